//! The asker's side: wait for one answer file to appear, without polling.
//!
//! One thread, one `poll(2)` over an inotify fd and a signalfd: the answer's arrival,
//! Ctrl-C and the deadline all wake the same call, so a short-lived `hitl ask` needs no
//! runtime and no helper threads. inotify is refused when the user's 128 instances are
//! used up (EMFILE) or the watch table is full (ENOSPC), and it sees nothing on network
//! file systems; only then do we poll, with a short interval that backs off.

use std::{
    io,
    os::fd::AsFd,
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use nix::{
    poll::{PollFd, PollFlags, PollTimeout, poll},
    sys::{
        inotify::{AddWatchFlags, InitFlags, Inotify},
        signal::{SigSet, Signal},
        signalfd::{SfdFlags, SignalFd},
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

/// A wait for `dir/name`, set up *before* the question is written so that an answer
/// arriving at once is not missed.
pub struct AnswerWait {
    target: PathBuf,
    name: String,
    inotify: Option<Inotify>,
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
        let inotify = if super::is_network_fs(dir) || std::env::var_os("HITL_FORCE_POLL").is_some()
        {
            None
        } else {
            Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC)
                .and_then(|ino| {
                    ino.add_watch(
                        dir,
                        AddWatchFlags::IN_MOVED_TO
                            | AddWatchFlags::IN_CLOSE_WRITE
                            | AddWatchFlags::IN_CREATE,
                    )
                    .map(|_| ino)
                })
                .map_err(|e| tracing::debug!("inotify refused ({e}); polling instead"))
                .ok()
        };
        Ok(AnswerWait {
            target: dir.join(name),
            name: name.to_string(),
            inotify,
            signals,
            old_mask,
        })
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
            // set, a lost event, and the polling mode.
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
            let mut wake = next_tick;
            if let Some(d) = deadline {
                wake = wake.min(d);
            }
            if self.inotify.is_none() {
                wake = wake.min(now + poll_interval);
                poll_interval = (poll_interval * 3 / 2).min(Duration::from_millis(100));
            }
            let millis = wake
                .saturating_duration_since(now)
                .as_millis()
                .min(i32::MAX as u128);
            let timeout = PollTimeout::try_from(millis as u32 + 1).unwrap_or(PollTimeout::MAX);

            let mut fds = vec![PollFd::new(self.signals.as_fd(), PollFlags::POLLIN)];
            if let Some(ino) = &self.inotify {
                fds.push(PollFd::new(ino.as_fd(), PollFlags::POLLIN));
            }
            match poll(&mut fds, timeout) {
                Ok(_) => {}
                Err(nix::errno::Errno::EINTR) => continue,
                Err(e) => return Err(e.into()),
            }
            if let Ok(Some(info)) = self.signals.read_signal()
                && let Ok(sig) = Signal::try_from(info.ssi_signo as i32)
            {
                return Ok(WaitOutcome::Interrupted(sig));
            }
            if let Some(ino) = &self.inotify {
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
