//! Requests that live in the store (made over HTTP: seed 004's `/events`, the native
//! API, and MCP through it; hooks ask through the spool): queued once committed, answered by a conditional *settle* (only a
//! still-pending row changes, so of racing brokers sharing the store exactly one
//! wins), timed out exactly at their deadline (nobody else keeps a timer for them),
//! and queued again from the store after a restart.

use std::{collections::HashMap, path::PathBuf, sync::Arc};

use super::{
    Answer, Broker, End, PendingRequest, Place, RespondError, Status, StoreMsg, StoreOp,
    WriteResult, Written,
};
use crate::{
    protocol::{AnswerStatus, Origin, ParsedQuestion, Request, Variant},
    store::{Ack, Outcome},
};

/// The broker's index of its stored requests.
pub(super) struct Stored {
    /// Still pending when the last broker stopped: queued at the start.
    at_start: Vec<(Request, Origin, i64)>,
    /// The queued ones, by id (their ids are unique).
    by_id: HashMap<String, u64>,
}

impl Stored {
    pub(super) fn new(at_start: Vec<(Request, Origin, i64)>) -> Stored {
        Stored {
            at_start,
            by_id: HashMap::new(),
        }
    }

    pub(super) fn seq_of(&self, id: &str) -> Option<u64> {
        self.by_id.get(id).copied()
    }
}

impl Broker {
    /// Queues what the store still had pending when the last broker stopped.
    pub(super) fn requeue_stored(&mut self) {
        for (request, origin, event_id) in std::mem::take(&mut self.stored.at_start) {
            self.admit_stored(request, origin, event_id);
        }
    }

    /// Queues a request already in the store. Its timeout is exact.
    pub(super) fn admit_stored(
        &mut self,
        request: Request,
        origin: Origin,
        event_id: i64,
    ) -> Option<Arc<PendingRequest>> {
        if let Some(seq) = self.stored.seq_of(&request.id) {
            // Queued already (the replica sync can get there first): the same one.
            return self.entries.get(&seq).map(|e| e.pending.clone());
        }
        let deadline = request.deadline();
        let id = request.id.clone();
        let parsed = ParsedQuestion {
            request,
            variant: Variant::Canonical,
        };
        let pending = self.enqueue(
            PathBuf::new(),
            origin,
            Some(event_id),
            parsed,
            Place::Stored,
            deadline,
        );
        self.stored.by_id.insert(id, pending.seq);
        self.announce_queued(pending.clone());
        Some(pending)
    }

    /// Commits the answer as a conditional settle; [`Broker::settled`] hears back.
    /// Committing the answer is delivering it: the way back follows the broadcast.
    pub(super) fn settle(&mut self, seq: u64, answer: Answer, done: super::Reply) {
        let Some(entry) = self.entries.get(&seq) else {
            return;
        };
        let op = StoreOp::Settle {
            id: entry.pending.request.id.clone(),
            status: answer.status.into(),
            answer: Some(Box::new(answer.clone())),
            reason: answer
                .comment
                .clone()
                .filter(|_| answer.status != AnswerStatus::Answered),
        };
        // Told on the writer, right after the commit: no task in between.
        let tx = self.written_tx.clone();
        let then = Ack::Then(Box::new(move |committed| {
            let won = match committed {
                Some(Outcome::Settled(won)) => Some(won),
                _ => None,
            };
            let _ = tx.send(Written {
                seq,
                answer,
                result: WriteResult::Settled(won),
                done,
            });
        }));
        self.write(StoreMsg {
            op,
            ack: Some(then),
        });
    }

    /// How a settle went: won (the request ends here), lost to another broker sharing
    /// the store (the replica sync ends it with that broker's answer), or not committed
    /// (still pending).
    pub(super) fn settled(
        &mut self,
        seq: u64,
        answer: Answer,
        won: Option<bool>,
    ) -> Result<Answer, RespondError> {
        match won {
            Some(true) => {
                let status = answer.status.into();
                self.end(
                    seq,
                    status,
                    Some(answer.clone()),
                    None,
                    End::Here { record: false },
                );
                Ok(answer)
            }
            Some(false) => {
                self.answer_failed(seq);
                Err(RespondError::AlreadyAnswered("another broker".into()))
            }
            None => {
                self.answer_failed(seq);
                Err(RespondError::Store)
            }
        }
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
            .filter(|seq| self.entries.get(seq).is_some_and(|e| !e.answering));
        if let Some(seq) = seq {
            self.end(seq, status, answer, reason, End::Elsewhere);
        }
    }

    /// The ids of the queued stored requests with no answer in flight.
    pub(super) fn stored_ids(&self) -> Vec<String> {
        self.entries
            .values()
            .filter(|e| matches!(e.place, Place::Stored) && !e.answering)
            .map(|e| e.pending.request.id.clone())
            .collect()
    }

    /// A stored request left the queue; `record` when the store does not know yet
    /// (an abandoned asker, say: a settle records its own end).
    pub(super) fn stored_ended(
        &mut self,
        pending: &PendingRequest,
        status: Status,
        answer: Option<&Answer>,
        reason: &Option<String>,
        record: bool,
    ) {
        self.stored.by_id.remove(&pending.request.id);
        if record {
            self.record(StoreOp::Settle {
                id: pending.request.id.clone(),
                status,
                answer: answer.cloned().map(Box::new),
                reason: reason.clone(),
            });
        }
    }
}
