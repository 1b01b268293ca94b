//! The one task that writes history, in batches.
//!
//! The broker never awaits the database: it sends [`StoreOp`]s here and goes on. Ops
//! that pile up while a transaction commits go into the next one, so a burst of a
//! thousand answers costs a few commits, not a thousand.

use std::time::Duration;

use tokio::{
    sync::{mpsc, oneshot},
    task::JoinHandle,
};

use crate::store::{Outcome, Store, StoreOp};

/// A write, and who to tell once it is committed.
#[derive(Debug)]
pub struct StoreMsg {
    /// The write.
    pub op: StoreOp,
    /// Told what the op did once committed, `None` if it could not be.
    pub ack: Option<oneshot::Sender<Option<Outcome>>>,
}

impl From<StoreOp> for StoreMsg {
    fn from(op: StoreOp) -> StoreMsg {
        StoreMsg { op, ack: None }
    }
}

const MAX_BATCH: usize = 1024;

/// Starts the writer. Drop every sender, then await the handle, to flush on shutdown.
pub fn spawn_store_writer(store: Store) -> (mpsc::UnboundedSender<StoreMsg>, JoinHandle<()>) {
    let (tx, mut rx) = mpsc::unbounded_channel::<StoreMsg>();
    let handle = tokio::spawn(async move {
        let mut batch = Vec::with_capacity(MAX_BATCH);
        let mut acks: Vec<(usize, oneshot::Sender<Option<Outcome>>)> = Vec::new();
        while let Some(msg) = rx.recv().await {
            let mut next = Some(msg);
            while let Some(msg) = next.take() {
                if let Some(ack) = msg.ack {
                    acks.push((batch.len(), ack));
                }
                batch.push(msg.op);
                if batch.len() < MAX_BATCH {
                    next = rx.try_recv().ok();
                }
            }
            let mut committed = None;
            // Retry a few times: another process may hold the write lock for a moment.
            let began = std::time::Instant::now();
            for attempt in 1..=5 {
                match store.apply(&batch).await {
                    Ok(outcomes) => {
                        committed = Some(outcomes);
                        break;
                    }
                    Err(e) if attempt < 5 => {
                        tracing::warn!("writing history failed (attempt {attempt}): {e:#}");
                        tokio::time::sleep(Duration::from_millis(100 * attempt)).await;
                    }
                    Err(e) => tracing::error!(
                        "writing history failed, {} records lost from history (the spool still has them): {e:#}",
                        batch.len()
                    ),
                }
            }
            tracing::debug!(
                ops = batch.len(),
                micros = began.elapsed().as_micros() as u64,
                "history batch"
            );
            for (i, ack) in acks.drain(..) {
                let _ = ack.send(committed.as_ref().and_then(|o| o.get(i).cloned()));
            }
            batch.clear();
        }
        store.close().await;
    });
    (tx, handle)
}
