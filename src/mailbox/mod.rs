//! Mailboxes (seed 003): plugin agents working in parallel in a run folder exchange
//! one request and one result at a time through `inbox/` and `outbox/`, report a
//! `status`, append to a shared `transcript.log`, and ask the user through
//! `question` and `answer` files.
//!
//! The agent's side (`agent`, for `hitl mailbox …` and the MCP tools) writes every
//! file whole and waits on inotify; the listener's side (`relay`) turns each
//! question into a request every hitl UI answers, writes its answer back, and
//! supervises the run in place of the seed's trampoline.

pub mod agent;
pub mod files;
pub mod keyvalue;
pub mod layout;
pub mod question;
pub mod registry;
pub mod relay;
pub mod report;
pub mod roster;
pub mod wait;
