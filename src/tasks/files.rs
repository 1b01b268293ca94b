//! Where tasks are kept: `.helpers/tasks/` of the listener's project. Each task is a
//! folder (`<task_id>/task.json`, and `RESULTS.json` once it ends), each session a
//! file (`sessions/<name>.json`); every write is atomic and durable, so a submitted
//! task outlives `kill -9` of the listener. `events/` is where `hitl task event` (the
//! agents' hooks) leaves what the agent did, for the runner to read.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use super::record::{Task, TaskResult, TaskSession};
use crate::spool::{Spool, write_atomic};

/// The task folders of one project.
#[derive(Debug, Clone)]
pub struct TaskFiles {
    root: PathBuf,
    tmp: PathBuf,
}

impl TaskFiles {
    /// The task folders of `spool`'s project.
    pub fn new(spool: &Spool) -> TaskFiles {
        TaskFiles {
            root: spool.root().join("tasks"),
            tmp: spool.tmp(),
        }
    }

    /// Makes the folders (owner only: tasks' texts are the user's).
    pub fn ensure(&self) -> Result<()> {
        use std::os::unix::fs::DirBuilderExt;
        for dir in [
            self.root.clone(),
            self.sessions_dir(),
            self.events_dir(),
            self.tmp.clone(),
        ] {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&dir)
                .with_context(|| format!("creating {}", dir.display()))?;
        }
        Ok(())
    }

    /// `.helpers/tasks/`.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Where the agents' hooks leave their events (`$HITL_TASK_EVENTS`).
    pub fn events_dir(&self) -> PathBuf {
        self.root.join("events")
    }

    /// The Claude Code settings file a session's agent is started with: hooks that
    /// tell hitl what it does.
    pub fn agent_settings(&self) -> PathBuf {
        self.root.join("claude-settings.json")
    }

    /// The MCP configuration headless agents are started with (hitl's server).
    pub fn mcp_config(&self) -> PathBuf {
        self.root.join("mcp.json")
    }

    /// The project these tasks belong to (the folder holding `.helpers/`).
    pub fn project(&self) -> PathBuf {
        self.root
            .parent()
            .and_then(Path::parent)
            .map_or_else(|| self.root.clone(), Path::to_path_buf)
    }

    /// Where a headless run of task `id` leaves its output and pid.
    pub fn run_files(&self, id: &str) -> RunFiles {
        let dir = self.task_dir(id);
        RunFiles {
            stream: dir.join("stream.jsonl"),
            stderr: dir.join("stderr.log"),
            pid: dir.join("agent.pid"),
        }
    }

    fn sessions_dir(&self) -> PathBuf {
        self.root.join("sessions")
    }

    fn task_dir(&self, id: &str) -> PathBuf {
        self.root.join(id)
    }

    /// RESULTS.json of task `id`.
    pub fn results_path(&self, id: &str) -> PathBuf {
        self.task_dir(id).join("RESULTS.json")
    }

    fn write(&self, dest: &Path, bytes: &[u8]) -> Result<()> {
        if let Some(dir) = dest.parent() {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        write_atomic(&self.tmp, dest, bytes, true)
            .with_context(|| format!("writing {}", dest.display()))
    }

    /// Keeps `task` (durably: it is acknowledged once this returns).
    pub fn save_task(&self, task: &Task) -> Result<()> {
        let bytes = serde_json::to_vec_pretty(task)?;
        self.write(&self.task_dir(&task.id).join("task.json"), &bytes)
    }

    /// Writes task `result`'s RESULTS.json.
    pub fn save_result(&self, result: &TaskResult) -> Result<()> {
        let bytes = serde_json::to_vec_pretty(result)?;
        self.write(&self.results_path(&result.task_id), &bytes)
    }

    /// Task `id`'s result, once it has one.
    pub fn load_result(&self, id: &str) -> Option<TaskResult> {
        let bytes = std::fs::read(self.results_path(id)).ok()?;
        serde_json::from_slice(&bytes).ok()
    }

    /// Every task kept, in submission order. A file that cannot be read is skipped
    /// with a warning (only hitl writes them).
    pub fn load_tasks(&self) -> Vec<Task> {
        let mut tasks: Vec<Task> = read_dir(&self.root)
            .filter(|p| p.is_dir())
            .filter_map(|dir| {
                let path = dir.join("task.json");
                let bytes = std::fs::read(&path).ok()?;
                serde_json::from_slice(&bytes)
                    .map_err(|e| tracing::warn!("{} cannot be read: {e}", path.display()))
                    .ok()
            })
            .collect();
        tasks.sort_by_key(|t| t.seq);
        tasks
    }

    /// Keeps `session`.
    pub fn save_session(&self, session: &TaskSession) -> Result<()> {
        let bytes = serde_json::to_vec_pretty(session)?;
        self.write(
            &self.sessions_dir().join(format!("{}.json", session.name)),
            &bytes,
        )
    }

    /// Names the task session `name` works on (`sessions/<name>.task`), for its
    /// agent's questions to carry ([`crate::protocol::Request::task_of_session`]);
    /// `None` removes it.
    pub fn set_current_task(&self, name: &str, task: Option<&str>) {
        let path = self.sessions_dir().join(format!("{name}.task"));
        let done = match task {
            Some(id) => write_atomic(&self.tmp, &path, id.as_bytes(), false),
            None => match std::fs::remove_file(&path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
                _ => Ok(()),
            },
        };
        if let Err(e) = done {
            tracing::warn!("tasks: {}: {e}", path.display());
        }
    }

    /// Forgets session `name`.
    pub fn remove_session(&self, name: &str) -> Result<()> {
        let path = self.sessions_dir().join(format!("{name}.json"));
        match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(e).with_context(|| format!("removing {}", path.display()))
            }
            _ => Ok(()),
        }
    }

    /// Every session kept, by name.
    pub fn load_sessions(&self) -> Vec<TaskSession> {
        let mut sessions: Vec<TaskSession> = read_dir(&self.sessions_dir())
            .filter(|p| p.extension().is_some_and(|e| e == "json"))
            .filter_map(|path| {
                let bytes = std::fs::read(&path).ok()?;
                serde_json::from_slice(&bytes)
                    .map_err(|e| tracing::warn!("{} cannot be read: {e}", path.display()))
                    .ok()
            })
            .collect();
        sessions.sort_by(|a, b| a.name.cmp(&b.name));
        sessions
    }
}

/// Where one headless run of a task leaves its output.
pub struct RunFiles {
    /// stream-json output (appended to by each run of the task).
    pub stream: PathBuf,
    /// Its stderr.
    pub stderr: PathBuf,
    /// `PID START_TIME` of the running agent.
    pub pid: PathBuf,
}

/// The entries of `dir` (none when it cannot be read).
fn read_dir(dir: &Path) -> impl Iterator<Item = PathBuf> {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok().map(|e| e.path()))
}
