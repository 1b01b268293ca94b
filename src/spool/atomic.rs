//! Atomic writes. A reader sees either nothing or the whole file, and after `durable`
//! writes a power cut cannot take the file back: temp file in `.helpers/tmp/` (same
//! file system, so rename is atomic), fsync the data, rename or link it into place,
//! fsync the folder so the new name itself is on disk.

use std::{
    fs::{self, File, OpenOptions},
    io::{self, Write},
    os::unix::fs::OpenOptionsExt,
    path::{Path, PathBuf},
    sync::atomic::{AtomicU64, Ordering},
};

/// Outcome of [`create_exclusive`].
#[derive(Debug, PartialEq, Eq)]
pub enum Created {
    /// The file is ours.
    Created,
    /// Someone else created it first; nothing was written.
    AlreadyExists,
}

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// A temp file name no other writer uses: pid, a per-process counter, and the time in
/// nanoseconds, so two processes with a reused pid cannot collide either (and the
/// file is created exclusively, so a collision fails rather than overwrites).
fn temp_path(tmp_dir: &Path, dest: &Path) -> PathBuf {
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let stem = dest
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    tmp_dir.join(format!(
        "{}.{}.{:x}.{}.tmp",
        std::process::id(),
        n,
        nanos,
        stem
    ))
}

fn write_temp(tmp_dir: &Path, dest: &Path, bytes: &[u8], durable: bool) -> io::Result<PathBuf> {
    let create = |tmp: &Path| {
        OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(tmp)
    };
    let tmp = temp_path(tmp_dir, dest);
    let (tmp, file) = match create(&tmp) {
        Ok(file) => (tmp, file),
        // Inside `hitl run`'s boundary `tmp/` is read-only (the listener's temp
        // files and the answers' slots are there): an asker's temp file goes beside
        // its destination, under a dot name every reader of the spool ignores.
        Err(e) if e.kind() == io::ErrorKind::ReadOnlyFilesystem => {
            let name = temp_path(Path::new(""), dest);
            let tmp = parent(dest).join(format!(".{}", name.display()));
            let file = create(&tmp)?;
            (tmp, file)
        }
        Err(e) => return Err(e),
    };
    fill(file, tmp, bytes, durable)
}

