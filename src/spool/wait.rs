//! The asker's side: wait for one answer file to appear.
//!
//! One thread, one `ppoll(2)` over a signalfd and (once set up) an inotify fd: the
//! answer's arrival, Ctrl-C and the deadline all wake the same call, so a short-lived
//! `hitl ask` needs no runtime and no helper threads.
//!
//! A listener usually answers within a millisecond (`--auto-answer`, a policy, a
//! question answered from a queue already open). Whoever writes an answer file then
//! *nudges* its asker ([`nudge`]): one `SIGURG`, which the asker blocks and reads from
//! its signalfd, so it sleeps until the answer is there and wakes at once. For its
//! first [`NUDGE_FOR`] the wait relies on that (and looks once more at its end, for a
//! writer that does not nudge), and only then sets up inotify: an inotify instance
//! costs more to close (the kernel waits for an RCU grace period, tens of microseconds
//! and at times milliseconds) than that whole first phase. Looking for the file every
//! few microseconds instead cost more still: on a machine with two cores each look
//! pre-empted the listener writing the answer. A question that waits for a person is
//! then woken by inotify as always. inotify is refused when the user's 128 instances
//! are used up (EMFILE) or the watch table is full (ENOSPC), and it sees nothing on
//! network file systems; only then do we poll, backing off.
//!
//! `SIGURG` because its default action is to do nothing: a nudge that reached some
//! other process (a question file naming a pid it does not own) would be ignored, and
//! [`nudge`] only signals a process that blocks it, as a waiting asker does.

use std::{
    io,
    ops::ControlFlow,
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
    /// The tick said to stop waiting.
    Stopped,
}

/// How long the wait relies on being nudged before it sets up inotify.
const NUDGE_FOR: Duration = Duration::from_millis(3);

/// The signal that tells an asker its answer file is there: ignored by default.
const NUDGE: Signal = Signal::SIGURG;

