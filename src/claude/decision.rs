//! What a hook says to Claude Code: the events `hitl hook` handles, the decision it
//! comes to, and that decision written in Claude Code's own JSON for each event (stdout
//! is the protocol; docs/PROTOCOL.md lists the shapes). Apart from how the decision is
//! reached (`hook`), so that the feed and MCP can name both without the hook.

use serde_json::{Value, json};

/// The hook events `hitl hook` handles, named as in `hitl hook EVENT`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum HookEvent {
    /// Before a tool runs: allow, deny or ask, by policy.
    PreToolUse,
    /// Claude Code is about to show its permission dialog: answered through hitl.
    PermissionRequest,
    /// After a tool ran.
    PostToolUse,
    /// Claude Code wants the user's attention.
    Notification,
    /// The main agent finished its turn.
    Stop,
    /// A subagent finished.
    SubagentStop,
    /// The user sent a prompt.
    UserPromptSubmit,
    /// A session began.
    SessionStart,
    /// A session ended.
    SessionEnd,
    /// An MCP server asks the user for input.
    Elicitation,
}

/// Whose hook calls `hitl hook`: the dialect of its input and output, and how its
/// agents are named (`hitl hook --agent codex EVENT`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum HookAgent {
    /// Claude Code (the default).
    #[default]
    Claude,
    /// OpenAI's Codex CLI.
    Codex,
    /// Google's Gemini CLI.
    Gemini,
}

impl HookAgent {
    /// The agent's id prefix (`claude-1a2b3c4d`) and the name its sessions are
    /// shown by ("Claude 1a2b3c4d (project)").
    pub fn names(self) -> (&'static str, &'static str) {
        match self {
            HookAgent::Claude => ("claude", "Claude"),
            HookAgent::Codex => ("codex", "Codex"),
            HookAgent::Gemini => ("gemini", "Gemini"),
        }
    }

    /// The hook's input as hitl's guard reads it (Claude Code's names). Gemini CLI's
    /// tools get Claude Code's names for the same tools (`run_shell_command` is
    /// `Bash`); and since its input does not say whether Gemini will confirm a call
    /// itself (`--approval-mode yolo` confirms nothing), every call is taken as one
    /// it runs unasked: only what hitl proves harmless passes without a person.
    pub fn input(self, mut input: Value) -> Value {
        if self != HookAgent::Gemini {
            return input;
        }
        if let Some(o) = input.as_object_mut() {
            let tool = o.get("tool_name").and_then(Value::as_str).unwrap_or("");
            if let Some(name) = crate::guard::claude_tool_name(tool) {
                o.insert("tool_name".into(), name.into());
            }
            o.entry("permission_mode")
                .or_insert_with(|| "bypassPermissions".into());
        }
        input
    }

    /// The stdout JSON for `decision` in this agent's dialect; `None`: print nothing.
    pub fn output(self, event: HookEvent, decision: &Decision) -> Option<Value> {
        match self {
            HookAgent::Claude => output(event, decision),
            HookAgent::Codex => codex_output(event, decision),
            HookAgent::Gemini => gemini_output(event, decision),
        }
    }
}

/// Gemini CLI's dialect: a BeforeTool hook blocks with `{"decision": "deny",
/// "reason": …}` (the reason reaches the model); anything else is said by printing
/// nothing, which leaves the call to Gemini's own approval mode.
fn gemini_output(event: HookEvent, decision: &Decision) -> Option<Value> {
    match (event, decision) {
        (HookEvent::PreToolUse, Decision::Deny { reason }) => {
            Some(json!({ "decision": "deny", "reason": reason }))
        }
        _ => None,
    }
}

/// Codex's dialect: Claude Code's shapes, but a PreToolUse hook may only deny (Codex
/// takes `allow` or `ask` as the hook failing, and runs the call): anything else is
/// said by printing nothing, which leaves the call to Codex's own approval policy.
fn codex_output(event: HookEvent, decision: &Decision) -> Option<Value> {
    match (event, decision) {
        (HookEvent::PreToolUse, Decision::Deny { .. })
        | (HookEvent::PermissionRequest, Decision::Allow { .. } | Decision::Deny { .. }) => {
            output(event, decision)
        }
        _ => None,
    }
}

/// What the hook says to Claude Code.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// No opinion: empty stdout. Claude Code's own permissions decide.
    NoOpinion,
    /// No opinion, with a message shown to the user (`systemMessage`).
    Notice {
        /// What the user should know.
        message: String,
    },
    /// Let the call run, with why (and, for decision tools, the input to run with).
    Allow {
        /// Who approved, and their comment.
        reason: String,
        /// The input to run the tool with, replacing Claude's.
        updated_input: Option<Value>,
        /// Permission rules for Claude Code to add (PermissionRequest only): its own
        /// suggestions, when the human chose "always allow".
        updated_permissions: Option<Value>,
    },
    /// Refuse it, with why (shown to Claude).
    Deny {
        /// Who denied, and their comment.
        reason: String,
    },
    /// Leave it to Claude Code's own prompt, with why (shown to the user).
    Ask {
        /// Why hitl did not decide.
        reason: String,
    },
    /// An MCP server's elicitation answered: `accept` (with the `content`), or
    /// `decline`.
    Elicit {
        /// `accept`, `decline` or `cancel`.
        action: &'static str,
        /// What was entered, with `accept` of a form.
        content: Option<Value>,
    },
}

