//! The broker core: one task owns every pending request, in the queue order people
//! answer them, and every change goes through it.
//!
//! Inputs are spool events (from [`crate::spool::watch`]) and commands from responders
//! (through a [`BrokerHandle`]); outputs are answer files, history writes (batched, off
//! the critical path) and a broadcast of [`Change`]s that UIs follow. No transport or
//! UI touches another: they all speak to this task.
//!
//! The life of a request: a question file appears → it is read (retried while it may
//! still be being written, rejected when it is bad) → queued → a responder, the timeout
//! or the asker's death ends it → the answer is written with an exclusive create, so of
//! two responders racing exactly one wins → history records how it ended. If the
//! broker dies at any point, the next start rebuilds all of this from the spool.

mod queue;
mod store_writer;

use std::{
    collections::{BTreeSet, HashMap, HashSet},
    path::{Path, PathBuf},
    sync::Arc,
    time::{Duration, Instant},
};

use jiff::Timestamp;
use serde::Serialize;
use thiserror::Error;
use tokio::sync::{broadcast, mpsc, oneshot};

pub use queue::{Queue, QueueKey};
pub use store_writer::{StoreMsg, spawn_store_writer};

use crate::{
    agents,
    protocol::{Answer, ParsedQuestion, Reply, Request, Status, Variant},
    spool::{
        Created, Spool,
        questions::{self, Loaded},
        watch::SpoolEvent,
        write_atomic,
    },
    store::{NewEvent, Outcome, StoreOp, Undelivered},
};

/// How long a question file that does not parse yet is given to become whole.
const PARTIAL_GRACE: Duration = Duration::from_secs(2);
/// The broker times a request out this long after the asker's own deadline. Askers
/// that keep their own timer (`hitl ask`, the seed scripts) withdraw at the deadline
/// and report a timeout in their own way; the broker's timeout is the backstop for
/// those that do not, and must not race them (seed 000 would read a broker timeout as
/// "cancelled", and its timestamps are truncated to the second).
const TIMEOUT_GRACE: jiff::SignedDuration = jiff::SignedDuration::from_secs(2);
/// How often the broker checks timeouts and retries partial files.
const TICK: Duration = Duration::from_millis(100);
/// How often it checks that askers are alive.
const LIVENESS_EVERY: Duration = Duration::from_secs(1);
/// How often it sweeps the agent registry.
const SWEEP_EVERY: Duration = Duration::from_secs(10);
/// The queue snapshot is rewritten at most this often.
const SNAPSHOT_EVERY: Duration = Duration::from_millis(200);

/// Broker settings.
#[derive(Debug, Clone)]
pub struct BrokerOptions {
    /// Question files bigger than this are rejected.
    pub max_question_bytes: u64,
    /// fsync answer files and their folder before reporting them delivered.
    pub durable: bool,
}

/// Where a request came from, and so how its answer goes back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase", tag = "kind")]
pub enum Origin {
    /// A question file in a project's `.helpers/`: answered by writing a file.
    Spool,
    /// Made over HTTP (`POST /events`, `/api/v1/requests`): it lives in the store,
    /// and its answer is committed there and announced to waiters.
    Http {
        /// The agent event that carried it (its id is this number, as text).
        event_id: i64,
    },
}

/// A pending request as responders see it.
#[derive(Debug, Clone, Serialize)]
pub struct PendingRequest {
    /// The broker's handle on it, for [`BrokerHandle::respond`].
    pub seq: u64,
    /// The project it belongs to (empty for requests made over HTTP).
    pub project: PathBuf,
    /// Where it came from.
    pub origin: Origin,
    /// The question.
    pub request: Request,
    /// The format it came in.
    #[serde(skip)]
    pub variant: Variant,
}

/// What changed in the queue.
#[derive(Debug, Clone)]
pub enum Change {
    /// A request joined the queue.
    Queued(Arc<PendingRequest>),
    /// A request left it.
    Finished {
        /// Its broker handle.
        seq: u64,
        /// Its id.
        id: String,
        /// How it ended.
        status: Status,
        /// Who answered, when someone did.
        responded_by: Option<String>,
        /// The answer delivered, if any (`None` also when another replica ended it
        /// and the store has the answer).
        answer: Option<Arc<Answer>>,
        /// Why it ended without an answer.
        reason: Option<String>,
    },
}

/// Counters since the broker started, for `/metrics` and `/api/v1/metrics`.
#[derive(Debug, Clone, Default, Serialize)]
pub struct BrokerStats {
    /// Requests queued.
    pub total_requests: u64,
    /// Requests a human answered or cancelled.
    pub total_responses: u64,
    /// Requests that timed out.
    pub total_timeouts: u64,
    /// Questions refused as bad input.
    pub total_errors: u64,
    /// Requests withdrawn by their asker or abandoned when it exited.
    pub total_withdrawn: u64,
    /// Sum of the time from asking to a human's answer, in milliseconds.
    pub response_time_ms_sum: u64,
    /// Requests pending now.
    pub pending: u64,
}

/// Why a request made over HTTP could not be accepted.
#[derive(Debug, Clone, Error, PartialEq, Eq)]
pub enum SubmitError {
    /// The store did not commit it: nothing was accepted.
    #[error("the request could not be stored; nothing was accepted (see the server log)")]
    Store,
    /// The broker has stopped.
    #[error("the broker has stopped")]
    Stopped,
}

/// A request made over HTTP, once stored.
#[derive(Debug, Clone)]
pub struct Submitted {
    /// The event's id, also the request's (as text).
    pub event_id: i64,
    /// True when the idempotency key named an earlier event: nothing new was made.
    pub existing: bool,
    /// The request as queued (absent for a repeat, or if it ended at once).
    pub pending: Option<Arc<PendingRequest>>,
}

/// Why a response was refused.
#[derive(Debug, Clone, Error, PartialEq, Eq)]
pub enum RespondError {
    /// No such pending request.
    #[error("no pending question {0}")]
    NotFound(String),
    /// Someone else answered first.
    #[error("already answered by {0}")]
    AlreadyAnswered(String),
    /// The asker stopped waiting before the answer was written.
    #[error("the question was withdrawn or answered by someone else first")]
    Gone,
    /// The reply does not fit the question.
    #[error("{0}")]
    Invalid(String),
    /// The store did not commit the answer; the request is still pending.
    #[error("the answer could not be stored; the request is still pending")]
    Store,
    /// The answer could not be written.
    #[error("writing the answer failed: {0}")]
    Io(String),
    /// The broker has stopped.
    #[error("the broker has stopped")]
    Stopped,
}

