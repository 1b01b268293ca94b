//! An agent-side wait for something in a run to change: one inotify instance over
//! a few folders, a signalfd for Ctrl-C and being stopped, and a condition looked at
//! on every wake. No sleep loop: a request or an answer is seen the moment it is
//! renamed into place. A look every second regardless catches what inotify cannot
//! report (an agent's process gone); polling, backing off, stands in only where
//! inotify is refused.

use std::{
    io,
    os::fd::AsFd,
    path::PathBuf,
    time::{Duration, Instant},
};

use nix::{
    poll::{PollFd, PollFlags, ppoll},
    sys::{
        inotify::{AddWatchFlags, InitFlags, Inotify},
        signal::{SigSet, Signal},
        signalfd::{SfdFlags, SignalFd},
        time::TimeSpec,
    },
};

/// How a wait ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Waited<T> {
    /// The condition held.
    Ready(T),
    /// The deadline passed.
    TimedOut,
    /// SIGINT, SIGTERM or SIGHUP.
    Interrupted(Signal),
    /// The caller's `stop` said so.
    Stopped,
}

/// Signals a waiting command takes through its signalfd instead of dying of them.
const SIGNALS: [Signal; 3] = [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP];

/// How often the condition is looked at with nothing reported.
const LOOK_EVERY: Duration = Duration::from_secs(1);

/// A wait over some folders, set up before the thing waited for can happen.
pub struct FileWait {
    inotify: Option<Inotify>,
    signals: Option<(SignalFd, SigSet)>,
}

impl Drop for FileWait {
    fn drop(&mut self) {
        if let Some((_, old)) = &self.signals {
            let _ = old.thread_set_mask();
        }
    }
}

impl FileWait {
    /// Watches `dirs`. `signals`: take SIGINT/SIGTERM/SIGHUP as the wait's end (a
    /// command's main thread), else leave them alone (a server's worker thread).
    pub fn new(dirs: &[PathBuf], signals: bool) -> io::Result<FileWait> {
        let signals = if signals {
            let mut set = SigSet::empty();
            for s in SIGNALS {
                set.add(s);
            }
            let old = SigSet::thread_get_mask().map_err(io::Error::from)?;
            set.thread_block().map_err(io::Error::from)?;
            let fd = SignalFd::with_flags(&set, SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC)
                .map_err(io::Error::from)?;
            Some((fd, old))
        } else {
            None
        };
        let inotify = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC)
            .ok()
            .filter(|_| std::env::var_os("HITL_FORCE_POLL").is_none());
        if let Some(ino) = &inotify {
            for dir in dirs {
                // A folder that is not there yet is looked at by the condition.
                let _ = ino.add_watch(
                    dir,
                    AddWatchFlags::IN_MOVED_TO
                        | AddWatchFlags::IN_CLOSE_WRITE
                        | AddWatchFlags::IN_CREATE
                        | AddWatchFlags::IN_DELETE
                        | AddWatchFlags::IN_MOVED_FROM,
                );
            }
        }
        Ok(FileWait { inotify, signals })
    }

    /// Waits until `ready` gives a value, `deadline` passes, a signal comes, or
    /// `stop` (asked every second) says to stop.
    pub fn wait<T>(
        &mut self,
        deadline: Option<Instant>,
        mut ready: impl FnMut() -> io::Result<Option<T>>,
        mut stop: impl FnMut() -> bool,
    ) -> io::Result<Waited<T>> {
        let mut poll_every = Duration::from_millis(5);
        let mut next_look = Instant::now() + LOOK_EVERY;
        loop {
            if let Some(t) = ready()? {
                return Ok(Waited::Ready(t));
            }
            let now = Instant::now();
            if deadline.is_some_and(|d| now >= d) {
                return Ok(Waited::TimedOut);
            }
            if now >= next_look {
                if stop() {
                    return Ok(Waited::Stopped);
                }
                next_look = now + LOOK_EVERY;
            }
            let mut wake = next_look;
            if let Some(d) = deadline {
                wake = wake.min(d);
            }
            if self.inotify.is_none() {
                wake = wake.min(now + poll_every);
                poll_every = (poll_every * 3 / 2).min(Duration::from_millis(250));
            }
            let timeout = TimeSpec::from_duration(wake.saturating_duration_since(now));
            let mut fds = Vec::with_capacity(2);
            if let Some((fd, _)) = &self.signals {
                fds.push(PollFd::new(fd.as_fd(), PollFlags::POLLIN));
            }
            if let Some(ino) = &self.inotify {
                fds.push(PollFd::new(ino.as_fd(), PollFlags::POLLIN));
            }
            match ppoll(&mut fds, Some(timeout), None) {
                Ok(_) | Err(nix::errno::Errno::EINTR) => {}
                Err(e) => return Err(e.into()),
            }
            if let Some((fd, _)) = &self.signals
                && let Ok(Some(info)) = fd.read_signal()
                && let Ok(sig) = Signal::try_from(info.ssi_signo as i32)
            {
                return Ok(Waited::Interrupted(sig));
            }
            if let Some(ino) = &self.inotify {
                // Drained: what changed is read by `ready` itself.
                while let Ok(events) = ino.read_events() {
                    if events.is_empty() {
                        break;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_renamed_into_place_ends_the_wait_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("answer");
        let mut wait = FileWait::new(&[dir.path().to_path_buf()], false).unwrap();
        let writer = {
            let target = target.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(50));
                let tmp = target.with_extension("tmp");
                std::fs::write(&tmp, "ANSWER=x\n").unwrap();
                std::fs::rename(&tmp, &target).unwrap();
            })
        };
        let got = wait
            .wait(
                Some(Instant::now() + Duration::from_secs(10)),
                || Ok(target.exists().then_some(())),
                || false,
            )
            .unwrap();
        writer.join().unwrap();
        assert_eq!(got, Waited::Ready(()));
        let none = wait
            .wait(
                Some(Instant::now() + Duration::from_millis(20)),
                || Ok(None::<()>),
                || false,
            )
            .unwrap();
        assert_eq!(none, Waited::TimedOut);
    }
}
