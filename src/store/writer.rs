//! The one task that writes history, in batches.
//!
//! The broker never awaits the database: it sends [`StoreOp`]s here and goes on. Ops
//! that pile up while a transaction commits go into the next one, so a burst of a
//! thousand answers costs a few commits, not a thousand.

use std::{
    sync::{
        Arc,
        atomic::{AtomicU64, AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use tokio::{
    sync::{mpsc, oneshot},
    task::JoinHandle,
};

use super::{Outcome, Store, StoreOp, sqlite_writer::SqliteWriter};

/// A write, and who to tell once it is committed.
#[derive(Debug)]
pub struct StoreMsg {
    /// The write.
    pub op: StoreOp,
    /// Told what the op did once committed, `None` if it could not be.
    pub ack: Option<Ack>,
}

/// What happens once an op is committed (or could not be: `None`).
pub enum Ack {
    /// Told on a channel.
    Tell(oneshot::Sender<Option<Outcome>>),
    /// Run on the writer, right after the commit: for work that must follow the
    /// commit at once (an answer file, whose asker is waiting) without another
    /// thread's wake-up in between. Keep it short: the next batch waits for it.
    Then(Box<dyn FnOnce(Option<Outcome>) + Send>),
}

impl Ack {
    fn done(self, outcome: Option<Outcome>) {
        match self {
            Ack::Tell(tx) => {
                let _ = tx.send(outcome);
            }
            Ack::Then(f) => f(outcome),
        }
    }
}

impl std::fmt::Debug for Ack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Ack::Tell(_) => "Ack::Tell",
            Ack::Then(_) => "Ack::Then",
        })
    }
}

impl From<oneshot::Sender<Option<Outcome>>> for Ack {
    fn from(tx: oneshot::Sender<Option<Outcome>>) -> Ack {
        Ack::Tell(tx)
    }
}

impl From<StoreOp> for StoreMsg {
    fn from(op: StoreOp) -> StoreMsg {
        StoreMsg { op, ack: None }
    }
}

const MAX_BATCH: usize = 1024;

/// History records that could not be written are kept and tried again this often
/// (a full disk, a database gone for a while), instead of being lost.
const PARKED_RETRY: Duration = Duration::from_secs(2);

/// At most this many are kept; past it the oldest go (with an error in the log).
const MAX_PARKED: usize = 100_000;

/// Ops taken from the channel for one transaction, with who to tell.
#[derive(Default)]
struct Batch {
    ops: Vec<StoreOp>,
    acks: Vec<(usize, Ack)>,
    /// History records whose writing failed, to go first in the next batch.
    parked: Vec<StoreMsg>,
}

impl Batch {
    /// Adds the parked records, then `first` and whatever else is already waiting, up
    /// to [`MAX_BATCH`].
    fn fill(&mut self, first: Option<StoreMsg>, rx: &mut mpsc::UnboundedReceiver<StoreMsg>) {
        let parked = std::mem::take(&mut self.parked);
        let mut pending = parked.into_iter().chain(first);
        let mut next = pending.next();
        while let Some(msg) = next.take() {
            if let Some(ack) = msg.ack {
                self.acks.push((self.ops.len(), ack));
            }
            self.ops.push(msg.op);
            next = pending.next();
            if next.is_none() && self.ops.len() < MAX_BATCH {
                next = rx.try_recv().ok();
            }
        }
    }

    /// Fills the batch from what [`next_msg`] returned. `Some(last)`: there is a batch
    /// to write, `last` when every sender is gone and the parked records get their
    /// final try; `None`: nothing is left to write.
    fn take(
        &mut self,
        next: Result<Option<StoreMsg>, ()>,
        rx: &mut mpsc::UnboundedReceiver<StoreMsg>,
    ) -> Option<bool> {
        match next {
            Ok(first) => {
                self.fill(first, rx);
                Some(false)
            }
            Err(()) if self.parked.is_empty() => None,
            Err(()) => {
                self.fill(None, rx);
                Some(true)
            }
        }
    }

