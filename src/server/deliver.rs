//! The way back for requests made over HTTP, and the `/stream` feed of every change.
//!
//! [`Deliverer`] follows the broker's changes, so an answer from any responder (the
//! terminal, `--auto-answer`, `hitl answer`, HTTP, another UI), a timeout and a
//! cancel all reach the agent the same way: pushed to its own WebSocket
//! (`responseWebSocketUrl`, seed 004) as the bare response object, the same one
//! `GET /events/:id/response` returns in `data`. No route delivers on its own.
//!
//! Pushes go only to loopback or to hosts the user allowed (`[http] delivery_hosts`):
//! a request must not be able to make the broker connect anywhere it names. When the
//! push is refused or fails, the agent still has its answer by polling; a respond call
//! reports which happened. Of brokers sharing a store, the one that ended a request
//! pushes it; the others only update their own streams.

use std::{
    collections::HashMap,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use futures_util::SinkExt;
use serde::Serialize;
use serde_json::{Value, json};
use tokio::{
    sync::{broadcast, broadcast::error::RecvError, oneshot},
    task::JoinHandle,
};
use tokio_tungstenite::tungstenite::Message;

use super::seed004::{self, EndedEvent, HitlStatus};
use crate::{
    broker::{BrokerHandle, Change, Finished, PendingRequest},
    config::HttpSettings,
    protocol::{Origin, Status},
    store::{Store, StoredRequest},
};

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

/// Follows the broker and delivers: see the module doc. Shared by the daemon (which
/// starts it before the broker runs) and the HTTP routes (which read its outcomes,
/// counters and feed).
pub struct Deliverer {
    allowed_hosts: Vec<String>,
    /// Delivery counts, for the metrics.
    pub(super) counters: DeliveryCounters,
    /// Respond calls waiting to hear how their answer was delivered, by broker seq.
    waiting: Mutex<HashMap<u64, oneshot::Sender<DeliveryStatus>>>,
    /// Events as they are stored or change, for `/stream`.
    pub(super) events: broadcast::Sender<Value>,
    /// The stored requests ended lately, for the poll fallback: an agent polls right
    /// after its answer, and reading back a row just written is a store round trip.
    recent: Mutex<Recent>,
    /// The seed 004 event of each pending request made here, as `POST /events` made
    /// it, so that answering it needs no read of the row just written.
    held_events: Mutex<HashMap<i64, Arc<Value>>>,
}

/// How many ended requests the poll fallback answers from memory.
const RECENT: usize = 4096;

/// Ended requests by id (with their seed 004 event as it was made here, if it was),
/// oldest first out.
#[derive(Default)]
struct Recent {
    by_id: HashMap<String, (Arc<Finished>, Option<Arc<Value>>)>,
    order: std::collections::VecDeque<String>,
}

/// How long a respond call waits to hear how its answer was delivered.
const OUTCOME_WAIT: Duration = Duration::from_secs(3);

impl Deliverer {
    /// A deliverer with the `[http]` settings' allowed push hosts.
    pub fn new(settings: &HttpSettings) -> Arc<Deliverer> {
        Arc::new(Deliverer {
            allowed_hosts: settings.delivery_hosts.clone(),
            counters: DeliveryCounters::default(),
            waiting: Mutex::new(HashMap::new()),
            events: broadcast::channel(1024).0,
            recent: Mutex::default(),
            held_events: Mutex::default(),
        })
    }

    /// Subscribes to `broker` now (call it before the broker runs, so no change is
    /// missed) and delivers until the broker stops. `store` supplies the stored events
    /// that `/stream` shows, read only while someone watches.
    pub fn spawn(self: &Arc<Self>, broker: BrokerHandle, store: Store) -> JoinHandle<()> {
        let mut changes = broker.subscribe();
        let me = self.clone();
        tokio::spawn(async move {
            loop {
                match changes.recv().await {
                    Ok(Change::Queued(p)) => me.queued(&p),
                    Ok(Change::Finished(f)) => me.finished(f, &store).await,
                    // The activity feed: seed 004's `/stream` shows every agent event.
                    Ok(Change::Activity(a)) if me.events.receiver_count() > 0 => {
                        let _ = me.events.send(super::seed004::event_json(&a.stored()));
                    }
                    Ok(Change::Activity(_) | Change::Updated(_) | Change::Reached(_)) => {}
                    Err(RecvError::Lagged(n)) => tracing::warn!(
                        "the way back missed {n} changes: those agents get their answers by polling"
                    ),
                    Err(RecvError::Closed) => return,
                }
            }
        })
    }

    /// Registers a respond call for request `seq`: told how its answer was delivered.
    pub(super) fn expect(&self, seq: u64) -> oneshot::Receiver<DeliveryStatus> {
        let (tx, rx) = oneshot::channel();
        lock(&self.waiting).insert(seq, tx);
        rx
    }

    /// Forgets a respond call whose answer was refused.
    pub(super) fn forget(&self, seq: u64) {
        lock(&self.waiting).remove(&seq);
    }

    /// Waits for the outcome [`Deliverer::expect`] promised; a push that takes longer
    /// than that is reported as left to polling.
    pub(super) async fn outcome(rx: oneshot::Receiver<DeliveryStatus>) -> DeliveryStatus {
        match tokio::time::timeout(OUTCOME_WAIT, rx).await {
            Ok(Ok(s)) => s,
            _ => DeliveryStatus::PendingPoll,
        }
    }

    fn told(&self, seq: u64, status: DeliveryStatus, push_failed: bool) {
        self.counters.count(status, push_failed);
        if let Some(tx) = lock(&self.waiting).remove(&seq) {
            let _ = tx.send(status);
        }
    }

    /// Spool questions join `/stream` as they are queued (requests made over HTTP are
    /// announced by the route that stored their event).
    fn queued(&self, p: &PendingRequest) {
        if !p.stored && self.events.receiver_count() > 0 {
            let _ = self.events.send(spool_event(p, Status::Pending, None));
        }
    }

    /// How stored request `id` ended, if it did lately and this broker knows how
    /// (one ended elsewhere without saying how is for the store to tell).
    pub(super) fn recently_finished(&self, id: &str) -> Option<Arc<Finished>> {
        let recent = lock(&self.recent);
        let (f, _) = recent.by_id.get(id)?;
        let answered = matches!(f.status, Status::Answered | Status::Cancelled);
        (!answered || f.answer.is_some()).then(|| f.clone())
    }

    /// How stored request `id` ended, if it did lately, as the store will have it.
    pub(super) fn recently_ended(&self, id: &str) -> Option<StoredRequest> {
        let f = self.recently_finished(id)?;
        Some(StoredRequest {
            request: f.pending.request.clone(),
            stored: f.pending.stored,
            status: f.status,
            answer: f.answer.clone(),
            reason: f.reason.clone(),
            finished_at: f.answer.as_ref().map(|a| a.timestamp.to_string()),
        })
    }

    /// Tells `/stream` of a new event, copying it only when someone follows.
    pub(super) fn announce(&self, event: &Value) {
        if self.events.receiver_count() > 0 {
            let _ = self.events.send(event.clone());
        }
    }

    /// Keeps the event `POST /events` made for a request now pending.
    pub(super) fn hold_event(&self, event_id: i64, event: Arc<Value>) {
        // Locks in the order `remember` takes them: held, then recent. A request that
        // ended before its event got here has its event put beside its end.
        let mut held = lock(&self.held_events);
        let mut recent = lock(&self.recent);
        match recent.by_id.get_mut(&event_id.to_string()) {
            Some((_, slot)) => *slot = Some(event),
            None => {
                held.insert(event_id, event);
            }
        }
    }

    /// The event made here for request `event_id`, pending or ended lately.
    pub(super) fn event_of(&self, event_id: i64) -> Option<Arc<Value>> {
        if let Some(v) = lock(&self.held_events).get(&event_id) {
            return Some(v.clone());
        }
        let recent = lock(&self.recent);
        recent.by_id.get(&event_id.to_string())?.1.clone()
    }

    /// Seed 004's event for request `p` marked with how it ended (the store may not
    /// have the end yet, so we say what we know): the event made here if it is held,
    /// else the stored one. `None` for a request no event carried.
    pub(super) async fn ended_event<'a>(
        &self,
        store: &Store,
        p: &PendingRequest,
        status: Status,
        answer: Option<&'a crate::protocol::Answer>,
        reason: Option<&'a str>,
    ) -> anyhow::Result<Option<EndedEvent<'a>>> {
        let Some(event_id) = p.event_id else {
            return Ok(None);
        };
        let event = match self.event_of(event_id) {
            Some(held) => held,
            None => match store.event(event_id).await? {
                Some(e) => Arc::new(seed004::event_json(&e)),
                None => return Ok(None),
            },
        };
        Ok(Some(EndedEvent {
            event,
            status: HitlStatus::answered(status, &p.request, Some(event_id), answer, reason),
        }))
    }

    /// Remembers how a stored request ended, when the change says all of it.
    fn remember(&self, f: &Arc<Finished>) {
        if !f.pending.stored {
            return;
        }
        let mut held = lock(&self.held_events);
        let event = f.pending.event_id.and_then(|e| held.remove(&e));
        let mut recent = lock(&self.recent);
        drop(held);
        let id = f.id().to_string();
        if recent
            .by_id
            .insert(id.clone(), (f.clone(), event))
            .is_none()
        {
            recent.order.push_back(id);
        }
        while recent.order.len() > RECENT {
            if let Some(old) = recent.order.pop_front() {
                recent.by_id.remove(&old);
            }
        }
    }

    async fn finished(self: &Arc<Self>, f: Arc<Finished>, store: &Store) {
        self.remember(&f);
        self.update_stream(&f, store).await;
        let p = &f.pending;
        if !f.here {
            // Another broker sharing the store ended it, and delivers it.
            return;
        }
        let Some(url) = push_url(p) else {
            self.told(p.seq, unpushed(p), false);
            return;
        };
        if let Some(why) = refusal(url, &self.allowed_hosts) {
            tracing::warn!(
                "answer to request {} not pushed: {why}; the agent can poll",
                p.request.id
            );
            self.told(p.seq, DeliveryStatus::PendingPoll, true);
            return;
        }
        // Another OS user may create requests but never read answers (it cannot
        // poll them either): its requests are not pushed to.
        let Some(owner) = creator_uid(&p.request) else {
            tracing::warn!(
                "answer to request {} not pushed: another OS user made it ({}); answers \
                 reach only the user's own agents",
                p.request.id,
                p.request.created_by.as_deref().unwrap_or("unknown")
            );
            self.told(p.seq, DeliveryStatus::PendingPoll, true);
            return;
        };
        let payload = push_payload(&f);
        let (url, me, f) = (url.to_string(), self.clone(), f.clone());
        // Each push on its own task: a slow agent must not hold up the others.
        tokio::spawn(async move {
            let status = match push(&url, &payload, owner).await {
                Ok(()) => DeliveryStatus::Delivered,
                Err(why) => {
                    tracing::warn!(
                        "answer to request {} not pushed: {why}; the agent can poll",
                        f.id()
                    );
                    DeliveryStatus::PendingPoll
                }
            };
            me.told(f.seq(), status, status == DeliveryStatus::PendingPoll);
        });
    }

    /// Tells `/stream` how a request ended.
    async fn update_stream(&self, f: &Finished, store: &Store) {
        if self.events.receiver_count() == 0 {
            return;
        }
        let p = &f.pending;
        let v = match p.event_id {
            None => spool_event(p, f.status, Some(f)),
            Some(_) => match self
                .ended_event(store, p, f.status, f.answer.as_ref(), f.reason.as_deref())
                .await
            {
                Ok(Some(ended)) => match serde_json::to_value(&ended) {
                    Ok(v) => v,
                    Err(_) => return,
                },
                _ => return,
            },
        };
        let _ = self.events.send(v);
    }
}

