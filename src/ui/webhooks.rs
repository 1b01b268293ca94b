//! Webhooks: each `[[webhooks]]` URL is told when a request is created, answered,
//! timed out or withdrawn, as hitl's own JSON or Slack's `text` and `blocks`, with a
//! link to the request in the dashboard.
//!
//! Opt-in and bounded like every outbound connection of hitl's: configured in the
//! user's settings only (never a project's, which agents work beside), `https://`
//! (or `http://` to loopback), to hosts that are loopback or in `[http]
//! delivery_hosts` as pushes are, redirects not followed. A secret signs each body
//! (`X-Hitl-Signature: sha256=HMAC(secret, "{X-Hitl-Timestamp}.{body}")`). Each post
//! runs on a task of its own, retried with backoff (1, 2, 4, 8 s) after a failed
//! connection, a 429 or a 5xx: the broker never waits for a receiver. How each URL
//! fares is kept in `.helpers/webhooks.json`, which `hitl status` shows.

use std::{
    path::PathBuf,
    sync::{Arc, Mutex},
    time::Duration,
};

use anyhow::{Result, bail};
use hmac::{Hmac, KeyInit, Mac};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::Sha256;
use tokio::sync::broadcast::error::RecvError;

use super::ResponderContext;
use crate::{
    broker::{Change, PendingRequest},
    config::{WEBHOOK_EVENTS, WebhookFormat, WebhookSettings},
    protocol::{Answer, Status, text::visible_line},
};

/// How many times a post is tried.
const ATTEMPTS: u32 = 5;
/// How long one try may take.
const TRY_FOR: Duration = Duration::from_secs(10);

/// Refuses webhooks that may not be posted to, saying which and why.
pub fn validate(hooks: &[WebhookSettings], delivery_hosts: &[String]) -> Result<()> {
    for h in hooks {
        if let Some(why) = refusal(&h.url, delivery_hosts) {
            bail!("[[webhooks]] url {:?}: {why}", h.url);
        }
        if h.url.starts_with("https://")
            && let Err(e) = crate::runtime::tls::client_config()
        {
            bail!("[[webhooks]] url {:?}: {e:#}", h.url);
        }
        for e in &h.events {
            if !WEBHOOK_EVENTS.contains(&e.as_str()) {
                bail!(
                    "[[webhooks]] events: {e:?} is not one of {}",
                    WEBHOOK_EVENTS.join(", ")
                );
            }
        }
    }
    Ok(())
}

/// Why `url` may not be posted to, or `None`.
fn refusal(url: &str, delivery_hosts: &[String]) -> Option<String> {
    let parsed = match reqwest::Url::parse(url) {
        Ok(u) => u,
        Err(e) => return Some(format!("not a URL: {e}")),
    };
    let host = parsed.host_str().unwrap_or_default();
    let (bare, loopback) = crate::runtime::tls::host_of(&parsed);
    match parsed.scheme() {
        "https" => {}
        "http" if loopback => {}
        "http" => return Some("plain http only to loopback; use https".into()),
        s => return Some(format!("{s}:// is not http(s)")),
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Some("no user or password in the URL (use the secret)".into());
    }
    if loopback || delivery_hosts.iter().any(|h| h.eq_ignore_ascii_case(&bare)) {
        None
    } else {
        Some(format!(
            "{host} is not loopback or in [http] delivery_hosts (add it there to post to it)"
        ))
    }
}

/// How one URL fares, as `.helpers/webhooks.json` keeps it.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct HookStatus {
    /// The URL, without its path (a Slack URL's path is its secret).
    pub url: String,
    /// Posts the receiver took.
    pub delivered: u64,
    /// Posts given up after every try.
    pub failed: u64,
    /// Tries that failed (each retried or given up).
    pub failed_tries: u64,
    /// The last failure, and when (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// When it failed last.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error_at: Option<String>,
}

/// The URL as it may be shown: scheme, host and port.
fn shown_url(url: &str) -> String {
    reqwest::Url::parse(url)
        .map(|u| format!("{}://{}", u.scheme(), u.authority()))
        .unwrap_or_default()
}