enum Command {
    Respond {
        seq: u64,
        reply: Reply,
        by: String,
        /// Told how it went; `None` for fire-and-forget responders.
        done: Option<oneshot::Sender<Result<Answer, RespondError>>>,
    },
    Pending {
        done: oneshot::Sender<Vec<Arc<PendingRequest>>>,
    },
    /// Queue a request made over HTTP, already committed to the store.
    Admit {
        request: Box<Request>,
        event_id: i64,
        done: oneshot::Sender<Option<Arc<PendingRequest>>>,
    },
    Find {
        id: String,
        done: oneshot::Sender<Option<Arc<PendingRequest>>>,
    },
    Stats {
        done: oneshot::Sender<BrokerStats>,
    },
    /// A request made over HTTP was ended by another broker sharing the store.
    EndedElsewhere {
        id: String,
        status: Status,
        answer: Option<Box<Answer>>,
        reason: Option<String>,
    },
    /// The ids of the queued requests made over HTTP that no answer is in flight for.
    RemoteIds {
        done: oneshot::Sender<Vec<String>>,
    },
}

/// How responders and UIs talk to the broker. Cheap to clone.
#[derive(Clone)]
pub struct BrokerHandle {
    commands: mpsc::UnboundedSender<Command>,
    changes: broadcast::Sender<Change>,
    store: mpsc::UnboundedSender<StoreMsg>,
}

impl BrokerHandle {
    /// Answers pending request `seq` with `reply`, as `by`.
    pub async fn respond(&self, seq: u64, reply: Reply, by: &str) -> Result<Answer, RespondError> {
        let (done, rx) = oneshot::channel();
        self.commands
            .send(Command::Respond {
                seq,
                reply,
                by: by.to_string(),
                done: Some(done),
            })
            .map_err(|_| RespondError::Stopped)?;
        rx.await.map_err(|_| RespondError::Stopped)?
    }

    /// Answers pending request `seq` without waiting to hear how it went: for
    /// responders that answer everything and have nobody to tell (`--auto-answer`).
    /// A refusal (someone answered first) is simply dropped.
    pub fn respond_detached(&self, seq: u64, reply: Reply, by: &str) {
        let _ = self.commands.send(Command::Respond {
            seq,
            reply,
            by: by.to_string(),
            done: None,
        });
    }

    /// The pending requests in answering order.
    pub async fn pending(&self) -> Vec<Arc<PendingRequest>> {
        let (done, rx) = oneshot::channel();
        if self.commands.send(Command::Pending { done }).is_err() {
            return Vec::new();
        }
        rx.await.unwrap_or_default()
    }

    /// Follows changes from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<Change> {
        self.changes.subscribe()
    }

    /// The pending request with this id (one made over HTTP first), if any.
    pub async fn find(&self, id: &str) -> Option<Arc<PendingRequest>> {
        let (done, rx) = oneshot::channel();
        let id = id.to_string();
        self.commands.send(Command::Find { id, done }).ok()?;
        rx.await.ok().flatten()
    }

    /// Counters since the start.
    pub async fn stats(&self) -> BrokerStats {
        let (done, rx) = oneshot::channel();
        if self.commands.send(Command::Stats { done }).is_err() {
            return BrokerStats::default();
        }
        rx.await.unwrap_or_default()
    }

    /// Queues a request made over HTTP that is already in the store (another broker
    /// sharing it made it). Known ids are ignored.
    pub fn admit_stored(&self, request: Request, event_id: i64) {
        let (done, _) = oneshot::channel();
        let _ = self.commands.send(Command::Admit {
            request: Box::new(request),
            event_id,
            done,
        });
    }

    /// Takes out of the queue a request made over HTTP that another broker sharing
    /// the store has ended; its waiters here get the answer.
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

    /// The ids of the queued requests made over HTTP with no answer in flight.
    pub async fn remote_ids(&self) -> Vec<String> {
        let (done, rx) = oneshot::channel();
        if self.commands.send(Command::RemoteIds { done }).is_err() {
            return Vec::new();
        }
        rx.await.unwrap_or_default()
    }

    /// Writes through the store writer and waits for the commit.
    async fn store_committed(&self, op: StoreOp) -> Option<Outcome> {
        let (ack, rx) = oneshot::channel();
        self.store.send(StoreMsg { op, ack: Some(ack) }).ok()?;
        rx.await.ok().flatten()
    }

    /// Accepts a request made over HTTP: it is committed to the store (with the event
    /// that carried it) before it is queued, and both before this returns, so an
    /// acknowledged request survives `kill -9`. A repeat of an idempotency key
    /// returns the first request's id and makes nothing new.
    pub async fn submit(
        &self,
        request: Request,
        event: NewEvent,
    ) -> Result<Submitted, SubmitError> {
        let op = StoreOp::CreateRemote {
            request: Box::new(request.clone()),
            event: Box::new(event),
        };
        let Some(Outcome::Created { event_id, existing }) = self.store_committed(op).await else {
            return Err(SubmitError::Store);
        };
        if existing {
            return Ok(Submitted {
                event_id,
                existing,
                pending: None,
            });
        }
        let mut request = request;
        request.id = event_id.to_string();
        let (done, rx) = oneshot::channel();
        self.commands
            .send(Command::Admit {
                request: Box::new(request),
                event_id,
                done,
            })
            .map_err(|_| SubmitError::Stopped)?;
        let pending = rx.await.map_err(|_| SubmitError::Stopped)?;
        Ok(Submitted {
            event_id,
            existing,
            pending,
        })
    }

    /// Records an agent event without a request; returns its id (the first one's
    /// for a repeated idempotency key).
    pub async fn record_event(&self, event: NewEvent) -> Result<i64, SubmitError> {
        match self.store_committed(StoreOp::Event(Box::new(event))).await {
            Some(Outcome::Created { event_id, .. }) => Ok(event_id),
            _ => Err(SubmitError::Store),
        }
    }
}