    /// Tells everyone waiting how it went, and empties the batch. A history record
    /// that was not written is parked for the next batch instead; its waiter (the
    /// journal link's removal) hears only once it is.
    fn finish(&mut self, committed: Vec<Option<Outcome>>, began: Instant) {
        tracing::debug!(
            ops = self.ops.len(),
            micros = began.elapsed().as_micros() as u64,
            "history batch"
        );
        let mut acks: Vec<Option<Ack>> = (0..self.ops.len()).map(|_| None).collect();
        for (i, ack) in self.acks.drain(..) {
            acks[i] = Some(ack);
        }
        let mut parked = 0;
        for ((op, ack), outcome) in self.ops.drain(..).zip(acks).zip(committed) {
            match (outcome, &op) {
                (None, StoreOp::Asked { .. } | StoreOp::Finished { .. }) => {
                    self.parked.push(StoreMsg { op, ack });
                    parked += 1;
                }
                (outcome, _) => {
                    if let Some(ack) = ack {
                        ack.done(outcome);
                    }
                }
            }
        }
        if parked > 0 {
            tracing::warn!(
                "{parked} history record(s) kept to write again in {} s",
                PARKED_RETRY.as_secs()
            );
        }
        if self.parked.len() > MAX_PARKED {
            let lost = self.parked.len() - MAX_PARKED;
            tracing::error!("{lost} history record(s) dropped: too many kept unwritten");
            for msg in self.parked.drain(..lost) {
                if let Some(ack) = msg.ack {
                    ack.done(None);
                }
            }
        }
    }

    /// Gives up on the parked records (shutting down): their waiters hear nothing
    /// was written. The spool's journal still has their questions for the next start.
    fn abandon_parked(&mut self) {
        if !self.parked.is_empty() {
            tracing::error!(
                "{} history record(s) not written at shutdown; the next start replays \
                 their questions from the journal",
                self.parked.len()
            );
        }
        for msg in self.parked.drain(..) {
            if let Some(ack) = msg.ack {
                ack.done(None);
            }
        }
    }
}

/// The next op for the writer: waits for one, or (with records parked) at most
/// [`PARKED_RETRY`], returning `Ok(None)` to retry those. `Err(())` once every
/// sender is gone.
async fn next_msg(
    rx: &mut mpsc::UnboundedReceiver<StoreMsg>,
    parked: bool,
) -> Result<Option<StoreMsg>, ()> {
    if !parked {
        return rx.recv().await.map(Some).ok_or(());
    }
    match tokio::time::timeout(PARKED_RETRY, rx.recv()).await {
        Ok(Some(msg)) => Ok(Some(msg)),
        Ok(None) => Err(()),
        Err(_) => Ok(None),
    }
}

fn split(n: usize, e: &anyhow::Error) {
    tracing::warn!("writing a batch of {n} failed ({e:#}); writing them one at a time");
}

/// Tries per op: another process may hold the write lock for a moment.
const ATTEMPTS: u64 = 5;

/// All the pauses between tries of one batch's ops fit in this: a database that
/// refuses everything (a full disk) costs a batch about a second, not a second an op.
const RETRY_BUDGET: Duration = Duration::from_millis(1500);

/// When to try an op again.
struct Retries {
    deadline: Instant,
}

impl Retries {
    fn new() -> Retries {
        Retries {
            deadline: Instant::now() + RETRY_BUDGET,
        }
    }

    /// After failed try `attempt` of an op: the pause before the next, or `None`
    /// to give the op up.
    fn after(&self, attempt: u64, e: &anyhow::Error) -> Option<Duration> {
        let pause = Duration::from_millis(100 * attempt);
        if attempt < ATTEMPTS && Instant::now() + pause <= self.deadline {
            tracing::warn!("writing history failed (attempt {attempt}): {e:#}");
            Some(pause)
        } else {
            tracing::error!(
                "writing to the store failed: {e:#} (history records are kept and \
                 written again later; a request made over HTTP was not accepted)"
            );
            None
        }
    }
}

// A batch is one transaction, so one op the database refuses (a row a trigger or a
// constraint rejects, say) would take the others down with it. When a batch fails,
// its ops are written one at a time, each with its own tries: the bad one fails alone.

