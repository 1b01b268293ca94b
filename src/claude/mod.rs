//! Claude Code: `hitl hook` (its hook handler) and the policy deciding which tool
//! calls ask the human.

pub mod danger;
pub mod decision;
pub mod elicit;
pub mod feed;
pub mod harmless;
pub mod hook;
pub mod mcp;
pub mod mcp_mailbox;
pub mod mode;
mod plain;
pub mod policy;
pub mod rules;
pub mod settings;
pub mod shell;
