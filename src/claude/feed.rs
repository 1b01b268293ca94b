//! What `hitl hook` tells the activity feed: every hook event, noted as a small
//! file for the project's listener (see [`crate::spool::activity`]) with the agent
//! it came from and what hitl said to it. Never waits for the broker, and writes
//! nothing when no listener runs to read it (the folder would only grow).

use serde_json::Value;

use super::decision::{Decision, HookAgent, HookEvent};
use crate::{
    protocol::activity::{ActivityNote, summarize},
    spool::{ListenerInfo, Spool, activity},
};

impl HookEvent {
    /// The event as Claude Code names it.
    pub fn claude_name(self) -> &'static str {
        match self {
            HookEvent::PreToolUse => "PreToolUse",
            HookEvent::PermissionRequest => "PermissionRequest",
            HookEvent::PostToolUse => "PostToolUse",
            HookEvent::Notification => "Notification",
            HookEvent::Stop => "Stop",
            HookEvent::SubagentStop => "SubagentStop",
            HookEvent::UserPromptSubmit => "UserPromptSubmit",
            HookEvent::SessionStart => "SessionStart",
            HookEvent::SessionEnd => "SessionEnd",
            HookEvent::Elicitation => "Elicitation",
        }
    }
}

/// The agent a hook call comes from, as hitl names it: `HITL_AGENT_ID` (and
/// `HITL_AGENT_NAME`) when set, else Claude Code's session (`claude-1a2b3c4d`,
/// "Claude 1a2b3c4d (project)"); `None` without either.
pub fn session_agent(
    input: &Value,
    project: &std::path::Path,
    agent: HookAgent,
) -> Option<(String, String)> {
    if let Some(id) = std::env::var("HITL_AGENT_ID")
        .ok()
        .filter(|s| !s.is_empty())
    {
        let id = crate::protocol::id_from(&id, 64, "agent");
        let name = std::env::var("HITL_AGENT_NAME")
            .ok()
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| id.clone());
        return Some((id, name));
    }
    let session = input.get("session_id").and_then(Value::as_str)?;
    let short: String = session
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .take(8)
        .collect();
    if short.is_empty() {
        return None;
    }
    let project = project
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let (prefix, shown) = agent.names();
    Some((
        format!("{prefix}-{short}"),
        format!("{shown} {short} ({project})"),
    ))
}

/// Notes one hook call for the listener of `spool`, if one runs.
pub fn note(
    spool: Option<&Spool>,
    project: &std::path::Path,
    event: HookEvent,
    input: &Value,
    decision: Option<&Decision>,
    agent: HookAgent,
) {
    let Some(spool) = spool else { return };
    if ListenerInfo::running(spool).is_none() {
        return;
    }
    let (agent_id, agent_name) = session_agent(input, project, agent).unwrap_or_else(|| {
        let (prefix, shown) = agent.names();
        (format!("{prefix}-unknown"), shown.to_string())
    });
    let (decision, reason) = match decision {
        None => (None, None),
        Some(Decision::NoOpinion) => (Some("none"), None),
        Some(Decision::Notice { message }) => (Some("none"), Some(message.clone())),
        Some(Decision::Allow { reason, .. }) => (Some("allow"), Some(reason.clone())),
        Some(Decision::Deny { reason }) => (Some("deny"), Some(reason.clone())),
        Some(Decision::Ask { reason }) => (Some("ask"), Some(reason.clone())),
        Some(Decision::Elicit { action, .. }) => (Some(*action), None),
    };
    // The transcript's path says nothing to a person; the rest, cut to size, does.
    let mut payload = input.clone();
    if let Some(o) = payload.as_object_mut() {
        o.remove("transcript_path");
    }
    let note = ActivityNote {
        source_app: project
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "claude-code".into()),
        session_id: input
            .get("session_id")
            .and_then(Value::as_str)
            .unwrap_or("unknown")
            .to_string(),
        hook_event_type: input
            .get("hook_event_name")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
            .unwrap_or(event.claude_name())
            .to_string(),
        payload: summarize(&payload),
        timestamp_ms: jiff::Timestamp::now().as_millisecond(),
        agent_id,
        agent_name,
        decision: decision.map(str::to_string),
        reason,
    };
    if let Err(e) = activity::drop_note(spool, &note) {
        eprintln!("hitl hook: the activity feed missed this event: {e}");
    }
}