/// Writes `ops` on SQLite's writer; what each did, `None` where it failed.
fn write_blocking(writer: &SqliteWriter, ops: &[StoreOp]) -> Vec<Option<Outcome>> {
    if ops.len() > 1 {
        match writer.apply_blocking(ops) {
            Ok(outcomes) => return outcomes.into_iter().map(Some).collect(),
            Err(e) => split(ops.len(), &e),
        }
    }
    let retries = Retries::new();
    ops.iter()
        .map(|op| {
            let mut attempt = 1;
            loop {
                match writer.apply_blocking(std::slice::from_ref(op)) {
                    Ok(mut outcome) => return outcome.pop(),
                    Err(e) => std::thread::sleep(retries.after(attempt, &e)?),
                }
                attempt += 1;
            }
        })
        .collect()
}

/// Writes `ops` through the store (PostgreSQL); what each did, `None` where it failed.
async fn write(store: &Store, ops: &[StoreOp]) -> Vec<Option<Outcome>> {
    if ops.len() > 1 {
        match store.apply(ops).await {
            Ok(outcomes) => return outcomes.into_iter().map(Some).collect(),
            Err(e) => split(ops.len(), &e),
        }
    }
    let retries = Retries::new();
    let mut outcomes = Vec::with_capacity(ops.len());
    for op in ops {
        let mut attempt = 1;
        let outcome = loop {
            match store.apply(std::slice::from_ref(op)).await {
                Ok(mut o) => break o.pop(),
                Err(e) => match retries.after(attempt, &e) {
                    Some(pause) => tokio::time::sleep(pause).await,
                    None => break None,
                },
            }
            attempt += 1;
        };
        outcomes.push(outcome);
    }
    outcomes
}

/// Where writes go: to the writer's queue, or (SQLite) written at once when it is idle.
/// Cheap to clone.
#[derive(Clone, Debug)]
pub struct StoreSender {
    queue: mpsc::UnboundedSender<StoreMsg>,
    /// SQLite's write connection, for [`StoreSender::write_now_or_send`].
    direct: Option<Direct>,
}

/// SQLite's write connection, and how many writes are on their way to it.
#[derive(Clone, Debug)]
struct Direct {
    writer: Arc<SqliteWriter>,
    /// Writes queued for the writer or being written at once, not yet done. Only
    /// a write that finds none is written at once: under load, writes that come
    /// together commit together (a lone commit each cost a third more CPU a request).
    unwritten: Arc<AtomicUsize>,
    /// When a write that would have gone at once last had to be queued instead, in
    /// microseconds since [`micros_now`]'s epoch: within [`BATCHING`] of that, writes
    /// keep going to the writer's batches.
    last_queued: Arc<AtomicU64>,
}

/// How long after a write found the writer busy the next ones join its batches too:
/// writes coming this close together are a load, and commit best together.
const BATCHING: Duration = Duration::from_millis(2);

/// Microseconds since the first call in this process.
fn micros_now() -> u64 {
    static EPOCH: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    EPOCH.get_or_init(Instant::now).elapsed().as_micros() as u64
}

impl Direct {
    /// Whether a write may go at once: no write waits or is being written, and
    /// none waited lately. When it may, it counts as being written until
    /// [`Direct::written`].
    fn claim(&self) -> bool {
        let now = micros_now();
        let last = self.last_queued.load(Ordering::Relaxed);
        if now.saturating_sub(last) < BATCHING.as_micros() as u64 && last != 0 {
            return false;
        }
        if self.unwritten.fetch_add(1, Ordering::AcqRel) == 0 {
            return true;
        }
        self.unwritten.fetch_sub(1, Ordering::AcqRel);
        false
    }

    fn written(&self) {
        self.unwritten.fetch_sub(1, Ordering::AcqRel);
    }
}

impl StoreSender {
    /// A sender whose writer has stopped: every write is refused (for tests).
    #[cfg(test)]
    pub(crate) fn stopped() -> StoreSender {
        StoreSender {
            queue: mpsc::unbounded_channel().0,
            direct: None,
        }
    }

    /// Queues `msg` for the writer. If the writer has stopped (shutting down), work
    /// waiting on the commit still runs, told nothing was committed: an asker waiting
    /// on its answer file gets it anyway. False when it had stopped.
    pub fn send(&self, msg: StoreMsg) -> bool {
        if let Some(d) = &self.direct {
            d.unwritten.fetch_add(1, Ordering::AcqRel);
        }
        match self.queue.send(msg) {
            Ok(()) => true,
            Err(unsent) => {
                if let Some(d) = &self.direct {
                    d.unwritten.fetch_sub(1, Ordering::AcqRel);
                }
                if let Some(ack) = unsent.0.ack {
                    ack.done(None);
                }
                false
            }
        }
    }

