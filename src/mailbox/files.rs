//! Reading and writing a run's files: never through a symlink, never half a file.
//!
//! Every file hitl writes is written whole in `.hitl/tmp/` and renamed into place,
//! so a reader (an agent's `source`, the relay) sees the old file or the new one. A
//! file an agent writes may be caught half-written (the seed's `cat > question`);
//! the relay reads it again when the writer closes it.

use std::{
    fs::OpenOptions,
    io::{self, Write},
    os::unix::fs::{MetadataExt, OpenOptionsExt},
    path::Path,
};

use anyhow::{Context, Result};

use super::{
    keyvalue::KeyValues,
    layout::{MAX_FILE_BYTES, Run},
};

/// Writes `bytes` to `dest` in `run` atomically (replacing any file there).
pub fn write(run: &Run, dest: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = run.ensure_tmp()?;
    crate::spool::write_atomic(&tmp, dest, bytes, false)
        .with_context(|| format!("writing {}", dest.display()))
}

/// Writes `bytes` to `dest` in `run` atomically unless a file has that name already:
/// false then, and nothing written.
pub fn write_new(run: &Run, dest: &Path, bytes: &[u8]) -> Result<bool> {
    let tmp = run.ensure_tmp()?;
    let staged = tmp.join(format!(
        ".{}.{}",
        std::process::id(),
        uuid::Uuid::new_v4().simple()
    ));
    crate::spool::write_atomic(&tmp, &staged, bytes, false)
        .with_context(|| format!("writing {}", staged.display()))?;
    match crate::spool::rename_no_replace(&staged, dest) {
        Ok(()) => Ok(true),
        Err(e) => {
            let _ = std::fs::remove_file(&staged);
            if e.kind() == io::ErrorKind::AlreadyExists {
                Ok(false)
            } else {
                Err(e).with_context(|| format!("writing {}", dest.display()))
            }
        }
    }
}

/// A file read: its bytes and which file it was (device, inode, modification time
/// in nanoseconds), so a later look can tell whether it is still the same one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Read {
    /// Its bytes.
    pub bytes: Vec<u8>,
    /// Which file it was.
    pub identity: Identity,
}

/// Which file a name held: device, inode and modification time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Identity {
    /// Device.
    pub dev: u64,
    /// Inode.
    pub ino: u64,
    /// Modification time, nanoseconds since 1970.
    pub mtime_ns: i128,
}

impl Identity {
    fn of(meta: &std::fs::Metadata) -> Identity {
        Identity {
            dev: meta.dev(),
            ino: meta.ino(),
            mtime_ns: i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec()),
        }
    }
}

/// Reads `path` (no symlink, no FIFO, at most [`MAX_FILE_BYTES`]); `None` if it is
/// not there.
pub fn read(path: &Path) -> Result<Option<Read>> {
    match crate::spool::read_untrusted_file(path, MAX_FILE_BYTES) {
        Ok((bytes, meta)) => Ok(Some(Read {
            bytes,
            identity: Identity::of(&meta),
        })),
        Err(crate::spool::Refusal::Gone) => Ok(None),
        Err(e) => Err(anyhow::anyhow!("{}: {e}", path.display())),
    }
}

/// Reads the KEY=VALUE file at `path`; `None` if it is not there.
pub fn read_pairs(path: &Path) -> Result<Option<KeyValues>> {
    Ok(read(path)?.map(|r| KeyValues::parse(&String::from_utf8_lossy(&r.bytes))))
}

/// The identity of the file at `path` now (not following a symlink).
pub fn identity(path: &Path) -> Option<Identity> {
    std::fs::symlink_metadata(path)
        .ok()
        .filter(|m| m.is_file())
        .map(|m| Identity::of(&m))
}

/// Renames `from` to `to` (replacing `to`); false if `from` is not there.
pub fn take(from: &Path, to: &Path) -> Result<bool> {
    match std::fs::rename(from, to) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e).with_context(|| format!("moving {} to {}", from.display(), to.display())),
    }
}

/// Removes `path` if it is there.
pub fn remove(path: &Path) -> Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => {
            Err(e).with_context(|| format!("removing {}", path.display()))
        }
        _ => Ok(()),
    }
}

/// Appends `line` (with its newline) to `path` in one write, as `>>` does: lines
/// of several agents at once interleave whole. Not through a symlink.
pub fn append_line(path: &Path, line: &str) -> Result<()> {
    let mut text = line.trim_end_matches('\n').to_string();
    text.push('\n');
    let mut file = OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(path)
        .with_context(|| format!("opening {}", path.display()))?;
    file.write_all(text.as_bytes())
        .with_context(|| format!("appending to {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_new_never_replaces_and_reads_refuse_symlinks() {
        let tmp = tempfile::tempdir().unwrap();
        let run = Run {
            dir: tmp.path().to_path_buf(),
        };
        let dest = tmp.path().join("request");
        assert!(write_new(&run, &dest, b"A=1\n").unwrap());
        assert!(!write_new(&run, &dest, b"A=2\n").unwrap());
        assert_eq!(
            read_pairs(&dest).unwrap().unwrap().get("A"),
            Some("1"),
            "the first write stays"
        );
        std::os::unix::fs::symlink("/etc/passwd", tmp.path().join("answer")).unwrap();
        assert!(read(&tmp.path().join("answer")).is_err());
        assert!(read(&tmp.path().join("nothing")).unwrap().is_none());
        // Nothing is left behind in the temp folder.
        assert_eq!(std::fs::read_dir(run.tmp()).unwrap().count(), 0);
    }
}
