//! When the broker's history writes go to the store, apart from what they record.
//!
//! A spool question's history (`Asked`, `Finished`, activity notes) is held back
//! until the spool has been quiet for [`HISTORY_QUIET`], or the next tick, or a write
//! that must follow it: it is safe meanwhile, since the question's `journal/` link
//! (kept until its end is committed) and its `deliveries` row replay it after a
//! crash. A question answered at once then finds the writer free for the one record
//! on its asker's path, its `Delivering` row, instead of queued behind the last
//! question's history (which was most of a disk round trip). History trails by at
//! most a tick.

use std::time::Duration;

use crate::store::{StoreMsg, StoreOp, StoreSender};

/// Held history goes once the spool has been this quiet.
const HISTORY_QUIET: Duration = Duration::from_millis(1);
/// At most this many history writes are held back between ticks.
const MAX_HELD: usize = 1024;

/// The broker's writes to the store, and the ones held back a moment.
pub(super) struct HistoryWrites {
    store: StoreSender,
    /// Writes held back (see the module's comment).
    held: Vec<StoreMsg>,
    /// When the spool will have been quiet a moment, if nothing happens first: the
    /// held writes go then, and the spare files askers took are made again.
    quiet_due: Option<tokio::time::Instant>,
}

impl HistoryWrites {
    /// Writes to `store`.
    pub(super) fn new(store: StoreSender) -> HistoryWrites {
        HistoryWrites {
            store,
            held: Vec::new(),
            quiet_due: None,
        }
    }

    /// Sends `msg`, holding a spool question's history back (see the module's
    /// comment). `at_once`: an answer's record is written on this thread now, when
    /// nothing else waits for the broker.
    pub(super) fn write(&mut self, msg: StoreMsg, at_once: bool) {
        match msg.op {
            StoreOp::Asked { .. } | StoreOp::Finished { .. } => return self.hold(msg),
            StoreOp::Delivering { .. } | StoreOp::Settle { .. } if at_once => {
                self.store.write_now_or_send(msg);
                return;
            }
            StoreOp::Delivering { .. } => {}
            _ => self.release(),
        }
        self.store.send(msg);
    }

    /// Holds `msg` back with the spool's history; sends what is held, then it, once
    /// [`MAX_HELD`] writes wait.
    pub(super) fn hold(&mut self, msg: StoreMsg) {
        if self.held.len() >= MAX_HELD {
            self.release();
            self.store.send(msg);
            return;
        }
        self.held.push(msg);
        self.quiet_soon();
    }

    /// Something happened in a spool: the quiet moment starts again.
    pub(super) fn quiet_soon(&mut self) {
        self.quiet_due = Some(tokio::time::Instant::now() + HISTORY_QUIET);
    }

    /// When the spool will have been quiet a moment, if nothing happens first.
    pub(super) fn quiet_due(&self) -> Option<tokio::time::Instant> {
        self.quiet_due
    }

    /// Sends the held-back writes, in order.
    pub(super) fn release(&mut self) {
        self.quiet_due = None;
        for msg in self.held.drain(..) {
            self.store.send(msg);
        }
    }
}
