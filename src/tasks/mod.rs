//! Tasks (seed 002): work handed to an agent (Claude Code) running in a tmux session
//! of hitl's own, one task at a time per session. hitl types each task in, knows it
//! is done when its summary `summaries/<task_id>.md` appears, and returns the summary
//! read into its parts with the deliverables it names.
//!
//! `runner` owns the sessions and tasks and drives them, `following` how it follows
//! each agent (hook events, questions to a human, first-run screens asked of a
//! person, interrupts, restarts), `headless_run` how it runs a headless one; `agent`
//! is the agent's side (its events, Claude Code's input box), `headless` a headless
//! agent's command line and process (`claude -p` once per task), `firstrun` Claude
//! Code's first-run screens read; `spec` is what callers send and get; `record` is
//! what it keeps, `files` where (`.helpers/tasks/`); `prompt` what a task says to the
//! agent (the context files and the typed text); `summary` reads a summary (and
//! writes the fallback one); `artifacts` picks what a task returns, each path
//! resolved inside the workspace; `usage` reads what a task cost; `worktree` makes a
//! session's git worktree; `tmux` drives hitl's tmux server; `nesting` keeps Claude
//! Code's session markers from its agents; `event` is `hitl task event`, the agents'
//! hooks' side.

pub mod agent;
pub mod artifacts;
pub mod event;
pub mod files;
pub mod firstrun;
mod following;
pub mod headless;
mod headless_run;
mod nesting;
pub mod prompt;
pub mod record;
pub mod runner;
pub mod spec;
pub mod summary;
pub mod tmux;
pub mod usage;
pub mod worktree;

pub use record::{SessionStatus, Task, TaskResult, TaskSession, TaskState};
pub use runner::TaskHandle;
pub use spec::{MoveSpec, SessionSpec, Submitted, TaskError, TaskSpec, TaskView};