/// Where an answer to `p` is pushed: the `responseWebSocketUrl` a request made over
/// HTTP gave. `None`: its way of asking delivers it ([`unpushed`]).
pub(super) fn push_url(p: &PendingRequest) -> Option<&str> {
    p.request
        .metadata
        .get("response_websocket_url")
        .and_then(Value::as_str)
        .filter(|u| !u.is_empty() && p.origin == Origin::Http)
}

/// How an answer that is not pushed reaches `p`'s asker.
pub(super) fn unpushed(p: &PendingRequest) -> DeliveryStatus {
    if p.stored {
        DeliveryStatus::NoWebsocket
    } else {
        // The answer file is the delivery.
        DeliveryStatus::Delivered
    }
}

/// Locks `m`; a panic elsewhere while it was held leaves data that is still whole
/// (every update here is one insert or remove).
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// What is pushed to the agent: the bare response object, as seed 004's clients read
/// it (`message["response"]`, `["permission"]`, `["choice"]`, …). A request that
/// ended without an answer says how (`status`) and why (`error`).
pub fn push_payload(f: &Finished) -> Value {
    let p = &f.pending;
    match &f.answer {
        Some(a) => seed004::response_data(&p.request, p.event_id, a),
        None => json!({
            "status": f.status.as_str(),
            "eventId": p.event_id,
            "error": f.reason.clone().unwrap_or_else(|| f.status.as_str().to_string()),
        }),
    }
}

