//! The global allocator, chosen by what the process is.
//!
//! The daemons (`hitl listen`, `hitl serve`) allocate on many threads for hours:
//! mimalloc there, since under HTTP load the server spent a sixth of its CPU in
//! glibc's allocator (consolidating and splitting chunks freed on other threads).
//! Every other `hitl` process (a hook on every tool call, `hitl ask`, the CLI) lives
//! a few milliseconds: mimalloc's first allocations touch a hundred-odd fresh pages
//! there (its arena's metadata and a 64 KiB page per size class), each a page fault,
//! where glibc's heap grows from one place; glibc there.
//!
//! mimalloc is built without the constructor that would set it up in every process
//! (`.cargo/config.toml`); the daemons set it up here, as they choose it.
//!
//! The choice is made at the first allocation, from `/proc/self/cmdline` (read with
//! plain system calls into a buffer on the stack), before anything could have been
//! allocated by either, and never changes: every block is freed by the allocator
//! that made it.

// A global allocator is unsafe by its trait's definition, and mimalloc's set-up is C.
#![allow(unsafe_code)]

use std::{
    alloc::{GlobalAlloc, Layout, System},
    sync::atomic::{AtomicU8, Ordering},
};

use mimalloc::MiMalloc;

const UNDECIDED: u8 = 0;
const SYSTEM: u8 = 1;
const MIMALLOC: u8 = 2;

static CHOICE: AtomicU8 = AtomicU8::new(UNDECIDED);

/// mimalloc for the daemons, glibc's malloc for everything else.
pub struct ByRole;

/// Which allocator this process uses (deciding on the first call).
#[inline]
fn choice() -> u8 {
    match CHOICE.load(Ordering::Relaxed) {
        UNDECIDED => decide(),
        c => c,
    }
}

unsafe extern "C" {
    /// mimalloc's process set-up, which its constructor would run at every start
    /// (`.cargo/config.toml` builds it without: `MI_PRIM_HAS_PROCESS_ATTACH`).
    /// Idempotent.
    fn _mi_auto_process_init();
}

#[cold]
fn decide() -> u8 {
    let c = if runs_a_daemon() {
        // SAFETY: no arguments; on the main thread, at its first allocation, before
        // any block of mimalloc's exists.
        unsafe { _mi_auto_process_init() };
        MIMALLOC
    } else {
        SYSTEM
    };
    // Two threads deciding at once decide the same.
    CHOICE.store(c, Ordering::Relaxed);
    c
}

/// Whether this process's first argument is `listen` or `serve`.
fn runs_a_daemon() -> bool {
    let mut buf = [0u8; 512];
    // SAFETY: a NUL-terminated path; the buffer is ours and its length is passed.
    let n = unsafe {
        let fd = nix::libc::open(
            c"/proc/self/cmdline".as_ptr(),
            nix::libc::O_RDONLY | nix::libc::O_CLOEXEC,
        );
        if fd < 0 {
            return false;
        }
        let n = nix::libc::read(fd, buf.as_mut_ptr().cast(), buf.len());
        nix::libc::close(fd);
        n
    };
    let Ok(n) = usize::try_from(n) else {
        return false;
    };
    is_daemon_command_line(&buf[..n])
}

/// Whether a command line (NUL-separated words) runs `PROGRAM listen|serve …`.
fn is_daemon_command_line(cmdline: &[u8]) -> bool {
    let mut words = cmdline.split(|b| *b == 0);
    words.next();
    matches!(words.next(), Some(b"listen" | b"serve"))
}

// SAFETY: each call goes to the allocator chosen once for the whole process, so a
// block is always freed and grown by the allocator that made it.
unsafe impl GlobalAlloc for ByRole {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        unsafe {
            match choice() {
                MIMALLOC => MiMalloc.alloc(layout),
                _ => System.alloc(layout),
            }
        }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as above.
        unsafe {
            match choice() {
                MIMALLOC => MiMalloc.alloc_zeroed(layout),
                _ => System.alloc_zeroed(layout),
            }
        }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as above.
        unsafe {
            match choice() {
                MIMALLOC => MiMalloc.dealloc(ptr, layout),
                _ => System.dealloc(ptr, layout),
            }
        }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as above.
        unsafe {
            match choice() {
                MIMALLOC => MiMalloc.realloc(ptr, layout, new_size),
                _ => System.realloc(ptr, layout, new_size),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_daemons_get_mimalloc() {
        assert!(is_daemon_command_line(b"hitl\0listen\0--ui\0none\0"));
        assert!(is_daemon_command_line(b"/usr/bin/hitl\0serve\0"));
        for other in [
            &b"hitl\0hook\0pre-tool-use\0"[..],
            b"hitl\0ask\0listen\0",
            b"hitl\0",
            b"",
        ] {
            assert!(!is_daemon_command_line(other), "{other:?}");
        }
    }
}
