//! Who asked: the one notion of where a request came from.

use serde::{Deserialize, Serialize};

/// The kind of asker a request came from ([`Request::origin`]), shown by every UI and
/// kept in history. It does not choose the way back: a hook asks through the spool
/// (its answer is a file) or over HTTP (settled in the store); where a request lives
/// is the broker's to know.
///
/// [`Request::origin`]: crate::protocol::Request::origin
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Origin {
    /// A question file in a project's `.helpers/questions/` that says nothing else
    /// (`hitl ask`, `ask-human.sh`, any script).
    #[default]
    Spool,
    /// An asker over HTTP that named no other kind: `POST /events` (seed 004), or
    /// `POST /api/v1/requests` without an `origin`.
    Http,
    /// A Claude Code hook (`hitl hook`), through the spool or over HTTP.
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

    /// Whether this is the spool's own (what a question file that names no asker is).
    pub fn is_spool(&self) -> bool {
        *self == Origin::Spool
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