/// How the wait learns of the file.
enum Watch {
    /// Woken by a nudge (or a look at the file when the time is up), until the
    /// instant held; then inotify.
    Nudge(Instant),
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
const WITHDRAW: [Signal; 3] = [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP];

/// Tells the asker `pid` (started at `start_time`, when known) that its answer file
/// is in place, so it need not look for it. The nudge goes to the process's main
/// thread, and only if that thread blocks the nudge's signal: that is how a waiting
/// asker takes it, and any other process is left alone. Best effort: an asker not
/// nudged (one waiting in another thread) finds the file a little later.
pub fn nudge(pid: u32, start_time: Option<u64>) {
    if !crate::runtime::tuning::fast_paths() {
        return;
    }
    let Some(s) = crate::runtime::process::main_thread_stat(pid) else {
        return;
    };
    let bit = 1u64 << (NUDGE as i32 - 1);
    if start_time.is_some_and(|t| t != s.starttime) || s.blocked & bit == 0 {
        return;
    }
    let Ok(pid) = i32::try_from(pid) else {
        return;
    };
    // To the main thread itself, where the asker waits: a signal for the whole
    // process could go to another of its threads, which does not block it (and so
    // drops it) instead.
    // SAFETY: tgkill takes three integers and touches no memory of ours.
    #[allow(unsafe_code)] // tgkill: neither std nor nix signals one thread of another process
    unsafe {
        nix::libc::syscall(nix::libc::SYS_tgkill, pid, pid, NUDGE as i32);
    }
}

impl AnswerWait {
    /// Prepares to wait for `dir/name`. Blocks SIGINT/SIGTERM/SIGHUP for this thread so
    /// they arrive through the signalfd; call it before starting other threads.
    pub fn new(dir: &Path, name: &str) -> io::Result<AnswerWait> {
        // Blocking the nudge's signal is what asks for it: without the fast paths,
        // the broker is not asked, and the wait is inotify's from the start.
        let fast = crate::runtime::tuning::fast_paths();
        let mut set = SigSet::empty();
        for sig in WITHDRAW.into_iter().chain(fast.then_some(NUDGE)) {
            set.add(sig);
        }
        let old_mask = SigSet::thread_get_mask().map_err(io::Error::from)?;
        set.thread_block().map_err(io::Error::from)?;
        let signals = SignalFd::with_flags(&set, SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC)
            .map_err(io::Error::from)?;
        let watch = if super::is_network_fs(dir) || std::env::var_os("HITL_FORCE_POLL").is_some() {
            Watch::Poll
        } else {
            // Past at once without the fast paths: inotify from the first wait.
            Watch::Nudge(Instant::now() + if fast { NUDGE_FOR } else { Duration::ZERO })
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
    /// runs every `tick` while waiting (the agent's heartbeat, a look at whether
    /// anyone will answer) and may end the wait.
    pub fn wait(
        &mut self,
        deadline: Option<Instant>,
        tick: Duration,
        mut on_tick: impl FnMut() -> ControlFlow<()>,
    ) -> io::Result<WaitOutcome> {
        let mut next_tick = Instant::now() + tick;
        let mut poll_interval = Duration::from_millis(2);
        loop {
            // Checked on every wake-up: covers an answer written before the watch was
            // set, a lost event, a nudge, and the polling mode.
            if self.target.exists() {
                return Ok(WaitOutcome::Appeared);
            }
            let now = Instant::now();
            if deadline.is_some_and(|d| now >= d) {
                return Ok(WaitOutcome::TimedOut);
            }
            if now >= next_tick {
                if on_tick().is_break() {
                    return Ok(WaitOutcome::Stopped);
                }
                next_tick = now + tick;
            }
            if let Watch::Nudge(until) = self.watch
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
                Watch::Nudge(until) => wake = wake.min(until),
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
                && sig != NUDGE
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader};
    use std::process::{Child, ChildStdout, Command, Stdio};

    /// A Python process that reports, once a second, whether a SIGURG reached it:
    /// `blocked` blocks the signal and finds it pending, as an asker's signalfd
    /// does; otherwise a handler would report it.
    fn witness(blocked: bool) -> (Child, BufReader<ChildStdout>, u64) {
        let script = if blocked {
            // Not sigtimedwait: the kernel unblocks the signals it waits for.
            "import signal,time\n\
             signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGURG})\n\
             print('ready', flush=True)\n\
             while True:\n\
             \x20   time.sleep(1)\n\
             \x20   got = signal.SIGURG in signal.sigpending()\n\
             \x20   if got: signal.sigwait({signal.SIGURG})\n\
             \x20   print('nudged' if got else 'idle', flush=True)\n"
        } else {
            "import signal,time\n\
             signal.signal(signal.SIGURG, lambda *a: print('handled', flush=True))\n\
             print('ready', flush=True)\n\
             while True:\n\
             \x20   time.sleep(1)\n\
             \x20   print('idle', flush=True)\n"
        };
        let mut child = Command::new("python3")
            .args(["-c", script])
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3 runs this test's witness");
        let mut out = BufReader::new(child.stdout.take().unwrap());
        assert_eq!(line(&mut out), "ready");
        let start = crate::runtime::process::start_time(child.id()).unwrap();
        (child, out, start)
    }

    fn line(out: &mut BufReader<ChildStdout>) -> String {
        let mut l = String::new();
        out.read_line(&mut l).unwrap();
        l.trim().to_string()
    }

    #[test]
    fn a_nudge_reaches_a_waiting_asker_and_no_one_else() {
        let (mut asker, mut out, start) = witness(true);
        if !crate::runtime::tuning::fast_paths() {
            // The plain way nudges nobody: askers wait on inotify alone.
            nudge(asker.id(), Some(start));
            assert_eq!(line(&mut out), "idle");
            let _ = asker.kill();
            let _ = asker.wait();
            return;
        }
        // Someone else under a reused pid: left alone.
        nudge(asker.id(), Some(start + 1));
        assert_eq!(line(&mut out), "idle");
        nudge(asker.id(), Some(start));
        assert_eq!(line(&mut out), "nudged");
        let _ = asker.kill();
        let _ = asker.wait();

        // A process that does not block the signal is not sent it, even one that
        // would notice it.
        let (mut other, mut out, start) = witness(false);
        nudge(other.id(), Some(start));
        assert_eq!(line(&mut out), "idle");
        let _ = other.kill();
        let _ = other.wait();
    }
}