/// The webhooks' status file of a project.
pub fn status_file(spool: &crate::spool::Spool) -> PathBuf {
    spool.root().join("webhooks.json")
}

/// What the status file says, if there is one.
pub fn read_status(spool: &crate::spool::Spool) -> Option<Vec<HookStatus>> {
    let bytes = crate::spool::read_untrusted(&status_file(spool), 1 << 20).ok()?;
    serde_json::from_slice(&bytes).ok()
}

struct Hook {
    settings: WebhookSettings,
    link_base: Option<String>,
    status: usize,
}

/// Starts following the broker for `hooks` (already validated). `link_base`: the
/// dashboard's address when the hook names none; `status`: where to keep how the
/// hooks fare.
pub fn start(
    context: ResponderContext,
    hooks: Vec<WebhookSettings>,
    link_base: Option<String>,
    status: Option<crate::spool::Spool>,
) -> tokio::task::JoinHandle<()> {
    // Read the trusted CAs only when a hook needs them (`validate` checked they can be).
    let https = hooks.iter().any(|h| h.url.starts_with("https://"));
    let client = crate::runtime::tls::http_client(https)
        .or_else(|_| crate::runtime::tls::http_client(false))
        .and_then(|b| {
            Ok(b.redirect(reqwest::redirect::Policy::none())
                .timeout(TRY_FOR)
                .user_agent(concat!("hitl/", env!("CARGO_PKG_VERSION")))
                .build()?)
        })
        .unwrap_or_default();
    let statuses = Arc::new(Mutex::new(
        hooks
            .iter()
            .map(|h| HookStatus {
                url: shown_url(&h.url),
                ..HookStatus::default()
            })
            .collect::<Vec<_>>(),
    ));
    let hooks: Vec<Arc<Hook>> = hooks
        .into_iter()
        .enumerate()
        .map(|(i, settings)| {
            Arc::new(Hook {
                link_base: settings.dashboard_url.clone().or_else(|| link_base.clone()),
                settings,
                status: i,
            })
        })
        .collect();
    let status_path = status.as_ref().map(status_file);
    let mut changes = context.broker.subscribe();
    tokio::spawn(async move {
        loop {
            let (event, pending, status, answer, reason) = match changes.recv().await {
                Ok(Change::Queued(p)) => ("created", p, Status::Pending, None, None),
                Ok(Change::Finished(f)) if f.here => {
                    let event = match f.status {
                        Status::Answered => "answered",
                        Status::Timeout => "timeout",
                        _ => "withdrawn",
                    };
                    (
                        event,
                        f.pending.clone(),
                        f.status,
                        f.answer.clone(),
                        f.reason.clone(),
                    )
                }
                Ok(_) => continue,
                Err(RecvError::Lagged(n)) => {
                    tracing::warn!("webhooks: {n} changes of the queue went by untold");
                    continue;
                }
                Err(RecvError::Closed) => return,
            };
            for hook in &hooks {
                if !hook.settings.events.iter().any(|e| e == event) {
                    continue;
                }
                let body = body(
                    hook.settings.format,
                    event,
                    &pending,
                    status,
                    answer.as_ref(),
                    reason.as_deref(),
                    hook.link_base.as_deref(),
                );
                // A new request's post goes into its trail.
                let trail = (event == "created")
                    .then(|| (context.broker.clone(), pending.request.id.clone()));
                tokio::spawn(post(
                    client.clone(),
                    hook.clone(),
                    body,
                    statuses.clone(),
                    status_path.clone(),
                    trail,
                ));
            }
        }
    })
}

