//! What callers send the task runner and get back: a session to start, a task to
//! submit, what a submit answers, a task as listed, and why a request was refused.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::record::Task;
use crate::protocol::Priority;

/// What went wrong with a request to the runner, for people.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TaskError {
    /// No such session or task.
    #[error("{0}")]
    NotFound(String),
    /// The request cannot be done as asked.
    #[error("{0}")]
    Invalid(String),
    /// It conflicts with what is there.
    #[error("{0}")]
    Conflict(String),
    /// Not allowed here (a program `[tasks] agents` does not name, the root folder).
    #[error("{0}")]
    Forbidden(String),
    /// The runner has stopped.
    #[error("the task runner has stopped")]
    Stopped,
    /// A file or tmux failed.
    #[error("{0}")]
    Failed(String),
}

/// A new session, as asked for.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionSpec {
    /// Its name: letters, digits, `.`, `_` and `-`.
    #[schemars(regex(pattern = crate::protocol::body_schema::ID))]
    pub name: String,
    /// The folder the agent works in.
    #[schemars(schema_with = "spec_schema::not_empty")]
    pub workspace: PathBuf,
    /// The agent's command line (default `claude`).
    #[serde(default)]
    pub command: Option<Vec<String>>,
    /// The key that interrupts it (default `Escape`).
    #[serde(default)]
    pub interrupt_key: Option<String>,
    /// Work in a git worktree of the workspace's repository on this branch (made
    /// from the current commit if it does not exist): `<repository>/.worktrees/<name>`.
    #[serde(default)]
    pub worktree: Option<String>,
}

/// A task, as submitted.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TaskSpec {
    /// The session to run it in.
    #[schemars(regex(pattern = crate::protocol::body_schema::ID))]
    pub session: String,
    /// What to do.
    #[schemars(regex(pattern = r"\S"))]
    pub instruction: String,
    /// urgent, high or normal (default).
    #[serde(default)]
    pub priority: Option<Priority>,
    /// CONTEXT.md's extra text.
    #[serde(default)]
    pub context: Option<String>,
    /// SPECS.md's text.
    #[serde(default)]
    pub specs: Option<String>,
    /// Seconds it may work, not counting time waiting for a person (default 300; a
    /// fraction rounds up).
    #[serde(default, deserialize_with = "crate::protocol::lenient::timeout")]
    #[schemars(schema_with = "spec_schema::timeout")]
    pub timeout: Option<u64>,
}

/// Where a waiting task is moved to.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MoveSpec {
    /// Its new place in its session's queue: 1 is next; beyond the end, last.
    #[serde(deserialize_with = "crate::protocol::lenient::whole")]
    #[schemars(range(min = 1))]
    pub position: usize,
}

/// The schemas of the specs' fields that their types alone do not say.
mod spec_schema {
    use schemars::{Schema, SchemaGenerator, json_schema};

    /// Seconds, more than 0 and at most a week, or null.
    pub fn timeout(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": ["number", "null"],
            "exclusiveMinimum": 0,
            "maximum": crate::protocol::MAX_TIMEOUT_SECS,
        })
    }

    /// A path with something in it.
    pub fn not_empty(_: &mut SchemaGenerator) -> Schema {
        json_schema!({ "type": "string", "minLength": 1 })
    }
}

/// A submitted task and its place in its session's queue.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Submitted {
    /// The task.
    pub task: Task,
    /// Its place among the session's waiting tasks (1: next), 0 once it runs.
    pub position: usize,
}

/// A task and, once it has ended, its result.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TaskView {
    /// The task.
    #[serde(flatten)]
    pub task: Task,
    /// Its place among the session's waiting tasks (1: next), while it waits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub position: Option<usize>,
}
