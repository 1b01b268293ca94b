//! Follows the broker and pushes to every subscription: each request that reaches
//! the phone on the escalation ladder (nobody at the desk, or `[escalation]
//! at_once = ["push"]`) as a notification with the answers that fit on it (Approve
//! and Deny, or one per option), and its end, so the service worker takes the
//! notification away.
//!
//! What a push says, and nothing more: who asks, the question, its kind and
//! priority, the command or the edited file, and the answers as respond bodies
//! ready to post (the service worker keeps no rule of its own on kinds). The
//! request's context, tokens and sessions never go.

use std::sync::Arc;

use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;

use super::{Message, Push, Sent, Subscription, crypto::MAX_PLAINTEXT};
use crate::{
    broker::{BrokerHandle, Change, PendingRequest},
    protocol::{
        AnswerShape, Priority, Status,
        text::{visible, visible_line},
    },
};

/// Whether a device (by id) is still logged in.
pub type DeviceLive = Arc<dyn Fn(&str) -> bool + Send + Sync>;

/// How many times a push is tried.
const ATTEMPTS: u32 = 3;

/// Starts pushing the requests the ladder sends to the phone, and their ends, to
/// every subscription.
pub fn start(
    broker: &BrokerHandle,
    push: Arc<Push>,
    device_live: DeviceLive,
) -> tokio::task::JoinHandle<()> {
    let mut changes = broker.subscribe();
    let broker = broker.clone();
    tokio::spawn(async move {
        // The requests pushed: their ends are pushed too, so the notification goes.
        let mut pushed = std::collections::HashSet::new();
        loop {
            let (message, asked) = match changes.recv().await {
                // The escalation ladder says when a request reaches the phone.
                // Brokers sharing a store each reach it: the first to claim it pushes.
                Ok(Change::Reached(r)) if r.reaches("push") => {
                    if pushed.contains(&r.pending.seq) || !push.claims.claim(&r.pending.request) {
                        continue;
                    }
                    pushed.insert(r.pending.seq);
                    (
                        request_message(&r.pending),
                        Some(r.pending.request.id.clone()),
                    )
                }
                // Its end, by the broker that ended it, whichever pushed it.
                Ok(Change::Finished(f)) => {
                    let ours = pushed.remove(&f.seq());
                    if !f.here || !(ours || push.claims.claimed(&f.pending.request)) {
                        continue;
                    }
                    (ended_message(f.id(), f.status), None)
                }
                Ok(_) => continue,
                Err(RecvError::Lagged(n)) => {
                    tracing::warn!("push: {n} changes of the queue went by unpushed");
                    continue;
                }
                Err(RecvError::Closed) => return,
            };
            let subscriptions = push.subscriptions.all();
            if subscriptions.is_empty() {
                continue;
            }
            // A subscription of a device logged out or revoked goes with it.
            let (live, dead): (Vec<_>, Vec<_>) = subscriptions
                .into_iter()
                .partition(|s| s.device.as_deref().is_none_or(|d| device_live(d)));
            if !dead.is_empty() {
                let _ = push.subscriptions.remove(|s| dead.contains(s));
            }
            let message = Arc::new(message);
            for sub in live {
                let trail = asked.clone().map(|id| (broker.clone(), id));
                tokio::spawn(deliver(push.clone(), sub, message.clone(), trail));
            }
        }
    })
}

/// Pushes `message` to `sub`, trying again after a failure that may pass; a
/// subscription its service says is gone is forgotten. How it went is kept in the
/// request's trail (`trail`: the broker and the request, for a new request's push).
async fn deliver(
    push: Arc<Push>,
    sub: Subscription,
    message: Arc<Message>,
    trail: Option<(BrokerHandle, String)>,
) {
    let record = |outcome: Result<(), &str>| {
        if let Some((broker, id)) = &trail {
            broker.note_trail(crate::store::TrailStep::notified(
                id,
                "push",
                &super::shown_endpoint(&sub.endpoint),
                outcome,
                json!({ "device": sub.device }),
            ));
        }
    };
    let mut wait = std::time::Duration::from_secs(1);
    for attempt in 1..=ATTEMPTS {
        match push.send(&sub, &message).await {
            Sent::Delivered => {
                record(Ok(()));
                return;
            }
            Sent::Gone => {
                record(Err("the push service says the subscription is gone"));
                tracing::info!(
                    "push: {} says a subscription is gone; forgotten",
                    super::shown_endpoint(&sub.endpoint)
                );
                let _ = push.subscriptions.remove(|s| s.endpoint == sub.endpoint);
                return;
            }
            Sent::Failed(why, again) => {
                if !again || attempt == ATTEMPTS {
                    tracing::warn!(
                        "push: {} not pushed to after {attempt} tries: {why}",
                        super::shown_endpoint(&sub.endpoint)
                    );
                    record(Err(&why));
                    return;
                }
            }
        }
        tokio::time::sleep(wait).await;
        wait *= 2;
    }
}

/// A topic for request `id`: a newer push with it replaces an older one the push
/// service still holds (an end replaces its request's push to an offline phone).
fn topic(id: &str) -> Option<String> {
    let t: String = id
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
        .take(32)
        .collect();
    (!t.is_empty()).then_some(t)
}