/// Writes `bytes` into `file`, the temp file `tmp`; removes it if that fails.
fn fill(mut file: File, tmp: PathBuf, bytes: &[u8], durable: bool) -> io::Result<PathBuf> {
    let written = file
        .write_all(bytes)
        .and_then(|()| if durable { file.sync_data() } else { Ok(()) });
    if let Err(e) = written {
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    Ok(tmp)
}

/// Renames the written temp file `tmp` to `dest` (removing it if that fails), and
/// syncs the folder when `durable`.
fn put_in_place(tmp: &Path, dest: &Path, durable: bool) -> io::Result<()> {
    if let Err(e) = fs::rename(tmp, dest) {
        let _ = fs::remove_file(tmp);
        return Err(e);
    }
    if durable {
        sync_dir(parent(dest))?;
    }
    Ok(())
}

/// Removes temp files that no writer will finish: ours whose writing process has
/// died (the pid comes first in the name), and any older than an hour. Returns how
/// many went.
pub fn clear_stale_temp(tmp_dir: &Path) -> usize {
    let Ok(entries) = fs::read_dir(tmp_dir) else {
        return 0;
    };
    let mut removed = 0;
    for e in entries.filter_map(Result::ok) {
        let name = e.file_name().to_string_lossy().into_owned();
        let writer_dead = name
            .split('.')
            .next()
            .and_then(|pid| pid.parse::<u32>().ok())
            .is_some_and(|pid| !crate::runtime::process::is_alive(pid, None));
        let old = e
            .metadata()
            .and_then(|m| m.modified())
            .map(|t| t.elapsed().unwrap_or_default() > std::time::Duration::from_secs(3600))
            .unwrap_or(false);
        if (writer_dead || old) && fs::remove_file(e.path()).is_ok() {
            removed += 1;
        }
    }
    removed
}

/// Syncs a folder so that names created or removed in it survive a crash.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

fn parent(dest: &Path) -> &Path {
    dest.parent().unwrap_or(Path::new("."))
}

/// Writes `bytes` to `dest` atomically, replacing any file there.
pub fn write_atomic(tmp_dir: &Path, dest: &Path, bytes: &[u8], durable: bool) -> io::Result<()> {
    put_in_place(&write_temp(tmp_dir, dest, bytes, durable)?, dest, durable)
}

/// Creates `dest` with `bytes` only if no file has that name yet, atomically.
///
/// `link(2)` and `RENAME_NOREPLACE` fail with `EEXIST` when the name is taken, so when
/// two responders race for the same answer exactly one file is ever created and the
/// other learns it lost.
///
/// The file is the empty one its asker left for it when there is one (see
/// [`leave_answer_slot`]); else it is written unnamed (`O_TMPFILE`) in `dest`'s own
/// folder where the file system allows, and in a temp file in `tmp_dir` only as the
/// fallback. Besides saving the temp name's removal, the unnamed file keeps answers
/// off `tmp/`'s lock: an asker renaming its question out of `tmp/` wakes the
/// listener from inside the rename, and the listener, preempting it, would otherwise
/// wait for the asker to get the CPU back and finish.
pub fn create_exclusive(
    tmp_dir: &Path,
    dest: &Path,
    bytes: &[u8],
    durable: bool,
) -> io::Result<Created> {
    let linked = match fill_answer_slot(tmp_dir, dest, bytes, durable) {
        Some(linked) => linked,
        None => match link_unnamed(dest, bytes, durable) {
            Some(linked) => linked,
            None => {
                let tmp = write_temp(tmp_dir, dest, bytes, durable)?;
                let linked = fs::hard_link(&tmp, dest);
                let _ = fs::remove_file(&tmp);
                linked
            }
        },
    };
    match linked {
        Ok(()) => {
            if durable {
                sync_dir(parent(dest))?;
            }
            Ok(Created::Created)
        }
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(Created::AlreadyExists),
        Err(e) => Err(e),
    }
}

/// Writes `bytes` to an unnamed file in `dest`'s folder and links it as `dest`; what
/// the link did. `None` when no unnamed file could be made or linked there (a file
/// system without `O_TMPFILE`, no `/proc`): the caller then uses a named temp file.
fn link_unnamed(dest: &Path, bytes: &[u8], durable: bool) -> Option<io::Result<()>> {
    use std::os::fd::AsRawFd;
    let dir = parent(dest);
    let mut file = match take_spare(dir) {
        Some(file) => file,
        None => open_unnamed(dir).ok()?,
    };
    if let Err(e) = file
        .write_all(bytes)
        .and_then(|()| if durable { file.sync_data() } else { Ok(()) })
    {
        return Some(Err(e));
    }
    // Linking an open file by its descriptor needs its /proc name, followed.
    let by_fd = format!("/proc/self/fd/{}", file.as_raw_fd());
    match nix::unistd::linkat(
        nix::fcntl::AT_FDCWD,
        by_fd.as_str(),
        nix::fcntl::AT_FDCWD,
        dest,
        nix::fcntl::AtFlags::AT_SYMLINK_FOLLOW,
    ) {
        Ok(()) => Some(Ok(())),
        Err(nix::errno::Errno::EEXIST) => Some(Err(io::ErrorKind::AlreadyExists.into())),
        Err(e) => {
            tracing::debug!("linking an unnamed file as {}: {e}", dest.display());
            None
        }
    }
}

fn open_unnamed(dir: &Path) -> io::Result<File> {
    OpenOptions::new()
        .write(true)
        .mode(0o600)
        .custom_flags(nix::fcntl::OFlag::O_TMPFILE.bits())
        .open(dir)
}

/// The folder, in a spool's `tmp/`, where the listener keeps empty files for askers.
pub const SPARES_DIR: &str = "spare";

/// How many empty files the listener keeps in [`SPARES_DIR`]: an asker takes two
/// (its question's and its answer's slot).
const NAMED_SPARES: u32 = 8;

/// Writes `bytes` to `dest` atomically as [`write_atomic`] does, in a file the
/// listener made ahead of need when one is there (see [`keep_named_spares`]): on a
/// disk whose inode allocator is busy, making the file is most of writing it. The
/// spare is claimed by renaming it (of two writers, one wins), then checked: an empty
/// regular file of ours, or it is not used.
pub fn write_atomic_spared(
    tmp_dir: &Path,
    dest: &Path,
    bytes: &[u8],
    durable: bool,
) -> io::Result<()> {
    if !crate::runtime::tuning::fast_paths() {
        return write_atomic(tmp_dir, dest, bytes, durable);
    }
    let tmp = match claim_named_spare(tmp_dir, dest) {
        Some((tmp, file)) => fill(file, tmp, bytes, durable)?,
        None => write_temp(tmp_dir, dest, bytes, durable)?,
    };
    put_in_place(&tmp, dest, durable)
}

/// Takes one of the listener's spare files in `tmp_dir`, under a temp name of ours.
fn claim_named_spare(tmp_dir: &Path, dest: &Path) -> Option<(PathBuf, File)> {
    let tmp = temp_path(tmp_dir, dest);
    if !move_named_spare(tmp_dir, &tmp) {
        return None;
    }
    match open_empty_own(&tmp) {
        Some(file) => Some((tmp, file)),
        None => {
            let _ = fs::remove_file(&tmp);
            None
        }
    }
}

/// Moves one of the listener's spare files in `tmp_dir` to `to` (of two takers, the
/// rename lets one win); whether there was one.
fn move_named_spare(tmp_dir: &Path, to: &Path) -> bool {
    let spares = tmp_dir.join(SPARES_DIR);
    let first = std::process::id() % NAMED_SPARES;
    for k in 0..NAMED_SPARES {
        let spare = spares.join(((first + k) % NAMED_SPARES).to_string());
        // Looked at first: a rename between folders takes a lock of the whole file
        // system, even one that finds nothing, and a burst of askers finds the spares
        // used up.
        if fs::symlink_metadata(&spare).is_err() {
            continue;
        }
        match fs::rename(&spare, to) {
            Ok(()) => return true,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(_) => return false,
        }
    }
    false
}

/// Opens `path` for writing if it is an empty regular file of ours with no other
/// name: whatever a spare or slot name held is checked before it is written through
/// (a symlink, a FIFO or someone else's file is not).
fn open_empty_own(path: &Path) -> Option<File> {
    use std::os::unix::fs::MetadataExt;
    OpenOptions::new()
        .write(true)
        .custom_flags((nix::fcntl::OFlag::O_NOFOLLOW | nix::fcntl::OFlag::O_NONBLOCK).bits())
        .open(path)
        .ok()
        .filter(|f| {
            f.metadata().is_ok_and(|m| {
                m.file_type().is_file()
                    && m.len() == 0
                    && m.uid() == nix::unistd::geteuid().as_raw()
                    && m.nlink() == 1
            })
        })
}

/// The folder, in a spool's `tmp/`, where askers leave empty files for their answers.
pub const SLOTS_DIR: &str = "slot";

/// Leaves an empty file named as the answer `dest` in `tmp_dir`'s [`SLOTS_DIR`], for
/// the responder to write and move into place ([`create_exclusive`]); a listener's
/// spare file when one is there. Where the inode allocator is busy (ext4 without a
/// journal skips every inode freed in the last minutes, one by one), making a file
/// is most of an answer's cost: an asker, who is about to wait anyway, makes it
/// before its question is out, so a responder answering a thousand waiting
/// questions at once makes none. Returns the slot, for the asker to remove if its
/// answer came another way; `None` when the spool has no slot folder (made by
/// `hitl init` and the listener) or the file could not be made.
pub fn leave_answer_slot(tmp_dir: &Path, dest: &Path) -> Option<PathBuf> {
    if !crate::runtime::tuning::fast_paths() {
        return None;
    }
    let slot = tmp_dir.join(SLOTS_DIR).join(dest.file_name()?);
    if move_named_spare(tmp_dir, &slot) {
        return Some(slot);
    }
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&slot)
        .ok()
        .map(|_| slot)
}