/// Posts `body` to `hook`, trying again after failures that may pass.
async fn post(
    client: reqwest::Client,
    hook: Arc<Hook>,
    body: Vec<u8>,
    statuses: Arc<Mutex<Vec<HookStatus>>>,
    status_path: Option<PathBuf>,
    trail: Option<(crate::broker::BrokerHandle, String)>,
) {
    let mut wait = Duration::from_secs(1);
    for attempt in 1..=ATTEMPTS {
        let stamp = jiff::Timestamp::now().as_second().to_string();
        let mut req = client
            .post(&hook.settings.url)
            .header("content-type", "application/json")
            .header("x-hitl-timestamp", &stamp)
            .body(body.clone());
        if let Some(secret) = &hook.settings.secret {
            req = req.header("x-hitl-signature", signature(secret, &stamp, &body));
        }
        let outcome = match req.send().await {
            Ok(r) if r.status().is_success() => Ok(()),
            Ok(r) => Err((
                format!("the receiver said {}", r.status()),
                r.status().is_server_error() || r.status().as_u16() == 429,
            )),
            // Said without the URL, whose path may be its secret (Slack's is), as
            // `webhooks.json` and the log keep it. A certificate refused will be refused
            // again: said at once, not retried.
            Err(e) => match e.without_url() {
                e if crate::runtime::tls::certificate_refused(&e) => Err((
                    format!(
                        "{} (hitl trusts the system's CAs, or those in SSL_CERT_FILE)",
                        crate::runtime::tls::error_chain(&e)
                    ),
                    false,
                )),
                e => Err((crate::runtime::tls::error_chain(&e), true)),
            },
        };
        let done = {
            let mut all = statuses.lock().unwrap_or_else(|e| e.into_inner());
            let s = &mut all[hook.status];
            match &outcome {
                Ok(()) => s.delivered += 1,
                Err((why, again)) => {
                    s.failed_tries += 1;
                    s.last_error = Some(why.clone());
                    s.last_error_at = Some(jiff::Timestamp::now().to_string());
                    if !again || attempt == ATTEMPTS {
                        s.failed += 1;
                        tracing::warn!("webhooks: {} gave up after {attempt} tries: {why}", s.url);
                    }
                }
            }
            let done = matches!(&outcome, Ok(()) | Err((_, false))) || attempt == ATTEMPTS;
            if let Some(path) = &status_path
                && (done || outcome.is_err())
            {
                let mut json = serde_json::to_vec_pretty(&*all).unwrap_or_default();
                json.push(b'\n');
                let tmp = path.with_extension("json.tmp");
                let _ = std::fs::write(&tmp, &json).and_then(|()| std::fs::rename(&tmp, path));
            }
            done
        };
        if done {
            if let Some((broker, id)) = &trail {
                broker.note_trail(crate::store::TrailStep::notified(
                    id,
                    "webhook",
                    &shown_url(&hook.settings.url),
                    outcome
                        .as_ref()
                        .map(|_| ())
                        .map_err(|(why, _)| why.as_str()),
                    Value::Null,
                ));
            }
            return;
        }
        tokio::time::sleep(wait).await;
        wait *= 2;
    }
}

/// `sha256=` and the hex HMAC-SHA256 of `"{stamp}.{body}"` under `secret`.
pub fn signature(secret: &str, stamp: &str, body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("HMAC takes any key");
    mac.update(stamp.as_bytes());
    mac.update(b".");
    mac.update(body);
    let bytes = mac.finalize().into_bytes();
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256={hex}")
}

/// The body told of `event` on request `p`.
fn body(
    format: WebhookFormat,
    event: &str,
    p: &PendingRequest,
    status: Status,
    answer: Option<&Answer>,
    reason: Option<&str>,
    link_base: Option<&str>,
) -> Vec<u8> {
    let r = &p.request;
    let link = link_base.map(|b| format!("{}/#request={}", b.trim_end_matches('/'), r.id));
    let value = match format {
        WebhookFormat::Json => json!({
            "event": format!("request.{event}"),
            "id": r.id,
            "status": status.as_str(),
            "type": r.kind.as_str(),
            "question": r.content,
            "options": r.options,
            "priority": r.priority.as_str(),
            "tags": r.tags,
            "labels": p.labels,
            "origin": p.origin.as_str(),
            "agent": { "id": r.agent_id, "name": r.agent_name },
            "project": p.project,
            "asked_at": r.timestamp.to_string(),
            "answer": answer.map(|a| json!({
                "text": a.content,
                "approved": a.approved,
                "choices": a.choices,
                "comment": a.comment,
                "responded_by": a.responded_by,
            })),
            "reason": reason,
            "url": link,
        }),
        WebhookFormat::Slack => slack(event, p, answer, reason, link.as_deref()),
    };
    serde_json::to_vec(&value).unwrap_or_default()
}

