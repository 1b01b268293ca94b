//! Where a request stands. Written to history; the terminal states never change again.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The life of a request: `Pending` until exactly one of the other states.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// In the queue, waiting for a human.
    Pending,
    /// A human answered (an approval or a denial).
    Answered,
    /// A human cancelled it.
    Cancelled,
    /// Nobody answered before its timeout.
    Timeout,
    /// The asker took it back (its own timeout, Ctrl-C, or it deleted the file).
    Withdrawn,
    /// The asker died while waiting.
    Abandoned,
    /// It could not be read; the file is in `.helpers/rejected/`.
    Rejected,
}

impl Status {
    /// The name used on the wire and in history.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pending => "pending",
            Status::Answered => "answered",
            Status::Cancelled => "cancelled",
            Status::Timeout => "timeout",
            Status::Withdrawn => "withdrawn",
            Status::Abandoned => "abandoned",
            Status::Rejected => "rejected",
        }
    }

    /// Every status.
    pub const ALL: [Status; 7] = [
        Status::Pending,
        Status::Answered,
        Status::Cancelled,
        Status::Timeout,
        Status::Withdrawn,
        Status::Abandoned,
        Status::Rejected,
    ];

    /// Reads a name written by [`Status::as_str`].
    pub fn parse(s: &str) -> Option<Status> {
        Status::ALL.into_iter().find(|st| st.as_str() == s)
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<super::AnswerStatus> for Status {
    fn from(s: super::AnswerStatus) -> Status {
        match s {
            super::AnswerStatus::Answered => Status::Answered,
            super::AnswerStatus::Cancelled => Status::Cancelled,
            super::AnswerStatus::Timeout => Status::Timeout,
        }
    }
}
