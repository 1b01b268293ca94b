//! Processes identified by pid *and* start time, so that a reused pid is never
//! mistaken for the process it once named. Shared by the agent registry, the spool
//! (stale temp files) and the listener file.

use std::io::Read;

/// A process, identified so that a reused pid is not mistaken for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcessRef {
    /// Its pid.
    pub pid: u32,
    /// Its start time in clock ticks since boot.
    pub start_time: u64,
}

/// The fields of `/proc/PID/stat` this program uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Stat {
    /// The executable's name (at most 15 bytes).
    pub comm: String,
    /// R, S, D, Z, T, X…
    pub state: char,
    /// Its parent.
    pub ppid: i32,
    /// Its session (the session leader's pid).
    pub session: i32,
    /// When it started, in clock ticks since boot.
    pub starttime: u64,
    /// The signals its (main) thread blocks, bit `n - 1` for signal `n`.
    pub blocked: u64,
}

/// Reads a process's stat line; `None` when it does not exist.
///
/// One open and one read of `/proc/PID/stat`, parsed here: every `hitl ask` walks its
/// ancestors with this, and the general-purpose reader's extra system calls per
/// process (a directory handle, a stat, a seek) were a fifth of an ask's own work.
pub(crate) fn stat(pid: u32) -> Option<Stat> {
    read_stat(&format!("/proc/{pid}/stat"))
}

/// Like [`stat`], from the process's main thread alone (`/proc/PID/task/PID/stat`):
/// the same name, parent, session and start time, without the kernel summing every
/// thread's times, which is most of a read's cost for a busy multithreaded process.
/// Its state is the main thread's, so liveness checks use [`stat`].
pub(crate) fn main_thread_stat(pid: u32) -> Option<Stat> {
    read_stat(&format!("/proc/{pid}/task/{pid}/stat"))
}

/// Notes this process's stat line when something read it anyway.
pub(crate) fn remember_self(s: &Stat) {
    let _ = ME.set(ProcessRef {
        pid: std::process::id(),
        start_time: s.starttime,
    });
}

