//! The one switch for hitl's fast paths: `[tuning] fast_paths` in the settings, or
//! `HITL_FAST_PATHS=0` in the environment (which wins).
//!
//! Each fast path does what a plain way already does, sooner: SQLite commits on the
//! caller's thread when the writer is idle (`store::writer`), WAL frames gathered
//! into one write per commit (`store::wal_gather`), files made ahead of need for
//! questions and answers (`spool::atomic`'s spares and answer slots), and the
//! `SIGURG` nudge that wakes an asker before inotify would (`spool::wait`). With the
//! switch off, hitl takes the plain way everywhere: the store writer's thread,
//! SQLite's own VFS, files made when they are written, inotify. So when something
//! goes wrong, turning the switch off tells whether a fast path is to blame; CI runs
//! the end-to-end suites both ways. Either side of the spool may run either way:
//! each fast path is optional to the other side.

use std::sync::atomic::{AtomicU8, Ordering};

/// Not decided yet, on, off.
const UNSET: u8 = 0;
const ON: u8 = 1;
const OFF: u8 = 2;

static FAST_PATHS: AtomicU8 = AtomicU8::new(UNSET);

/// The environment variable that turns the fast paths off (`0`, `false`, `off`, `no`)
/// or on, whatever the settings say.
pub const ENV: &str = "HITL_FAST_PATHS";

/// What `HITL_FAST_PATHS` says, if it says anything readable.
fn from_env() -> Option<bool> {
    switch(&std::env::var(ENV).ok()?)
}

/// A switch's word: on, off, or neither.
fn switch(word: &str) -> Option<bool> {
    match word.trim().to_ascii_lowercase().as_str() {
        "0" | "false" | "off" | "no" => Some(false),
        "1" | "true" | "on" | "yes" => Some(true),
        _ => None,
    }
}

/// Whether this process takes the fast paths: the environment's word, else the
/// settings' ([`configure`]), else yes.
pub fn fast_paths() -> bool {
    match FAST_PATHS.load(Ordering::Relaxed) {
        ON => true,
        OFF => false,
        _ => {
            let on = from_env().unwrap_or(true);
            // A race here stores the same answer twice.
            let _ = FAST_PATHS.compare_exchange(
                UNSET,
                if on { ON } else { OFF },
                Ordering::Relaxed,
                Ordering::Relaxed,
            );
            FAST_PATHS.load(Ordering::Relaxed) == ON
        }
    }
}

/// Sets the switch from the settings (`[tuning] fast_paths`), unless the
/// environment says otherwise. Called when settings are loaded.
pub fn configure(fast_paths_setting: bool) {
    let on = from_env().unwrap_or(fast_paths_setting);
    FAST_PATHS.store(if on { ON } else { OFF }, Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_switch_reads_the_usual_words() {
        for (word, on) in [
            ("0", Some(false)),
            (" Off", Some(false)),
            ("no", Some(false)),
        ] {
            assert_eq!(super::switch(word), on);
        }
        for (word, on) in [
            ("1", Some(true)),
            ("TRUE", Some(true)),
            ("", None),
            ("2", None),
        ] {
            assert_eq!(super::switch(word), on);
        }
    }
}
