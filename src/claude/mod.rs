//! Claude Code: `hitl hook` (its hook handler, and through `HookAgent` Codex CLI's
//! and Gemini CLI's), its settings, its MCP server and the activity feed; what a
//! call needs is the guard's (`crate::guard`).

pub mod decision;
pub mod elicit;
pub mod feed;
pub mod hook;
pub mod mcp;
pub mod mcp_mailbox;
pub mod settings;
