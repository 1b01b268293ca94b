//! [`BrokerHandle`]: how transports, responders and UIs talk to the broker task.
//!
//! Every call is a message to the one task that owns the queue, so no caller ever
//! sees the queue half-changed. Transports ask through [`BrokerHandle::ask`] (the
//! spool's questions arrive as files instead); responders answer through
//! [`BrokerHandle::respond`]; everyone follows [`BrokerHandle::subscribe`].

use std::sync::Arc;

use tokio::sync::{broadcast, mpsc, oneshot};

use super::{
    AskError, BrokerStats, Change, PendingRequest, RespondError,
    presence::{Attendance, Presence},
};
use crate::{
    protocol::{Answer, Origin, Reply, Request, Status},
    store::{NewEvent, Outcome, StoreMsg, StoreOp, StoreSender},
};

pub(super) enum Command {
    Respond {
        seq: u64,
        reply: Reply,
        by: String,
        /// Who the person is, for requests that need several people's approval.
        approver: String,
        done: super::Reply,
    },
    Pending {
        done: oneshot::Sender<Vec<Arc<PendingRequest>>>,
    },
    /// Queue a request already committed to the store.
    Admit {
        request: Box<Request>,
        event_id: i64,
        done: oneshot::Sender<Option<Arc<PendingRequest>>>,
    },
    Find {
        id: String,
        stored_only: bool,
        done: oneshot::Sender<Option<Arc<PendingRequest>>>,
    },
    Stats {
        done: oneshot::Sender<BrokerStats>,
    },
    /// A stored request was ended by another broker sharing the store.
    EndedElsewhere {
        id: String,
        status: Status,
        answer: Option<Box<Answer>>,
        reason: Option<String>,
    },
    /// The ids of the queued stored requests that no answer is in flight for.
    StoredIds {
        done: oneshot::Sender<Vec<String>>,
    },
    /// An event for the activity feed from an adapter in this process (the task
    /// runner), as a hook's note would be.
    Note {
        project: std::path::PathBuf,
        note: Box<crate::protocol::activity::ActivityNote>,
    },
}

/// A request accepted by [`BrokerHandle::ask`].
#[derive(Debug, Clone)]
pub struct Asked {
    /// The event's id, also the request's (as text).
    pub event_id: i64,
    /// True when the idempotency key named an earlier event: nothing new was made.
    pub existing: bool,
    /// The request as queued (absent for a repeat, or if it ended at once).
    pub pending: Option<Arc<PendingRequest>>,
}

/// How responders and UIs talk to the broker. Cheap to clone.
#[derive(Clone)]
pub struct BrokerHandle {
    commands: mpsc::UnboundedSender<Command>,
    changes: broadcast::Sender<Change>,
    store: StoreSender,
    presence: Presence,
}

impl BrokerHandle {
    pub(super) fn new(
        commands: mpsc::UnboundedSender<Command>,
        changes: broadcast::Sender<Change>,
        store: StoreSender,
    ) -> BrokerHandle {
        BrokerHandle {
            commands,
            changes,
            store,
            presence: Presence::new(),
        }
    }

    /// Marks a UI of `kind` (`terminal`, `dashboard`, …) as putting questions in
    /// front of a person until the guard is dropped (see [`super::presence`]).
    pub fn attend(&self, kind: &str) -> Attendance {
        self.presence.attend(kind)
    }

    /// Tells every follower of the queue of `change` (the ladder's steps).
    pub(super) fn announce(&self, change: Change) {
        let _ = self.changes.send(change);
    }

    /// Who is present to answer.
    pub fn presence(&self) -> &Presence {
        &self.presence
    }

    /// Sends a command that answers on a oneshot, and waits for it.
    async fn call<T>(&self, make: impl FnOnce(oneshot::Sender<T>) -> Command) -> Option<T> {
        let (done, rx) = oneshot::channel();
        self.commands.send(make(done)).ok()?;
        rx.await.ok()
    }

    /// Answers pending request `seq` with `reply`, as `by`. A reply that does not fit
    /// the request's kind is refused ([`RespondError::Invalid`]) and leaves it pending.
    ///
    /// The person answering is this machine's user ([`super::LOCAL_APPROVER`]): to
    /// a request that needs several people's approval, every surface of theirs
    /// counts once.
    pub async fn respond(&self, seq: u64, reply: Reply, by: &str) -> Result<Answer, RespondError> {
        self.respond_as(seq, reply, by, super::LOCAL_APPROVER).await
    }

    /// [`BrokerHandle::respond`] from a person reached elsewhere, named by
    /// `approver` (`telegram:12345`): for a request that needs several people's
    /// approval, an approval is counted once per approver, and until there are
    /// enough it is recorded and the request waits ([`RespondError::Waiting`]).
    pub async fn respond_as(
        &self,
        seq: u64,
        reply: Reply,
        by: &str,
        approver: &str,
    ) -> Result<Answer, RespondError> {
        let by = by.to_string();
        let approver = approver.to_string();
        self.call(|done| Command::Respond {
            seq,
            reply,
            by,
            approver,
            done: Some(done),
        })
        .await
        .ok_or(RespondError::Stopped)?
    }

