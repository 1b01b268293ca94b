//! A request's way back to its asker, which the broker asks through one trait,
//! [`WayBack`]: how an answer is delivered, how the delivery went, and what the
//! request's end records. Each way is one implementation (a spool question's answer
//! file, `spool.rs`; a stored request's settle, `stored.rs`); the lifecycle in
//! `mod.rs` never tells them apart, so a new way back (a mailbox's answer file, keys
//! typed into a task's session) is a new implementation and a [`super::Place`].

use super::{PendingRequest, RespondError};
use crate::{
    protocol::{Answer, Status},
    store::{Outcome, StoreMsg, StoreOp},
};

/// A way back to an asker.
pub(super) trait WayBack {
    /// What delivering `answer` to `pending`'s asker takes. `record`: commit the
    /// answer to the store before delivering it, so a broker that dies in between
    /// delivers the same answer at its next start instead of asking again (answers
    /// already recorded, and the broker's own rule's, need none).
    fn delivery(&self, pending: &PendingRequest, answer: &Answer, record: bool) -> Delivery;

    /// The store write that records how `pending` ended, if the store does not
    /// know yet (`settled`: a delivery's own commit ended it there).
    fn end_record(&self, pending: &PendingRequest, end: &Ending<'_>) -> Option<StoreMsg>;
}

/// How an answer is delivered: a store write committed first, if any, then the
/// delivery itself, told how that write went (`None`: it did not commit; with no
/// write, [`Outcome::Done`]). The delivery runs right after the commit on the
/// writer's thread (an asker waiting on a file is woken without another thread's
/// turn in between), or, with no write, on whichever thread the broker chooses.
pub(super) struct Delivery {
    /// What to commit first.
    pub record: Option<StoreOp>,
    /// Delivers, and says how that went.
    pub deliver: Box<dyn FnOnce(Option<Outcome>) -> Delivered + Send>,
}

/// How a delivery went.
pub(super) enum Delivered {
    /// The asker has it: the request ends with the answer.
    Done,
    /// Another responder's answer got there first (`by`): the request ends with
    /// theirs at once when this way knows it, else when the way hears of it (another
    /// broker's settle, which replica sync brings).
    Lost {
        by: String,
        theirs: Option<Box<Answer>>,
    },
    /// Nobody waits for an answer any more (the question went meanwhile).
    Gone,
    /// Not delivered: the request stays pending.
    Failed(RespondError),
}

/// How a request ended, as its way back records it.
pub(super) struct Ending<'a> {
    pub status: Status,
    pub answer: Option<&'a Answer>,
    pub reason: &'a Option<String>,
    /// The store already knows: a settle ended it there.
    pub settled: bool,
}
