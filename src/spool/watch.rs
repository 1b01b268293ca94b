//! The broker's one watcher over every project's spool.
//!
//! One inotify instance for all projects (the per-user default is 128 instances, and
//! the askers need theirs), two watches per project: `questions/` and `answers/`.
//! Events are reduced to "this name changed" or "this name is gone"; the broker reads
//! the file itself, so a lost or merged event costs nothing but a re-read. When the
//! kernel's queue overflows we are told to rescan, and do.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use notify::{
    EventKind, RecursiveMode, Watcher,
    event::{AccessKind, AccessMode, ModifyKind, RenameMode},
};
use tokio::sync::mpsc::UnboundedSender;

/// What happened in a watched folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SpoolEvent {
    /// A file appeared or was written. `closed` is true when a writer closed it, so a
    /// file that still does not parse is not going to get better.
    Changed {
        /// The full path.
        path: PathBuf,
        /// Closed after writing.
        closed: bool,
    },
    /// A name disappeared (deleted or renamed away).
    Removed {
        /// The full path.
        path: PathBuf,
    },
    /// Events were lost; every folder must be read again.
    Rescan,
}

/// Keeps the inotify instance alive; dropping it stops the events.
pub struct SpoolWatcher {
    inner: notify::RecommendedWatcher,
}

impl SpoolWatcher {
    /// Starts a watcher sending its events to `tx`.
    pub fn new(tx: UnboundedSender<SpoolEvent>) -> Result<SpoolWatcher> {
        let inner = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
            let ev = match res {
                Ok(ev) => ev,
                Err(e) => {
                    tracing::warn!("watcher error, rescanning: {e}");
                    let _ = tx.send(SpoolEvent::Rescan);
                    return;
                }
            };
            if ev.need_rescan() {
                let _ = tx.send(SpoolEvent::Rescan);
                return;
            }
            for out in translate(&ev) {
                let _ = tx.send(out);
            }
        })
        .context("starting the file watcher (inotify)")?;
        Ok(SpoolWatcher { inner })
    }

    /// Watches one folder, not its subfolders.
    pub fn watch(&mut self, dir: &Path) -> Result<()> {
        self.inner
            .watch(dir, RecursiveMode::NonRecursive)
            .with_context(|| format!("watching {}", dir.display()))
    }
}

fn translate(ev: &notify::Event) -> Vec<SpoolEvent> {
    let changed = |closed| {
        ev.paths
            .iter()
            .map(|p| SpoolEvent::Changed {
                path: p.clone(),
                closed,
            })
            .collect()
    };
    match ev.kind {
        EventKind::Create(_) | EventKind::Modify(ModifyKind::Data(_)) => changed(false),
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => changed(true),
        EventKind::Modify(ModifyKind::Name(RenameMode::To)) => changed(true),
        EventKind::Modify(ModifyKind::Name(RenameMode::From)) | EventKind::Remove(_) => ev
            .paths
            .iter()
            .map(|p| SpoolEvent::Removed { path: p.clone() })
            .collect(),
        EventKind::Modify(ModifyKind::Name(RenameMode::Both)) => {
            let mut out = Vec::new();
            if let Some(from) = ev.paths.first() {
                out.push(SpoolEvent::Removed { path: from.clone() });
            }
            if let Some(to) = ev.paths.get(1) {
                out.push(SpoolEvent::Changed {
                    path: to.clone(),
                    closed: true,
                });
            }
            out
        }
        _ => Vec::new(),
    }
}
