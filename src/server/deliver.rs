//! Pushing an answer to the agent's own WebSocket (`responseWebSocketUrl`, seed 004).
//!
//! Only to loopback or to hosts the user allowed (`[http] delivery_hosts`): a request
//! must not be able to make the broker connect anywhere it names. When the push is
//! refused or fails, the agent still has its answer by polling
//! `GET /events/:id/response`; the respond call reports which happened.

use std::{
    net::IpAddr,
    sync::atomic::{AtomicU64, Ordering},
    time::Duration,
};

use futures_util::SinkExt;
use serde::Serialize;
use tokio_tungstenite::tungstenite::Message;

/// How long a push may take before the agent is left to poll.
const PUSH_TIMEOUT: Duration = Duration::from_secs(2);

/// What became of an answer, as `deliveryStatus` reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DeliveryStatus {
    /// Pushed to the agent's WebSocket, or written to its answer file.
    Delivered,
    /// The push was refused or failed: the agent polls for it.
    PendingPoll,
    /// The agent gave no WebSocket: it polls for it.
    NoWebsocket,
}

impl DeliveryStatus {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            DeliveryStatus::Delivered => "delivered",
            DeliveryStatus::PendingPoll => "pending_poll",
            DeliveryStatus::NoWebsocket => "no_websocket",
        }
    }
}

/// Counts for the metrics.
#[derive(Debug, Default)]
pub struct DeliveryCounters {
    /// Answers delivered (pushed or written).
    pub delivered: AtomicU64,
    /// Pushes refused or failed.
    pub failed: AtomicU64,
    /// Answers left for the agent to poll.
    pub pending_poll: AtomicU64,
}

impl DeliveryCounters {
    /// Counts one outcome.
    pub fn count(&self, s: DeliveryStatus, push_failed: bool) {
        let c = match s {
            DeliveryStatus::Delivered => &self.delivered,
            DeliveryStatus::PendingPoll | DeliveryStatus::NoWebsocket => &self.pending_poll,
        };
        c.fetch_add(1, Ordering::Relaxed);
        if push_failed {
            self.failed.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Why a push target is not allowed, or `None` if it is.
pub fn refusal(url: &str, allowed_hosts: &[String]) -> Option<String> {
    let parsed = match reqwest::Url::parse(url) {
        Ok(u) => u,
        Err(e) => return Some(format!("{url:?} is not a URL: {e}")),
    };
    if parsed.scheme() != "ws" {
        return Some(format!(
            "{url:?}: only ws:// URLs are pushed to (the agent can poll instead)"
        ));
    }
    let host = parsed.host_str().unwrap_or_default();
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    let loopback = bare.eq_ignore_ascii_case("localhost")
        || bare.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback());
    if loopback || allowed_hosts.iter().any(|h| h.eq_ignore_ascii_case(bare)) {
        None
    } else {
        Some(format!(
            "{host} is not loopback or in [http] delivery_hosts; answers are not pushed there"
        ))
    }
}

/// Pushes `payload` to `url`. Returns whether it was delivered.
pub async fn push(url: &str, payload: &serde_json::Value) -> Result<(), String> {
    let attempt = async {
        let (mut ws, _) = tokio_tungstenite::connect_async(url)
            .await
            .map_err(|e| format!("connecting to {url}: {e}"))?;
        ws.send(Message::text(payload.to_string()))
            .await
            .map_err(|e| format!("sending to {url}: {e}"))?;
        let _ = ws.close(None).await;
        Ok::<(), String>(())
    };
    match tokio::time::timeout(PUSH_TIMEOUT, attempt).await {
        Ok(r) => r,
        Err(_) => Err(format!(
            "{url} did not take the answer within {PUSH_TIMEOUT:?}"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_and_allowed_hosts() {
        assert_eq!(refusal("ws://localhost:9/x", &[]), None);
        assert_eq!(refusal("ws://127.0.0.1:9", &[]), None);
        assert_eq!(refusal("ws://[::1]:9", &[]), None);
        assert!(refusal("ws://example.com:9", &[]).is_some());
        assert_eq!(refusal("ws://example.com:9", &["example.com".into()]), None);
        assert!(refusal("http://127.0.0.1:9", &[]).is_some());
        assert!(refusal("not a url", &[]).is_some());
    }
}