/// A spool question shown in seed 004's event shape (it has no stored event).
pub fn spool_event(p: &PendingRequest, status: Status, f: Option<&Finished>) -> Value {
    let answer = f.and_then(|f| f.answer.as_ref());
    let reason = f.and_then(|f| f.reason.as_deref());
    let mut v = json!({
        "id": p.request.id,
        "source_app": p.request.agent_name,
        "session_id": p.request.agent_id,
        "hook_event_type": "HumanInTheLoop",
        "payload": {},
        "origin": p.origin,
        "timestamp": p.request.timestamp.as_millisecond(),
        "humanInTheLoop": {
            "question": p.request.content,
            "type": seed004::seed_type(&p.request),
            "choices": p.request.options,
        },
        "humanInTheLoopStatus": seed004::status_object(status, answer, reason),
    });
    if let Some(a) = answer.filter(|_| status != Status::Timeout) {
        v["humanInTheLoopStatus"]["response"] = seed004::response_data(&p.request, None, a);
    }
    v
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
    let (bare, loopback) = crate::runtime::tls::host_of(&parsed);
    if loopback || allowed_hosts.iter().any(|h| h.eq_ignore_ascii_case(&bare)) {
        None
    } else {
        Some(format!(
            "{host} is not loopback or in [http] delivery_hosts; answers are not pushed there"
        ))
    }
}

