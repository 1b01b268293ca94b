//! `.helpers/activity/`: hook events on their way to the listener's activity feed.
//! `hitl hook` drops one small file per event (renamed into place whole, never
//! fsynced: a note lost to a power cut is a line missing from a feed) and goes; the
//! listener reads each as it appears, records it and deletes it.

use std::{
    io,
    os::unix::fs::DirBuilderExt,
    path::{Path, PathBuf},
};

use super::{Spool, write_atomic, write_atomic_spared};
use crate::protocol::activity::{ActivityNote, MAX_NOTE_BYTES};

/// Drops `note` into `spool`'s activity folder (made on first use).
pub fn drop_note(spool: &Spool, note: &ActivityNote) -> io::Result<PathBuf> {
    let dir = spool.activity();
    // Unique without coordination: the time and this process.
    let name = format!(
        "{:020}-{}.json",
        jiff::Timestamp::now().as_nanosecond(),
        std::process::id()
    );
    let dest = dir.join(name);
    let bytes = note.to_bytes();
    match write_atomic_spared(&spool.tmp(), &dest, &bytes, false) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&dir)?;
            std::fs::create_dir_all(spool.tmp())?;
            write_atomic(&spool.tmp(), &dest, &bytes, false)?;
        }
        done => done?,
    }
    Ok(dest)
}

/// Whether `name` is a note's file name (temp files and others are not).
pub fn is_note_name(name: &str) -> bool {
    name.ends_with(".json") && !name.starts_with('.')
}

/// Reads the note at `path` and deletes it. `None` when it is gone, or not a note
/// (a link, a folder, too big, not JSON: deleted too, nothing else belongs there).
pub fn take_note(path: &Path) -> Option<ActivityNote> {
    let note = match super::read_untrusted(path, MAX_NOTE_BYTES as u64) {
        Ok(bytes) => ActivityNote::from_bytes(&bytes),
        Err(super::Refusal::Gone) => return None,
        Err(_) => None,
    };
    // A folder is left: only a human could have made it.
    let _ = std::fs::remove_file(path);
    note
}

/// The notes waiting in `spool`'s activity folder, oldest first.
pub fn waiting_notes(spool: &Spool) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(spool.activity()) else {
        return Vec::new();
    };
    let mut paths: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(is_note_name)
        })
        .collect();
    paths.sort();
    paths
}
