//! Processes identified by pid *and* start time, so that a reused pid is never
//! mistaken for the process it once named. Shared by the agent registry, the spool
//! (stale temp files) and the listener file.

use procfs::process::Process;

/// A process, identified so that a reused pid is not mistaken for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcessRef {
    /// Its pid.
    pub pid: u32,
    /// Its start time in clock ticks since boot.
    pub start_time: u64,
}

/// Reads a process's start time and state; `None` when it does not exist.
pub(crate) fn stat(pid: u32) -> Option<procfs::process::Stat> {
    Process::new(pid as i32).ok()?.stat().ok()
}

/// The start time of `pid`, if it is running.
pub fn start_time(pid: u32) -> Option<u64> {
    stat(pid).map(|s| s.starttime)
}

/// This process, as a [`ProcessRef`].
pub fn this_process() -> ProcessRef {
    let pid = std::process::id();
    ProcessRef {
        pid,
        start_time: start_time(pid).unwrap_or(0),
    }
}

/// True while `pid` runs and, when `start` is given, is still the same process.
/// Zombies count as dead: they will never read an answer.
pub fn is_alive(pid: u32, start: Option<u64>) -> bool {
    match stat(pid) {
        Some(s) => s.state != 'Z' && s.state != 'X' && start.is_none_or(|t| t == s.starttime),
        None => false,
    }
}