/// A finished answer write (from the blocking pool) or settle (from the store writer).
struct Written {
    seq: u64,
    answer: Answer,
    result: WriteResult,
    done: Option<oneshot::Sender<Result<Answer, RespondError>>>,
}

enum WriteResult {
    /// The answer file's exclusive create.
    File(std::io::Result<Created>),
    /// The store's settle: `Some(true)` won, `Some(false)` ended elsewhere first,
    /// `None` not committed.
    Settled(Option<bool>),
}

/// Where a pending request lives.
enum Place {
    /// A question file.
    Spool {
        spool: usize,
        question_path: PathBuf,
        /// The question's link in `journal/`, removed once history has its end.
        journal_path: Option<PathBuf>,
        answer_path: PathBuf,
    },
    /// A row in the store (made over HTTP).
    Remote,
}

struct Entry {
    pending: Arc<PendingRequest>,
    place: Place,
    queue_key: QueueKey,
    deadline: Option<Timestamp>,
    /// An answer write is in flight; nothing else may end this request meanwhile.
    answering: bool,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Folder {
    Questions,
    Answers,
}

/// The broker's state. Owned by the task running [`Broker::run`].
pub struct Broker {
    spools: Vec<Spool>,
    folders: HashMap<PathBuf, (usize, Folder)>,
    opts: BrokerOptions,
    entries: HashMap<u64, Entry>,
    by_question: HashMap<PathBuf, u64>,
    by_answer: HashMap<PathBuf, u64>,
    deadlines: BTreeSet<(Timestamp, u64)>,
    queue: Queue,
    /// Question files that do not parse yet, with when we give up on them.
    partial: HashMap<PathBuf, Instant>,
    /// Question files found already answered (their asker has not picked the answer up
    /// yet), with their modification time: the periodic rescan skips them while they
    /// stay as they are, instead of reading and recording them every time.
    settled: HashMap<PathBuf, std::time::SystemTime>,
    next_seq: u64,
    store: mpsc::UnboundedSender<StoreMsg>,
    /// Answers recorded as being delivered when the last broker died: delivered again,
    /// not asked again. Keyed by (project, id, asked_at).
    undelivered: HashMap<(String, String, String), Undelivered>,
    changes: broadcast::Sender<Change>,
    written_tx: mpsc::UnboundedSender<Written>,
    written_rx: mpsc::UnboundedReceiver<Written>,
    commands_rx: mpsc::UnboundedReceiver<Command>,
    snapshot_dirty: Vec<bool>,
    /// Requests made over HTTP still pending when the last broker stopped.
    remote_pending: Vec<Request>,
    /// The queued requests made over HTTP, by id (their ids are unique).
    remote_by_id: HashMap<String, u64>,
    stats: BrokerStats,
}

impl Entry {
    fn spool(&self) -> Option<usize> {
        match self.place {
            Place::Spool { spool, .. } => Some(spool),
            Place::Remote => None,
        }
    }

    fn answer_path(&self) -> Option<&Path> {
        match &self.place {
            Place::Spool { answer_path, .. } => Some(answer_path),
            Place::Remote => None,
        }
    }

    fn question_path(&self) -> Option<&Path> {
        match &self.place {
            Place::Spool { question_path, .. } => Some(question_path),
            Place::Remote => None,
        }
    }
}

impl Broker {
    /// A broker over `spools`, writing history to `store`. `undelivered` and
    /// `remote_pending` are what the store says the last broker left unfinished.
    /// Returns the handle responders use.
    pub fn new(
        spools: Vec<Spool>,
        opts: BrokerOptions,
        store: mpsc::UnboundedSender<StoreMsg>,
        undelivered: Vec<Undelivered>,
        remote_pending: Vec<Request>,
    ) -> (Broker, BrokerHandle) {
        let (commands, commands_rx) = mpsc::unbounded_channel();
        let (changes, _) = broadcast::channel(16 * 1024);
        let (written_tx, written_rx) = mpsc::unbounded_channel();
        let mut folders = HashMap::new();
        for (i, s) in spools.iter().enumerate() {
            folders.insert(s.questions(), (i, Folder::Questions));
            folders.insert(s.answers(), (i, Folder::Answers));
        }
        let handle = BrokerHandle {
            commands,
            changes: changes.clone(),
            store: store.clone(),
        };
        let n = spools.len();
        let broker = Broker {
            spools,
            folders,
            opts,
            entries: HashMap::new(),
            by_question: HashMap::new(),
            by_answer: HashMap::new(),
            deadlines: BTreeSet::new(),
            queue: Queue::default(),
            partial: HashMap::new(),
            settled: HashMap::new(),
            next_seq: 1,
            store,
            undelivered: undelivered
                .into_iter()
                .map(|u| (u.key.clone(), u))
                .collect(),
            changes,
            written_tx,
            written_rx,
            commands_rx,
            snapshot_dirty: vec![true; n],
            remote_pending,
            remote_by_id: HashMap::new(),
            stats: BrokerStats::default(),
        };
        (broker, handle)
    }

