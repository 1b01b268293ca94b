//! The one task that writes history, in batches.
//!
//! The broker never awaits the database: it sends [`StoreOp`]s here and goes on. Ops
//! that pile up while a transaction commits go into the next one, so a burst of a
//! thousand answers costs a few commits, not a thousand.

use std::time::Duration;

use tokio::{sync::mpsc, task::JoinHandle};

use crate::store::{Store, StoreOp};

const MAX_BATCH: usize = 1024;

/// Starts the writer. Drop every sender, then await the handle, to flush on shutdown.
pub fn spawn_store_writer(store: Store) -> (mpsc::UnboundedSender<StoreOp>, JoinHandle<()>) {
    let (tx, mut rx) = mpsc::unbounded_channel::<StoreOp>();
    let handle = tokio::spawn(async move {
        let mut batch = Vec::with_capacity(MAX_BATCH);
        while let Some(op) = rx.recv().await {
            batch.push(op);
            while batch.len() < MAX_BATCH {
                match rx.try_recv() {
                    Ok(op) => batch.push(op),
                    Err(_) => break,
                }
            }
            // Retry a few times: another process may hold the write lock for a moment.
            for attempt in 1..=5 {
                match store.apply(&batch).await {
                    Ok(()) => break,
                    Err(e) if attempt < 5 => {
                        tracing::warn!("writing history failed (attempt {attempt}): {e:#}");
                        tokio::time::sleep(Duration::from_millis(100 * attempt)).await;
                    }
                    Err(e) => tracing::error!("writing history failed, {} records lost from history (the spool still has them): {e:#}", batch.len()),
                }
            }
            batch.clear();
        }
        store.close().await;
    });
    (tx, handle)
}
