//! The `agents/` registry: one JSON file per agent, read leniently (seed 000 and seed
//! 001 scripts write their own shapes there) and written atomically.
//!
//! Facts (pid, start time, first/last seen, questions asked) are stored; `status` is
//! derived from them and the pending questions whenever the registry is read, and
//! written back by the listener's sweep so the files stay current for other tools.
//! Read-modify-write cycles hold `agents/.lock` so parallel asks lose no count.

use std::{
    collections::HashSet,
    fs::{self, File},
    path::Path,
    time::Duration,
};

use anyhow::{Context, Result};
use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{Identity, is_alive};
use crate::{
    protocol::{Request, is_valid_id, parse_timestamp},
    spool::Spool,
};

/// After this long without a sign of life an agent is idle.
const ACTIVE_FOR: Duration = Duration::from_secs(10 * 60);
/// A dead agent's record is kept this long so people can see what happened.
const GONE_KEPT_FOR: Duration = Duration::from_secs(10 * 60);
/// A record with no known process is dropped after this long without a sign of life.
const STALE_AFTER: Duration = Duration::from_secs(24 * 60 * 60);

/// What an agent is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AgentStatus {
    /// Seen recently, nothing pending.
    Active,
    /// Its hooks say it is at work (a prompt taken, tools running).
    Working,
    /// Has a question in the queue.
    Waiting,
    /// Not seen for a while.
    Idle,
    /// Its process has ended.
    Gone,
}

/// One agent in the registry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentRecord {
    /// Always 1.
    pub version: u32,
    /// Stable id.
    pub agent_id: String,
    /// Name for people.
    pub name: String,
    /// Its process, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// The process's start time in clock ticks since boot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<u64>,
    /// Where it works.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub working_dir: Option<String>,
    /// First question.
    pub first_seen: Timestamp,
    /// Last question or heartbeat.
    pub last_seen: Timestamp,
    /// Questions asked so far.
    pub questions_asked: u64,
    /// What it is doing (derived; see the module docs).
    pub status: AgentStatus,
    /// What its own hooks last said it is doing (working, idle after a stop, gone
    /// after its session ended), if they said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reported: Option<AgentStatus>,
}

impl AgentRecord {
    fn new(id: &str, name: &str, now: Timestamp) -> AgentRecord {
        AgentRecord {
            version: 1,
            agent_id: id.to_string(),
            name: name.to_string(),
            pid: None,
            start_time: None,
            working_dir: None,
            first_seen: now,
            last_seen: now,
            questions_asked: 0,
            status: AgentStatus::Active,
            reported: None,
        }
    }

    /// Reads any of the shapes found in `agents/`: ours, seed 000's (`id`,
    /// `last_heartbeat`), seed 001's (`agent_id`, `last_seen` as unix seconds).
    pub fn from_value(v: &Value, file_stem: &str) -> Option<AgentRecord> {
        let o: &Map<String, Value> = v.as_object()?;
        let s = |k: &str| o.get(k).and_then(Value::as_str).map(str::to_string);
        let ts = |k: &str| o.get(k).and_then(parse_timestamp);
        let id = s("agent_id")
            .or_else(|| s("id"))
            .unwrap_or_else(|| file_stem.to_string());
        let now = Timestamp::now();
        let last_seen = ts("last_seen")
            .or_else(|| ts("last_heartbeat"))
            .unwrap_or(now);
        Some(AgentRecord {
            version: 1,
            name: s("name")
                .or_else(|| s("agent_name"))
                .unwrap_or_else(|| id.clone()),
            pid: o.get("pid").and_then(Value::as_u64).map(|p| p as u32),
            start_time: o.get("start_time").and_then(Value::as_u64),
            working_dir: s("working_dir").or_else(|| s("working_directory")),
            first_seen: ts("first_seen")
                .or_else(|| ts("started_at"))
                .unwrap_or(last_seen),
            last_seen,
            questions_asked: o
                .get("questions_asked")
                .and_then(Value::as_u64)
                .unwrap_or(0),
            status: o
                .get("status")
                .and_then(|st| serde_json::from_value(st.clone()).ok())
                .unwrap_or(AgentStatus::Active),
            reported: o
                .get("reported")
                .and_then(|st| serde_json::from_value(st.clone()).ok()),
            agent_id: id,
        })
    }

