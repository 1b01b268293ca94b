//! What hitl keeps of a task and of a session: the records the runner changes, the
//! files keep, and the API and CLI show.

use std::path::PathBuf;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use super::artifacts::Artifacts;
use super::summary::{Outcome, Summary};
use super::usage::TaskUsage;
use crate::protocol::Priority;

/// A task's state, as A2A names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum TaskState {
    /// Queued for its session.
    Submitted,
    /// Typed in; the agent works on it.
    Working,
    /// The agent waits for a person: a question to a human, a permission prompt, or
    /// it stopped without its summary.
    InputRequired,
    /// It ran to its summary (its outcome says how well).
    Completed,
    /// It could not run to its end (the agent exited, the send failed).
    Failed,
    /// Cancelled by a person.
    Canceled,
    /// Refused: no such session.
    Rejected,
    /// The agent needs a login before it can work (its API calls were refused); it
    /// was stopped, and the task is retried once someone has logged it in.
    AuthRequired,
}

impl TaskState {
    /// Every state, in the order they are listed.
    pub const ALL: [TaskState; 8] = [
        TaskState::Submitted,
        TaskState::Working,
        TaskState::InputRequired,
        TaskState::Completed,
        TaskState::Failed,
        TaskState::Canceled,
        TaskState::Rejected,
        TaskState::AuthRequired,
    ];

    /// Its name (`input-required`).
    pub fn as_str(self) -> &'static str {
        match self {
            TaskState::Submitted => "submitted",
            TaskState::Working => "working",
            TaskState::InputRequired => "input-required",
            TaskState::Completed => "completed",
            TaskState::Failed => "failed",
            TaskState::Canceled => "canceled",
            TaskState::Rejected => "rejected",
            TaskState::AuthRequired => "auth-required",
        }
    }

    /// Whether it has ended (nothing will change it but a retry). `auth-required`
    /// has: the agent was stopped, and once someone has logged it in, a retry runs
    /// the task again.
    pub fn is_final(self) -> bool {
        matches!(
            self,
            TaskState::Completed
                | TaskState::Failed
                | TaskState::Canceled
                | TaskState::Rejected
                | TaskState::AuthRequired
        )
    }
}

impl std::fmt::Display for TaskState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

/// One task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Task {
    /// `task-<uuid v7>`: the summary's name is the same under either reading of seed
    /// 002 (`summaries/<task_id>.md`).
    pub id: String,
    /// The session it runs in.
    pub session: String,
    /// What to do.
    pub instruction: String,
    /// Its place among its session's queued tasks: urgent, high, normal.
    pub priority: Priority,
    /// CONTEXT.md's extra text, if given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
    /// SPECS.md's text, if given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub specs: Option<String>,
    /// Seconds it may work (not counting time waiting for a person).
    pub timeout_secs: u64,
    /// Where it stands.
    pub state: TaskState,
    /// How it ended, from its summary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<Outcome>,
    /// Why it is in its state, when that needs saying (a failure's reason, a
    /// timeout, a cancel).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// When it was submitted.
    #[schemars(with = "String")]
    pub submitted_at: Timestamp,
    /// When it was typed in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>")]
    pub started_at: Option<Timestamp>,
    /// When it ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>")]
    pub ended_at: Option<Timestamp>,
    /// Milliseconds spent waiting for a person, which its timeout does not count.
    #[serde(default)]
    pub waited_ms: u64,
    /// Since when it waits for a person, while it does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>")]
    pub waiting_since: Option<Timestamp>,
    /// Whether the agent confirmed the task reached it (its prompt hook fired).
    #[serde(default)]
    pub delivered: bool,
    /// Whether the summary is hitl's fallback (the agent wrote none in time).
    #[serde(default)]
    pub fallback_summary: bool,
    /// Submission order, which breaks ties within a priority.
    pub seq: u64,
    /// Its place within its priority once it was moved in the queue (instead of
    /// `seq`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_key: Option<u64>,
    /// How many times it was retried.
    #[serde(default)]
    pub attempt: u32,
    /// Its turns, tokens and cost, where the agent reports them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<TaskUsage>,
}

impl Task {
    /// Its summary's path inside the workspace.
    pub fn summary_path(&self) -> PathBuf {
        PathBuf::from("summaries").join(format!("{}.md", self.id))
    }
}

/// A task's result: RESULTS.json.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TaskResult {
    /// The task.
    pub task_id: String,
    /// Its state when the result was written.
    pub state: TaskState,
    /// How it ended, from its summary.
    pub outcome: Outcome,
    /// Its summary, read.
    pub summary: Summary,
    /// The summary and the deliverables it names; those left out, and why.
    #[serde(flatten)]
    pub artifacts: Artifacts,
    /// STATUS.txt, as the agent left it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_txt: Option<String>,
    /// ERRORS.md, as the agent left it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub errors_md: Option<String>,
    /// Seconds from typed in to ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_secs: Option<f64>,
    /// Its turns, tokens and cost, where the agent reports them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<TaskUsage>,
    /// The agent's own summary, read, when it came after the task had ended with
    /// hitl's fallback (the task's state and outcome stay as they were).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub late_summary: Option<Summary>,
}

/// A session: an agent in a tmux session of hitl's, working in one folder.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TaskSession {
    /// Its name (the tmux session's too).
    pub name: String,
    /// The folder it works in.
    pub workspace: PathBuf,
    /// The agent's command line.
    pub command: Vec<String>,
    /// The key that interrupts the agent (Escape for Claude Code: C-c would clear its
    /// input, and a second one exit it).
    pub interrupt_key: String,
    /// When it was made.
    #[schemars(with = "String")]
    pub created_at: Timestamp,
    /// Whether the agent is ready for a task (its SessionStart hook fired, or its
    /// prompt is up).
    #[serde(default)]
    pub ready: bool,
    /// The agent's own session id (Claude Code's, from its hooks), to resume it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_session_id: Option<String>,
    /// The branch of the git worktree it works in (`workspace`), if it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worktree: Option<String>,
}

/// A session as listed: the record and its queue (seed 002's queue status).
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SessionStatus {
    /// The session.
    #[serde(flatten)]
    pub session: TaskSession,
    /// Whether its tmux session runs.
    pub alive: bool,
    /// Whether a task is typed in and not ended (seed 002's `is_executing`).
    pub is_executing: bool,
    /// That task (seed 002's `current_task_id`).
    pub current_task_id: Option<String>,
    /// How many wait (seed 002's `queued_tasks`).
    pub queued_tasks: usize,
    /// The session's name again, as seed 002's status has it (`agent_name`).
    pub agent_name: String,
}
