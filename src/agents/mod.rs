//! Who is asking: a stable identity per agent session, the `agents/` registry, and
//! liveness checks by pid *and* process start time (a reused pid is a new process).
//!
//! Each `hitl ask` is a short-lived child of the agent, so its own pid says nothing.
//! The identity is the nearest long-lived ancestor that is an agent (claude, codex,
//! aider, …), else the session leader (the terminal's shell), unless the agent named
//! itself with `HITL_AGENT_ID` / `HITL_AGENT_NAME`.

mod registry;

pub use registry::{
    AGENT_PROCESS_KEY, AgentProcess, AgentRecord, AgentStatus, list_agents, note_questions,
    note_reports, record_heartbeat, record_waiting, status_after, sweep,
};

use crate::runtime::process::main_thread_stat;
pub use crate::runtime::process::{ProcessRef, is_alive, start_time, this_process};

/// Process names that are AI agents.
const AGENT_NAMES: &[&str] = &[
    "claude",
    "codex",
    "aider",
    "gemini",
    "goose",
    "opencode",
    "cursor-agent",
    "amp",
    "crush",
    "qwen",
    "copilot",
    "cline",
];

/// The identity of an asking agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// Stable id, `[A-Za-z0-9_.-]{1,128}`, e.g. `claude-41235-8812345`.
    pub id: String,
    /// For people, e.g. `Claude-41235`.
    pub name: String,
    /// The agent's process, when the identity comes from one.
    pub process: Option<ProcessRef>,
}

fn sanitize(s: &str) -> String {
    crate::protocol::id_from(s, 64, "agent")
}

fn capitalize(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

fn is_agent_name(comm: &str) -> bool {
    let comm = comm.to_ascii_lowercase();
    AGENT_NAMES.iter().any(|a| {
        comm.strip_prefix(a)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with(['-', '_']))
    })
}

/// Works out who is asking, from the environment and the process tree.
pub fn identify() -> Identity {
    let env_id = std::env::var("HITL_AGENT_ID")
        .ok()
        .filter(|s| !s.is_empty());
    let env_name = std::env::var("HITL_AGENT_NAME")
        .ok()
        .filter(|s| !s.is_empty());
    if let Some(id) = env_id {
        let id = sanitize(&id);
        return Identity {
            name: env_name.unwrap_or_else(|| id.clone()),
            id,
            process: None,
        };
    }
    let (comm, proc_ref) = find_agent_process();
    let name = env_name.unwrap_or_else(|| format!("{}-{}", capitalize(&comm), proc_ref.pid));
    Identity {
        id: format!(
            "{}-{}-{}",
            sanitize(&comm.to_ascii_lowercase()),
            proc_ref.pid,
            proc_ref.start_time
        ),
        name,
        process: Some(proc_ref),
    }
}

/// Who asks through `hitl mcp`: as [`identify`] says when the server runs inside a
/// known agent (Claude Code, …) or the agent named itself; otherwise the MCP client,
/// by the name it gave (`clientInfo.name`), and the process it runs in, instead of
/// an interpreter's name (`Python-4242`).
pub fn identify_mcp_client(client: Option<&str>) -> Identity {
    let who = identify();
    let named_by_env = std::env::var_os("HITL_AGENT_ID").is_some_and(|v| !v.is_empty());
    let client = client.map(str::trim).filter(|c| !c.is_empty());
    let (Some(client), false) = (client, named_by_env) else {
        return who;
    };
    let in_agent = who.id.split('-').next().is_some_and(is_agent_name);
    if in_agent {
        return who;
    }
    let pid = who.process.map(|p| p.pid).unwrap_or_default();
    let name = match std::env::var("HITL_AGENT_NAME")
        .ok()
        .filter(|n| !n.is_empty())
    {
        Some(n) => n,
        None => format!("{}-{pid}", crate::protocol::text::visible_line(client)),
    };
    Identity {
        id: format!("mcp-{}-{}", sanitize(client), who.id),
        name,
        process: who.process,
    }
}

/// The nearest ancestor that is an agent, else the session leader, else our parent.
fn find_agent_process() -> (String, ProcessRef) {
    let me = std::process::id();
    let my_stat = main_thread_stat(me);
    if let Some(s) = &my_stat {
        crate::runtime::process::remember_self(s);
    }
    let session = my_stat.as_ref().map(|s| s.session).unwrap_or(0);
    let mut pid = my_stat.as_ref().map(|s| s.ppid).unwrap_or(0);
    let mut parent: Option<(String, ProcessRef)> = None;
    for _ in 0..64 {
        if pid <= 1 {
            break;
        }
        let Some(s) = main_thread_stat(pid as u32) else {
            break;
        };
        let here = (
            s.comm.clone(),
            ProcessRef {
                pid: pid as u32,
                start_time: s.starttime,
            },
        );
        if parent.is_none() {
            parent = Some(here.clone());
        }
        if is_agent_name(&s.comm) {
            return here;
        }
        if pid == session {
            // The session leader: a terminal's shell, tmux pane, or CI job.
            return here;
        }
        pid = s.ppid;
    }
    parent.unwrap_or_else(|| ("agent".into(), this_process()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn knows_agent_names() {
        assert!(is_agent_name("claude"));
        assert!(is_agent_name("Codex"));
        assert!(!is_agent_name("bash"));
        assert!(!is_agent_name("claudette"));
    }

    #[test]
    fn this_process_is_alive_and_a_wrong_start_time_is_not() {
        let me = this_process();
        assert!(is_alive(me.pid, Some(me.start_time)));
        assert!(!is_alive(me.pid, Some(me.start_time + 1)));
        assert!(!is_alive(u32::MAX - 1, None));
    }

    #[test]
    fn identity_is_stable_across_calls() {
        let a = identify();
        let b = identify();
        assert_eq!(a, b);
        assert!(crate::protocol::is_valid_id(&a.id), "{}", a.id);
    }
}