    /// True while the agent's process runs (unknown processes count as alive).
    fn process_alive(&self) -> bool {
        self.pid.is_none_or(|pid| is_alive(pid, self.start_time))
    }

    fn derive_status(&self, waiting: bool, now: Timestamp) -> AgentStatus {
        if waiting {
            return AgentStatus::Waiting;
        }
        if !self.process_alive() {
            return AgentStatus::Gone;
        }
        let recent = age(self.last_seen, now) < ACTIVE_FOR;
        match self.reported {
            Some(AgentStatus::Gone) => AgentStatus::Gone,
            Some(AgentStatus::Idle) => AgentStatus::Idle,
            Some(AgentStatus::Working) if recent => AgentStatus::Working,
            _ if recent => AgentStatus::Active,
            _ => AgentStatus::Idle,
        }
    }
}

fn age(t: Timestamp, now: Timestamp) -> Duration {
    now.duration_since(t).unsigned_abs()
}

fn record_path(spool: &Spool, id: &str) -> std::path::PathBuf {
    spool.agents().join(format!("{id}.json"))
}

fn read_record(path: &Path, id: &str) -> Option<AgentRecord> {
    let bytes = crate::spool::read_untrusted(path, 1 << 20).ok()?;
    AgentRecord::from_value(&serde_json::from_slice(&bytes).ok()?, id)
}

fn write_record(spool: &Spool, rec: &AgentRecord) -> Result<()> {
    let path = record_path(spool, &rec.agent_id);
    let mut bytes = serde_json::to_vec_pretty(rec)?;
    bytes.push(b'\n');
    // Not fsynced: the registry is a convenience, rebuilt from the next question.
    spool
        .replace_file(&path, &bytes)
        .with_context(|| format!("writing {}", path.display()))
}

/// Holds `agents/.lock` for one read-modify-write.
fn lock(spool: &Spool) -> Result<nix::fcntl::Flock<File>> {
    let path = spool.agents().join(".lock");
    let file = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .with_context(|| format!("opening {}", path.display()))?;
    nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusive)
        .map_err(|(_, e)| e)
        .with_context(|| format!("locking {}", path.display()))
}

fn update(spool: &Spool, id: &str, name: &str, f: impl FnOnce(&mut AgentRecord)) -> Result<()> {
    let _guard = lock(spool)?;
    let now = Timestamp::now();
    let mut rec = read_record(&record_path(spool, id), id)
        .filter(|r| r.agent_id == id)
        .unwrap_or_else(|| AgentRecord::new(id, name, now));
    rec.last_seen = now;
    f(&mut rec);
    write_record(spool, &rec)
}

/// Records that the agent `who` is waiting on a question no broker has taken yet
/// (`hitl ask` with no listener running). The broker counts the question when it
/// takes it ([`note_question`]).
pub fn record_waiting(spool: &Spool, who: &Identity, working_dir: Option<&str>) -> Result<()> {
    update(spool, &who.id, &who.name, |rec| {
        rec.name = who.name.clone();
        if let Some(p) = who.process {
            rec.pid = Some(p.pid);
            rec.start_time = Some(p.start_time);
        }
        if let Some(d) = working_dir {
            rec.working_dir = Some(d.to_string());
        }
        rec.status = AgentStatus::Waiting;
    })
}

/// Records that the agent `who` is still waiting (sent while `hitl ask` waits).
pub fn record_heartbeat(spool: &Spool, who: &Identity) -> Result<()> {
    update(spool, &who.id, &who.name, |rec| {
        rec.status = AgentStatus::Waiting
    })
}

/// The metadata key under which `hitl ask` names the agent's own process (the
/// long-lived ancestor it found), so the broker can register it.
pub const AGENT_PROCESS_KEY: &str = "agent_process";