/// Writes `bytes` into the slot its asker left for `dest` and moves it into place,
/// exclusively; what that did. `None` when no usable slot is there. The slot is
/// claimed first by renaming it to a name of ours in the same folder, so that of two
/// responders only one writes it; the claimed file is checked as a spare is.
fn fill_answer_slot(
    tmp_dir: &Path,
    dest: &Path,
    bytes: &[u8],
    durable: bool,
) -> Option<io::Result<()>> {
    let slots = tmp_dir.join(SLOTS_DIR);
    let slot = slots.join(dest.file_name()?);
    let claimed = temp_path(&slots, dest);
    fs::rename(&slot, &claimed).ok()?;
    let Some(mut file) = open_empty_own(&claimed) else {
        let _ = fs::remove_file(&claimed);
        return None;
    };
    let placed = file
        .write_all(bytes)
        .and_then(|()| if durable { file.sync_data() } else { Ok(()) })
        .and_then(|()| rename_no_replace(&claimed, dest));
    if placed.is_err() {
        let _ = fs::remove_file(&claimed);
    }
    Some(placed)
}

/// Renames `from` to `to` unless `to` exists (`AlreadyExists` then), in one step
/// where the file system has `RENAME_NOREPLACE`, else as a link and an unlink.
pub fn rename_no_replace(from: &Path, to: &Path) -> io::Result<()> {
    use nix::{errno::Errno, fcntl};
    match fcntl::renameat2(
        fcntl::AT_FDCWD,
        from,
        fcntl::AT_FDCWD,
        to,
        fcntl::RenameFlags::RENAME_NOREPLACE,
    ) {
        Ok(()) => Ok(()),
        Err(Errno::EINVAL | Errno::ENOSYS) => {
            fs::hard_link(from, to)?;
            let _ = fs::remove_file(from);
            Ok(())
        }
        Err(e) => Err(e.into()),
    }
}

