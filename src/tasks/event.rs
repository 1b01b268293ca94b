//! `hitl task event EVENT`: what a session's agent hook runs. It reads the hook's JSON
//! on stdin and leaves the few fields the runner needs as one file in
//! `$HITL_TASK_EVENTS` (atomically: a dot-named temp file, then a rename), then exits
//! at once, printing nothing (Claude Code adds a UserPromptSubmit hook's output to
//! the prompt). Outside a task session it does nothing.

use std::io::Read;
use std::path::Path;

use serde_json::Value;

use super::agent::AgentEvent;

/// The most of the hook's input read.
const MAX_INPUT: u64 = 1 << 20;
/// The most of a prompt or message kept.
const MAX_TEXT: usize = 300;

/// Records hook event `event` for the runner, if this runs inside a task session.
/// Never fails the agent: a problem is said on stderr and the hook exits 0.
pub fn record(event: &str) {
    let (Ok(session), Ok(dir)) = (
        std::env::var("HITL_TASK_SESSION"),
        std::env::var("HITL_TASK_EVENTS"),
    ) else {
        return;
    };
    let mut input = String::new();
    let _ = std::io::stdin().take(MAX_INPUT).read_to_string(&mut input);
    let v: Value = serde_json::from_str(&input).unwrap_or(Value::Null);
    let text = |key: &str| {
        v.get(key)
            .and_then(Value::as_str)
            .map(|s| s.chars().take(MAX_TEXT).collect::<String>())
    };
    let ev = AgentEvent {
        session,
        event: event.to_string(),
        agent_session_id: text("session_id"),
        prompt: text("prompt"),
        message: text("message").or_else(|| text("last_assistant_message")),
        error: text("error"),
        reason: text("reason"),
        transcript_path: v
            .get("transcript_path")
            .and_then(Value::as_str)
            .map(str::to_string),
    };
    if let Err(e) = write(Path::new(&dir), &ev) {
        eprintln!("hitl task event: {e}");
    }
}

fn write(dir: &Path, ev: &AgentEvent) -> std::io::Result<()> {
    let now = jiff::Timestamp::now().as_nanosecond();
    let name = format!("{now:020}-{}.json", std::process::id());
    let tmp = dir.join(format!(".{name}"));
    std::fs::write(&tmp, serde_json::to_vec(ev)?)?;
    std::fs::rename(&tmp, dir.join(name))
}