/// Records questions one agent asked and the broker took, in the order taken, with
/// one write of its record: the registry is the broker's to keep, off the asker's
/// path (a registry write costs an asker more than its whole round trip on some file
/// systems). The agent's process comes from each request's metadata when `hitl ask`
/// put it there. Requests of other agents are ignored.
pub fn note_questions(spool: &Spool, requests: &[Request]) -> Result<()> {
    let Some(first) = requests.first() else {
        return Ok(());
    };
    if !is_valid_id(&first.agent_id) {
        return Ok(());
    }
    let agent_id = &first.agent_id;
    let last_name = &requests[requests.len() - 1].agent_name;
    update(spool, agent_id, last_name, |rec| {
        for req in requests.iter().filter(|r| &r.agent_id == agent_id) {
            rec.name = req.agent_name.clone();
            if let Some(p) = req
                .metadata
                .get(AGENT_PROCESS_KEY)
                .and_then(|v| serde_json::from_value::<AgentProcess>(v.clone()).ok())
            {
                rec.pid = Some(p.pid);
                rec.start_time = Some(p.start_time);
            }
            if let Some(d) = &req.working_dir {
                rec.working_dir = Some(d.clone());
            }
            rec.questions_asked += 1;
        }
        rec.status = AgentStatus::Waiting;
    })
}

/// What an agent's hook event says of it: `SessionStart` seen, a prompt or a tool
/// call at work, `Stop` idle (its turn is over), `SessionEnd` gone; `None` for
/// events that say nothing of it (a notification).
pub fn status_after(hook_event_type: &str) -> Option<AgentStatus> {
    Some(match hook_event_type {
        "SessionStart" => AgentStatus::Active,
        "UserPromptSubmit" | "PreToolUse" | "PostToolUse" | "PermissionRequest"
        | "SubagentStop" | "Elicitation" => AgentStatus::Working,
        "Stop" => AgentStatus::Idle,
        "SessionEnd" => AgentStatus::Gone,
        _ => return None,
    })
}

/// Records what one agent's hook events said of it, latest last (the broker's, in
/// one write per agent per tick).
pub fn note_reports(
    spool: &Spool,
    agent_id: &str,
    name: &str,
    working_dir: Option<&str>,
    statuses: &[AgentStatus],
) -> Result<()> {
    let Some(last) = statuses.last().copied() else {
        return Ok(());
    };
    if !is_valid_id(agent_id) {
        return Ok(());
    }
    update(spool, agent_id, name, |rec| {
        rec.name = name.to_string();
        if let Some(d) = working_dir {
            rec.working_dir = Some(d.to_string());
        }
        rec.reported = Some(last);
        if rec.status != AgentStatus::Waiting {
            rec.status = last;
        }
    })
}

/// An agent's process as `hitl ask` writes it into a question's metadata.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct AgentProcess {
    /// Its pid.
    pub pid: u32,
    /// Its start time in clock ticks since boot.
    pub start_time: u64,
}

/// Every agent in the registry with its status derived now. `waiting` holds the ids of
/// agents with a pending question.
pub fn list_agents(spool: &Spool, waiting: &HashSet<String>) -> Vec<AgentRecord> {
    let now = Timestamp::now();
    let Ok(entries) = fs::read_dir(spool.agents()) else {
        return Vec::new();
    };
    let mut out: Vec<AgentRecord> = entries
        .filter_map(Result::ok)
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let stem = name.strip_suffix(".json")?;
            if crate::spool::is_ignored_name(&name) {
                return None;
            }
            let mut rec = read_record(&e.path(), stem)?;
            rec.status = rec.derive_status(waiting.contains(&rec.agent_id), now);
            Some(rec)
        })
        .collect();
    out.sort_by(|a, b| {
        a.first_seen
            .cmp(&b.first_seen)
            .then(a.agent_id.cmp(&b.agent_id))
    });
    out
}

