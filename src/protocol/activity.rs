//! Activity notes: what an agent's hooks saw (a tool call, a prompt, a stop, a
//! notification), dropped by `hitl hook` into the project's `.helpers/activity/`
//! for the listener to record in its activity feed (seed 004's observability
//! events). A hook never waits for the broker: it writes a small file and goes.
//!
//! Notes come from the agent's side, so they are read as untrusted: bounded in size,
//! most fields optional, their payload a summary cut to size by the writer
//! ([`summarize`]).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::Request;

/// [`ActivityNote::decision`] of a call asked of the human in hitl.
pub const ASKED: &str = "asked";

/// The largest note a writer makes, and a reader takes.
pub const MAX_NOTE_BYTES: usize = 16 << 10;

/// The longest text kept of any one string in a payload summary.
const MAX_TEXT: usize = 400;
/// The most items kept of any one list or object.
const MAX_ITEMS: usize = 24;
/// How deep a summary goes.
const MAX_DEPTH: usize = 5;

/// One hook event, as `hitl hook` notes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ActivityNote {
    /// The application (seed 004's `source_app`): the project's folder name.
    #[serde(default)]
    pub source_app: String,
    /// The agent's session (Claude Code's `session_id`).
    #[serde(default)]
    pub session_id: String,
    /// The event as Claude Code names it: `PreToolUse`, `Stop`, `Notification`…
    pub hook_event_type: String,
    /// A bounded summary of the hook's input.
    #[serde(default)]
    pub payload: Value,
    /// When, in milliseconds since 1970.
    pub timestamp_ms: i64,
    /// The agent, as hitl names it.
    #[serde(default)]
    pub agent_id: String,
    /// The agent, for people.
    #[serde(default)]
    pub agent_name: String,
    /// What hitl said to the call, for tool events: `allow`, `deny`, `ask` (Claude
    /// Code's own prompt), `none` (no opinion) or [`ASKED`] (the human, in hitl), with
    /// why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<String>,
    /// Why, with the decision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl ActivityNote {
    /// The note as JSON bytes, within [`MAX_NOTE_BYTES`]: a payload that will not fit
    /// even summarised is replaced by what it was (its event and size).
    pub fn to_bytes(&self) -> Vec<u8> {
        let bytes = serde_json::to_vec(self).unwrap_or_default();
        if bytes.len() <= MAX_NOTE_BYTES {
            return bytes;
        }
        let mut small = self.clone();
        small.payload = serde_json::json!({ "summary_dropped": true, "bytes": bytes.len() });
        small.reason = small.reason.map(|r| clip(&r, MAX_TEXT));
        serde_json::to_vec(&small).unwrap_or_default()
    }

    /// The note of a tool call whose hook asked the human about it through the spool,
    /// as `request` (its context holds the hook's `hook_event`, `session_id`,
    /// `tool_name` and `tool_input`, as `hitl hook` writes them). `source_app`: the
    /// project's folder name, as the hook's other notes say.
    pub fn asked(request: &Request, source_app: String) -> ActivityNote {
        let context = &request.context;
        let text = |key: &str| {
            context
                .get(key)
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
        };
        ActivityNote {
            source_app,
            session_id: text("session_id").unwrap_or("unknown").to_string(),
            hook_event_type: text("hook_event").unwrap_or("PreToolUse").to_string(),
            payload: summarize(context),
            timestamp_ms: request.timestamp.as_millisecond(),
            agent_id: request.agent_id.clone(),
            agent_name: request.agent_name.clone(),
            decision: Some(ASKED.to_string()),
            reason: Some(format!("asked in hitl ({})", request.id)),
        }
    }

    /// Reads a note, or `None` when it is not one (or too big).
    pub fn from_bytes(bytes: &[u8]) -> Option<ActivityNote> {
        if bytes.len() > MAX_NOTE_BYTES {
            return None;
        }
        // Bounded by its size: a reader keeps what the writer summarised.
        let note: ActivityNote = serde_json::from_slice(bytes).ok()?;
        (!note.hook_event_type.trim().is_empty()).then_some(note)
    }
}

/// `value` cut to size: strings to a few hundred characters, lists and objects to a
/// couple of dozen items, nesting to a few levels; what was cut says so.
pub fn summarize(value: &Value) -> Value {
    summarize_at(value, 0)
}

fn summarize_at(value: &Value, depth: usize) -> Value {
    match value {
        Value::String(s) => Value::String(clip(s, MAX_TEXT)),
        Value::Array(items) if depth >= MAX_DEPTH => {
            Value::String(format!("[{} items]", items.len()))
        }
        Value::Object(o) if depth >= MAX_DEPTH => Value::String(format!("{{{} keys}}", o.len())),
        Value::Array(items) => {
            let mut out: Vec<Value> = items
                .iter()
                .take(MAX_ITEMS)
                .map(|v| summarize_at(v, depth + 1))
                .collect();
            if items.len() > MAX_ITEMS {
                out.push(Value::String(format!("… {} more", items.len() - MAX_ITEMS)));
            }
            Value::Array(out)
        }
        Value::Object(o) => {
            let mut out = Map::new();
            for (k, v) in o.iter().take(MAX_ITEMS) {
                out.insert(clip(k, 64), summarize_at(v, depth + 1));
            }
            if o.len() > MAX_ITEMS {
                out.insert("…".into(), Value::from(o.len() - MAX_ITEMS));
            }
            Value::Object(out)
        }
        other => other.clone(),
    }
}

/// `s` cut to `max` characters, with how much was left out.
fn clip(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        None => s.to_string(),
        Some((at, _)) => format!("{}… ({} bytes)", &s[..at], s.len()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn summaries_are_bounded_whatever_the_input() {
        let big = json!({
            "tool_input": { "content": "x".repeat(100_000), "edits": (0..1000).collect::<Vec<_>>() },
            "deep": [[[[[[[["bottom"]]]]]]]],
        });
        let s = summarize(&big);
        let text = s.to_string();
        assert!(text.len() < 2_000, "{}", text.len());
        assert!(text.contains("(100000 bytes)"), "{text}");
        assert!(text.contains("… 976 more"), "{text}");
        assert!(!text.contains("bottom"), "{text}");
        let note = ActivityNote {
            source_app: "p".into(),
            session_id: "s".into(),
            hook_event_type: "PreToolUse".into(),
            payload: s,
            timestamp_ms: 1,
            agent_id: "a".into(),
            agent_name: "A".into(),
            decision: Some("none".into()),
            reason: None,
        };
        let back = ActivityNote::from_bytes(&note.to_bytes()).unwrap();
        assert_eq!(back, note);
        assert_eq!(
            ActivityNote::from_bytes(b"{\"hook_event_type\":\" \",\"timestamp_ms\":1}"),
            None
        );
        assert_eq!(
            ActivityNote::from_bytes(&vec![b' '; MAX_NOTE_BYTES + 1]),
            None
        );
    }
}
