//! The activity side of the broker: hook events noted in each project's
//! `.helpers/activity/` (see [`crate::spool::activity`]) are recorded as agent events
//! (seed 004's observability feed), told to every subscriber as
//! [`Change::Activity`], and what they say of their agent (working, idle, gone) is
//! kept in the agent registry. Notes are taken once a tick, together: nobody waits
//! on one.

use std::{
    path::{Path, PathBuf},
    sync::Arc,
};

use serde_json::{Map, Value, json};

use super::{Activity, Broker, Change, StoreMsg, StoreOp};
use crate::{
    agents::{self, AgentStatus},
    protocol::{Request, activity::ActivityNote},
    spool::activity,
    store::{Ack, NewEvent, Outcome},
};

/// What one tick's notes said of one agent.
pub(super) struct Report {
    spool: usize,
    agent_id: String,
    agent_name: String,
    working_dir: Option<String>,
    status: AgentStatus,
}

/// Notes waiting past this many are taken at once rather than at the next tick.
const MAX_WAITING_NOTES: usize = 256;

impl Broker {
    /// A note arrived in a spool's activity folder. Nobody waits on a note, so it is
    /// taken with the tick's batch, not now: the hook that wrote it is still exiting,
    /// and on a small machine storing it now would take the CPU from it (and from
    /// the agent it belongs to); a tick's notes go to the store in one transaction.
    pub(super) fn note_arrived(&mut self, spool: usize, path: PathBuf) {
        self.files.notes.push((spool, path));
        // The note's file was a spare: another is made once the spool is quiet.
        self.history.quiet_soon();
        if self.files.notes.len() > MAX_WAITING_NOTES {
            self.take_notes();
        }
    }

    /// Takes the notes that arrived since the last tick.
    pub(super) fn take_notes(&mut self) {
        for (spool, path) in std::mem::take(&mut self.files.notes) {
            self.note_appeared(spool, &path);
        }
    }

    /// A note appeared in a spool's activity folder.
    pub(super) fn note_appeared(&mut self, spool: usize, path: &Path) {
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            return;
        };
        if !activity::is_note_name(name) {
            return;
        }
        if let Some(note) = activity::take_note(path) {
            self.record_activity(spool, note, false);
        }
    }

    /// Takes every note waiting in every spool (at start, and after lost events).
    pub(super) fn rescan_activity(&mut self) {
        for spool in 0..self.files.spools.len() {
            for path in activity::waiting_notes(&self.files.spools[spool]) {
                self.note_appeared(spool, &path);
            }
        }
    }

    /// A Claude Code hook asked about a call through the spool: the call goes in the
    /// activity feed as the hook's other calls do. Held back with the question's own
    /// history, so that the answer's record finds the store writer free.
    pub(super) fn note_asked_call(&mut self, spool: usize, request: &Request) {
        let source_app = self.files.spools[spool]
            .project()
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "claude-code".into());
        let note = ActivityNote::asked(request, source_app);
        self.record_activity(spool, note, true);
    }

    /// A note from an adapter in this process, for the spool of `project`.
    pub(super) fn note_from(&mut self, project: &Path, note: ActivityNote) {
        let spool = self
            .files
            .spools
            .iter()
            .position(|s| s.project() == project);
        match spool {
            Some(spool) => self.record_activity(spool, note, false),
            None => tracing::warn!(
                "an activity note for {} has no spool here",
                project.display()
            ),
        }
    }

    /// Records `note`; `held`: with the spool's held-back history.
    fn record_activity(&mut self, spool: usize, note: ActivityNote, held: bool) {
        let project = self.files.spools[spool].project().to_path_buf();
        if let Some(status) = agents::status_after(&note.hook_event_type) {
            self.files.reports.push(Report {
                spool,
                agent_id: note.agent_id.clone(),
                agent_name: note.agent_name.clone(),
                working_dir: note
                    .payload
                    .get("cwd")
                    .and_then(Value::as_str)
                    .map(str::to_string),
                status,
            });
        }
        let mut extra = Map::new();
        extra.insert("agent_id".into(), json!(note.agent_id));
        extra.insert("agent_name".into(), json!(note.agent_name));
        extra.insert("project".into(), json!(project));
        if let Some(d) = &note.decision {
            extra.insert("decision".into(), json!(d));
        }
        if let Some(r) = &note.reason {
            extra.insert("reason".into(), json!(r));
        }
        let event = NewEvent {
            source_app: note.source_app,
            session_id: note.session_id,
            hook_event_type: note.hook_event_type,
            payload: note.payload,
            extra,
            timestamp_ms: note.timestamp_ms,
            hitl: None,
            idempotency_key: None,
        };
        // Told once stored, with its id, on the writer (a broadcast send is cheap).
        let changes = self.changes.clone();
        let told = event.clone();
        let tell = Ack::Then(Box::new(move |outcome| {
            if let Some(Outcome::Created { event_id, .. }) = outcome {
                let _ = changes.send(Change::Activity(Arc::new(Activity {
                    event_id,
                    event: told,
                    project,
                })));
            }
        }));
        let msg = StoreMsg {
            op: StoreOp::Event(Box::new(event)),
            ack: Some(tell),
        };
        if held {
            self.history.hold(msg);
        } else {
            self.write(msg);
        }
    }

    /// Keeps what the tick's notes said of their agents in the registry: one write
    /// per agent, on the blocking pool.
    pub(super) fn flush_reports(&mut self) {
        if self.files.reports.is_empty() {
            return;
        }
        // One entry per agent: its latest name and folder, and every status said.
        let mut by_agent: Vec<(Report, Vec<AgentStatus>)> = Vec::new();
        for r in std::mem::take(&mut self.files.reports) {
            match by_agent
                .iter_mut()
                .find(|(a, _)| a.spool == r.spool && a.agent_id == r.agent_id)
            {
                Some((a, statuses)) => {
                    statuses.push(r.status);
                    a.agent_name = r.agent_name;
                    if r.working_dir.is_some() {
                        a.working_dir = r.working_dir;
                    }
                }
                None => {
                    let status = r.status;
                    by_agent.push((r, vec![status]));
                }
            }
        }
        let spools = self.files.spools.clone();
        tokio::task::spawn_blocking(move || {
            for (a, statuses) in by_agent {
                let spool = &spools[a.spool];
                let dir = a.working_dir.as_deref();
                if let Err(e) =
                    agents::note_reports(spool, &a.agent_id, &a.agent_name, dir, &statuses)
                {
                    tracing::debug!("agent registry not updated: {e:#}");
                }
            }
        });
    }
}