    /// The pending requests in answering order.
    pub async fn pending(&self) -> Vec<Arc<PendingRequest>> {
        self.call(|done| Command::Pending { done })
            .await
            .unwrap_or_default()
    }

    /// Follows changes from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<Change> {
        self.changes.subscribe()
    }

    /// The pending request with this id (a stored one first), if any.
    pub async fn find(&self, id: &str) -> Option<Arc<PendingRequest>> {
        self.find_in(id, false).await
    }

    /// The pending request that lives in the store (made over HTTP) with this id.
    /// Spool questions are not looked at: their ids are the asker's choice and may
    /// look like an event id.
    pub async fn find_stored(&self, id: &str) -> Option<Arc<PendingRequest>> {
        self.find_in(id, true).await
    }

    async fn find_in(&self, id: &str, stored_only: bool) -> Option<Arc<PendingRequest>> {
        let id = id.to_string();
        self.call(|done| Command::Find {
            id,
            stored_only,
            done,
        })
        .await
        .flatten()
    }

    /// Counters since the start.
    pub async fn stats(&self) -> BrokerStats {
        self.call(|done| Command::Stats { done })
            .await
            .unwrap_or_default()
    }

    /// Queues a request that is already in the store (another broker sharing it made
    /// it). Known ids are ignored.
    pub fn admit_stored(&self, request: Request, event_id: i64) {
        let (done, _) = oneshot::channel();
        let _ = self.commands.send(Command::Admit {
            request: Box::new(request),
            event_id,
            done,
        });
    }

    /// Takes out of the queue a stored request that another broker sharing the store
    /// has ended; its waiters here get the answer.
    pub fn ended_elsewhere(
        &self,
        id: String,
        status: Status,
        answer: Option<Answer>,
        reason: Option<String>,
    ) {
        let _ = self.commands.send(Command::EndedElsewhere {
            id,
            status,
            answer: answer.map(Box::new),
            reason,
        });
    }

    /// The ids of the queued stored requests with no answer in flight.
    pub async fn stored_ids(&self) -> Vec<String> {
        self.call(|done| Command::StoredIds { done })
            .await
            .unwrap_or_default()
    }

    /// Writes and waits for the commit: on this thread when the writer is idle (no
    /// other thread woken on the asker's way), else through the writer's queue.
    async fn store_committed(&self, op: StoreOp) -> Option<Outcome> {
        let (ack, rx) = oneshot::channel();
        self.store.write_now_or_send(StoreMsg {
            op,
            ack: Some(ack.into()),
        });
        rx.await.ok().flatten()
    }

    /// Asks: the way in for every transport whose requests live in the store (the
    /// HTTP APIs, which MCP and `hitl ask --server` use too). The request is committed with the
    /// agent event that carried it before it is queued, and both before this returns,
    /// so an acknowledged request survives `kill -9`. A repeat of an idempotency key
    /// returns the first request's id and makes nothing new. Its way back is to be
    /// settled in the store. Spool questions (of [`Origin::Spool`]) are asked by
    /// writing their file.
    pub async fn ask(&self, request: Request, event: NewEvent) -> Result<Asked, AskError> {
        if request.origin == Origin::Spool {
            return Err(AskError::NotStored);
        }
        let op = StoreOp::CreateRemote {
            request: Box::new(request.clone()),
            event: Box::new(event),
        };
        let Some(Outcome::Created { event_id, existing }) = self.store_committed(op).await else {
            return Err(AskError::Store);
        };
        if existing {
            return Ok(Asked {
                event_id,
                existing,
                pending: None,
            });
        }
        let mut request = request;
        request.id = event_id.to_string();
        let pending = self
            .call(|done| Command::Admit {
                request: Box::new(request),
                event_id,
                done,
            })
            .await
            .ok_or(AskError::Stopped)?;
        Ok(Asked {
            event_id,
            existing,
            pending,
        })
    }

    /// Records `note` in the activity feed of the spool of `project` (and tells
    /// every subscriber), as a hook's note in its `.helpers/activity/` would be.
    /// Fire and forget: nobody waits on the feed.
    pub fn note_activity(
        &self,
        project: std::path::PathBuf,
        note: crate::protocol::activity::ActivityNote,
    ) {
        let _ = self.commands.send(Command::Note {
            project,
            note: Box::new(note),
        });
    }

    /// Records a step of a request's trail (a notification sent, a vote). Fire and
    /// forget: a notifier never waits on history.
    pub fn note_trail(&self, step: crate::store::TrailStep) {
        self.store.write_now_or_send(StoreMsg {
            op: StoreOp::Trail(Box::new(step)),
            ack: None,
        });
    }

    /// Records an agent event without a request; returns its id (the first one's
    /// for a repeated idempotency key).
    pub async fn record_event(&self, event: NewEvent) -> Result<i64, AskError> {
        match self.store_committed(StoreOp::Event(Box::new(event))).await {
            Some(Outcome::Created { event_id, .. }) => Ok(event_id),
            _ => Err(AskError::Store),
        }
    }
}
