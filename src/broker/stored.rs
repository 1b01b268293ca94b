//! Requests that live in the store (made over HTTP: seed 004's `/events`, the native
//! API, and MCP through it; hooks ask through the spool): queued once committed, answered by a conditional *settle* (only a
//! still-pending row changes, so of racing brokers sharing the store exactly one
//! wins), timed out exactly at their deadline (nobody else keeps a timer for them),
//! and queued again from the store after a restart.

use std::{collections::HashMap, path::PathBuf, sync::Arc};

use super::{
    Answer, Broker, End, PendingRequest, Place, RespondError, Status, StoreMsg, StoreOp,
    way_back::{Delivered, Delivery, Ending, WayBack},
};
use crate::{
    protocol::{AnswerStatus, ParsedQuestion, Request, Variant},
    store::Outcome,
};

/// The broker's index of its stored requests.
pub(super) struct Stored {
    /// Still pending when the last broker stopped: queued at the start.
    at_start: Vec<(Request, i64)>,
    /// The queued ones, by id (their ids are unique).
    by_id: HashMap<String, u64>,
}

impl Stored {
    pub(super) fn new(at_start: Vec<(Request, i64)>) -> Stored {
        Stored {
            at_start,
            by_id: HashMap::new(),
        }
    }

    /// A request that left the queue.
    pub(super) fn forget(&mut self, id: &str) {
        self.by_id.remove(id);
    }

    pub(super) fn seq_of(&self, id: &str) -> Option<u64> {
        self.by_id.get(id).copied()
    }
}

impl Broker {
    /// Queues what the store still had pending when the last broker stopped.
    pub(super) fn requeue_stored(&mut self) {
        for (request, event_id) in std::mem::take(&mut self.stored.at_start) {
            self.admit_stored(request, event_id);
        }
    }

    /// Queues a request already in the store. Its timeout is exact.
    pub(super) fn admit_stored(
        &mut self,
        request: Request,
        event_id: i64,
    ) -> Option<Arc<PendingRequest>> {
        if let Some(seq) = self.stored.seq_of(&request.id) {
            // Queued already (the replica sync can get there first): the same one.
            return self.requests.get(seq).map(|e| e.pending.clone());
        }
        let deadline = request.deadline();
        let id = request.id.clone();
        let parsed = ParsedQuestion {
            request,
            variant: Variant::Canonical,
        };
        let pending = self.enqueue(
            PathBuf::new(),
            Some(event_id),
            parsed,
            Place::Stored(Settle),
            deadline,
        );
        self.stored.by_id.insert(id, pending.seq);
        self.announce_queued(pending.clone());
        Some(pending)
    }

    /// A stored request another broker sharing the store ended.
    pub(super) fn ended_elsewhere(
        &mut self,
        id: &str,
        status: Status,
        answer: Option<Answer>,
        reason: Option<String>,
    ) {
        let seq = self
            .stored
            .seq_of(id)
            .filter(|seq| self.requests.get(*seq).is_some_and(|e| !e.answering));
        if let Some(seq) = seq {
            self.end(seq, status, answer, reason, End::Elsewhere);
        }
    }

    /// The ids of the queued stored requests with no answer in flight.
    pub(super) fn stored_ids(&self) -> Vec<String> {
        self.requests
            .iter()
            .filter(|e| matches!(e.place, Place::Stored(_)) && !e.answering)
            .map(|e| e.pending.request.id.clone())
            .collect()
    }
}

/// A stored request's way back: a conditional settle in the store. Committing the
/// answer is delivering it: its asker follows the broadcast (a long poll, `hitl ask
/// --server`) or is pushed to by `server::Deliverer`; of racing brokers sharing the
/// store exactly one settles.
pub(super) struct Settle;

impl WayBack for Settle {
    fn delivery(&self, pending: &PendingRequest, answer: &Answer, _record: bool) -> Delivery {
        let record = StoreOp::Settle {
            id: pending.request.id.clone(),
            status: answer.status.into(),
            answer: Some(Box::new(answer.clone())),
            reason: answer
                .comment
                .clone()
                .filter(|_| answer.status != AnswerStatus::Answered),
        };
        let deliver = |committed: Option<Outcome>| match committed {
            Some(Outcome::Settled(true)) => Delivered::Done,
            // Another broker sharing the store ended it first: replica sync ends it
            // here with that broker's answer.
            Some(Outcome::Settled(false)) => Delivered::Lost {
                by: "another broker".into(),
                theirs: None,
            },
            _ => Delivered::Failed(RespondError::Store),
        };
        Delivery {
            record: Some(record),
            deliver: Box::new(deliver),
        }
    }

    /// Its end as a settle, unless one ended it (an abandoned asker, a timeout: the
    /// store does not know yet).
    fn end_record(&self, pending: &PendingRequest, end: &Ending<'_>) -> Option<StoreMsg> {
        (!end.settled).then(|| {
            StoreOp::Settle {
                id: pending.request.id.clone(),
                status: end.status,
                answer: end.answer.cloned().map(Box::new),
                reason: end.reason.clone(),
            }
            .into()
        })
    }
}
