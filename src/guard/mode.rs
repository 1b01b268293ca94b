//! Claude Code's permission mode, as each hook call reports it (`permission_mode`),
//! and what it means for the guard: in some modes Claude Code runs calls without
//! asking anyone, and hitl is then the only gate between the agent and the call.

use serde_json::Value;

/// A session's permission mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PermissionMode {
    /// Claude Code asks before anything its rules do not allow.
    Default,
    /// File edits run unasked; the rest as `Default`.
    AcceptEdits,
    /// Planning only: Claude Code runs nothing that changes anything.
    Plan,
    /// Every call runs unasked.
    BypassPermissions,
    /// What its rules do not allow is denied, never asked.
    DontAsk,
    /// A classifier of Claude Code's decides instead of asking.
    Auto,
    /// A mode this hitl does not know (a newer Claude Code's): taken as one that
    /// does not ask, so that the guard fails closed.
    Other,
}

impl PermissionMode {
    /// The mode of a hook call; a call that names none (not every event carries it)
    /// is `Default`.
    pub fn of(input: &Value) -> PermissionMode {
        let mode = match input.get("permission_mode") {
            None | Some(Value::Null) => return PermissionMode::Default,
            Some(mode) => mode.as_str(),
        };
        match mode {
            Some("default") => PermissionMode::Default,
            Some("acceptEdits") => PermissionMode::AcceptEdits,
            Some("plan") => PermissionMode::Plan,
            Some("bypassPermissions") => PermissionMode::BypassPermissions,
            Some("dontAsk") => PermissionMode::DontAsk,
            Some("auto") => PermissionMode::Auto,
            Some(_) | None => PermissionMode::Other,
        }
    }

    /// Whether Claude Code would run a call of `tool` without asking a person in
    /// this mode (rules aside): then nobody sees its prompt, and what hitl does not
    /// stop, runs.
    pub fn runs_unasked(self, tool: &str) -> bool {
        match self {
            PermissionMode::Default | PermissionMode::Plan => false,
            PermissionMode::AcceptEdits => is_file_edit(tool),
            PermissionMode::BypassPermissions
            | PermissionMode::DontAsk
            | PermissionMode::Auto
            | PermissionMode::Other => true,
        }
    }

    /// The mode's name, as Claude Code writes it.
    pub fn name(self) -> &'static str {
        match self {
            PermissionMode::Default => "default",
            PermissionMode::AcceptEdits => "acceptEdits",
            PermissionMode::Plan => "plan",
            PermissionMode::BypassPermissions => "bypassPermissions",
            PermissionMode::DontAsk => "dontAsk",
            PermissionMode::Auto => "auto",
            PermissionMode::Other => "an unknown mode",
        }
    }
}

/// The tools `acceptEdits` runs unasked (Codex's patches among them).
fn is_file_edit(tool: &str) -> bool {
    matches!(
        tool,
        "Edit" | "Write" | "MultiEdit" | "NotebookEdit" | super::policy::PATCH_TOOL
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn modes_that_do_not_ask_are_known_and_unknown_ones_fail_closed() {
        let mode = |m: Value| PermissionMode::of(&json!({ "permission_mode": m }));
        assert_eq!(PermissionMode::of(&json!({})), PermissionMode::Default);
        assert!(!mode(json!("default")).runs_unasked("Bash"));
        assert!(!mode(json!("plan")).runs_unasked("Bash"));
        assert!(mode(json!("acceptEdits")).runs_unasked("Edit"));
        assert!(!mode(json!("acceptEdits")).runs_unasked("Bash"));
        for m in ["bypassPermissions", "dontAsk", "auto", "yolo2"] {
            assert!(mode(json!(m)).runs_unasked("Bash"), "{m}");
        }
        assert_eq!(mode(json!(3)), PermissionMode::Other);
    }
}