    /// Runs until `shutdown` completes. Reads every spool once at the start, then
    /// follows `events`. Pending questions stay in the spool when it stops.
    pub async fn run(
        mut self,
        mut events: mpsc::UnboundedReceiver<SpoolEvent>,
        shutdown: impl std::future::Future<Output = ()>,
    ) {
        self.replay_journal();
        for r in std::mem::take(&mut self.remote_pending) {
            let event_id = r.id.parse().unwrap_or_default();
            self.admit_remote(r, event_id);
        }
        self.rescan();
        self.settle_undelivered();
        self.flush_snapshots(true);
        let mut tick = tokio::time::interval(TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let start = Instant::now();
        // The first sweep runs at the first tick.
        let (mut last_liveness, mut last_sweep, mut last_snapshot) = (
            start,
            start.checked_sub(SWEEP_EVERY).unwrap_or(start),
            start,
        );
        tokio::pin!(shutdown);
        loop {
            tokio::select! {
                biased;
                _ = &mut shutdown => break,
                Some(w) = self.written_rx.recv() => self.on_written(w),
                Some(ev) = events.recv() => {
                    self.on_event(ev);
                    // Drain what is already queued before doing anything else, so a
                    // burst of files costs one pass.
                    while let Ok(ev) = events.try_recv() {
                        self.on_event(ev);
                    }
                }
                Some(cmd) = self.commands_rx.recv() => self.on_command(cmd),
                _ = tick.tick() => {
                    let now = Instant::now();
                    self.expire_timeouts();
                    self.retry_partials(now);
                    if now.duration_since(last_liveness) >= LIVENESS_EVERY {
                        last_liveness = now;
                        self.check_askers();
                    }
                    if now.duration_since(last_sweep) >= SWEEP_EVERY {
                        last_sweep = now;
                        // Belt and braces: inotify can in principle drop an event
                        // without flagging an overflow; a periodic read costs little.
                        self.rescan();
                        self.sweep_agents();
                    }
                    if now.duration_since(last_snapshot) >= SNAPSHOT_EVERY {
                        last_snapshot = now;
                        self.flush_snapshots(false);
                    }
                }
            }
        }
        self.flush_snapshots(false);
    }

    fn on_command(&mut self, cmd: Command) {
        match cmd {
            Command::Pending { done } => {
                let list = self
                    .queue
                    .iter()
                    .filter_map(|seq| self.entries.get(&seq))
                    .map(|e| e.pending.clone())
                    .collect();
                let _ = done.send(list);
            }
            Command::Admit {
                request,
                event_id,
                done,
            } => {
                let _ = done.send(self.admit_remote(*request, event_id));
            }
            Command::Find { id, done } => {
                // A request made over HTTP first (their ids are unique); then the spool's.
                let remote = self
                    .remote_by_id
                    .get(&id)
                    .and_then(|seq| self.entries.get(seq));
                let found = remote
                    .or_else(|| self.entries.values().find(|e| e.pending.request.id == id))
                    .map(|e| e.pending.clone());
                let _ = done.send(found);
            }
            Command::EndedElsewhere {
                id,
                status,
                answer,
                reason,
            } => {
                let seq = self
                    .remote_by_id
                    .get(&id)
                    .copied()
                    .filter(|seq| self.entries.get(seq).is_some_and(|e| !e.answering));
                if let Some(seq) = seq {
                    self.finish_quietly(seq, status, answer.map(|a| *a), reason);
                }
            }
            Command::RemoteIds { done } => {
                let ids = self
                    .entries
                    .values()
                    .filter(|e| matches!(e.place, Place::Remote) && !e.answering)
                    .map(|e| e.pending.request.id.clone())
                    .collect();
                let _ = done.send(ids);
            }
            Command::Stats { done } => {
                let mut stats = self.stats.clone();
                stats.pending = self.queue.len() as u64;
                let _ = done.send(stats);
            }
            Command::Respond {
                seq,
                reply,
                by,
                done,
            } => {
                let refuse = |done: Option<oneshot::Sender<_>>, e| {
                    if let Some(done) = done {
                        let _ = done.send(Err(e));
                    }
                };
                let Some(entry) = self.entries.get(&seq) else {
                    refuse(done, RespondError::NotFound(seq.to_string()));
                    return;
                };
                if entry.answering {
                    let by = "another responder (in progress)".to_string();
                    refuse(done, RespondError::AlreadyAnswered(by));
                    return;
                }
                let answer = Answer::from_reply(&entry.pending.request, reply, &by);
                self.start_answer(seq, answer, false, done);
            }
        }
    }

    fn record(&self, op: StoreOp) {
        let _ = self.store.send(op.into());
    }

    /// Records `op` and, once it is committed, removes the question's journal link.
    fn record_then_forget(&self, op: StoreOp, journal: Option<PathBuf>) {
        let Some(journal) = journal else {
            self.record(op);
            return;
        };
        let (ack, committed) = oneshot::channel();
        let _ = self.store.send(StoreMsg { op, ack: Some(ack) });
        tokio::spawn(async move {
            if committed.await.ok().flatten().is_some() {
                let _ = tokio::fs::remove_file(journal).await;
            }
        });
    }

    /// Delivers an answer. History records it as `delivering` (so a broker that dies
    /// before the file is written delivers the same answer at its next start instead of
    /// asking the human again), and the answer file is written on the blocking pool
    /// without waiting for that commit: the fsynced answer file is what makes the
    /// answer durable, and the start-up reconciliation records any answer file history
    /// missed. [`Broker::on_written`] finishes the job. `recorded` skips the history
    /// write for answers already there.
    fn start_answer(
        &mut self,
        seq: u64,
        answer: Answer,
        recorded: bool,
        done: Option<oneshot::Sender<Result<Answer, RespondError>>>,
    ) {
        let Some(entry) = self.entries.get_mut(&seq) else {
            return;
        };
        entry.answering = true;
        let (spool, question) = match &entry.place {
            Place::Spool {
                spool,
                question_path,
                ..
            } => (self.spools[*spool].clone(), question_path.clone()),
            Place::Remote => {
                // Committing the answer is delivering it: waiters hear of it from the
                // broadcast once the store has it, and a replica's settle can win.
                let (ack, committed) = oneshot::channel();
                let op = StoreOp::Settle {
                    id: entry.pending.request.id.clone(),
                    status: answer.status.into(),
                    answer: Some(Box::new(answer.clone())),
                    reason: answer
                        .comment
                        .clone()
                        .filter(|_| answer.status != crate::protocol::AnswerStatus::Answered),
                };
                let _ = self.store.send(StoreMsg { op, ack: Some(ack) });
                let tx = self.written_tx.clone();
                tokio::spawn(async move {
                    let won = match committed.await.ok().flatten() {
                        Some(Outcome::Settled(won)) => Some(won),
                        _ => None,
                    };
                    let _ = tx.send(Written {
                        seq,
                        answer,
                        result: WriteResult::Settled(won),
                        done,
                    });
                });
                return;
            }
        };
        // A copy for the writer thread, made only now: 10,000 pending requests should
        // not cost two copies each.
        let parsed = ParsedQuestion {
            request: entry.pending.request.clone(),
            variant: entry.pending.variant,
        };
        let durable = self.opts.durable;
        let tx = self.written_tx.clone();
        let project = entry.pending.project.display().to_string();
        if !recorded {
            self.record(StoreOp::Delivering {
                project,
                request: Box::new(parsed.request.clone()),
                variant: parsed.variant,
                answer: Box::new(answer.clone()),
            });
        }
        tokio::task::spawn_blocking(move || {
            let result = questions::deliver(&spool, &question, &parsed, &answer, durable);
            let _ = tx.send(Written {
                seq,
                answer,
                result: WriteResult::File(result),
                done,
            });
        });
    }

    fn on_written(&mut self, w: Written) {
        let Written {
            seq,
            answer,
            result,
            done,
        } = w;
        let reply = match result {
            WriteResult::Settled(Some(true)) => {
                self.finish_quietly(seq, answer.status.into(), Some(answer.clone()), None);
                Ok(answer)
            }
            WriteResult::Settled(Some(false)) => {
                // Another broker sharing the store ended it first. The store has how;
                // the replica sync takes it out of the queue with that answer.
                if let Some(entry) = self.entries.get_mut(&seq) {
                    entry.answering = false;
                }
                Err(RespondError::AlreadyAnswered("another broker".into()))
            }
            WriteResult::Settled(None) => {
                if let Some(entry) = self.entries.get_mut(&seq) {
                    entry.answering = false;
                }
                Err(RespondError::Store)
            }
            WriteResult::File(Ok(Created::Created)) => {
                self.finish(seq, answer.status.into(), Some(answer.clone()), None);
                Ok(answer)
            }
            WriteResult::File(Ok(Created::AlreadyExists)) => {
                let existing = self
                    .entries
                    .get(&seq)
                    .and_then(|e| e.answer_path())
                    .and_then(questions::read_answer);
                match existing {
                    Some(a) => {
                        let by = a.responded_by.clone();
                        self.finish(seq, a.status.into(), Some(a), None);
                        Err(RespondError::AlreadyAnswered(by))
                    }
                    None => {
                        // Answered and picked up meanwhile, or withdrawn: either way
                        // nobody waits any more. History keeps a recorded answer.
                        let why = "the question was gone before the answer was written";
                        self.finish(seq, Status::Withdrawn, None, Some(why.into()));
                        Err(RespondError::Gone)
                    }
                }
            }
            WriteResult::File(Err(e)) => {
                if let Some(entry) = self.entries.get_mut(&seq) {
                    entry.answering = false;
                }
                tracing::error!("writing the answer to request {seq} failed: {e}");
                Err(RespondError::Io(e.to_string()))
            }
        };
        if let Some(done) = done {
            let _ = done.send(reply);
        }
    }

    fn on_event(&mut self, ev: SpoolEvent) {
        match ev {
            SpoolEvent::Rescan => self.rescan(),
            SpoolEvent::Changed { path, closed } => match self.folder_of(&path) {
                Some((spool, Folder::Questions)) => self.question_changed(spool, path, closed),
                Some((_, Folder::Answers)) => self.answer_appeared(&path),
                None => {}
            },
            SpoolEvent::Removed { path } => match self.folder_of(&path) {
                Some((_, Folder::Questions)) => self.question_removed(&path),
                Some((_, Folder::Answers)) | None => {}
            },
        }
    }

    fn folder_of(&self, path: &Path) -> Option<(usize, Folder)> {
        self.folders.get(path.parent()?).copied()
    }

    fn question_changed(&mut self, spool: usize, path: PathBuf, closed: bool) {
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            return;
        };
        if !questions::is_question_name(name) || self.by_question.contains_key(&path) {
            return;
        }
        match questions::load_question(&path, self.opts.max_question_bytes) {
            Loaded::Question(q) => {
                self.partial.remove(&path);
                self.admit(spool, path, *q);
            }
            Loaded::Gone => {
                self.partial.remove(&path);
            }
            Loaded::Partial(e) => {
                if closed {
                    // The writer closed the file and it is still not whole JSON.
                    self.partial.remove(&path);
                    self.reject(spool, &path, &e.to_string(), None);
                } else {
                    self.partial
                        .entry(path)
                        .or_insert_with(|| Instant::now() + PARTIAL_GRACE);
                }
            }
            Loaded::Bad(reason, bytes) => {
                self.partial.remove(&path);
                self.reject(spool, &path, &reason, bytes.as_deref());
            }
        }
    }