fn read_stat(path: &str) -> Option<Stat> {
    let mut buf = [0u8; 1024];
    let mut f = std::fs::File::open(path).ok()?;
    let mut n = 0;
    while n < buf.len() {
        match f.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => {
                n += k;
                // The kernel writes the whole line in one read when it fits, so the
                // line ends here: no second read (a system call per ancestor) to see
                // the end of the file. A line cut short fails to parse and is read on.
                if buf[n - 1] == b'\n' {
                    break;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
    parse_stat(&buf[..n])
}

/// Parses a stat line: `pid (comm) state ppid pgrp session … starttime …`. The name
/// may hold spaces and parentheses, so it ends at the *last* `)`.
fn parse_stat(line: &[u8]) -> Option<Stat> {
    let open = line.iter().position(|&b| b == b'(')?;
    let close = line.iter().rposition(|&b| b == b')')?;
    let comm = String::from_utf8_lossy(line.get(open + 1..close)?).into_owned();
    let rest = std::str::from_utf8(line.get(close + 1..)?).ok()?;
    let mut fields = rest.split_ascii_whitespace();
    let state = fields.next()?.chars().next()?;
    let ppid = fields.next()?.parse().ok()?;
    let _pgrp = fields.next()?;
    let session = fields.next()?.parse().ok()?;
    // starttime is the 22nd field of the line; `state` is the 3rd.
    let starttime = fields.nth(22 - 3 - 4)?.parse().ok()?;
    // blocked is the 32nd; only waking an asker needs it (see `spool::wait::nudge`).
    let blocked = fields
        .nth(32 - 22 - 1)
        .and_then(|f| f.parse().ok())
        .unwrap_or(0);
    Some(Stat {
        comm,
        state,
        ppid,
        session,
        starttime,
        blocked,
    })
}

/// The start time of `pid`, if it is running.
pub fn start_time(pid: u32) -> Option<u64> {
    stat(pid).map(|s| s.starttime)
}

static ME: std::sync::OnceLock<ProcessRef> = std::sync::OnceLock::new();

/// This process, as a [`ProcessRef`] (read once).
pub fn this_process() -> ProcessRef {
    *ME.get_or_init(|| {
        let pid = std::process::id();
        ProcessRef {
            pid,
            start_time: main_thread_stat(pid).map_or(0, |s| s.starttime),
        }
    })
}

/// The user this process runs as (its effective uid), asked of the kernel once: the
/// server compares every loopback client's owner with it.
pub fn euid() -> u32 {
    static EUID: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *EUID.get_or_init(|| nix::unistd::geteuid().as_raw())
}

/// True while `pid` runs and, when `start` is given, is still the same process.
/// Zombies count as dead: they will never read an answer.
pub fn is_alive(pid: u32, start: Option<u64>) -> bool {
    match stat(pid) {
        Some(s) => s.state != 'Z' && s.state != 'X' && start.is_none_or(|t| t == s.starttime),
        None => false,
    }
}

/// This process's OS user's name (its uid, `uid 1000`, where no name is known).
pub fn user_name() -> String {
    let uid = nix::unistd::getuid();
    nix::unistd::User::from_uid(uid)
        .ok()
        .flatten()
        .map(|u| u.name)
        .unwrap_or_else(|| format!("uid {uid}"))
}

/// Where `program` is: itself when it names a folder (a relative one from `dir`),
/// else the first executable file of that name in a folder of the PATH.
pub fn find_program(program: &str, dir: &std::path::Path) -> Option<std::path::PathBuf> {
    if program.contains('/') {
        let path = dir.join(program);
        return is_executable(&path).then_some(path);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(program))
        .find(|p| is_executable(p))
}

/// Whether `path` is a file someone may run.
pub fn is_executable(path: &std::path::Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Lets a closed standard output end this process, as it ends `ls`'s: the default
/// action of SIGPIPE, which Rust's runtime sets to ignored (a write then fails, and
/// `println!` panics on it). For commands that only print: `hitl history | head -1`.
/// Call it before any other thread starts.
pub fn end_on_closed_output() {
    #[allow(unsafe_code)] // setting a signal's disposition is unsafe in nix's API
    // SAFETY: the default action runs no handler code in this process.
    let _ = unsafe {
        nix::sys::signal::signal(
            nix::sys::signal::Signal::SIGPIPE,
            nix::sys::signal::SigHandler::SigDfl,
        )
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_names_with_spaces_and_parentheses() {
        let line = b"4172 (my (odd) name) S 4171 4172 4170 34816 4172 4194560 1 2 3 4 5 6 7 8 20 0 1 0 7192 1 2\n";
        let s = parse_stat(line).unwrap();
        assert_eq!(s.comm, "my (odd) name");
        assert_eq!(
            (s.state, s.ppid, s.session, s.starttime),
            ('S', 4171, 4170, 7192)
        );
        assert_eq!(s.blocked, 0, "a line cut short has no blocked set");
        assert_eq!(parse_stat(b"12 (x"), None);
        let full = b"9 (hitl) S 8 9 7 0 -1 4194304 90 0 0 0 0 0 0 0 20 0 1 0 7192 1 2 3 4 5 6 0 0 0 4194304 0 0 0 0 0 17 1 0 0 0 0 0\n";
        assert_eq!(parse_stat(full).unwrap().blocked, 1 << 22);
    }

    #[test]
    fn agrees_with_procfs_on_this_process() {
        let me = std::process::id();
        let ours = stat(me).unwrap();
        let theirs = procfs::process::Process::myself().unwrap().stat().unwrap();
        assert_eq!(ours.starttime, theirs.starttime);
        assert_eq!(ours.ppid, theirs.ppid);
        assert_eq!(ours.session, theirs.session);
        assert_eq!(ours.comm, theirs.comm);
        assert_eq!(ours.blocked, theirs.blocked);
        assert_eq!(main_thread_stat(me).unwrap().starttime, theirs.starttime);
        assert_eq!(this_process().start_time, theirs.starttime);
        assert!(is_alive(me, Some(ours.starttime)));
        assert!(!is_alive(me, Some(ours.starttime + 1)));
    }
}
