//! The guard: which agent actions need a human, whatever the agent. It reads a shell
//! line as bash does (`shell`, with `plain` for the common simple lines), passes only
//! what it can prove harmless (`harmless`), names what is dangerous and why
//! (`danger`), checks protected paths and the user's "always allow" rules (`rules`),
//! reads the files Codex's patches write (`patch`),
//! and decides what a call needs (`policy`), given whether the agent would run it
//! without asking anyone (`mode`). Each agent's hooks are a thin translation of its
//! payloads and decisions over this (`claude::hook`, with `HookAgent` for Codex CLI
//! and Gemini CLI).

pub mod danger;
pub mod harmless;
pub mod mode;
pub mod patch;
mod plain;
pub mod policy;
pub mod rules;
pub mod shell;

/// Claude Code's name for another agent's tool (Gemini CLI's `run_shell_command` is
/// `Bash`), which the guard and the task runner's transcript read; `None`: no such
/// tool of Claude Code's.
pub fn claude_tool_name(tool: &str) -> Option<&'static str> {
    match tool {
        "run_shell_command" => Some("Bash"),
        "write_file" => Some("Write"),
        "replace" => Some("Edit"),
        "read_file" => Some("Read"),
        _ => None,
    }
}
