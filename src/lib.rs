//! hitl: a human-in-the-loop broker for AI agents.
//!
//! Agents ask through the `.helpers/` file spool (`hitl ask`, the seeds' scripts), over
//! HTTP, from Claude Code's hooks and through MCP; one broker keeps a durable, prioritised
//! queue; humans answer from the terminal prompt, the web dashboard or `hitl answer`,
//! and each answer goes back the way its question came. See ARCHITECTURE.md for the map
//! of modules and how a request flows, and docs/PROTOCOL.md for the formats.

#![warn(missing_docs)]
// Unsafe code only where a module says why (`allow(unsafe_code)` beside it): the
// allocator, the WAL-gathering VFS, and single system calls std and nix do not wrap.
#![deny(unsafe_code)]

pub mod agents;
pub mod api;
pub mod boundary;
pub mod broker;
pub mod claude;
pub mod cmd;
pub mod codex;
pub mod config;
pub mod daemon;
pub mod gemini;
pub mod guard;
pub mod mailbox;
pub mod protocol;
pub mod push;
pub mod runtime;
pub mod server;
pub mod spool;
pub mod store;
pub mod tasks;
pub mod ui;
