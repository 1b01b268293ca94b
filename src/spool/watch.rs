//! The broker's one watcher over every project's spool.
//!
//! One inotify instance for all projects (the per-user default is 128 instances, and
//! the askers need theirs), two watches per project: `questions/` and `answers/`.
//! Events are reduced to "this name changed" or "this name is gone"; the broker reads
//! the file itself, so a lost or merged event costs nothing but a re-read. When the
//! kernel's queue overflows we are told to rescan, and do.
//!
//! The inotify descriptor is read by a task on the broker's own runtime (tokio's
//! reactor wakes it), not by a watcher thread of its own: every question would
//! otherwise pay one more thread's wake-up before the broker sees it, which was a
//! tenth of a whole `hitl ask`.

use std::{
    collections::HashMap,
    os::fd::{AsFd, AsRawFd, RawFd},
    path::{Path, PathBuf},
    sync::{Arc, Mutex},
};

use anyhow::{Context, Result};
use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify, InotifyEvent, WatchDescriptor};
use tokio::{io::unix::AsyncFd, sync::mpsc::UnboundedSender, task::JoinHandle};

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

/// The inotify instance, for tokio's reactor.
struct Fd(Inotify);

impl AsRawFd for Fd {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_fd().as_raw_fd()
    }
}

/// The watched folders, by watch descriptor.
type Folders = Arc<Mutex<HashMap<WatchDescriptor, PathBuf>>>;

/// Watches spool folders until dropped. Must be made inside a tokio runtime.
pub struct SpoolWatcher {
    fd: Arc<AsyncFd<Fd>>,
    folders: Folders,
    task: JoinHandle<()>,
}

/// What each watched folder reports.
fn mask() -> AddWatchFlags {
    AddWatchFlags::IN_CREATE
        | AddWatchFlags::IN_MODIFY
        | AddWatchFlags::IN_CLOSE_WRITE
        | AddWatchFlags::IN_MOVED_TO
        | AddWatchFlags::IN_MOVED_FROM
        | AddWatchFlags::IN_DELETE
        | AddWatchFlags::IN_ONLYDIR
}

impl SpoolWatcher {
    /// Starts a watcher sending its events to `tx`.
    pub fn new(tx: UnboundedSender<SpoolEvent>) -> Result<SpoolWatcher> {
        let inotify = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC)
            .context("starting the file watcher (inotify)")?;
        // SAFETY: `Fd` owns the inotify descriptor, closes it only when dropped (after
        // the registration, which it lives inside), and always returns that same fd.
        #[allow(unsafe_code)] // tokio's registration of a raw fd it does not own
        let registered =
            unsafe { AsyncFd::register_with_interest(Fd(inotify), tokio::io::Interest::READABLE) };
        let fd = Arc::new(
            registered
                .map_err(std::io::Error::from)
                .context("watching the inotify descriptor")?,
        );
        let folders: Folders = Arc::default();
        let task = tokio::spawn(read_events(fd.clone(), folders.clone(), tx));
        Ok(SpoolWatcher { fd, folders, task })
    }

    /// Watches one folder, not its subfolders.
    pub fn watch(&mut self, dir: &Path) -> Result<()> {
        let wd = self
            .fd
            .get_ref()
            .0
            .add_watch(dir, mask())
            .with_context(|| format!("watching {}", dir.display()))?;
        self.folders
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(wd, dir.to_path_buf());
        Ok(())
    }
}

impl Drop for SpoolWatcher {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Reads events as the kernel queues them and hands them to the broker.
async fn read_events(fd: Arc<AsyncFd<Fd>>, folders: Folders, tx: UnboundedSender<SpoolEvent>) {
    loop {
        let mut ready = match fd.readable().await {
            Ok(r) => r,
            Err(e) => {
                tracing::error!("the file watcher stopped ({e}); the periodic rescan goes on");
                return;
            }
        };
        match ready.get_inner().0.read_events() {
            Ok(events) => {
                let folders = folders.lock().unwrap_or_else(|e| e.into_inner());
                for ev in &events {
                    if let Some(out) = translate(ev, &folders)
                        && tx.send(out).is_err()
                    {
                        return;
                    }
                }
            }
            Err(nix::errno::Errno::EAGAIN) => ready.clear_ready(),
            Err(e) => {
                tracing::warn!("reading file events failed ({e}); rescanning");
                if tx.send(SpoolEvent::Rescan).is_err() {
                    return;
                }
            }
        }
    }
}

fn translate(ev: &InotifyEvent, folders: &HashMap<WatchDescriptor, PathBuf>) -> Option<SpoolEvent> {
    if ev.mask.contains(AddWatchFlags::IN_Q_OVERFLOW) {
        return Some(SpoolEvent::Rescan);
    }
    let path = folders.get(&ev.wd)?.join(ev.name.as_ref()?);
    let m = ev.mask;
    if m.intersects(AddWatchFlags::IN_MOVED_FROM | AddWatchFlags::IN_DELETE) {
        Some(SpoolEvent::Removed { path })
    } else if m.intersects(AddWatchFlags::IN_CLOSE_WRITE | AddWatchFlags::IN_MOVED_TO) {
        Some(SpoolEvent::Changed { path, closed: true })
    } else if m.intersects(AddWatchFlags::IN_CREATE | AddWatchFlags::IN_MODIFY) {
        Some(SpoolEvent::Changed {
            path,
            closed: false,
        })
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn reports_writes_renames_and_removals() {
        let dir = tempfile::tempdir().unwrap();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let mut w = SpoolWatcher::new(tx).unwrap();
        w.watch(dir.path()).unwrap();
        let a = dir.path().join("a.json");
        std::fs::write(&a, b"{}").unwrap();
        let b = dir.path().join("b.json");
        std::fs::rename(&a, &b).unwrap();
        std::fs::remove_file(&b).unwrap();
        let mut seen = Vec::new();
        while seen.last() != Some(&SpoolEvent::Removed { path: b.clone() }) {
            let ev = tokio::time::timeout(std::time::Duration::from_secs(5), rx.recv())
                .await
                .expect("the watcher reported nothing")
                .unwrap();
            seen.push(ev);
        }
        assert!(seen.contains(&SpoolEvent::Changed {
            path: a.clone(),
            closed: true
        }));
        assert!(seen.contains(&SpoolEvent::Removed { path: a }));
        assert!(seen.contains(&SpoolEvent::Changed {
            path: b,
            closed: true
        }));
    }
}
