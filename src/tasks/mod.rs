//! Tasks (seed 002): work handed to an agent (Claude Code) running in a tmux session
//! of hitl's own, one task at a time per session. hitl types each task in, knows it
//! is done when its summary `summaries/<task_id>.md` appears, and returns the summary
//! read into its parts with the deliverables it names.
//!
//! `summary` reads a summary (and writes the fallback one); `artifacts` picks what a
//! task returns, each path resolved inside the workspace; `tmux` drives hitl's tmux
//! server.

pub mod artifacts;
pub mod summary;
pub mod tmux;
