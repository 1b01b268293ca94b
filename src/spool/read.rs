//! Reading files that anyone with write access to the project may have put there.
//!
//! Never follow a symlink (it could point at `~/.ssh/id_rsa` and the broker would show
//! it to the human), never open a FIFO (the open would block the broker for ever), never
//! read more than the size limit.

use std::{
    fs::{self, OpenOptions},
    io::{self, Read},
    os::unix::fs::{FileTypeExt, OpenOptionsExt},
    path::Path,
};

use thiserror::Error;

/// Why a spool entry was not read.
#[derive(Debug, Error)]
pub enum Refusal {
    /// It vanished before it could be read (withdrawn, or a temp name).
    #[error("it no longer exists")]
    Gone,
    /// A symbolic link.
    #[error("it is a symbolic link; the spool only accepts regular files")]
    Symlink,
    /// A folder.
    #[error("it is a folder, not a file")]
    Directory,
    /// A FIFO, socket or device.
    #[error("it is a {0}, not a regular file")]
    Special(&'static str),
    /// Bigger than the limit.
    #[error("it is {size} bytes; the limit is {limit}")]
    TooBig {
        /// Its size.
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// Any other I/O error.
    #[error("reading it failed: {0}")]
    Io(#[from] io::Error),
}

/// Reads a regular file of at most `limit` bytes without following symlinks or
/// blocking on special files.
pub fn read_untrusted(path: &Path, limit: u64) -> Result<Vec<u8>, Refusal> {
    read_untrusted_file(path, limit).map(|(bytes, _)| bytes)
}

/// [`read_untrusted`], with the metadata of the file that was read (its modification
/// time dates a question that does not say when it was asked).
pub fn read_untrusted_file(path: &Path, limit: u64) -> Result<(Vec<u8>, fs::Metadata), Refusal> {
    // One open does what an lstat first would: O_NOFOLLOW refuses a symlink (ELOOP),
    // O_NONBLOCK keeps a FIFO from blocking, O_NOCTTY keeps a terminal from becoming
    // ours; the descriptor's own metadata then says what was opened, with no window
    // for a swap between a check and the open.
    let file = match OpenOptions::new()
        .read(true)
        .custom_flags(libc_flags())
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(Refusal::Gone),
        Err(e) if e.raw_os_error() == Some(nix::libc::ELOOP) => return Err(Refusal::Symlink),
        // What opening a Unix socket says.
        Err(e) if e.raw_os_error() == Some(nix::libc::ENXIO) => {
            return Err(Refusal::Special("socket"));
        }
        Err(e) => return Err(e.into()),
    };
    let meta = file.metadata()?;
    check_type(&meta.file_type())?;
    if meta.len() > limit {
        return Err(Refusal::TooBig {
            size: meta.len(),
            limit,
        });
    }
    let mut buf = Vec::with_capacity(meta.len().saturating_add(1) as usize);
    file.take(limit.saturating_add(1)).read_to_end(&mut buf)?;
    if buf.len() as u64 > limit {
        return Err(Refusal::TooBig {
            size: buf.len() as u64,
            limit,
        });
    }
    Ok((buf, meta))
}

fn libc_flags() -> i32 {
    nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK | nix::libc::O_NOCTTY | nix::libc::O_CLOEXEC
}

fn check_type(t: &fs::FileType) -> Result<(), Refusal> {
    if t.is_symlink() {
        Err(Refusal::Symlink)
    } else if t.is_dir() {
        Err(Refusal::Directory)
    } else if t.is_fifo() {
        Err(Refusal::Special("FIFO"))
    } else if t.is_socket() {
        Err(Refusal::Special("socket"))
    } else if t.is_block_device() || t.is_char_device() {
        Err(Refusal::Special("device"))
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_what_is_not_a_small_regular_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path();
        fs::write(p.join("ok"), b"{}").unwrap();
        assert_eq!(read_untrusted(&p.join("ok"), 10).unwrap(), b"{}");
        fs::write(p.join("big"), vec![b'x'; 11]).unwrap();
        assert!(matches!(
            read_untrusted(&p.join("big"), 10),
            Err(Refusal::TooBig { .. })
        ));
        std::os::unix::fs::symlink(p.join("ok"), p.join("link")).unwrap();
        assert!(matches!(
            read_untrusted(&p.join("link"), 10),
            Err(Refusal::Symlink)
        ));
        fs::create_dir(p.join("dir")).unwrap();
        assert!(matches!(
            read_untrusted(&p.join("dir"), 10),
            Err(Refusal::Directory)
        ));
        nix::unistd::mkfifo(&p.join("fifo"), nix::sys::stat::Mode::S_IRWXU).unwrap();
        assert!(matches!(
            read_untrusted(&p.join("fifo"), 10),
            Err(Refusal::Special("FIFO"))
        ));
        let _socket = std::os::unix::net::UnixListener::bind(p.join("socket")).unwrap();
        assert!(matches!(
            read_untrusted(&p.join("socket"), 10),
            Err(Refusal::Special("socket"))
        ));
        assert!(matches!(
            read_untrusted(&p.join("none"), 10),
            Err(Refusal::Gone)
        ));
    }
}
