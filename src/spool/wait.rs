//! The asker's side: wait for one answer file to appear.
//!
//! One thread, one `ppoll(2)` over a signalfd and (once set up) an inotify fd: the
//! answer's arrival, Ctrl-C and the deadline all wake the same call, so a short-lived
//! `hitl ask` needs no runtime and no helper threads.
//!
//! A listener usually answers within a millisecond (`--auto-answer`, a policy, a
//! question answered from a queue already open), so the wait first looks for the file
//! every [`SPIN_EVERY`] for [`SPIN_FOR`], and only then sets up inotify: an inotify
//! instance costs more to close (the kernel waits for an RCU grace period, tens of
//! microseconds and at times milliseconds) than that whole first phase. A question that
//! waits for a person is then woken by inotify as always. inotify is refused when the
//! user's 128 instances are used up (EMFILE) or the watch table is full (ENOSPC), and
//! it sees nothing on network file systems; only then do we poll, backing off.

use std::{
    io,
    os::fd::AsFd,
    path::{Path, PathBuf},
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

/// Why [`AnswerWait::wait`] returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitOutcome {
    /// The file exists now.
    Appeared,
    /// The deadline passed first.
    TimedOut,
    /// SIGINT, SIGTERM or SIGHUP arrived.
    Interrupted(Signal),
}

/// How long the wait looks for the answer file before it sets up inotify.
const SPIN_FOR: Duration = Duration::from_millis(3);
/// How often it looks meanwhile.
const SPIN_EVERY: Duration = Duration::from_micros(50);

/// How the wait learns of the file.
enum Watch {
    /// Looking every [`SPIN_EVERY`] until the deadline, then inotify.
    Spin(Instant),
    /// inotify: woken by the kernel the moment the file is put in place.
    Inotify(Inotify),
    /// Polling with back-off: inotify was refused or cannot see this file system.
    Poll,
}

/// A wait for `dir/name`, set up *before* the question is written so that an answer
/// arriving at once is not missed (the first look for the file comes after the write).
pub struct AnswerWait {
    dir: PathBuf,
    target: PathBuf,
    name: String,
    watch: Watch,
    signals: SignalFd,
    /// The signal mask before [`AnswerWait::new`] blocked ours; restored on drop, since
    /// a blocked mask is inherited by every process this thread spawns later.
    old_mask: SigSet,
}

impl Drop for AnswerWait {
    fn drop(&mut self) {
        let _ = self.old_mask.thread_set_mask();
    }
}

/// The signals that withdraw a question instead of killing the asker outright.
fn withdraw_signals() -> SigSet {
    let mut set = SigSet::empty();
    set.add(Signal::SIGINT);
    set.add(Signal::SIGTERM);
    set.add(Signal::SIGHUP);
    set
}

impl AnswerWait {
    /// Prepares to wait for `dir/name`. Blocks SIGINT/SIGTERM/SIGHUP for this thread so
    /// they arrive through the signalfd; call it before starting other threads.
    pub fn new(dir: &Path, name: &str) -> io::Result<AnswerWait> {
        let set = withdraw_signals();
        let old_mask = SigSet::thread_get_mask().map_err(io::Error::from)?;
        set.thread_block().map_err(io::Error::from)?;
        let signals = SignalFd::with_flags(&set, SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC)
            .map_err(io::Error::from)?;
        let watch = if super::is_network_fs(dir) || std::env::var_os("HITL_FORCE_POLL").is_some() {
            Watch::Poll
        } else {
            // Sleeps of 50 microseconds need a timer that keeps to them (the
            // default slack, 50 microseconds, would double them); this only concerns
            // this process.
            let _ = nix::sys::prctl::set_timerslack(1_000);
            Watch::Spin(Instant::now() + SPIN_FOR)
        };
        Ok(AnswerWait {
            dir: dir.to_path_buf(),
            target: dir.join(name),
            name: name.to_string(),
            watch,
            signals,
            old_mask,
        })
    }

    /// Leaves the first phase: inotify from now on, or polling if it is refused.
    fn start_inotify(&mut self) {
        self.watch = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC)
            .and_then(|ino| {
                ino.add_watch(
                    &self.dir,
                    AddWatchFlags::IN_MOVED_TO
                        | AddWatchFlags::IN_CLOSE_WRITE
                        | AddWatchFlags::IN_CREATE,
                )
                .map(|_| ino)
            })
            .map(Watch::Inotify)
            .unwrap_or_else(|e| {
                tracing::debug!("inotify refused ({e}); polling instead");
                Watch::Poll
            });
    }

    /// Waits until the file exists, the deadline passes or a signal arrives. `on_tick`
    /// runs every `tick` while waiting (the agent's heartbeat).
    pub fn wait(
        &mut self,
        deadline: Option<Instant>,
        tick: Duration,
        mut on_tick: impl FnMut(),
    ) -> io::Result<WaitOutcome> {
        let mut next_tick = Instant::now() + tick;
        let mut poll_interval = Duration::from_millis(2);
        loop {
            // Checked on every wake-up: covers an answer written before the watch was
            // set, a lost event, and the spinning and polling modes.
            if self.target.exists() {
                return Ok(WaitOutcome::Appeared);
            }
            let now = Instant::now();
            if deadline.is_some_and(|d| now >= d) {
                return Ok(WaitOutcome::TimedOut);
            }
            if now >= next_tick {
                on_tick();
                next_tick = now + tick;
            }
            if let Watch::Spin(until) = self.watch
                && now >= until
            {
                self.start_inotify();
                // Look once more now that the watch is set: nothing can slip between.
                continue;
            }
            let mut wake = next_tick;
            if let Some(d) = deadline {
                wake = wake.min(d);
            }
            match self.watch {
                Watch::Spin(until) => wake = wake.min(until).min(now + SPIN_EVERY),
                Watch::Poll => {
                    wake = wake.min(now + poll_interval);
                    poll_interval = (poll_interval * 3 / 2).min(Duration::from_millis(100));
                }
                Watch::Inotify(_) => {}
            }
            let timeout = TimeSpec::from_duration(wake.saturating_duration_since(now));

            let mut fds = vec![PollFd::new(self.signals.as_fd(), PollFlags::POLLIN)];
            if let Watch::Inotify(ino) = &self.watch {
                fds.push(PollFd::new(ino.as_fd(), PollFlags::POLLIN));
            }
            match ppoll(&mut fds, Some(timeout), None) {
                Ok(_) => {}
                Err(nix::errno::Errno::EINTR) => continue,
                Err(e) => return Err(e.into()),
            }
            if let Ok(Some(info)) = self.signals.read_signal()
                && let Ok(sig) = Signal::try_from(info.ssi_signo as i32)
            {
                return Ok(WaitOutcome::Interrupted(sig));
            }
            if let Watch::Inotify(ino) = &self.watch {
                match ino.read_events() {
                    Ok(events) => {
                        if events
                            .iter()
                            .any(|e| e.name.as_deref().is_some_and(|n| n == self.name.as_str()))
                        {
                            return Ok(WaitOutcome::Appeared);
                        }
                    }
                    Err(nix::errno::Errno::EAGAIN) => {}
                    Err(e) => return Err(e.into()),
                }
            }
        }
    }
}