/// `text` made safe to show (controls escaped, lines kept), cut to `max` characters.
fn cut(text: &str, max: usize) -> String {
    let line = visible(text);
    if line.chars().count() <= max {
        return line.into_owned();
    }
    let mut s: String = line.chars().take(max.saturating_sub(1)).collect();
    s.push('…');
    s
}

/// What a tool call does, in a line: the command, or the file an edit changes and
/// by how many lines.
fn detail(context: &Value) -> Option<String> {
    let input = context.get("tool_input")?;
    if let Some(command) = input.get("command").and_then(Value::as_str) {
        return Some(cut(command, 600));
    }
    let file = input
        .get("file_path")
        .or_else(|| input.get("notebook_path"))
        .and_then(Value::as_str)?;
    let lines = |key: &str| {
        input
            .get(key)
            .and_then(Value::as_str)
            .map_or(0, |s| s.lines().count())
    };
    let what = if input.get("old_string").is_some() {
        format!(
            "edit {file}: -{} +{} lines",
            lines("old_string"),
            lines("new_string")
        )
    } else if input.get("content").is_some() {
        format!("write {file}: {} lines", lines("content"))
    } else {
        file.to_string()
    };
    Some(cut(&what, 600))
}

/// The answers a notification can carry as buttons: each a title and the respond
/// body it posts. Decisions and single choices; anything else opens the dashboard.
fn actions(shape: &AnswerShape) -> Vec<Value> {
    let action = |i: usize, title: &str, answer: Value| json!({ "action": format!("a{i}"), "title": cut(&visible_line(title), 40), "answer": answer });
    match shape {
        AnswerShape::Decision { field, .. } => vec![
            action(0, "Approve", json!({ field.as_str(): true })),
            action(1, "Deny", json!({ field.as_str(): false })),
        ],
        AnswerShape::Choice {
            field,
            options,
            many: false,
        } => options
            .iter()
            .take(4)
            .enumerate()
            .map(|(i, o)| action(i, o, json!({ field.as_str(): o })))
            .collect(),
        _ => Vec::new(),
    }
}

/// The push for a new request.
pub fn request_message(p: &PendingRequest) -> Message {
    let r = &p.request;
    let mut body = json!({
        "type": "request",
        "id": r.id,
        "title": cut(&visible_line(&format!("{} asks", r.agent_name)), 80),
        "question": cut(&r.content, 400),
        "kind": r.kind.as_str(),
        "priority": r.priority.as_str(),
        "detail": detail(&r.context),
        "actions": actions(&p.answer_shape),
        "url": format!("/#request={}", r.id),
    });
    // Within what one push carries, whatever the agent wrote: fewer buttons first.
    let mut bytes = serde_json::to_vec(&body).unwrap_or_default();
    while bytes.len() > MAX_PLAINTEXT {
        let Some(actions) = body["actions"].as_array_mut().filter(|a| !a.is_empty()) else {
            body["detail"] = Value::Null;
            body["question"] = json!(cut(&r.content, 100));
            bytes = serde_json::to_vec(&body).unwrap_or_default();
            break;
        };
        actions.pop();
        bytes = serde_json::to_vec(&body).unwrap_or_default();
    }
    let now = jiff::Timestamp::now();
    let ttl = r
        .timeout
        .map(|t| {
            let ends = r.timestamp.as_second().saturating_add(t as i64);
            ends.saturating_sub(now.as_second()).max(0) as u64
        })
        .unwrap_or(24 * 3600)
        .min(24 * 3600);
    Message {
        body: bytes,
        ttl,
        urgency: match r.priority {
            Priority::Urgent | Priority::High => "high",
            _ => "normal",
        },
        topic: topic(&r.id),
    }
}

/// The push for a request's end: the service worker closes its notification.
pub fn ended_message(id: &str, status: Status) -> Message {
    Message {
        body: serde_json::to_vec(&json!({ "type": "ended", "id": id, "status": status.as_str() }))
            .unwrap_or_default(),
        ttl: 3600,
        urgency: "normal",
        topic: topic(id),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tool_call_is_told_by_its_command_or_file() {
        let bash = json!({ "tool_input": { "command": "rm -rf build\nls" } });
        assert_eq!(detail(&bash).unwrap(), "rm -rf build\nls");
        let edit = json!({ "tool_input": { "file_path": "src/a.rs", "old_string": "a\nb", "new_string": "c" } });
        assert_eq!(detail(&edit).unwrap(), "edit src/a.rs: -2 +1 lines");
        assert_eq!(detail(&json!({ "secret": "x" })), None);
    }

    #[test]
    fn decisions_and_single_choices_become_buttons() {
        let d = actions(&AnswerShape::Decision {
            field: "permission".into(),
            always: None,
        });
        assert_eq!(d[0]["answer"], json!({ "permission": true }));
        assert_eq!(d[1]["title"], "Deny");
        let c = actions(&AnswerShape::Choice {
            field: "choice".into(),
            options: vec!["a".into(), "b".into()],
            many: false,
        });
        assert_eq!(c[1]["answer"], json!({ "choice": "b" }));
        assert!(
            actions(&AnswerShape::Form {
                field: "answers".into()
            })
            .is_empty()
        );
    }

    #[test]
    fn topics_are_short_and_safe() {
        assert_eq!(
            topic("0190e7a2-1234-7abc-8def-0123456789ab").unwrap(),
            "0190e7a212347abc8def0123456789ab"
        );
        assert_eq!(topic("../..").as_deref(), None);
    }
}