/// The stdout JSON for `decision`, in the format of `event`; `None`: print nothing.
pub fn output(event: HookEvent, decision: &Decision) -> Option<Value> {
    match (event, decision) {
        (_, Decision::NoOpinion) => None,
        (_, Decision::Notice { message }) => Some(json!({ "systemMessage": message })),
        // An elicitation is accepted or declined; anything else leaves it to Claude
        // Code's own dialog.
        (HookEvent::Elicitation, Decision::Elicit { action, content }) => {
            let mut out = json!({ "hookEventName": "Elicitation", "action": action });
            if let Some(c) = content {
                out["content"] = c.clone();
            }
            Some(json!({ "hookSpecificOutput": out }))
        }
        (HookEvent::Elicitation, Decision::Deny { .. }) => Some(json!({ "hookSpecificOutput": {
            "hookEventName": "Elicitation", "action": "decline" } })),
        (HookEvent::Elicitation, _) | (_, Decision::Elicit { .. }) => None,
        (
            HookEvent::PermissionRequest,
            Decision::Allow {
                updated_input,
                updated_permissions,
                ..
            },
        ) => {
            let mut d = json!({ "behavior": "allow" });
            if let Some(i) = updated_input {
                d["updatedInput"] = i.clone();
            }
            if let Some(p) = updated_permissions {
                d["updatedPermissions"] = p.clone();
            }
            Some(json!({ "hookSpecificOutput": {
                "hookEventName": "PermissionRequest", "decision": d } }))
        }
        (HookEvent::PermissionRequest, Decision::Deny { reason }) => {
            Some(json!({ "hookSpecificOutput": {
                "hookEventName": "PermissionRequest",
                "decision": { "behavior": "deny", "message": reason } } }))
        }
        // Claude Code's own dialog is what a PermissionRequest without a decision gets.
        (HookEvent::PermissionRequest, Decision::Ask { .. }) => None,
        (_, d) => {
            let (verdict, reason, updated) = match d {
                Decision::Allow {
                    reason,
                    updated_input,
                    ..
                } => ("allow", reason, updated_input.clone()),
                Decision::Deny { reason } => ("deny", reason, None),
                Decision::Ask { reason } => ("ask", reason, None),
                Decision::NoOpinion | Decision::Notice { .. } | Decision::Elicit { .. } => {
                    unreachable!("handled above")
                }
            };
            let mut out = json!({ "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": verdict,
                "permissionDecisionReason": reason,
            } });
            if let Some(i) = updated {
                out["hookSpecificOutput"]["updatedInput"] = i;
            }
            Some(out)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decisions_are_written_in_claude_codes_formats() {
        let allow = Decision::Allow {
            reason: "ok".into(),
            updated_input: None,
            updated_permissions: None,
        };
        let deny = Decision::Deny {
            reason: "no".into(),
        };
        assert_eq!(
            output(HookEvent::PreToolUse, &allow).unwrap(),
            json!({"hookSpecificOutput": {"hookEventName": "PreToolUse",
                "permissionDecision": "allow", "permissionDecisionReason": "ok"}})
        );
        assert_eq!(
            output(HookEvent::PreToolUse, &deny).unwrap()["hookSpecificOutput"]["permissionDecision"],
            "deny"
        );
        assert_eq!(
            output(HookEvent::PermissionRequest, &deny).unwrap(),
            json!({"hookSpecificOutput": {"hookEventName": "PermissionRequest",
                "decision": {"behavior": "deny", "message": "no"}}})
        );
        assert_eq!(
            output(HookEvent::PermissionRequest, &allow).unwrap(),
            json!({"hookSpecificOutput": {"hookEventName": "PermissionRequest",
                "decision": {"behavior": "allow"}}})
        );
        assert_eq!(output(HookEvent::PreToolUse, &Decision::NoOpinion), None);
        let ask = Decision::Ask { reason: "?".into() };
        assert_eq!(output(HookEvent::PermissionRequest, &ask), None);
    }

    #[test]
    fn codex_is_told_only_denials_before_a_call() {
        let codex = HookAgent::Codex;
        let deny = Decision::Deny {
            reason: "no".into(),
        };
        assert_eq!(
            codex.output(HookEvent::PreToolUse, &deny),
            output(HookEvent::PreToolUse, &deny)
        );
        let allow = Decision::Allow {
            reason: "ok".into(),
            updated_input: None,
            updated_permissions: None,
        };
        assert_eq!(codex.output(HookEvent::PreToolUse, &allow), None);
        let ask = Decision::Ask { reason: "?".into() };
        assert_eq!(codex.output(HookEvent::PreToolUse, &ask), None);
        assert_eq!(
            codex.output(HookEvent::PermissionRequest, &allow),
            output(HookEvent::PermissionRequest, &allow)
        );
        let notice = Decision::Notice {
            message: "m".into(),
        };
        assert_eq!(codex.output(HookEvent::Stop, &notice), None);
    }

    #[test]
    fn gemini_calls_are_read_with_claude_codes_names_and_told_only_denials() {
        let gemini = HookAgent::Gemini;
        let input = gemini.input(json!({
            "hook_event_name": "BeforeTool", "tool_name": "run_shell_command",
            "tool_input": { "command": "ls" },
        }));
        assert_eq!(input["tool_name"], "Bash");
        assert_eq!(input["permission_mode"], "bypassPermissions");
        assert_eq!(
            gemini.input(json!({ "tool_name": "web_fetch" }))["tool_name"],
            "web_fetch"
        );
        let deny = Decision::Deny {
            reason: "no".into(),
        };
        assert_eq!(
            gemini.output(HookEvent::PreToolUse, &deny),
            Some(json!({ "decision": "deny", "reason": "no" }))
        );
        let ask = Decision::Ask { reason: "?".into() };
        assert_eq!(gemini.output(HookEvent::PreToolUse, &ask), None);
    }
}
