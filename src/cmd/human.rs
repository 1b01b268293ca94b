//! Commands only a human may run: answering and cancelling questions, changing
//! hitl's rules, taking its hooks out of Claude Code. An agent that could run them
//! from its own shell would approve its own questions and switch the guard off.
//!
//! An agent's shell is known by what Claude Code gives it: `CLAUDECODE=1` in the
//! environment of every command its Bash tool runs. Unsetting it (`env -u`) does
//! not help: the variable is looked for in the environment every ancestor started
//! with too (readable for our own processes), and a `claude` ancestor counts.
//! This stops an agent using its tools in ordinary ways; an agent set on getting
//! round any same-user check (a daemonised double fork) is beyond what one user's
//! processes can tell apart: run agents as another OS user for that (README).

use anyhow::{Result, bail};

/// The variable Claude Code sets for the commands it runs.
const AGENT_VARIABLE: &str = "CLAUDECODE";

/// Refuses `what` when this process runs inside an agent's session.
pub fn only_a_human(what: &str) -> Result<()> {
    if let Some(why) = inside_agent() {
        bail!(
            "{what} is for a human: this runs inside an AI agent's session ({why}). \
             Run it from your own terminal, or answer in a hitl UI (the terminal \
             prompt, the dashboard)"
        );
    }
    Ok(())
}

/// Why this process looks like an agent's command, if it does.
pub fn inside_agent() -> Option<String> {
    if std::env::var_os(AGENT_VARIABLE).is_some_and(|v| !v.is_empty() && v != "0") {
        return Some(format!("{AGENT_VARIABLE} is set"));
    }
    let mut pid = parent_of(std::process::id())?;
    for _ in 0..64 {
        if pid <= 1 {
            return None;
        }
        if started_with_agent_variable(pid) {
            return Some(format!(
                "process {pid}, an ancestor, was started with {AGENT_VARIABLE}"
            ));
        }
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        if comm.trim_end() == "claude" {
            return Some(format!("process {pid}, an ancestor, is Claude Code"));
        }
        pid = parent_of(pid)?;
    }
    None
}

/// A process's parent, from `/proc/PID/stat` (after the command name's `)`).
fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(1)?.parse().ok()
}

/// Whether a process's starting environment has the agent variable set.
fn started_with_agent_variable(pid: u32) -> bool {
    let Ok(environ) = std::fs::read(format!("/proc/{pid}/environ")) else {
        return false;
    };
    environ.split(|b| *b == 0).any(|entry| {
        entry
            .strip_prefix(AGENT_VARIABLE.as_bytes())
            .and_then(|rest| rest.strip_prefix(b"="))
            .is_some_and(|v| !v.is_empty() && v != b"0")
    })
}
