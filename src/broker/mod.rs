//! The broker core: one task owns every pending request, in the queue order people
//! answer them, and every change goes through it.
//!
//! Inputs are spool events (from [`crate::spool::watch`]), requests asked through a
//! [`BrokerHandle`] by the other transports, and responders' commands; outputs are the
//! answers (a file for a spool question, a settle in the store for the rest), history
//! writes (batched, off the critical path) and a broadcast of [`Change`]s. Every way
//! back to an asker, and every UI, follows that broadcast: an answer from any
//! responder, a timeout, a cancel or a withdrawal reaches the asker the same way.
//!
//! The life of a request: it arrives (a question file is read, retried while it may
//! still be being written, rejected when bad; or a transport's request is committed to
//! the store) → [`Broker::enqueue`] queues it → a responder, the timeout or the asker's
//! death ends it → the answer is written exclusively (an answer file by `link(2)`, a
//! store row by a conditional update), so of two responders racing exactly one wins →
//! history records how it ended. If the broker dies at any point, the next start
//! rebuilds all of this from the spool and the store.
//!
//! The code is split by concern: this file holds the queue and the lifecycle every
//! origin shares; `requests` the pending requests, changed only through it;
//! `handle` the API responders and transports use; `way_back` the
//! one trait through which the lifecycle delivers an answer and records an end,
//! whatever the origin; `spool` the file side (and its way back, the answer file);
//! `stored` the requests that live in the store (and theirs, the settle); `history`
//! when history writes go to the store (held back while the spool is busy);
//! `snapshot` the queue file.

mod activity;
mod handle;
mod history;
pub mod ladder;
pub mod presence;
mod queue;
mod requests;
mod snapshot;
mod spool;
mod stored;
#[cfg(test)]
mod tests;
mod way_back;

use std::{
    collections::HashMap,
    path::PathBuf,
    sync::Arc,
    time::{Duration, Instant},
};

use jiff::Timestamp;
use serde::Serialize;
use thiserror::Error;
use tokio::sync::{broadcast, mpsc, oneshot};

pub use handle::{Asked, BrokerHandle};
pub use queue::{Queue, QueueKey};

use crate::{
    protocol::{Answer, AnswerShape, Origin, Request, Status, Variant},
    spool::{Spool, watch::SpoolEvent},
    store::{Ack, Outcome, StoreMsg, StoreOp, StoreSender, Undelivered},
};
use handle::Command;
use requests::Entry;
use way_back::{Delivered, Delivery, Ending, WayBack};

/// How long a question file that does not parse yet, and whose writer has not closed
/// it, may stay unchanged before it is taken as abandoned and rejected. Any change to
/// it starts the wait again: a writer may pause mid-write for as long as it likes
/// while it keeps writing. (A file that is closed, or renamed in, is whole or bad.)
const PARTIAL_GRACE: Duration = Duration::from_secs(30);
/// The broker times a spool question out this long after the asker's own deadline.
/// Askers that keep their own timer (`hitl ask`, the seed scripts) withdraw at the
/// deadline and report a timeout in their own way; the broker's timeout is the
/// backstop for those that do not, and must not race them (seed 000 would read a
/// broker timeout as "cancelled", and its timestamps are truncated to the second).
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
    /// fsync answer files and their folder before reporting them delivered
    /// (`[spool] fsync`).
    pub durable: bool,
    /// Answer every request the moment it joins the queue, with this text
    /// (`--auto-answer`): see [`Request::auto_reply`].
    pub auto_answer: Option<String>,
    /// How long a spool question stays pending once its asker was stopped from
    /// outside and marked it kept (`[ask] keep_when_stopped`; zero: not at all).
    pub keep_when_stopped: Duration,
}

/// Who auto answers are from, in history and answer files.
pub const AUTO_RESPONDER: &str = "auto";

