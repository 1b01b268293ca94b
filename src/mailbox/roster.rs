//! The agents of a project's mailbox runs, as `hitl agents` and the dashboard list
//! them: each with the status it reported (planning, executing, idle, working,
//! done, error) and its run. Read from the runs' own files: the run folders are
//! where that state lives.

use std::{path::PathBuf, time::Duration};

use serde::Serialize;

use super::{agent, layout, registry, report};
use crate::{agents::AgentStatus, spool::Spool};

/// How long the agents of an ended run are still listed.
const ENDED_SHOWN_FOR: Duration = Duration::from_secs(10 * 60);

/// One agent of a run.
#[derive(Debug, Clone, Serialize)]
pub struct RunAgent {
    /// The id its questions are asked in ([`layout::agent_id`]).
    pub agent_id: String,
    /// Its name in the run.
    pub name: String,
    /// Its status in hitl's words.
    pub status: AgentStatus,
    /// The status it reported itself.
    pub mailbox_status: Option<String>,
    /// The run's folder.
    pub run: PathBuf,
    /// How the run ended (`done`, `failed`), if it has.
    pub run_state: Option<String>,
    /// When its status was last written.
    pub last_seen: Option<jiff::Timestamp>,
}

/// The agents of `spool`'s registered runs that are going, or ended lately.
pub fn agents(spool: &Spool) -> Vec<RunAgent> {
    let mut out = Vec::new();
    for dir in registry::runs(spool) {
        let Ok(run) = layout::Run::open(&dir) else {
            continue;
        };
        let ended = report::read(&run);
        if let Some(r) = &ended {
            let age = jiff::Timestamp::now().as_millisecond() - r.ended_ms;
            if age > ENDED_SHOWN_FOR.as_millis() as i64 {
                continue;
            }
        }
        for name in run.agents() {
            let Ok(mailbox) = run.mailbox(&name) else {
                continue;
            };
            let text = mailbox.status();
            let last_seen = std::fs::metadata(mailbox.status_file())
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| jiff::Timestamp::try_from(t).ok());
            out.push(RunAgent {
                agent_id: layout::agent_id(&run.name(), &name),
                status: status_of(text.as_deref(), ended.is_some()),
                mailbox_status: text,
                name,
                run: run.dir.clone(),
                run_state: ended.as_ref().map(|r| r.state.clone()),
                last_seen,
            });
        }
    }
    out
}

/// A reported status in hitl's words: done, error or an ended run's agents are
/// gone; idle (and a run's first `starting`) idle; anything else at work.
fn status_of(text: Option<&str>, run_ended: bool) -> AgentStatus {
    match text {
        _ if run_ended => AgentStatus::Gone,
        Some(t) if agent::is_done(t) || agent::is_error(t) => AgentStatus::Gone,
        None | Some("idle" | "starting") => AgentStatus::Idle,
        Some(_) => AgentStatus::Working,
    }
}