/// Fills the spare files askers take in `tmp_dir` (see [`write_atomic_spared`]) back
/// up. The listener calls it while its spool is quiet, so the files' making is on
/// nobody's path. Returns how many it made.
pub fn keep_named_spares(tmp_dir: &Path) -> usize {
    if !crate::runtime::tuning::fast_paths() {
        return 0;
    }
    use std::os::unix::fs::DirBuilderExt;
    let spares = tmp_dir.join(SPARES_DIR);
    let _ = fs::DirBuilder::new().mode(0o700).create(&spares);
    let mut made = 0;
    for k in 0..NAMED_SPARES {
        let made_one = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(spares.join(k.to_string()));
        if made_one.is_ok() {
            made += 1;
        }
    }
    made
}

/// Unnamed files made ahead of need, one per folder, by [`keep_spare`].
static SPARES: std::sync::Mutex<Vec<(PathBuf, File)>> = std::sync::Mutex::new(Vec::new());

/// At most this many folders keep a spare (a listener's projects).
const MAX_SPARES: usize = 256;

fn take_spare(dir: &Path) -> Option<File> {
    let mut spares = SPARES.lock().unwrap_or_else(|e| e.into_inner());
    let i = spares.iter().position(|(d, _)| d == dir)?;
    Some(spares.swap_remove(i).1)
}