/// The uid whose socket may receive the answer to `r`: the server's own user's,
/// for a request the user made; `None` for another OS user's (or an unknown
/// creator's).
fn creator_uid(r: &crate::protocol::Request) -> Option<u32> {
    (r.created_by.as_deref() == Some(crate::protocol::CREATED_BY_USER))
        .then(crate::runtime::process::euid)
}

/// Connects to `url`'s host and port; on loopback, only to a socket the OS user
/// `owner` listens on. Another user of the machine may name any loopback port in
/// `responseWebSocketUrl` (a socket of its own, to read the answer to a request
/// it copied; or one of the user's services): the answer goes only to a server run
/// by whoever asked.
async fn connect_owned(url: &reqwest::Url, owner: u32) -> Result<tokio::net::TcpStream, String> {
    let host = url
        .host_str()
        .unwrap_or_default()
        .trim_start_matches('[')
        .trim_end_matches(']');
    let port = url.port_or_known_default().unwrap_or(80);
    let stream = tokio::net::TcpStream::connect((host, port))
        .await
        .map_err(|e| format!("connecting to {url}: {e}"))?;
    let (local, remote) = (
        stream.local_addr().map_err(|e| e.to_string())?,
        stream.peer_addr().map_err(|e| e.to_string())?,
    );
    if remote.ip().is_loopback() {
        // The server's end of this connection: its local end is `remote`.
        let found = tokio::task::spawn_blocking(move || super::peer::owner(remote, local))
            .await
            .ok()
            .flatten();
        match found {
            Some(f) if f == owner => {}
            found => {
                return Err(format!(
                    "{url} is served by {}, not by the user who asked; answers go only to \
                     the asker's own server",
                    found.map_or_else(|| "an unknown user".to_string(), |u| format!("uid {u}"))
                ));
            }
        }
    }
    Ok(stream)
}

/// Pushes `payload` to `url`, served (on loopback) by the OS user `owner`.
pub async fn push(url: &str, payload: &serde_json::Value, owner: u32) -> Result<(), String> {
    let attempt = async {
        let parsed = reqwest::Url::parse(url).map_err(|e| format!("{url:?}: {e}"))?;
        let stream = connect_owned(&parsed, owner).await?;
        let (mut ws, _) = tokio_tungstenite::client_async(url, stream)
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