    /// Writes `msg` on this thread if nothing else is being written or waits to be
    /// (here, or by another process holding the database's write lock), its
    /// acknowledgement included; otherwise queues it as [`StoreSender::send`] does.
    ///
    /// For the one write on an asker's path when nothing else is going on: handing it
    /// to the writer thread costs a wake-up of another thread, on a small virtual
    /// machine as much as the commit itself. Under load the writer is busy and the
    /// write joins its next batch as before. It never waits: a busy database sends it
    /// to the writer, which has the retries.
    pub fn write_now_or_send(&self, msg: StoreMsg) {
        if let Some(d) = &self.direct
            && crate::runtime::tuning::fast_paths()
            && d.claim()
        {
            let written = d.writer.try_apply_now(std::slice::from_ref(&msg.op));
            d.written();
            if let Some(mut outcomes) = written {
                if let Some(ack) = msg.ack {
                    ack.done(outcomes.pop());
                }
                return;
            }
        }
        if let Some(d) = &self.direct {
            d.last_queued.store(micros_now(), Ordering::Relaxed);
        }
        self.send(msg);
    }
}

/// Starts the writer. Drop every sender, then await the handle, to flush on shutdown.
///
/// On SQLite it is a thread of its own calling the store's blocking writer directly:
/// a hop to the blocking pool per batch would be most of a small batch's cost.
pub fn spawn_store_writer(store: Store) -> (StoreSender, JoinHandle<()>) {
    let (tx, mut rx) = mpsc::unbounded_channel::<StoreMsg>();
    if let Some(writer) = store.sqlite_writer() {
        let unwritten = Arc::new(AtomicUsize::new(0));
        let sender = StoreSender {
            queue: tx,
            direct: Some(Direct {
                writer: writer.clone(),
                unwritten: unwritten.clone(),
                last_queued: Arc::new(AtomicU64::new(0)),
            }),
        };
        let runtime = tokio::runtime::Handle::current();
        let handle = tokio::task::spawn_blocking(move || {
            let mut batch = Batch::default();
            loop {
                let next = runtime.block_on(next_msg(&mut rx, !batch.parked.is_empty()));
                let Some(last) = batch.take(next, &mut rx) else {
                    break;
                };
                let began = Instant::now();
                let taken = batch.ops.len();
                let committed = write_blocking(&writer, &batch.ops);
                batch.finish(committed, began);
                // Parked records are still on their way.
                unwritten.fetch_sub(taken - batch.parked.len(), Ordering::AcqRel);
                writer.maintain();
                if last {
                    break;
                }
            }
            unwritten.fetch_sub(batch.parked.len(), Ordering::AcqRel);
            batch.abandon_parked();
            runtime.block_on(store.close());
        });
        return (sender, handle);
    }
    let handle = tokio::spawn(async move {
        let mut batch = Batch::default();
        loop {
            let next = next_msg(&mut rx, !batch.parked.is_empty()).await;
            let Some(last) = batch.take(next, &mut rx) else {
                break;
            };
            let began = Instant::now();
            let committed = write(&store, &batch.ops).await;
            batch.finish(committed, began);
            if last {
                break;
            }
        }
        batch.abandon_parked();
        store.close().await;
    });
    let sender = StoreSender {
        queue: tx,
        direct: None,
    };
    (sender, handle)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A write goes at once only when no other is queued or being written, and not
    /// for [`BATCHING`] after one found the writer busy: a load's writes commit in
    /// the writer's batches.
    #[tokio::test]
    async fn writes_go_at_once_only_when_nothing_else_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&format!("sqlite://{}", dir.path().join("h.db").display()))
            .await
            .unwrap();
        let (sender, writer) = spawn_store_writer(store);
        let direct = sender.direct.clone().unwrap();
        assert!(direct.claim(), "idle: at once");
        assert!(!direct.claim(), "another being written: queued");
        direct.written();
        assert!(direct.claim());
        direct.written();
        direct
            .last_queued
            .store(micros_now().max(1), Ordering::Relaxed);
        assert!(!direct.claim(), "a write found the writer busy just now");
        drop((sender, direct));
        writer.await.unwrap();
    }
}