/// Makes an unnamed file in `dir` for the next [`create_exclusive`] there to write
/// and link, unless one is waiting already. A long-running writer (the broker) calls
/// it after an answer is out: making a file is most of an answer's cost on a disk
/// whose inode allocator is busy (ext4 without a journal skips every inode freed in
/// the last minutes), and made here it is off the next asker's path. An unnamed file
/// leaves nothing behind when the process ends, however it ends.
pub fn keep_spare(dir: &Path) {
    if !crate::runtime::tuning::fast_paths() {
        return;
    }
    let mut spares = SPARES.lock().unwrap_or_else(|e| e.into_inner());
    if spares.len() >= MAX_SPARES || spares.iter().any(|(d, _)| d == dir) {
        return;
    }
    if let Ok(file) = open_unnamed(dir) {
        spares.push((dir.to_path_buf(), file));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exclusive_create_has_one_winner() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("a.json");
        let results: Vec<Created> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..8)
                .map(|i| {
                    let (d, dest) = (dir.path(), &dest);
                    s.spawn(move || {
                        create_exclusive(d, dest, format!("{i}").as_bytes(), false).unwrap()
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert_eq!(
            results.iter().filter(|r| **r == Created::Created).count(),
            1
        );
        // No temp files are left behind.
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn a_spare_file_is_written_and_linked_once() {
        let dir = tempfile::tempdir().unwrap();
        keep_spare(dir.path());
        keep_spare(dir.path());
        let dest = dir.path().join("a.json");
        assert_eq!(
            create_exclusive(dir.path(), &dest, b"one", false).unwrap(),
            Created::Created
        );
        assert!(take_spare(dir.path()).is_none(), "the one spare was used");
        assert_eq!(fs::read(&dest).unwrap(), b"one");
        // Without a spare the next one makes its own file, and loses to the first.
        assert_eq!(
            create_exclusive(dir.path(), &dest, b"two", false).unwrap(),
            Created::AlreadyExists
        );
        keep_spare(dir.path());
        assert_eq!(
            create_exclusive(dir.path(), &dest, b"three", false).unwrap(),
            Created::AlreadyExists
        );
        assert_eq!(fs::read(&dest).unwrap(), b"one");
        // Unnamed files have no name to leave behind.
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn named_spares_are_claimed_once_and_checked() {
        let dir = tempfile::tempdir().unwrap();
        let dest = |n: &str| dir.path().join(n);
        let n = NAMED_SPARES as usize;
        if !crate::runtime::tuning::fast_paths() {
            // The plain way: no spares; every write makes its own file.
            assert_eq!(keep_named_spares(dir.path()), 0);
            write_atomic_spared(dir.path(), &dest("s"), b"s", false).unwrap();
            assert_eq!(fs::read(dest("s")).unwrap(), b"s");
            return;
        }
        assert_eq!(keep_named_spares(dir.path()), n);
        assert_eq!(keep_named_spares(dir.path()), 0, "all there already");
        let spares = || fs::read_dir(dir.path().join(SPARES_DIR)).unwrap().count();
        for i in 0..n {
            let name = format!("s{i}");
            write_atomic_spared(dir.path(), &dest(&name), name.as_bytes(), false).unwrap();
            assert_eq!(fs::read(dest(&name)).unwrap(), name.as_bytes());
            assert_eq!(spares(), n - 1 - i);
        }
        // None left: the writer makes its own file.
        write_atomic_spared(dir.path(), &dest("e"), b"e", false).unwrap();
        assert_eq!(fs::read(dest("e")).unwrap(), b"e");
        // A planted symlink or a file with something in it is not written through.
        let target = dir.path().join("target");
        fs::write(&target, b"keep").unwrap();
        std::os::unix::fs::symlink(&target, dir.path().join(SPARES_DIR).join("0")).unwrap();
        for k in 1..n {
            fs::write(dir.path().join(SPARES_DIR).join(k.to_string()), b"full").unwrap();
        }
        for i in 0..n {
            let name = format!("p{i}");
            write_atomic_spared(dir.path(), &dest(&name), b"new", false).unwrap();
            assert_eq!(fs::read(dest(&name)).unwrap(), b"new");
        }
        assert_eq!(fs::read(&target).unwrap(), b"keep");
        // Nothing is left behind in tmp but the spares' folder.
        let left: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".tmp"))
            .collect();
        assert!(left.is_empty(), "{left:?}");
    }

    #[test]
    fn an_answer_is_written_in_the_slot_its_asker_left() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let (tmp, answers) = (dir.path().join("tmp"), dir.path().join("answers"));
        fs::create_dir_all(&answers).unwrap();
        let dest = answers.join("a.json");
        // No slot folder (a spool no listener has prepared): no slot.
        fs::create_dir_all(&tmp).unwrap();
        assert_eq!(leave_answer_slot(&tmp, &dest), None);
        fs::create_dir(tmp.join(SLOTS_DIR)).unwrap();
        keep_named_spares(&tmp);
        if !crate::runtime::tuning::fast_paths() {
            // The plain way: no slot; the answer is a file of its own.
            assert_eq!(leave_answer_slot(&tmp, &dest), None);
            assert_eq!(
                create_exclusive(&tmp, &dest, b"one", false).unwrap(),
                Created::Created
            );
            assert_eq!(fs::read(&dest).unwrap(), b"one");
            return;
        }
        let slot = leave_answer_slot(&tmp, &dest).unwrap();
        assert_eq!(slot, tmp.join(SLOTS_DIR).join("a.json"));
        let ino = fs::metadata(&slot).unwrap().ino();
        assert_eq!(
            create_exclusive(&tmp, &dest, b"one", false).unwrap(),
            Created::Created
        );
        assert_eq!(fs::read(&dest).unwrap(), b"one");
        assert_eq!(fs::metadata(&dest).unwrap().ino(), ino, "the slot's file");
        assert!(fs::symlink_metadata(&slot).is_err(), "moved into place");
        // A second answer loses, slot or not, and leaves nothing behind.
        leave_answer_slot(&tmp, &dest).unwrap();
        assert_eq!(
            create_exclusive(&tmp, &dest, b"two", false).unwrap(),
            Created::AlreadyExists
        );
        assert_eq!(fs::read(&dest).unwrap(), b"one");
        assert_eq!(fs::read_dir(tmp.join(SLOTS_DIR)).unwrap().count(), 0);
    }

    #[test]
    fn a_planted_slot_is_not_written_through() {
        let dir = tempfile::tempdir().unwrap();
        let tmp = dir.path().join("tmp");
        fs::create_dir_all(tmp.join(SLOTS_DIR)).unwrap();
        let target = dir.path().join("target");
        fs::write(&target, b"").unwrap();
        std::os::unix::fs::symlink(&target, tmp.join(SLOTS_DIR).join("a.json")).unwrap();
        fs::write(tmp.join(SLOTS_DIR).join("b.json"), b"full").unwrap();
        nix::unistd::mkfifo(
            &tmp.join(SLOTS_DIR).join("c.json"),
            nix::sys::stat::Mode::S_IRWXU,
        )
        .unwrap();
        for name in ["a.json", "b.json", "c.json"] {
            let dest = dir.path().join(name);
            assert_eq!(
                create_exclusive(&tmp, &dest, b"answer", false).unwrap(),
                Created::Created
            );
            assert_eq!(fs::read(&dest).unwrap(), b"answer");
        }
        assert_eq!(fs::read(&target).unwrap(), b"", "not written through");
    }

    #[test]
    fn racing_responders_share_a_slot_with_one_winner() {
        for _ in 0..20 {
            let dir = tempfile::tempdir().unwrap();
            let tmp = dir.path().join("tmp");
            fs::create_dir_all(tmp.join(SLOTS_DIR)).unwrap();
            let dest = dir.path().join("a.json");
            // Without the fast paths there is no slot, and still one winner.
            let slot = leave_answer_slot(&tmp, &dest);
            assert_eq!(slot.is_some(), crate::runtime::tuning::fast_paths());
            let results: Vec<(Created, String)> = std::thread::scope(|s| {
                let hs: Vec<_> = (0..4)
                    .map(|i| {
                        let (tmp, dest) = (&tmp, &dest);
                        s.spawn(move || {
                            let text = format!("answer {i}");
                            (
                                create_exclusive(tmp, dest, text.as_bytes(), false).unwrap(),
                                text,
                            )
                        })
                    })
                    .collect();
                hs.into_iter().map(|h| h.join().unwrap()).collect()
            });
            let won: Vec<_> = results
                .iter()
                .filter(|(c, _)| *c == Created::Created)
                .collect();
            assert_eq!(won.len(), 1, "{results:?}");
            // The winner's answer whole, never mixed with a loser's.
            assert_eq!(fs::read_to_string(&dest).unwrap(), won[0].1);
            assert_eq!(fs::read_dir(tmp.join(SLOTS_DIR)).unwrap().count(), 0);
        }
    }

    #[test]
    fn stale_temp_files_of_dead_writers_go() {
        let dir = tempfile::tempdir().unwrap();
        let dead = dir.path().join("4000000000.0.abc.q.json.tmp");
        let live = dir
            .path()
            .join(format!("{}.0.abc.q.json.tmp", std::process::id()));
        let script = dir.path().join("1795346141_14404_106.json.tmp");
        for p in [&dead, &live, &script] {
            fs::write(p, b"x").unwrap();
        }
        assert_eq!(clear_stale_temp(dir.path()), 1);
        assert!(!dead.exists() && live.exists() && script.exists());
    }

    #[test]
    fn atomic_write_replaces() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("b.json");
        write_atomic(dir.path(), &dest, b"one", true).unwrap();
        write_atomic(dir.path(), &dest, b"two", true).unwrap();
        assert_eq!(fs::read(&dest).unwrap(), b"two");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