    fn admit(&mut self, spool: usize, path: PathBuf, q: ParsedQuestion) {
        let answer_path = questions::answer_path(&self.spools[spool], &q);
        if let Some(&other) = self.by_answer.get(&answer_path) {
            let other_path = self.entries[&other]
                .question_path()
                .map(|p| p.display().to_string())
                .unwrap_or_default();
            let reason = format!(
                "id {:?} is already pending in {other_path}; ids must be unique",
                q.request.id
            );
            self.reject(spool, &path, &reason, None);
            return;
        }
        let project = self.spools[spool].project().display().to_string();
        if answer_path.exists() {
            let existing = questions::read_answer(&answer_path);
            let stale = q.variant == Variant::ClaudeHelpers
                && existing
                    .as_ref()
                    .is_none_or(|a| a.timestamp < q.request.timestamp);
            if !stale {
                // Answered while no broker ran, or by another responder: record it.
                let status = existing
                    .as_ref()
                    .map_or(Status::Answered, |a| a.status.into());
                self.record(StoreOp::Finished {
                    project,
                    request: Box::new(q.request),
                    variant: q.variant,
                    status,
                    answer: existing.map(Box::new),
                    reason: None,
                });
                if let Some(mtime) = modified(&path) {
                    self.settled.insert(path, mtime);
                }
                return;
            }
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        let r = &q.request;
        let queue_key = Queue::key(r.priority, r.timestamp, seq);
        let deadline = r.deadline().and_then(|d| d.checked_add(TIMEOUT_GRACE).ok());
        if let Some(d) = deadline {
            self.deadlines.insert((d, seq));
        }
        let pending = Arc::new(PendingRequest {
            seq,
            project: self.spools[spool].project().to_path_buf(),
            origin: Origin::Spool,
            request: q.request.clone(),
            variant: q.variant,
        });
        self.record(StoreOp::Asked {
            project,
            request: Box::new(q.request.clone()),
            variant: q.variant,
        });
        if q.variant != Variant::Canonical {
            // The seed scripts do not keep the registry; the broker does it for them.
            let (s, r) = (self.spools[spool].clone(), q.request.clone());
            tokio::task::spawn_blocking(move || agents::note_question(&s, &r));
        }
        let journal_path = self.spools[spool].journal().join(format!(
            "{}.{}.json",
            questions::stem(&path).unwrap_or("q"),
            q.request.timestamp.as_millisecond()
        ));
        let journal_path = match std::fs::hard_link(&path, &journal_path) {
            Ok(()) => Some(journal_path),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Some(journal_path),
            Err(e) => {
                tracing::warn!("journaling {}: {e}", path.display());
                None
            }
        };
        self.queue.insert(queue_key);
        self.by_question.insert(path.clone(), seq);
        self.by_answer.insert(answer_path.clone(), seq);
        self.entries.insert(
            seq,
            Entry {
                pending: pending.clone(),
                place: Place::Spool {
                    spool,
                    question_path: path,
                    journal_path,
                    answer_path,
                },
                queue_key,
                deadline,
                answering: false,
            },
        );
        self.stats.total_requests += 1;
        self.snapshot_dirty[spool] = true;
        let key = (
            pending.project.display().to_string(),
            pending.request.id.clone(),
            pending.request.timestamp.to_string(),
        );
        if let Some(u) = self.undelivered.remove(&key) {
            // Chosen before the last broker died, never delivered: deliver it now.
            self.start_answer(seq, u.answer, true, None);
            return;
        }
        let _ = self.changes.send(Change::Queued(pending));
    }

    /// Queues a request made over HTTP (already in the store). Its timeout is exact:
    /// nobody else keeps a timer for it.
    fn admit_remote(&mut self, request: Request, event_id: i64) -> Option<Arc<PendingRequest>> {
        if let Some(seq) = self.remote_by_id.get(&request.id) {
            // Queued already (the replica sync can get there first): the same one.
            return self.entries.get(seq).map(|e| e.pending.clone());
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        let queue_key = Queue::key(request.priority, request.timestamp, seq);
        let deadline = request.deadline();
        if let Some(d) = deadline {
            self.deadlines.insert((d, seq));
        }
        let pending = Arc::new(PendingRequest {
            seq,
            project: PathBuf::new(),
            origin: Origin::Http { event_id },
            request,
            variant: Variant::Canonical,
        });
        self.queue.insert(queue_key);
        self.remote_by_id.insert(pending.request.id.clone(), seq);
        self.entries.insert(
            seq,
            Entry {
                pending: pending.clone(),
                place: Place::Remote,
                queue_key,
                deadline,
                answering: false,
            },
        );
        self.stats.total_requests += 1;
        let _ = self.changes.send(Change::Queued(pending.clone()));
        Some(pending)
    }

    /// An answer file appeared: a responder outside this broker (`hitl answer`, another
    /// broker) answered, unless it is our own write finishing.
    fn answer_appeared(&mut self, path: &Path) {
        let Some(&seq) = self.by_answer.get(path) else {
            return;
        };
        if self.entries.get(&seq).is_some_and(|e| e.answering) {
            return;
        }
        let existing = questions::read_answer(path);
        let status = existing
            .as_ref()
            .map_or(Status::Answered, |a| a.status.into());
        self.finish(seq, status, existing, None);
    }

    fn question_removed(&mut self, path: &Path) {
        self.partial.remove(path);
        let Some(&seq) = self.by_question.get(path) else {
            return;
        };
        let entry = &self.entries[&seq];
        if entry.answering {
            return;
        }
        if let Some(answer_path) = entry
            .answer_path()
            .filter(|p| p.exists())
            .map(Path::to_path_buf)
        {
            self.answer_appeared(&answer_path);
            return;
        }
        self.remove_seed_marker(seq);
        self.finish(
            seq,
            Status::Withdrawn,
            None,
            Some("the asker withdrew the question".into()),
        );
    }

    fn remove_seed_marker(&self, seq: u64) {
        if let Some(e) = self.entries.get(&seq)
            && e.pending.variant == Variant::Seed000
            && let Some(spool) = e.spool()
        {
            let marker = self.spools[spool]
                .queue()
                .join(format!("{}.queue", e.pending.request.id));
            let _ = std::fs::remove_file(marker);
        }
    }

    /// Takes a request out of the queue for good and records how it ended.
    fn finish(&mut self, seq: u64, status: Status, answer: Option<Answer>, reason: Option<String>) {
        self.end(seq, status, answer, reason, true);
    }

    /// Like [`Broker::finish`], for an end the store has already recorded (a remote
    /// request's settle).
    fn finish_quietly(
        &mut self,
        seq: u64,
        status: Status,
        answer: Option<Answer>,
        reason: Option<String>,
    ) {
        self.end(seq, status, answer, reason, false);
    }

    fn end(
        &mut self,
        seq: u64,
        status: Status,
        answer: Option<Answer>,
        reason: Option<String>,
        record: bool,
    ) {
        let Some(entry) = self.entries.remove(&seq) else {
            return;
        };
        self.queue.remove(&entry.queue_key);
        if let Some(d) = entry.deadline {
            self.deadlines.remove(&(d, seq));
        }
        self.count_end(&entry, status, answer.as_ref());
        let answer = answer.map(Arc::new);
        let responded_by = answer.as_ref().map(|a| a.responded_by.clone());
        match entry.place {
            Place::Spool {
                spool,
                question_path,
                journal_path,
                answer_path,
            } => {
                self.by_question.remove(&question_path);
                self.by_answer.remove(&answer_path);
                self.snapshot_dirty[spool] = true;
                let op = StoreOp::Finished {
                    project: entry.pending.project.display().to_string(),
                    request: Box::new(entry.pending.request.clone()),
                    variant: entry.pending.variant,
                    status,
                    answer: answer.as_deref().cloned().map(Box::new),
                    reason: reason.clone(),
                };
                self.record_then_forget(op, journal_path);
            }
            Place::Remote if record => {
                self.remote_by_id.remove(&entry.pending.request.id);
                self.record(StoreOp::Settle {
                    id: entry.pending.request.id.clone(),
                    status,
                    answer: answer.as_deref().cloned().map(Box::new),
                    reason: reason.clone(),
                });
            }
            Place::Remote => {
                self.remote_by_id.remove(&entry.pending.request.id);
            }
        }
        let _ = self.changes.send(Change::Finished {
            seq,
            id: entry.pending.request.id.clone(),
            status,
            responded_by,
            answer,
            reason,
        });
    }

    fn count_end(&mut self, entry: &Entry, status: Status, answer: Option<&Answer>) {
        match status {
            Status::Answered | Status::Cancelled
                if answer.is_some_and(|a| a.responded_by != "broker") =>
            {
                self.stats.total_responses += 1;
                let waited = Timestamp::now().duration_since(entry.pending.request.timestamp);
                self.stats.response_time_ms_sum += waited.as_millis().max(0) as u64;
            }
            Status::Timeout => self.stats.total_timeouts += 1,
            Status::Rejected => self.stats.total_errors += 1,
            Status::Withdrawn | Status::Abandoned => self.stats.total_withdrawn += 1,
            _ => {}
        }
    }

    fn reject(&mut self, spool: usize, path: &Path, reason: &str, bytes: Option<&[u8]>) {
        let s = &self.spools[spool];
        match questions::reject(s, path, reason, bytes) {
            Ok(dest) => {
                tracing::warn!(
                    "rejected {}: {reason} (moved to {})",
                    path.display(),
                    dest.display()
                );
                let stem = questions::stem(path).unwrap_or("invalid");
                let id = if crate::protocol::is_valid_id(stem) {
                    stem
                } else {
                    "invalid"
                };
                let preview: String = bytes
                    .map(|b| String::from_utf8_lossy(&b[..b.len().min(200)]).into_owned())
                    .unwrap_or_default();
                let request = Request {
                    version: crate::protocol::VERSION,
                    id: id.to_string(),
                    agent_id: "unknown".into(),
                    agent_name: "unknown".into(),
                    working_dir: None,
                    timestamp: Timestamp::now(),
                    kind: crate::protocol::Kind::Text,
                    content: preview,
                    options: Vec::new(),
                    priority: crate::protocol::Priority::Normal,
                    timeout: None,
                    context: serde_json::Value::Null,
                    metadata: serde_json::Map::new(),
                    asker: None,
                };
                self.stats.total_errors += 1;
                self.record(StoreOp::Finished {
                    project: s.project().display().to_string(),
                    request: Box::new(request),
                    variant: Variant::Canonical,
                    status: Status::Rejected,
                    answer: None,
                    reason: Some(format!("{reason} (file kept as {})", dest.display())),
                });
            }
            Err(e) => tracing::error!("could not move bad file {} aside: {e}", path.display()),
        }
    }

    /// Reads every spool again: after start and whenever the kernel dropped events.
    fn rescan(&mut self) {
        for spool in 0..self.spools.len() {
            let paths = match questions::question_paths(&self.spools[spool]) {
                Ok(p) => p,
                Err(e) => {
                    tracing::error!("reading {}: {e}", self.spools[spool].questions().display());
                    continue;
                }
            };
            let present: HashSet<&PathBuf> = paths.iter().collect();
            let gone: Vec<PathBuf> = self
                .by_question
                .keys()
                .filter(|p| {
                    self.folder_of(p).is_some_and(|(s, _)| s == spool) && !present.contains(p)
                })
                .cloned()
                .collect();
            for p in gone {
                self.question_removed(&p);
            }
            let folder = self.spools[spool].questions();
            self.settled
                .retain(|p, _| p.parent() != Some(folder.as_path()) || present.contains(p));
            for p in paths.clone() {
                if self
                    .settled
                    .get(&p)
                    .is_some_and(|t| modified(&p) == Some(*t))
                {
                    continue;
                }
                self.question_changed(spool, p, false);
            }
        }
        let answered: Vec<PathBuf> = self
            .by_answer
            .keys()
            .filter(|p| p.exists())
            .cloned()
            .collect();
        for p in answered {
            self.answer_appeared(&p);
        }
    }

    /// Replays the journal: questions a previous broker took whose end history never
    /// recorded (it was killed). Each is recorded as asked; one whose question file is
    /// still there is queued again by the rescan that follows; one whose asker already
    /// has its answer is recorded from the answer file; one that is simply gone was
    /// withdrawn while no broker ran.
    fn replay_journal(&mut self) {
        for spool in 0..self.spools.len() {
            let s = self.spools[spool].clone();
            let Ok(entries) = std::fs::read_dir(s.journal()) else {
                continue;
            };
            let asked: HashSet<(u64, u64)> = questions::question_paths(&s)
                .unwrap_or_default()
                .iter()
                .filter_map(|p| file_id(p))
                .collect();
            for e in entries.filter_map(Result::ok) {
                let link = e.path();
                let Loaded::Question(q) =
                    questions::load_question(&link, self.opts.max_question_bytes)
                else {
                    let _ = std::fs::remove_file(&link);
                    continue;
                };
                let q = *q;
                let project = s.project().display().to_string();
                self.record(StoreOp::Asked {
                    project: project.clone(),
                    request: Box::new(q.request.clone()),
                    variant: q.variant,
                });
                if file_id(&link).is_some_and(|id| asked.contains(&id)) {
                    // The rescan queues it again and links it anew; this link goes.
                    let _ = std::fs::remove_file(&link);
                    continue;
                }
                let answer = questions::read_answer(&questions::answer_path(&s, &q))
                    .filter(|a| a.id == q.request.id);
                let (status, reason) = match &answer {
                    Some(a) => (Status::from(a.status), None),
                    None => (
                        Status::Withdrawn,
                        Some("the asker withdrew the question while no broker ran".to_string()),
                    ),
                };
                let op = StoreOp::Finished {
                    project,
                    request: Box::new(q.request),
                    variant: q.variant,
                    status,
                    answer: answer.map(Box::new),
                    reason,
                };
                self.record_then_forget(op, Some(link));
            }
        }
    }

    /// Answers recorded as `delivering` whose question is gone from the spool were
    /// delivered and picked up before the last broker died: record them as finished.
    fn settle_undelivered(&mut self) {
        for (_, u) in std::mem::take(&mut self.undelivered) {
            self.record(StoreOp::Finished {
                project: u.key.0,
                request: Box::new(u.request),
                variant: u.variant,
                status: u.answer.status.into(),
                answer: Some(Box::new(u.answer)),
                reason: None,
            });
        }
    }

    fn retry_partials(&mut self, now: Instant) {
        if self.partial.is_empty() {
            return;
        }
        let paths: Vec<(PathBuf, Instant)> =
            self.partial.iter().map(|(p, t)| (p.clone(), *t)).collect();
        for (path, give_up) in paths {
            let Some((spool, _)) = self.folder_of(&path) else {
                self.partial.remove(&path);
                continue;
            };
            // Past the grace period the file counts as closed: reject it if still bad.
            self.question_changed(spool, path, now >= give_up);
        }
    }

    fn expire_timeouts(&mut self) {
        let now = Timestamp::now();
        let due: Vec<u64> = self
            .deadlines
            .iter()
            .take_while(|(d, _)| *d <= now)
            .map(|(_, seq)| *seq)
            .collect();
        for seq in due {
            let Some(entry) = self.entries.get(&seq) else {
                continue;
            };
            if entry.deadline.is_some_and(|d| d <= now) && !entry.answering {
                let answer = Answer::timeout(&entry.pending.request);
                if let Some(d) = entry.deadline {
                    self.deadlines.remove(&(d, seq));
                }
                self.start_answer(seq, answer, false, None);
            }
        }
    }

    /// Ends the requests whose asking process has died: nobody will read their answer.
    fn check_askers(&mut self) {
        let mut alive: HashMap<(u32, Option<u64>), bool> = HashMap::new();
        let dead: Vec<u64> = self
            .entries
            .iter()
            .filter(|(_, e)| !e.answering)
            .filter_map(|(seq, e)| {
                let a = e.pending.request.asker?;
                let ok = *alive
                    .entry((a.pid, a.start_time))
                    .or_insert_with(|| agents::is_alive(a.pid, a.start_time));
                (!ok).then_some(*seq)
            })
            .collect();
        for seq in dead {
            let Some(e) = self.entries.get(&seq) else {
                continue;
            };
            let pid = e.pending.request.asker.map(|a| a.pid).unwrap_or_default();
            if let Some(q) = e.question_path() {
                let _ = std::fs::remove_file(q);
            }
            self.remove_seed_marker(seq);
            self.finish(
                seq,
                Status::Abandoned,
                None,
                Some(format!("the asking process {pid} exited without an answer")),
            );
        }
    }

    /// Keeps the registry current and clears old answer tombstones.
    fn sweep_agents(&self) {
        for (i, spool) in self.spools.iter().enumerate() {
            let live: HashSet<String> = self
                .entries
                .values()
                .filter(|e| e.spool() == Some(i))
                .filter_map(|e| {
                    e.answer_path()?
                        .file_name()
                        .map(|n| n.to_string_lossy().into_owned())
                })
                .collect();
            let waiting: HashSet<String> = self
                .entries
                .values()
                .filter(|e| e.spool() == Some(i))
                .map(|e| e.pending.request.agent_id.clone())
                .collect();
            let spool = spool.clone();
            tokio::task::spawn_blocking(move || {
                agents::sweep(&spool, &waiting);
                questions::clear_old_answers(&spool, &live);
                crate::spool::clear_stale_temp(&spool.tmp());
            });
        }
    }

    /// Rewrites `queue/question_queue.json` for each spool whose queue changed.
    fn flush_snapshots(&mut self, force: bool) {
        let mut wrote = false;
        for i in 0..self.spools.len() {
            if !(force || self.snapshot_dirty[i]) {
                continue;
            }
            self.snapshot_dirty[i] = false;
            wrote = true;
            let items: Vec<SnapshotItem> = self
                .queue
                .iter()
                .filter_map(|seq| self.entries.get(&seq))
                .filter(|e| e.spool() == Some(i))
                .map(|e| SnapshotItem::of(&e.pending.request))
                .collect();
            let agents: HashSet<&str> = items.iter().map(|q| q.agent_id).collect();
            let body = Snapshot {
                version: crate::protocol::VERSION,
                updated: Timestamp::now(),
                total_questions: items.len(),
                active_agents: agents.len(),
                queue: items,
            };
            let spool = &self.spools[i];
            let mut bytes = serde_json::to_vec_pretty(&body).unwrap_or_default();
            bytes.push(b'\n');
            if let Err(e) = write_atomic(&spool.tmp(), &spool.queue_snapshot(), &bytes, false) {
                tracing::warn!("writing {}: {e}", spool.queue_snapshot().display());
            }
        }
        if wrote {
            release_free_memory();
        }
    }
}

/// A file's modification time, if it exists.
fn modified(path: &Path) -> Option<std::time::SystemTime> {
    std::fs::symlink_metadata(path)
        .and_then(|m| m.modified())
        .ok()
}

/// A file's identity (device, inode): a hard link has its original's.
fn file_id(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(path)
        .ok()
        .map(|m| (m.dev(), m.ino()))
}

/// Hands freed heap back to the system. A burst of thousands of questions leaves the
/// allocator holding pages that would otherwise count as the listener's memory for ever.
fn release_free_memory() {
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim only walks the allocator's own free lists.
    unsafe {
        nix::libc::malloc_trim(0);
    }
}

/// `queue/question_queue.json`, in seed 001's shape plus ids and priorities.
#[derive(Serialize)]
struct Snapshot<'a> {
    version: u32,
    updated: Timestamp,
    total_questions: usize,
    active_agents: usize,
    queue: Vec<SnapshotItem<'a>>,
}

/// One queued question in the snapshot; its text cut to 100 characters as in seed 001.
#[derive(Serialize)]
struct SnapshotItem<'a> {
    id: &'a str,
    agent_id: &'a str,
    agent_name: &'a str,
    #[serde(rename = "type")]
    kind: crate::protocol::Kind,
    priority: crate::protocol::Priority,
    content: std::borrow::Cow<'a, str>,
    timestamp: Timestamp,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    options: &'a [String],
}

impl<'a> SnapshotItem<'a> {
    fn of(r: &'a Request) -> SnapshotItem<'a> {
        let content = match r.content.char_indices().nth(100) {
            Some((cut, _)) => std::borrow::Cow::Owned(format!("{}...", &r.content[..cut])),
            None => std::borrow::Cow::Borrowed(r.content.as_str()),
        };
        SnapshotItem {
            id: &r.id,
            agent_id: &r.agent_id,
            agent_name: &r.agent_name,
            kind: r.kind,
            priority: r.priority,
            content,
            timestamp: r.timestamp,
            options: &r.options,
        }
    }
}