/// A pending request as responders see it.
#[derive(Debug, Clone, Serialize)]
pub struct PendingRequest {
    /// The broker's handle on it, for [`BrokerHandle::respond`].
    pub seq: u64,
    /// The project it belongs to (empty for requests that live in the store).
    pub project: PathBuf,
    /// Who asked ([`Request::origin`], here for readers of the queue's JSON).
    pub origin: Origin,
    /// Whether it lives in the store (its way back is to settle it there), rather
    /// than in a question file (whose way back is the answer file).
    #[serde(skip)]
    pub stored: bool,
    /// The agent event that carried it, for requests made over HTTP.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub event_id: Option<i64>,
    /// The question.
    pub request: Request,
    /// How it is answered: what UIs draw their controls from.
    pub answer_shape: AnswerShape,
    /// What UIs show beside the question ([`Request::labels`]).
    pub labels: Vec<String>,
    /// The format it came in.
    #[serde(skip)]
    pub variant: Variant,
    /// Its asker was stopped from outside: kept until then for the same agent to ask
    /// again (`hitl ask` re-attaches), withdrawn after.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kept_until: Option<Timestamp>,
    /// The approvals it has had, when it needs several people's
    /// ([`Request::approvals`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub votes: Vec<Vote>,
}

#[cfg(test)]
impl PendingRequest {
    /// `request` as the broker would hold it as `seq`, for tests of its followers.
    pub fn for_test(seq: u64, request: Request) -> PendingRequest {
        PendingRequest {
            seq,
            project: "/work/app".into(),
            origin: request.origin,
            stored: request.origin != Origin::Spool,
            event_id: None,
            answer_shape: request.answer_shape(),
            labels: request.labels(),
            request,
            variant: Variant::Canonical,
            kept_until: None,
            votes: Vec::new(),
        }
    }
}

/// What changed in the queue.
#[derive(Debug, Clone)]
pub enum Change {
    /// A request joined the queue.
    Queued(Arc<PendingRequest>),
    /// A request left it.
    Finished(Arc<Finished>),
    /// A pending request changed how it waits: its asker was stopped and it is kept
    /// (`kept_until`), or its agent asked again.
    Updated(Arc<PendingRequest>),
    /// An agent's hook event was recorded in the activity feed.
    Activity(Arc<Activity>),
    /// A pending request reached a step of the escalation ladder: the channels it
    /// names reach a person now ([`ladder`]).
    Reached(Arc<ladder::Reached>),
}

/// A hook event recorded in the activity feed.
#[derive(Debug, Clone)]
pub struct Activity {
    /// Its id in the store.
    pub event_id: i64,
    /// The event (its `extra` holds `agent_id`, `agent_name`, `project`, and
    /// `decision` and `reason` for tool calls).
    pub event: crate::store::NewEvent,
    /// The project it came from.
    pub project: std::path::PathBuf,
}

impl Activity {
    /// The event as the store holds it.
    pub fn stored(&self) -> crate::store::StoredEvent {
        crate::store::StoredEvent {
            id: self.event_id,
            event: self.event.clone(),
            request: None,
        }
    }

    /// A text field of the event's `extra`.
    pub fn extra(&self, key: &str) -> Option<&str> {
        self.event
            .extra
            .get(key)
            .and_then(serde_json::Value::as_str)
    }
}

/// How a request left the queue.
#[derive(Debug, Clone)]
pub struct Finished {
    /// The request as it was pending.
    pub pending: Arc<PendingRequest>,
    /// How it ended.
    pub status: Status,
    /// The answer delivered, if any (`None` also when another broker sharing the
    /// store ended it and did not say how).
    pub answer: Option<Answer>,
    /// Why it ended without an answer.
    pub reason: Option<String>,
    /// True when this broker ended it (wrote the answer file or won the settle);
    /// false when another broker sharing the store did, and has delivered it.
    pub here: bool,
}

impl Finished {
    /// Its broker handle.
    pub fn seq(&self) -> u64 {
        self.pending.seq
    }

    /// Its id.
    pub fn id(&self) -> &str {
        &self.pending.request.id
    }

    /// Who answered, when someone did.
    pub fn responded_by(&self) -> Option<&str> {
        self.answer.as_ref().map(|a| a.responded_by.as_str())
    }
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

/// Why a request could not be accepted.
#[derive(Debug, Clone, Error, PartialEq, Eq)]
pub enum AskError {
    /// The store did not commit it: nothing was accepted.
    #[error("the request could not be stored; nothing was accepted (see the server log)")]
    Store,
    /// Spool questions are asked by writing their file, not through the handle.
    #[error("spool questions are asked by writing a file into .helpers/questions/")]
    NotStored,
    /// The broker has stopped.
    #[error("the broker has stopped")]
    Stopped,
}

/// Who answers from any surface of this machine's user (terminal, TUI, dashboard,
/// the user's paired phone, `hitl answer`, the API with the token): one person.
pub const LOCAL_APPROVER: &str = "local";

/// One person's approval of a request that needs several.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Vote {
    /// Who, as history credits it (`dashboard:ana (phone)`, `telegram:@bob`).
    pub by: String,
    /// The person ([`LOCAL_APPROVER`], `telegram:12345`): each counts once.
    pub approver: String,
    /// When.
    pub at: Timestamp,
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
    /// An approval was counted, and the request waits for more people's: it needs
    /// `needed` different approvers and has `have`.
    #[error("approval {have} of {needed} recorded: it waits for another person's approval")]
    Waiting {
        /// Approvals so far.
        have: usize,
        /// Approvals it needs.
        needed: usize,
    },
}

