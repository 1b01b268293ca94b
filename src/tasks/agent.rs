//! The agent side of a session: what its hooks report (`AgentEvent`, written by
//! `hitl task event`), which agents are Claude Code, and the one look at Claude Code's
//! screen the runner makes.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::tmux::Tmux;

/// The pause between typing and pressing Enter (and after emptying the input box).
pub const ENTER_PAUSE: std::time::Duration = std::time::Duration::from_millis(300);

/// What a hook of a session's agent reported (`hitl task event`), as left in
/// `events/`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct AgentEvent {
    /// The session (`$HITL_TASK_SESSION`).
    pub session: String,
    /// The hook event (`SessionStart`, `UserPromptSubmit`, `Stop`, …).
    pub event: String,
    /// The agent's own session id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_session_id: Option<String>,
    /// The prompt taken (UserPromptSubmit), cut short.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    /// What a Notification says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Why the session ended (SessionEnd).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The agent's transcript.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transcript_path: Option<String>,
    /// Why its turn failed (StopFailure: `authentication_failed`, `rate_limit`…).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The hook events a session's Claude Code reports to the runner.
pub const AGENT_EVENTS: [&str; 7] = [
    "SessionStart",
    "UserPromptSubmit",
    "PreToolUse",
    "Stop",
    "StopFailure",
    "Notification",
    "SessionEnd",
];

/// Whether a StopFailure's `error` means the agent cannot reach its model until
/// someone logs it in (or fixes its credentials): the task is `auth-required`.
pub fn needs_login(error: &str) -> bool {
    [
        "authentication_failed",
        "oauth_org_not_allowed",
        "cloud_credential_error",
        "verification_required",
        "account_on_hold",
    ]
    .contains(&error)
}

/// The program `command` runs: its first word. (No `env VAR=value` before it: a
/// `PATH` or `LD_PRELOAD` there would change what an allowed name runs.)
pub fn program_of(command: &[String]) -> Option<&str> {
    command.first().map(String::as_str)
}

/// Whether `command` runs Claude Code (which takes hitl's hooks and shows `❯`).
pub fn is_claude(command: &[String]) -> bool {
    program_of(command)
        .and_then(|p| Path::new(p).file_name())
        .is_some_and(|n| n == "claude")
}

/// Whether `command` runs OpenAI's Codex CLI.
pub fn is_codex(command: &[String]) -> bool {
    program_of(command)
        .and_then(|p| Path::new(p).file_name())
        .is_some_and(|n| n == "codex")
}

/// Whether `command` runs Google's Gemini CLI.
pub fn is_gemini(command: &[String]) -> bool {
    program_of(command)
        .and_then(|p| Path::new(p).file_name())
        .is_some_and(|n| n == "gemini")
}

/// `s` quoted for a POSIX shell (Claude Code runs hook commands through one).
pub fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// Empties Claude Code's input box when it holds text (Ctrl-C does, once; a second
/// within a second would exit it, so only one, and only for text): the one look at
/// the screen the runner makes, and only to type into a clean box.
pub fn empty_claude_input(tmux: &Tmux, name: &str) {
    let Ok(screen) = tmux.capture(name, usize::from(super::tmux::PANE_ROWS)) else {
        return;
    };
    let holds_text = screen
        .lines()
        .rev()
        .find_map(|l| l.trim_start().strip_prefix('❯'))
        .is_some_and(|rest| !rest.trim().is_empty());
    if holds_text {
        let _ = tmux.send_keys(name, &["C-c"]);
        std::thread::sleep(ENTER_PAUSE);
    }
}
