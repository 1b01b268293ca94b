//! Where a request came from, and so the way its answer goes back.

use serde::{Deserialize, Serialize};

/// The way a request reached the broker. Its answer goes back the same way: a spool
/// question gets an answer file; a request made over HTTP is settled in the store,
/// pushed to the agent's WebSocket when it gave one, and handed to its pollers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Origin {
    /// A question file in a project's `.helpers/questions/`.
    Spool,
    /// `POST /events` (seed 004) or `POST /api/v1/requests`.
    Http,
    /// A Claude Code hook (`hitl hook`).
    Hook,
    /// The MCP server (`hitl mcp`).
    Mcp,
    /// A task session of the tmux runner.
    Task,
    /// A KEY=VALUE mailbox file.
    Mailbox,
}

impl Origin {
    /// Every origin.
    pub const ALL: [Origin; 6] = [
        Origin::Spool,
        Origin::Http,
        Origin::Hook,
        Origin::Mcp,
        Origin::Task,
        Origin::Mailbox,
    ];

    /// The name stored in history and shown by the CLI and the API.
    pub fn as_str(self) -> &'static str {
        match self {
            Origin::Spool => "spool",
            Origin::Http => "http",
            Origin::Hook => "hook",
            Origin::Mcp => "mcp",
            Origin::Task => "task",
            Origin::Mailbox => "mailbox",
        }
    }

    /// The origin named `s`, as [`Origin::as_str`] writes it.
    pub fn parse(s: &str) -> Option<Origin> {
        Origin::ALL.into_iter().find(|o| o.as_str() == s)
    }

    /// Whether requests of this origin live in the store (rather than in a spool file):
    /// every origin but the spool.
    pub fn is_stored(self) -> bool {
        self != Origin::Spool
    }
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for o in Origin::ALL {
            assert_eq!(Origin::parse(o.as_str()), Some(o));
            assert_eq!(serde_json::to_value(o).unwrap(), o.as_str());
        }
        assert_eq!(Origin::parse("HTTP"), None);
    }
}