/// Who to tell how an answer went; `None` for fire-and-forget responders.
type Reply = Option<oneshot::Sender<Result<Answer, RespondError>>>;

/// A delivery that finished, one way or another.
struct Written {
    seq: u64,
    answer: Answer,
    result: Delivered,
    done: Reply,
}

/// Where a pending request lives: the file side keeps its own for a question file.
/// Each place is a way back ([`Place::way_back`]).
enum Place {
    /// A question file.
    Spool(spool::SpoolPlace),
    /// A row in the store.
    Stored(stored::Settle),
}

impl Place {
    /// How its answer goes back.
    fn way_back(&self) -> &dyn WayBack {
        match self {
            Place::Spool(place) => place,
            Place::Stored(settle) => settle,
        }
    }
}

/// The broker's state. Owned by the task running [`Broker::run`].
pub struct Broker {
    opts: BrokerOptions,
    /// The pending requests (`requests.rs`, the one place that changes them).
    requests: requests::Requests,
    /// History writes, and when they go (`history.rs`).
    history: history::HistoryWrites,
    /// True while more work waits for this task than the command in hand: the
    /// answer's history write then joins the writer's batch instead of going at once.
    backlog: bool,
    changes: broadcast::Sender<Change>,
    written_tx: mpsc::UnboundedSender<Written>,
    written_rx: mpsc::UnboundedReceiver<Written>,
    commands_rx: mpsc::UnboundedReceiver<Command>,
    stats: BrokerStats,
    /// The file side: spools, their indexes, partial files, the journal.
    files: spool::Files,
    /// The requests that live in the store.
    stored: stored::Stored,
    /// Approvals counted before the last stop, by request id: given back to each
    /// request as it is queued again, so that no one has to approve twice.
    recorded_votes: HashMap<String, Vec<Vote>>,
}

/// What the store says the last broker left unfinished, read before a broker starts.
#[derive(Debug, Default)]
pub struct Unfinished {
    /// Answers chosen but never written (it died in between).
    pub undelivered: Vec<Undelivered>,
    /// Requests made over HTTP, still pending, with their event ids.
    pub stored_pending: Vec<(Request, i64)>,
    /// Approvals of requests that need several people's, as their trail recorded
    /// them (`vote` steps); those of requests that ended are never asked for.
    pub votes: Vec<crate::store::TrailStep>,
}

impl Unfinished {
    /// Reads it from `store`.
    pub async fn read(store: &crate::store::Store) -> anyhow::Result<Unfinished> {
        Ok(Unfinished {
            undelivered: store.undelivered().await?,
            stored_pending: store.pending_remote().await?,
            votes: store.trail_steps(VOTE_STEP).await?,
        })
    }
}

/// The trail step an approval of a request that needs several people's is.
const VOTE_STEP: &str = "vote";