/// Brings every record's status up to date and removes dead and stale agents that
/// have nothing pending. Returns the ids removed.
pub fn sweep(spool: &Spool, waiting: &HashSet<String>) -> Vec<String> {
    let Ok(_guard) = lock(spool) else {
        return Vec::new();
    };
    let now = Timestamp::now();
    let mut removed = Vec::new();
    let Ok(entries) = fs::read_dir(spool.agents()) else {
        return removed;
    };
    for e in entries.filter_map(Result::ok) {
        let Ok(name) = e.file_name().into_string() else {
            continue;
        };
        let Some(stem) = name.strip_suffix(".json") else {
            continue;
        };
        if crate::spool::is_ignored_name(&name) {
            continue;
        }
        let path = e.path();
        let Some(mut rec) = read_record(&path, stem) else {
            // Unreadable and old: junk. Young: maybe still being written.
            let old = fs::symlink_metadata(&path)
                .and_then(|m| m.modified())
                .map(|m| m.elapsed().unwrap_or_default() > GONE_KEPT_FOR)
                .unwrap_or(false);
            if old && fs::remove_file(&path).is_ok() {
                removed.push(stem.to_string());
            }
            continue;
        };
        let status = rec.derive_status(waiting.contains(&rec.agent_id), now);
        let expired = match status {
            AgentStatus::Gone => age(rec.last_seen, now) > GONE_KEPT_FOR,
            AgentStatus::Idle => rec.pid.is_none() && age(rec.last_seen, now) > STALE_AFTER,
            _ => false,
        };
        if expired {
            if fs::remove_file(&path).is_ok() {
                removed.push(rec.agent_id);
            }
        } else if status != rec.status && rec.agent_id == stem {
            rec.status = status;
            let _ = write_record(spool, &rec);
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_seed_shapes() {
        let seed000 = json!({"id":"claude_1_2","pid":1,"ppid":0,"command_line":"x",
            "working_directory":"/p","start_time":"2024-01-01T00:00:00+00:00",
            "last_heartbeat":"2024-01-01T00:00:00+00:00","metadata":{}});
        let r = AgentRecord::from_value(&seed000, "claude_1_2").unwrap();
        assert_eq!(r.agent_id, "claude_1_2");
        assert_eq!(r.working_dir.as_deref(), Some("/p"));
        let seed001 = json!({"agent_id":"agent_5","name":"Claude-5","working_dir":"/p",
            "last_seen":1738339250.5,"started_at":1738339200,"questions_asked":3,"status":"waiting"});
        let r = AgentRecord::from_value(&seed001, "agent_agent_5").unwrap();
        assert_eq!(r.questions_asked, 3);
        assert_eq!(r.status, AgentStatus::Waiting);
    }

    #[test]
    fn counts_questions_and_derives_status() {
        let dir = tempfile::tempdir().unwrap();
        let spool = Spool::new(dir.path());
        spool.ensure_layout().unwrap();
        let who = super::super::identify();
        // Waiting with no broker: registered, nothing counted yet.
        record_waiting(&spool, &who, Some("/w")).unwrap();
        assert_eq!(list_agents(&spool, &HashSet::new())[0].questions_asked, 0);
        // The broker counts each question it takes, with the agent's process.
        let mut req = crate::protocol::Request {
            id: "q1".into(),
            ..Request::new(
                who.id.clone(),
                who.name.clone(),
                crate::protocol::Kind::Text,
                "?",
            )
        };
        let me = crate::runtime::process::this_process();
        req.metadata.insert(
            AGENT_PROCESS_KEY.into(),
            json!({ "pid": me.pid, "start_time": me.start_time }),
        );
        note_questions(&spool, std::slice::from_ref(&req)).unwrap();
        // A batch of one agent's questions is one write that counts each.
        note_questions(&spool, &[req.clone(), req.clone()]).unwrap();
        let mut waiting = HashSet::new();
        let list = list_agents(&spool, &waiting);
        assert_eq!(list.len(), 1);
        assert_eq!(list[0].questions_asked, 3);
        assert_eq!(list[0].pid, Some(me.pid));
        assert_eq!(list[0].working_dir.as_deref(), Some("/w"));
        assert_eq!(list[0].status, AgentStatus::Active);
        waiting.insert(who.id.clone());
        assert_eq!(
            list_agents(&spool, &waiting)[0].status,
            AgentStatus::Waiting
        );
    }
}