/// Text safe in Slack's mrkdwn: `&`, `<` and `>` escaped, controls made visible.
fn mrkdwn(text: &str) -> String {
    visible_line(text)
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn slack(
    event: &str,
    p: &PendingRequest,
    answer: Option<&Answer>,
    reason: Option<&str>,
    link: Option<&str>,
) -> Value {
    let r = &p.request;
    let who = mrkdwn(&r.agent_name);
    let question: String = mrkdwn(&r.content).chars().take(2800).collect();
    let head = match event {
        "created" => format!("*{who}* asks ({}): {question}", r.kind),
        "answered" => {
            let a = answer.map(|a| mrkdwn(&a.content)).unwrap_or_default();
            let by = answer
                .map(|a| format!(" by {}", mrkdwn(&a.responded_by)))
                .unwrap_or_default();
            format!("Answered{by}: *{a}* ({who}: {question})")
        }
        "timeout" => format!("Nobody answered in time: {question} ({who})"),
        _ => format!(
            "Withdrawn{}: {question} ({who})",
            reason
                .map(|r| format!(" ({})", mrkdwn(r)))
                .unwrap_or_default()
        ),
    };
    let mut blocks = vec![json!({ "type": "section", "text": { "type": "mrkdwn", "text": head } })];
    if event == "created" && !r.options.is_empty() {
        let options: Vec<String> = r
            .options
            .iter()
            .enumerate()
            .map(|(i, o)| format!("{}. {}", i + 1, mrkdwn(o)))
            .collect();
        blocks.push(
            json!({ "type": "section", "text": { "type": "mrkdwn", "text": options.join("\n") } }),
        );
    }
    let mut context = vec![
        json!({ "type": "mrkdwn", "text": format!("{} · {}", r.priority.as_str(), p.origin.as_str()) }),
    ];
    if !p.labels.is_empty() {
        context.push(json!({ "type": "mrkdwn", "text": mrkdwn(&p.labels.join(", ")) }));
    }
    blocks.push(json!({ "type": "context", "elements": context }));
    if let Some(link) = link.filter(|_| event == "created") {
        blocks.push(json!({
            "type": "actions",
            "elements": [{
                "type": "button",
                "text": { "type": "plain_text", "text": "Answer in hitl" },
                "url": link,
            }],
        }));
    }
    json!({ "text": head, "blocks": blocks })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_https_or_loopback_and_known_hosts_are_posted_to() {
        assert!(refusal("https://127.0.0.1:9/x", &[]).is_none());
        assert!(refusal("http://localhost:9/x", &[]).is_none());
        assert!(refusal("https://hooks.slack.com/services/T/B/X", &[]).is_some());
        let hosts = vec!["hooks.slack.com".to_string()];
        assert!(refusal("https://hooks.slack.com/services/T/B/X", &hosts).is_none());
        assert!(
            refusal("http://hooks.slack.com/x", &hosts).is_some(),
            "plain http"
        );
        assert!(refusal("https://u:p@127.0.0.1/x", &[]).is_some());
        assert!(refusal("file:///etc/passwd", &[]).is_some());
        assert_eq!(
            shown_url("https://hooks.slack.com/services/T/B/X"),
            "https://hooks.slack.com"
        );
    }

    #[test]
    fn signatures_are_hmac_sha256_of_the_stamp_a_dot_and_the_body() {
        // HMAC-SHA256("Jefe", "what do ya want. for nothing?"), from Python's hmac.
        assert_eq!(
            signature("Jefe", "what do ya want", b" for nothing?"),
            "sha256=ab2065b8987c48983f47a32020a95286d05c7938720abf8bfec9274ac25ed450"
        );
    }
}