impl Broker {
    /// A broker over `spools`, writing history to `store`, taking up what the last
    /// one left `unfinished`. Returns the handle responders and transports use.
    pub fn new(
        spools: Vec<Spool>,
        opts: BrokerOptions,
        store: StoreSender,
        unfinished: Unfinished,
    ) -> (Broker, BrokerHandle) {
        let Unfinished {
            undelivered,
            stored_pending,
            votes,
        } = unfinished;
        let mut recorded_votes: HashMap<String, Vec<Vote>> = HashMap::new();
        for step in votes {
            // Who the person is (written since votes were read again; an older
            // step cannot tell two people apart, so it is not counted).
            let field = |k: &str| step.detail.get(k).and_then(serde_json::Value::as_str);
            let (Some(by), Some(approver)) = (field("by"), field("approver")) else {
                continue;
            };
            let votes = recorded_votes.entry(step.id.clone()).or_default();
            if votes.iter().all(|v| v.approver != approver) {
                votes.push(Vote {
                    by: by.to_string(),
                    approver: approver.to_string(),
                    at: Timestamp::from_millisecond(step.at_ms)
                        .unwrap_or_else(|_| Timestamp::now()),
                });
            }
        }
        let (commands, commands_rx) = mpsc::unbounded_channel();
        let (changes, _) = broadcast::channel(16 * 1024);
        let (written_tx, written_rx) = mpsc::unbounded_channel();
        let handle = BrokerHandle::new(commands, changes.clone(), store.clone());
        let broker = Broker {
            opts,
            requests: requests::Requests::new(),
            history: history::HistoryWrites::new(store),
            backlog: true,
            changes,
            written_tx,
            written_rx,
            commands_rx,
            stats: BrokerStats::default(),
            files: spool::Files::new(spools, undelivered),
            stored: stored::Stored::new(stored_pending),
            recorded_votes,
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
        self.start();
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
            let quiet_due = self.history.quiet_due();
            tokio::select! {
                biased;
                _ = &mut shutdown => break,
                Some(w) = self.written_rx.recv() => self.on_written(w),
                Some(ev) = events.recv() => {
                    // Drain what is already queued before doing anything else, so a
                    // burst of files costs one pass.
                    let mut next = Some(ev);
                    while let Some(ev) = next {
                        next = events.try_recv().ok();
                        self.backlog = next.is_some() || !self.commands_rx.is_empty();
                        self.on_spool_event(ev);
                    }
                    self.backlog = true;
                }
                Some(cmd) = self.commands_rx.recv() => {
                    self.backlog = !events.is_empty() || !self.commands_rx.is_empty();
                    self.on_command(cmd);
                    self.backlog = true;
                }
                _ = async {
                    match quiet_due {
                        Some(due) => tokio::time::sleep_until(due).await,
                        None => std::future::pending().await,
                    }
                } => {
                    self.history.release();
                    self.refill_spares();
                }
                _ = tick.tick() => {
                    let now = Instant::now();
                    self.expire_timeouts();
                    self.apply_rule_again();
                    self.retry_partials(now);
                    self.take_notes();
                    self.flush_registry_notes();
                    self.flush_reports();
                    self.history.release();
                    self.refill_spares();
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
        self.take_notes();
        self.flush_registry_notes();
        self.flush_reports();
        self.history.release();
    }

    /// What a start does before following events: the journal and the store's
    /// unfinished requests first, then the spool.
    fn start(&mut self) {
        self.replay_journal();
        self.requeue_stored();
        self.rescan();
        self.settle_undelivered();
        self.flush_snapshots(true);
    }

    /// Queues a request: the one way in, whatever the origin. Gives it a handle,
    /// its place in the queue and its deadline, and announces it.
    fn enqueue(
        &mut self,
        project: PathBuf,
        event_id: Option<i64>,
        parsed: crate::protocol::ParsedQuestion,
        place: Place,
        deadline: Option<Timestamp>,
    ) -> Arc<PendingRequest> {
        let stored = matches!(place, Place::Stored(_));
        let votes = self
            .recorded_votes
            .remove(&parsed.request.id)
            .unwrap_or_default();
        let make = |seq| PendingRequest {
            seq,
            project,
            origin: parsed.request.origin,
            stored,
            event_id,
            answer_shape: parsed.request.answer_shape(),
            labels: parsed.request.labels(),
            request: parsed.request,
            variant: parsed.variant,
            kept_until: None,
            votes,
        };
        self.stats.total_requests += 1;
        self.requests.add(make, place, deadline)
    }

    /// Announces a queued request to every follower, then applies the answer rule if
    /// there is one. The rule is the broker's, not a responder's: a request it answers
    /// is answered before this returns, with no other task's turn in between (an
    /// instant answer's whole wait is otherwise made of such turns).
    fn announce_queued(&mut self, pending: Arc<PendingRequest>) {
        let _ = self.changes.send(Change::Queued(pending.clone()));
        if let Some(text) = &self.opts.auto_answer {
            let reply = pending.request.auto_reply(text);
            // No *delivering* record first: after a crash the rule answers again.
            self.respond(pending.seq, reply, AUTO_RESPONDER.to_string(), true, None);
        }
    }

    /// Answers again, by the rule, whatever is still pending: an answer that could not
    /// be written (a full disk) leaves its request pending, and no responder's turn
    /// comes round again for a rule.
    fn apply_rule_again(&mut self) {
        let Some(text) = self.opts.auto_answer.clone() else {
            return;
        };
        let waiting: Vec<(u64, crate::protocol::Reply)> = self
            .requests
            .in_order()
            .filter(|e| !e.answering)
            .map(|e| (e.pending.seq, e.pending.request.auto_reply(&text)))
            .collect();
        for (seq, reply) in waiting {
            self.respond(seq, reply, AUTO_RESPONDER.to_string(), true, None);
        }
    }

    fn on_command(&mut self, cmd: Command) {
        match cmd {
            Command::Pending { done } => {
                let list = self
                    .requests
                    .in_order()
                    .map(|e| e.pending.clone())
                    .collect();
                let _ = done.send(list);
            }
            Command::Admit {
                request,
                event_id,
                done,
            } => {
                let _ = done.send(self.admit_stored(*request, event_id));
            }
            Command::Find {
                id,
                stored_only,
                done,
            } => {
                // A stored request first (their ids are unique); then the spool's.
                let found = self
                    .stored
                    .seq_of(&id)
                    .and_then(|seq| self.requests.get(seq))
                    .or_else(|| {
                        let spool = |e: &&Entry| !stored_only && e.pending.request.id == id;
                        self.requests.iter().find(spool)
                    })
                    .map(|e| e.pending.clone());
                let _ = done.send(found);
            }
            Command::EndedElsewhere {
                id,
                status,
                answer,
                reason,
            } => self.ended_elsewhere(&id, status, answer.map(|a| *a), reason),
            Command::StoredIds { done } => {
                let _ = done.send(self.stored_ids());
            }
            Command::Note { project, note } => self.note_from(&project, *note),
            Command::Stats { done } => {
                let mut stats = self.stats.clone();
                stats.pending = self.requests.len() as u64;
                let _ = done.send(stats);
            }
            Command::Respond {
                seq,
                reply,
                by,
                approver,
                done,
            } => match self.count_vote(seq, &reply, by, approver) {
                Ok(by) => self.respond(seq, reply, by, false, done),
                Err(e) => {
                    if let Some(done) = done {
                        let _ = done.send(Err(e));
                    }
                }
            },
        }
    }

    /// Counts an approval of `seq` that needs several people's: each `approver` once,
    /// each approval in the request's trail. Until there are enough, the request
    /// waits ([`RespondError::Waiting`]); the last one answers it, credited to every
    /// approver (`by` for the answer). Anything else (one person's request, a
    /// denial, which ends it at once) passes as it is.
    fn count_vote(
        &mut self,
        seq: u64,
        reply: &crate::protocol::Reply,
        by: String,
        approver: String,
    ) -> Result<String, RespondError> {
        let Some(entry) = self.requests.get(seq) else {
            return Ok(by); // `respond` says it is gone
        };
        let needed = entry.pending.request.approvals_needed();
        let approves = matches!(
            reply,
            crate::protocol::Reply::Approval { approved: true, .. }
        );
        if needed <= 1 || !approves || entry.answering {
            return Ok(by);
        }
        if let Some(v) = entry.pending.votes.iter().find(|v| v.approver == approver) {
            return Err(RespondError::Invalid(format!(
                "{} approved this already: it needs {needed} different people's approval, \
                 and every surface of this machine's user counts as one person",
                v.by
            )));
        }
        let id = entry.pending.request.id.clone();
        let mut all: Vec<String> = entry.pending.votes.iter().map(|v| v.by.clone()).collect();
        all.push(by.clone());
        let have = all.len();
        let surface = by.split(':').next().unwrap_or_default().to_string();
        self.write(StoreMsg {
            op: StoreOp::Trail(Box::new(crate::store::TrailStep::now(
                &id,
                VOTE_STEP,
                &surface,
                serde_json::json!({
                    "by": by, "approver": approver, "approved": true, "have": have, "needed": needed
                }),
            ))),
            ack: None,
        });
        if have < needed {
            let vote = Vote {
                by,
                approver,
                at: Timestamp::now(),
            };
            self.update_pending(seq, |p| p.votes.push(vote));
            return Err(RespondError::Waiting { have, needed });
        }
        Ok(all.join(" + "))
    }

    /// Answers `seq` with `reply` from `by`, unless it is gone, being answered, or the
    /// reply does not fit it (it then stays pending). `recorded` as for
    /// [`Broker::start_answer`].
    fn respond(
        &mut self,
        seq: u64,
        reply: crate::protocol::Reply,
        by: String,
        recorded: bool,
        done: Reply,
    ) {
        let refuse = |done: Reply, e| {
            if let Some(done) = done {
                let _ = done.send(Err(e));
            }
        };
        let Some(entry) = self.requests.get(seq) else {
            refuse(done, RespondError::NotFound(seq.to_string()));
            return;
        };
        if entry.answering {
            let by = "another responder (in progress)".to_string();
            refuse(done, RespondError::AlreadyAnswered(by));
            return;
        }
        // The kind decides which replies fit: a refusal leaves it pending.
        if let Err(why) = reply.fits(&entry.pending.request) {
            refuse(done, RespondError::Invalid(why));
            return;
        }
        let answer = Answer::from_reply(&entry.pending.request, reply, &by);
        self.start_answer(seq, answer, recorded, done);
    }

    /// Sends a history write.
    fn record(&mut self, op: StoreOp) {
        self.write(op.into());
    }

    /// Sends a write to the store writer, when [`history`] says: an answer's own
    /// record on this thread when nothing else waits ([`Broker::answer_at_once`]).
    fn write(&mut self, msg: StoreMsg) {
        let at_once = self.answer_at_once();
        self.history.write(msg, at_once);
    }

    /// Whether an answer's write (its record, its file) goes on this thread now
    /// rather than to another: when nothing else waits for the broker, and no fsync
    /// (`[spool] fsync`) would hold it up.
    fn answer_at_once(&self) -> bool {
        !self.backlog && !self.opts.durable
    }

    /// Starts delivering an answer by its request's way back;
    /// [`Broker::on_written`] hears how it went. `recorded` skips the store write
    /// before delivery, for answers that need none (already recorded, or the
    /// broker's rule's, which it gives again after a crash). The delivery runs right
    /// after that write commits, on the writer's thread; without one, on this
    /// thread when nothing else waits, else on the blocking pool.
    fn start_answer(&mut self, seq: u64, answer: Answer, recorded: bool, done: Reply) {
        let Some(entry) = self.requests.begin_answer(seq) else {
            return;
        };
        let Delivery { record, deliver } =
            entry
                .place
                .way_back()
                .delivery(&entry.pending, &answer, !recorded);
        let tx = self.written_tx.clone();
        let finish = move |outcome: Option<Outcome>| {
            let result = deliver(outcome);
            let _ = tx.send(Written {
                seq,
                answer,
                result,
                done,
            });
        };
        match record {
            Some(op) => {
                let ack = Some(Ack::Then(Box::new(finish)));
                self.write(StoreMsg { op, ack });
            }
            None if self.answer_at_once() => finish(Some(Outcome::Done)),
            None => {
                tokio::task::spawn_blocking(move || finish(Some(Outcome::Done)));
            }
        }
    }

    /// How a delivery went: the request ends with the answer, or with the one that
    /// got there first, or is withdrawn; or it stays pending.
    fn on_written(&mut self, w: Written) {
        let Written {
            seq,
            answer,
            result,
            done,
        } = w;
        let reply = match result {
            Delivered::Done => {
                let status = answer.status.into();
                let how = End::Here { settled: true };
                self.end(seq, status, Some(answer.clone()), None, how);
                Ok(answer)
            }
            Delivered::Lost {
                by,
                theirs: Some(theirs),
            } => {
                self.finish(seq, theirs.status.into(), Some(*theirs), None);
                Err(RespondError::AlreadyAnswered(by))
            }
            Delivered::Lost { by, theirs: None } => {
                self.answer_failed(seq);
                Err(RespondError::AlreadyAnswered(by))
            }
            Delivered::Gone => {
                // Answered and picked up meanwhile, or withdrawn: either way nobody
                // waits any more. History keeps a recorded answer.
                let why = "the question was gone before the answer was written";
                self.finish(seq, Status::Withdrawn, None, Some(why.into()));
                Err(RespondError::Gone)
            }
            Delivered::Failed(e) => {
                tracing::error!("delivering the answer to request {seq} failed: {e}");
                self.answer_failed(seq);
                Err(e)
            }
        };
        if let Some(done) = done {
            let _ = done.send(reply);
        }
    }

    /// An answer could not be written: the request stays pending.
    fn answer_failed(&mut self, seq: u64) {
        self.requests.answer_failed(seq);
    }

    /// Takes a request out of the queue for good, records how it ended, and tells
    /// every follower: this is how the way back hears of it.
    fn finish(&mut self, seq: u64, status: Status, answer: Option<Answer>, reason: Option<String>) {
        self.end(seq, status, answer, reason, End::Here { settled: false });
    }

    fn end(
        &mut self,
        seq: u64,
        status: Status,
        answer: Option<Answer>,
        reason: Option<String>,
        how: End,
    ) {
        let Some(entry) = self.requests.remove(seq) else {
            return;
        };
        self.count_end(&entry, status, answer.as_ref());
        let pending = entry.pending.clone();
        // The way in forgets it; the way back records its end.
        match &entry.place {
            Place::Spool(place) => self.files.forget(place),
            Place::Stored(_) => self.stored.forget(&pending.request.id),
        }
        let ending = Ending {
            status,
            answer: answer.as_ref(),
            reason: &reason,
            // Another broker's end is its to record.
            settled: !matches!(how, End::Here { settled: false }),
        };
        if let Some(msg) = entry.place.way_back().end_record(&pending, &ending) {
            self.write(msg);
        }
        let finished = Finished {
            pending,
            status,
            answer,
            reason,
            here: !matches!(how, End::Elsewhere),
        };
        let _ = self.changes.send(Change::Finished(Arc::new(finished)));
    }

    /// Replaces a pending request's view (what responders see) and tells them.
    fn update_pending(&mut self, seq: u64, change: impl FnOnce(&mut PendingRequest)) {
        let Some(p) = self.requests.change_view(seq, change) else {
            return;
        };
        if let Some(place) = self.requests.get(seq).and_then(Entry::spool) {
            self.files.snapshot_dirty[place.spool] = true;
        }
        let _ = self.changes.send(Change::Updated(p));
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

    fn expire_timeouts(&mut self) {
        let now = Timestamp::now();
        for seq in self.requests.due(now) {
            let Some(entry) = self.requests.get(seq) else {
                continue;
            };
            if entry.deadline.is_some_and(|d| d <= now) && !entry.answering {
                let answer = Answer::timeout(&entry.pending.request);
                self.requests.set_deadline(seq, None);
                self.start_answer(seq, answer, false, None);
            }
        }
    }

    /// Ends the requests whose asking process has died: nobody will read their answer
    /// (unless its asker was stopped and kept it for its next ask, for a while).
    fn check_askers(&mut self) {
        let now = Timestamp::now();
        let expired: Vec<u64> = self
            .requests
            .iter()
            .filter(|e| !e.answering && e.pending.kept_until.is_some_and(|t| t <= now))
            .map(|e| e.pending.seq)
            .collect();
        for seq in expired {
            self.withdraw_kept(seq);
        }
        let mut alive: HashMap<(u32, Option<u64>), bool> = HashMap::new();
        let dead: Vec<u64> = self
            .requests
            .iter()
            .filter(|e| !e.answering && e.pending.kept_until.is_none())
            .filter_map(|e| {
                let a = e.pending.request.asker?;
                let ok = *alive
                    .entry((a.pid, a.start_time))
                    .or_insert_with(|| crate::agents::is_alive(a.pid, a.start_time));
                (!ok).then_some(e.pending.seq)
            })
            .collect();
        for seq in dead {
            if self.keep_for_its_asker(seq) {
                continue;
            }
            let Some(e) = self.requests.get(seq) else {
                continue;
            };
            let pid = e.pending.request.asker.map(|a| a.pid).unwrap_or_default();
            self.withdraw_question_file(seq);
            self.finish(
                seq,
                Status::Abandoned,
                None,
                Some(format!("the asking process {pid} exited without an answer")),
            );
        }
    }
}

/// Who ended a request, and whether history still needs to hear of it.
#[derive(Clone, Copy)]
enum End {
    /// This broker; `settled` when the store has the end already (a settle).
    Here { settled: bool },
    /// Another broker sharing the store; it has recorded and delivered the answer.
    Elsewhere,
}
