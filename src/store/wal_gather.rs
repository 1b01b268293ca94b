//! The SQLite write connection's VFS: a commit's WAL frames reach the file in one
//! write.
//!
//! SQLite writes each WAL frame as two `pwrite`s (its 24-byte header, then the page),
//! so a commit of seven pages is fourteen system calls, each taking the inode lock
//! and touching one or two page-cache pages: on this class of VM they were a tenth of
//! the server's CPU time for a lone request. This VFS wraps the platform's and holds
//! a WAL's writes in memory while each continues the last, then writes them with one
//! call when the commit frame's page arrives (the frame header whose "database size"
//! field is set marks the commit frame). Any other operation on the WAL (a read, a
//! sync, a truncation, its size, closing it, a write elsewhere in it) writes what is
//! held first, so the file always reads as SQLite wrote it; so does the end of a
//! write transaction (the WAL write lock's release), so that frames a rolled-back
//! transaction spilled go out while the lock is still this connection's, as SQLite
//! would have written them, never later over frames another connection wrote.
//!
//! Readers see a commit only once SQLite publishes the new WAL-index header, which it
//! does after the commit frame was written: by then the frames are in the file. As a
//! last guard, the memory barrier SQLite takes while publishing writes anything a WAL
//! of that database still holds, and stops the process if that fails (the header
//! must never name frames that are not in the file; a restart recovers the WAL from
//! the file, where the unwritten commit simply is not).
//!
//! Nothing is held past the commit, so durability is what it was: when a commit
//! returns, its frames are in the page cache and survive the process (`synchronous =
//! NORMAL` syncs the WAL at checkpoints, not at commits).
//!
//! Only the writer opens files through this VFS; every other method is the
//! platform's own (the unix VFS's ignore the VFS pointer they are given).

// A SQLite VFS is C callbacks over raw pointers, checked by the tests beside it.
#![allow(unsafe_code)]

use std::{
    ffi::{CStr, CString, c_int, c_void},
    ptr,
    sync::{
        Arc, Mutex, MutexGuard, OnceLock,
        atomic::{AtomicUsize, Ordering},
    },
};

use rusqlite::ffi;

/// The VFS's name, for `Connection::open_with_flags_and_vfs`.
pub const NAME: &CStr = c"hitl-wal-gather";

/// Writes held beyond this many bytes go out at once: a transaction that spills pages
/// before its commit must not hold them all in memory. It is also the most the unix
/// VFS writes in one call (it writes `amt & 0x1ffff` bytes).
const MAX_HELD: usize = 64 << 10;

/// A WAL frame header's size. Bytes 4..8 hold the database's size in pages after a
/// commit frame, zero in every other frame.
const FRAME_HEADER: usize = 24;

/// The WAL header's size: written at offset 0 when the WAL starts over.
const WAL_HEADER: usize = 32;

/// Registers the VFS (once per process), for [`NAME`].
pub fn register() -> Result<(), String> {
    static REGISTERED: OnceLock<Result<(), String>> = OnceLock::new();
    REGISTERED
        .get_or_init(|| {
            // SAFETY: `sqlite3_vfs_find` returns SQLite's default VFS, which lives as
            // long as the process; the copy is leaked, so it does too.
            unsafe {
                let real = ffi::sqlite3_vfs_find(ptr::null());
                if real.is_null() {
                    return Err("SQLite has no default VFS".into());
                }
                let mut vfs = *real;
                vfs.szOsFile = (REAL_AT + (*real).szOsFile as usize) as c_int;
                vfs.pNext = ptr::null_mut();
                vfs.zName = NAME.as_ptr();
                vfs.pAppData = real.cast();
                vfs.xOpen = Some(x_open);
                let vfs = Box::leak(Box::new(vfs));
                match ffi::sqlite3_vfs_register(vfs, 0) {
                    ffi::SQLITE_OK => Ok(()),
                    rc => Err(format!("registering the WAL-gathering VFS: code {rc}")),
                }
            }
        })
        .clone()
}

/// A WAL's writes not yet in the file.
struct Held {
    bytes: Vec<u8>,
    /// The file offset of `bytes[0]`.
    at: i64,
    /// Where the last write through this file ended (-1: none yet).
    end: i64,
    /// The last write was a commit frame's header: its page ends the commit.
    commit_page_next: bool,
    /// The platform's file; null once closed.
    real: *mut ffi::sqlite3_file,
    /// Writes that reached the file.
    writes: u64,
    /// Tests: one write in this many fails as a full disk does (0: none).
    #[cfg(test)]
    fail_one_in: u64,
}

// SAFETY: the platform file is used only under the mutex that holds it, and SQLite
// allows a file to be used from any thread, one at a time.
unsafe impl Send for Held {}

impl Held {
    /// Takes a write of `data` at `off`: held when it continues what is held (or what
    /// was last written), else written now, after what is held.
    fn write(&mut self, data: &[u8], off: i64) -> c_int {
        let follows = if self.bytes.is_empty() {
            off == self.end || (off == 0 && data.len() == WAL_HEADER)
        } else {
            off == self.at + self.bytes.len() as i64
        };
        if !follows {
            let rc = self.write_out();
            if rc != ffi::SQLITE_OK {
                return rc;
            }
            self.end = off + data.len() as i64;
            let rc = self.put(data, off);
            // A commit frame's header written alone (a one-frame commit where the
            // last write failed, so this one does not continue it): its page, held
            // next, must still go out before the commit returns, and fail it if it
            // cannot. Held, it would meet the publishing barrier, too late to fail.
            self.commit_page_next = rc == ffi::SQLITE_OK && is_commit_header(data);
            return rc;
        }
        if self.bytes.is_empty() {
            self.at = off;
            HOLDING.fetch_add(1, Ordering::AcqRel);
        }
        self.bytes.extend_from_slice(data);
        self.end = off + data.len() as i64;
        if self.commit_page_next {
            return self.write_out();
        }
        if is_commit_header(data) {
            self.commit_page_next = true;
        } else if self.bytes.len() >= MAX_HELD {
            return self.write_out();
        }
        ffi::SQLITE_OK
    }

    /// Writes `data` at `off` to the file now.
    fn put(&mut self, data: &[u8], off: i64) -> c_int {
        self.writes += 1;
        #[cfg(test)]
        if self.fail_one_in > 0 {
            // xorshift64* over the write count: spread, and the same every run.
            let mut x = self.writes ^ 0x2545_f491_4f6c_dd1d;
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            if x.wrapping_mul(0x2545_f491_4f6c_dd1d)
                .is_multiple_of(self.fail_one_in)
            {
                return ffi::SQLITE_FULL;
            }
        }
        // SAFETY: `real` is open while this file is (closing takes the lock).
        unsafe { real_write(self.real, data, off) }
    }

    /// Writes what is held.
    fn write_out(&mut self) -> c_int {
        self.commit_page_next = false;
        if self.bytes.is_empty() || self.real.is_null() {
            return ffi::SQLITE_OK;
        }
        let mut rc = ffi::SQLITE_OK;
        let mut at = self.at;
        let bytes = std::mem::take(&mut self.bytes);
        for chunk in bytes.chunks(MAX_HELD) {
            rc = self.put(chunk, at);
            if rc != ffi::SQLITE_OK {
                break;
            }
            at += chunk.len() as i64;
        }
        // The buffer kept for the next commit's frames.
        self.bytes = bytes;
        self.bytes.clear();
        HOLDING.fetch_sub(1, Ordering::AcqRel);
        rc
    }
}

/// Whether `data`, written on its own, is a commit frame's header: a frame header
/// whose "database size" field is set.
fn is_commit_header(data: &[u8]) -> bool {
    data.len() == FRAME_HEADER && data[4..8] != [0; 4]
}

type SharedHeld = Arc<Mutex<Held>>;

/// How many WALs hold writes now: the database-side checks below look for held
/// writes only when some are.
static HOLDING: AtomicUsize = AtomicUsize::new(0);

/// Writes what the WALs at `wal_path` hold (normally nothing); the first failure.
fn write_out_wals(wal_path: &CStr) -> c_int {
    if HOLDING.load(Ordering::Acquire) == 0 {
        return ffi::SQLITE_OK;
    }
    let mut rc = ffi::SQLITE_OK;
    for (_, held) in lock(&OPEN_WALS)
        .iter()
        .filter(|(p, _)| p.as_c_str() == wal_path)
    {
        let done = lock(held).write_out();
        if rc == ffi::SQLITE_OK {
            rc = done;
        }
    }
    rc
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Every WAL open through this VFS, by path, so that its database's memory barrier
/// can write what it holds. Locked before any `Held`.
static OPEN_WALS: Mutex<Vec<(CString, SharedHeld)>> = Mutex::new(Vec::new());

/// A file opened through this VFS; the platform's file follows it in the same
/// allocation, at [`REAL_AT`].
#[repr(C)]
struct File {
    base: ffi::sqlite3_file,
    real: *mut ffi::sqlite3_file,
    /// A WAL: its held writes.
    wal: Option<SharedHeld>,
    /// A main database: its WAL's path.
    wal_path: Option<CString>,
}

/// Where the platform's file starts in a [`File`]'s allocation (SQLite allocates
/// `szOsFile` bytes, aligned for any type).
const REAL_AT: usize = std::mem::size_of::<File>().next_multiple_of(16);

/// # Safety
/// `f` must be a file this VFS opened.
unsafe fn me<'a>(f: *mut ffi::sqlite3_file) -> &'a mut File {
    unsafe { &mut *f.cast::<File>() }
}

/// # Safety
/// `real` must be an open platform file.
unsafe fn methods<'a>(real: *mut ffi::sqlite3_file) -> &'a ffi::sqlite3_io_methods {
    unsafe { &*(*real).pMethods }
}

/// # Safety
/// `real` must be an open platform file.
unsafe fn real_write(real: *mut ffi::sqlite3_file, data: &[u8], off: i64) -> c_int {
    let Ok(n) = c_int::try_from(data.len()) else {
        return ffi::SQLITE_IOERR_WRITE;
    };
    match unsafe { methods(real) }.xWrite {
        Some(write) => unsafe { write(real, data.as_ptr().cast(), n, off) },
        None => ffi::SQLITE_IOERR_WRITE,
    }
}

/// Writes what `f` holds, if it is a WAL; the result of that.
///
/// # Safety
/// `f` must be a file this VFS opened.
unsafe fn write_held(f: *mut ffi::sqlite3_file) -> c_int {
    match &unsafe { me(f) }.wal {
        Some(held) => lock(held).write_out(),
        None => ffi::SQLITE_OK,
    }
}

/// Calls `call` with the platform's file and its methods.
///
/// # Safety
/// `f` must be a file this VFS opened.
unsafe fn through(
    f: *mut ffi::sqlite3_file,
    call: impl FnOnce(*mut ffi::sqlite3_file, &ffi::sqlite3_io_methods) -> c_int,
) -> c_int {
    let real = unsafe { me(f) }.real;
    call(real, unsafe { methods(real) })
}

/// [`through`], after writing what `f` holds (that write's failure instead).
///
/// # Safety
/// `f` must be a file this VFS opened.
unsafe fn after_held(
    f: *mut ffi::sqlite3_file,
    call: impl FnOnce(*mut ffi::sqlite3_file, &ffi::sqlite3_io_methods) -> c_int,
) -> c_int {
    match unsafe { write_held(f) } {
        ffi::SQLITE_OK => unsafe { through(f, call) },
        rc => rc,
    }
}

unsafe extern "C" fn x_open(
    vfs: *mut ffi::sqlite3_vfs,
    name: ffi::sqlite3_filename,
    f: *mut ffi::sqlite3_file,
    flags: c_int,
    out_flags: *mut c_int,
) -> c_int {
    unsafe {
        let real_vfs = (*vfs).pAppData.cast::<ffi::sqlite3_vfs>();
        let real = f.cast::<u8>().add(REAL_AT).cast::<ffi::sqlite3_file>();
        ptr::write(
            f.cast::<File>(),
            File {
                base: ffi::sqlite3_file {
                    pMethods: ptr::null(),
                },
                real,
                wal: None,
                wal_path: None,
            },
        );
        let Some(open) = (*real_vfs).xOpen else {
            return ffi::SQLITE_CANTOPEN;
        };
        let rc = open(real_vfs, name, real, flags, out_flags);
        if (*real).pMethods.is_null() {
            return if rc == ffi::SQLITE_OK {
                ffi::SQLITE_CANTOPEN
            } else {
                rc
            };
        }
        if rc != ffi::SQLITE_OK {
            if let Some(close) = methods(real).xClose {
                close(real);
            }
            return rc;
        }
        let file = me(f);
        if !name.is_null() {
            let name = CStr::from_ptr(name);
            if flags & ffi::SQLITE_OPEN_WAL != 0 {
                let held = Arc::new(Mutex::new(Held {
                    bytes: Vec::new(),
                    at: 0,
                    end: -1,
                    commit_page_next: false,
                    real,
                    writes: 0,
                    #[cfg(test)]
                    fail_one_in: 0,
                }));
                lock(&OPEN_WALS).push((name.to_owned(), held.clone()));
                file.wal = Some(held);
            } else if flags & ffi::SQLITE_OPEN_MAIN_DB != 0 {
                let mut path = name.to_bytes().to_vec();
                path.extend_from_slice(b"-wal");
                file.wal_path = CString::new(path).ok();
            }
        }
        file.base.pMethods = &METHODS;
        ffi::SQLITE_OK
    }
}

unsafe extern "C" fn x_close(f: *mut ffi::sqlite3_file) -> c_int {
    unsafe {
        let file = me(f);
        let mut rc = ffi::SQLITE_OK;
        if let Some(held) = file.wal.take() {
            lock(&OPEN_WALS).retain(|(_, h)| !Arc::ptr_eq(h, &held));
            let mut h = lock(&held);
            rc = h.write_out();
            h.real = ptr::null_mut();
        }
        file.wal_path = None;
        let closed = match methods(file.real).xClose {
            Some(close) => close(file.real),
            None => ffi::SQLITE_OK,
        };
        if rc == ffi::SQLITE_OK { closed } else { rc }
    }
}

unsafe extern "C" fn x_read(
    f: *mut ffi::sqlite3_file,
    buf: *mut c_void,
    amt: c_int,
    off: ffi::sqlite3_int64,
) -> c_int {
    unsafe {
        after_held(f, |real, m| {
            m.xRead
                .map_or(ffi::SQLITE_IOERR_READ, |read| read(real, buf, amt, off))
        })
    }
}

unsafe extern "C" fn x_write(
    f: *mut ffi::sqlite3_file,
    buf: *const c_void,
    amt: c_int,
    off: ffi::sqlite3_int64,
) -> c_int {
    unsafe {
        let file = me(f);
        let Some(held) = &file.wal else {
            let real = file.real;
            return methods(real)
                .xWrite
                .map_or(ffi::SQLITE_IOERR_WRITE, |write| write(real, buf, amt, off));
        };
        let Ok(len) = usize::try_from(amt) else {
            return ffi::SQLITE_IOERR_WRITE;
        };
        let data = std::slice::from_raw_parts(buf.cast::<u8>(), len);
        lock(held).write(data, off)
    }
}

unsafe extern "C" fn x_truncate(f: *mut ffi::sqlite3_file, size: ffi::sqlite3_int64) -> c_int {
    unsafe {
        after_held(f, |real, m| {
            m.xTruncate
                .map_or(ffi::SQLITE_IOERR_TRUNCATE, |t| t(real, size))
        })
    }
}

unsafe extern "C" fn x_sync(f: *mut ffi::sqlite3_file, flags: c_int) -> c_int {
    unsafe {
        after_held(f, |real, m| {
            m.xSync.map_or(ffi::SQLITE_IOERR_FSYNC, |s| s(real, flags))
        })
    }
}

unsafe extern "C" fn x_file_size(
    f: *mut ffi::sqlite3_file,
    size: *mut ffi::sqlite3_int64,
) -> c_int {
    unsafe {
        after_held(f, |real, m| {
            m.xFileSize
                .map_or(ffi::SQLITE_IOERR_FSTAT, |s| s(real, size))
        })
    }
}

unsafe extern "C" fn x_lock(f: *mut ffi::sqlite3_file, level: c_int) -> c_int {
    unsafe {
        through(f, |real, m| {
            m.xLock.map_or(ffi::SQLITE_IOERR_LOCK, |l| l(real, level))
        })
    }
}

unsafe extern "C" fn x_unlock(f: *mut ffi::sqlite3_file, level: c_int) -> c_int {
    unsafe {
        through(f, |real, m| {
            m.xUnlock
                .map_or(ffi::SQLITE_IOERR_UNLOCK, |l| l(real, level))
        })
    }
}

unsafe extern "C" fn x_check_reserved_lock(f: *mut ffi::sqlite3_file, out: *mut c_int) -> c_int {
    unsafe {
        through(f, |real, m| {
            m.xCheckReservedLock
                .map_or(ffi::SQLITE_IOERR_CHECKRESERVEDLOCK, |c| c(real, out))
        })
    }
}

unsafe extern "C" fn x_file_control(
    f: *mut ffi::sqlite3_file,
    op: c_int,
    arg: *mut c_void,
) -> c_int {
    unsafe {
        after_held(f, |real, m| {
            m.xFileControl
                .map_or(ffi::SQLITE_NOTFOUND, |c| c(real, op, arg))
        })
    }
}

unsafe extern "C" fn x_sector_size(f: *mut ffi::sqlite3_file) -> c_int {
    unsafe { through(f, |real, m| m.xSectorSize.map_or(4096, |s| s(real))) }
}

unsafe extern "C" fn x_device_characteristics(f: *mut ffi::sqlite3_file) -> c_int {
    unsafe { through(f, |real, m| m.xDeviceCharacteristics.map_or(0, |d| d(real))) }
}

unsafe extern "C" fn x_shm_map(
    f: *mut ffi::sqlite3_file,
    page: c_int,
    size: c_int,
    extend: c_int,
    out: *mut *mut c_void,
) -> c_int {
    unsafe {
        through(f, |real, m| match (m.iVersion >= 2, m.xShmMap) {
            (true, Some(map)) => map(real, page, size, extend, out),
            _ => ffi::SQLITE_IOERR_SHMMAP,
        })
    }
}

/// WAL-index lock 0 is the WAL's write lock.
const WAL_WRITE_LOCK: c_int = 0;

unsafe extern "C" fn x_shm_lock(
    f: *mut ffi::sqlite3_file,
    offset: c_int,
    n: c_int,
    flags: c_int,
) -> c_int {
    unsafe {
        let file = me(f);
        // A write transaction ends. After a commit nothing is held; after a rollback
        // frames it spilled may be: they go out while the lock is still ours, as
        // SQLite would have written them, so that they can never land later over
        // frames another connection wrote in the meantime.
        if offset == WAL_WRITE_LOCK
            && flags & ffi::SQLITE_SHM_UNLOCK != 0
            && let Some(path) = &file.wal_path
        {
            write_out_wals(path);
        }
        through(f, |real, m| match (m.iVersion >= 2, m.xShmLock) {
            (true, Some(l)) => l(real, offset, n, flags),
            _ => ffi::SQLITE_IOERR_SHMLOCK,
        })
    }
}

/// SQLite's barrier between the two copies of the WAL-index header it publishes: no
/// frame may still be held then (see the module doc).
unsafe extern "C" fn x_shm_barrier(f: *mut ffi::sqlite3_file) {
    unsafe {
        let file = me(f);
        if let Some(path) = &file.wal_path {
            let rc = write_out_wals(path);
            if rc != ffi::SQLITE_OK {
                eprintln!(
                    "hitl: writing SQLite's WAL failed (code {rc}) as a commit was being published; stopping so that no reader sees it"
                );
                // Tests count it (the test that fails writes asserts none happen).
                #[cfg(test)]
                {
                    tests::LATE_FAILURES.fetch_add(1, Ordering::Relaxed);
                    return;
                }
                #[cfg(not(test))]
                std::process::abort();
            }
        }
        let real = file.real;
        if methods(real).iVersion >= 2
            && let Some(barrier) = methods(real).xShmBarrier
        {
            barrier(real);
        }
    }
}

unsafe extern "C" fn x_shm_unmap(f: *mut ffi::sqlite3_file, delete: c_int) -> c_int {
    unsafe {
        through(f, |real, m| match (m.iVersion >= 2, m.xShmUnmap) {
            (true, Some(u)) => u(real, delete),
            _ => ffi::SQLITE_OK,
        })
    }
}

unsafe extern "C" fn x_fetch(
    f: *mut ffi::sqlite3_file,
    off: ffi::sqlite3_int64,
    amt: c_int,
    out: *mut *mut c_void,
) -> c_int {
    unsafe {
        after_held(f, |real, m| match (m.iVersion >= 3, m.xFetch) {
            (true, Some(fetch)) => fetch(real, off, amt, out),
            _ => {
                *out = ptr::null_mut();
                ffi::SQLITE_OK
            }
        })
    }
}

unsafe extern "C" fn x_unfetch(
    f: *mut ffi::sqlite3_file,
    off: ffi::sqlite3_int64,
    p: *mut c_void,
) -> c_int {
    unsafe {
        through(f, |real, m| match (m.iVersion >= 3, m.xUnfetch) {
            (true, Some(unfetch)) => unfetch(real, off, p),
            _ => ffi::SQLITE_OK,
        })
    }
}

static METHODS: ffi::sqlite3_io_methods = ffi::sqlite3_io_methods {
    iVersion: 3,
    xClose: Some(x_close),
    xRead: Some(x_read),
    xWrite: Some(x_write),
    xTruncate: Some(x_truncate),
    xSync: Some(x_sync),
    xFileSize: Some(x_file_size),
    xLock: Some(x_lock),
    xUnlock: Some(x_unlock),
    xCheckReservedLock: Some(x_check_reserved_lock),
    xFileControl: Some(x_file_control),
    xSectorSize: Some(x_sector_size),
    xDeviceCharacteristics: Some(x_device_characteristics),
    xShmMap: Some(x_shm_map),
    xShmLock: Some(x_shm_lock),
    xShmBarrier: Some(x_shm_barrier),
    xShmUnmap: Some(x_shm_unmap),
    xFetch: Some(x_fetch),
    xUnfetch: Some(x_unfetch),
};

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicI32, AtomicUsize, Ordering};

    use rusqlite::{Connection, OpenFlags, params};

    use super::*;

    fn writer(path: &std::path::Path) -> Connection {
        register().unwrap();
        let c = Connection::open_with_flags_and_vfs(path, OpenFlags::default(), NAME).unwrap();
        c.pragma_update(None, "journal_mode", "WAL").unwrap();
        c.pragma_update(None, "synchronous", "NORMAL").unwrap();
        c.pragma_update(None, "wal_autocheckpoint", 0).unwrap();
        c
    }

    fn count_and_sum(c: &Connection) -> (i64, i64) {
        c.query_row("SELECT count(*), coalesce(sum(n), 0) FROM t", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .unwrap()
    }

    /// Every commit is whole to a reader on the platform's VFS at once, through small
    /// and big (spilled, over `MAX_HELD`) transactions, rollbacks of spilled ones
    /// followed by another connection's commit, and WAL restarts.
    #[test]
    fn readers_see_every_commit_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g.db");
        let w = writer(&path);
        // A small page cache: big transactions spill frames before their commit.
        w.pragma_update(None, "cache_size", 20).unwrap();
        w.execute_batch("CREATE TABLE t (n INTEGER, pad BLOB); CREATE INDEX t_n ON t (n);")
            .unwrap();
        let reader = Connection::open(&path).unwrap();
        // Another writer (as `hitl gc` is), on the platform's VFS.
        let other = Connection::open(&path).unwrap();
        other
            .busy_timeout(std::time::Duration::from_secs(5))
            .unwrap();
        let (mut rows, mut sum) = (0i64, 0i64);
        for round in 0..120i64 {
            let big = round % 10 == 3 || round % 10 == 7;
            let (n, pad) = if big {
                (400, 4000)
            } else {
                (1 + round % 3, 100)
            };
            let tx = w.unchecked_transaction().unwrap();
            for i in 0..n {
                tx.execute(
                    "INSERT INTO t VALUES (?1, zeroblob(?2))",
                    params![round * 1000 + i, pad],
                )
                .unwrap();
            }
            if round % 10 == 7 {
                tx.rollback().unwrap();
                // Its spilled frames must not land over the other writer's commit.
                let n = -round;
                other
                    .execute("INSERT INTO t VALUES (?1, zeroblob(10))", [n])
                    .unwrap();
                rows += 1;
                sum += n;
            } else {
                tx.commit().unwrap();
                rows += n;
                sum += (0..n).map(|i| round * 1000 + i).sum::<i64>();
            }
            assert_eq!(count_and_sum(&reader), (rows, sum), "after round {round}");
            if round % 25 == 24 {
                // Folded into the database: the next commit starts the WAL over.
                let busy: i64 = w
                    .query_row("PRAGMA wal_checkpoint(RESTART)", [], |r| r.get(0))
                    .unwrap();
                assert_eq!(busy, 0);
            }
        }
        drop(w);
        let again = Connection::open(&path).unwrap();
        assert_eq!(count_and_sum(&again), (rows, sum));
        let ok: String = again
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))
            .unwrap();
        assert_eq!(ok, "ok");
    }

    /// A power cut, as the disk may leave the WAL: after acknowledged commits (small
    /// ones, and big ones whose frames spill before their commit, and a spilled one
    /// rolled back), the WAL is cut at a random byte, and half the time its last frame
    /// torn too. Read back through the platform's VFS, the database must pass
    /// `integrity_check` and hold exactly the commits whose frames all lie before the
    /// damage: a prefix, none lost that was whole on disk. `HITL_POWER_CUTS` cases
    /// (300; `tools/test-all --long` runs 5,000); `HITL_POWER_CUT_SEED` replays one run.
    #[test]
    fn a_power_cut_leaves_exactly_a_prefix_of_the_commits() {
        let cases: u64 = std::env::var("HITL_POWER_CUTS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(300);
        let seed: u64 = std::env::var("HITL_POWER_CUT_SEED")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_nanos() as u64
                    | 1
            });
        // xorshift64*: enough to spread cuts, and replayable from the seed.
        let mut state = seed;
        let mut next = move |below: u64| {
            state ^= state >> 12;
            state ^= state << 25;
            state ^= state >> 27;
            state.wrapping_mul(0x2545_f491_4f6c_dd1d) % below.max(1)
        };
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g.db");
        // The schema folded into the database: every commit below lives in the WAL.
        Connection::open(&path)
            .unwrap()
            .execute_batch(
                "PRAGMA journal_mode = WAL; CREATE TABLE t (n INTEGER PRIMARY KEY, pad BLOB);",
            )
            .unwrap();
        let w = writer(&path);
        w.pragma_update(None, "cache_size", 20).unwrap();
        let wal = dir.path().join("g.db-wal");
        // The rows there are after each acknowledged commit (numbered 0.., in
        // commit order).
        let mut commits: Vec<i64> = Vec::new();
        let mut rows = 0i64;
        for round in 0..48i64 {
            let (n, pad) = match round % 8 {
                3 | 6 => (150, 3000),
                _ => (1 + round % 4, 200 + round * 37),
            };
            let tx = w.unchecked_transaction().unwrap();
            for i in 0..n {
                tx.execute(
                    "INSERT INTO t VALUES (?1, randomblob(?2))",
                    params![rows + i, pad],
                )
                .unwrap();
            }
            if round == 14 {
                tx.rollback().unwrap();
                continue;
            }
            tx.commit().unwrap();
            rows += n;
            commits.push(rows);
        }
        // Copied with the writer still open: what the disk held at the cut.
        let db_bytes = std::fs::read(&path).unwrap();
        let wal_bytes = std::fs::read(&wal).unwrap();
        let page_size = u32::from_be_bytes(wal_bytes[8..12].try_into().unwrap()) as usize;
        let frame = FRAME_HEADER + page_size;
        // Where each commit's frames end: after its commit frame, the one whose
        // "database size" field is set (a rolled-back transaction's frames, written
        // over by later commits or left past them, have none).
        let ends: Vec<usize> = (WAL_HEADER..wal_bytes.len())
            .step_by(frame)
            .filter(|&at| at + frame <= wal_bytes.len() && wal_bytes[at + 4..at + 8] != [0; 4])
            .map(|at| at + frame)
            .collect();
        assert_eq!(ends.len(), commits.len(), "one commit frame per commit");
        let case_db = dir.path().join("cut.db");
        let case_wal = dir.path().join("cut.db-wal");
        for case in 0..cases {
            let cut = next(wal_bytes.len() as u64 + 1) as usize;
            let mut cut_wal = wal_bytes[..cut].to_vec();
            // Everything before this offset is as SQLite wrote it.
            let mut whole = cut;
            if cut > WAL_HEADER && next(2) == 0 {
                let last = WAL_HEADER + (cut - WAL_HEADER - 1) / frame * frame;
                let at = last + next((cut - last) as u64) as usize;
                cut_wal[at] ^= 1 + next(255) as u8;
                whole = last;
            }
            let _ = std::fs::remove_file(dir.path().join("cut.db-shm"));
            std::fs::write(&case_db, &db_bytes).unwrap();
            std::fs::write(&case_wal, &cut_wal).unwrap();
            let expected = ends
                .iter()
                .zip(&commits)
                .take_while(|(end, _)| **end <= whole)
                .last()
                .map_or(0, |(_, rows)| *rows);
            let c = Connection::open(&case_db).unwrap();
            let ok: String = c
                .query_row("PRAGMA integrity_check", [], |r| r.get(0))
                .unwrap();
            let (count, top): (i64, i64) = c
                .query_row("SELECT count(*), coalesce(max(n) + 1, 0) FROM t", [], |r| {
                    Ok((r.get(0)?, r.get(1)?))
                })
                .unwrap();
            let why = format!(
                "case {case} (HITL_POWER_CUT_SEED={seed}): WAL cut at {cut} of {}, whole to {whole}",
                wal_bytes.len()
            );
            assert_eq!(ok, "ok", "{why}");
            assert_eq!((count, top), (expected, expected), "{why}");
        }
    }

    /// A commit's frames go to the file in one write.
    #[test]
    fn a_commit_is_one_write() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g.db");
        let w = writer(&path);
        w.execute_batch(
            "CREATE TABLE a (n INTEGER); CREATE INDEX a_n ON a (n);
             CREATE TABLE b (n INTEGER); CREATE INDEX b_n ON b (n);",
        )
        .unwrap();
        w.wal_hook(Some(note_frames));
        // The first commit after opening finds the WAL's end; later ones continue it.
        w.execute("INSERT INTO a VALUES (0)", []).unwrap();
        let wal = CString::new(format!("{}-wal", path.display())).unwrap();
        let writes = || {
            let wals = lock(&OPEN_WALS);
            let (_, held) = wals.iter().find(|(p, _)| *p == wal).unwrap();
            lock(held).writes
        };
        let before = writes();
        let tx = w.unchecked_transaction().unwrap();
        tx.execute("INSERT INTO a VALUES (1)", []).unwrap();
        tx.execute("INSERT INTO b VALUES (1)", []).unwrap();
        let frames_before = FRAMES.load(Ordering::Relaxed);
        tx.commit().unwrap();
        assert_eq!(
            FRAMES.load(Ordering::Relaxed) - frames_before,
            4,
            "four pages changed"
        );
        assert_eq!(writes() - before, 1);
    }

    /// Commits published while a write the barrier made failed (counted in tests,
    /// where the process would otherwise stop).
    pub(super) static LATE_FAILURES: AtomicUsize = AtomicUsize::new(0);

    /// A full disk, as the soak meets it: writes fail now and then (one in
    /// 3 to 40), through one-page commits (a lone frame whose header is the
    /// commit's), many-page ones, spilled ones rolled back, and WAL restarts, with a
    /// reader and a checkpointer beside. Every failed write fails its commit then
    /// and there, never the publishing of one (which stops the process); and the
    /// database holds exactly the commits that returned.
    #[test]
    fn a_failed_write_fails_its_commit_never_its_publication() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g.db");
        let w = writer(&path);
        w.pragma_update(None, "journal_size_limit", 1 << 20)
            .unwrap();
        w.pragma_update(None, "cache_size", 20).unwrap();
        w.execute_batch(
            "CREATE TABLE t (n INTEGER, pad BLOB); CREATE INDEX t_n ON t (n);
             CREATE TABLE u (n INTEGER);",
        )
        .unwrap();
        let wal = CString::new(format!("{}-wal", path.display())).unwrap();
        let set_failures = |one_in: u64| {
            let wals = lock(&OPEN_WALS);
            let (_, held) = wals.iter().find(|(p, _)| *p == wal).unwrap();
            lock(held).fail_one_in = one_in;
        };
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let beside = std::thread::spawn({
            let (path, stop) = (path.clone(), stop.clone());
            move || {
                let c = Connection::open(&path).unwrap();
                while !stop.load(Ordering::Relaxed) {
                    let _ = c.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()));
                    let _ = c.query_row("SELECT count(*) FROM t", [], |r| r.get::<_, i64>(0));
                }
            }
        });
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = move |below: u64| {
            state ^= state >> 12;
            state ^= state << 25;
            state ^= state >> 27;
            state.wrapping_mul(0x2545_f491_4f6c_dd1d) % below.max(1)
        };
        let (mut t_rows, mut u_rows, mut failed) = (0i64, 0i64, 0);
        for round in 0..3000i64 {
            set_failures(if next(3) == 0 { 0 } else { 3 + next(38) });
            let lone = next(2) == 0;
            let most = if next(10) == 0 { 200 } else { 5 };
            let n = 1 + next(most) as i64;
            let pad = 50 + next(3000) as i64;
            let ops = |w: &Connection| -> rusqlite::Result<()> {
                if lone {
                    w.prepare_cached("INSERT INTO u VALUES (?1)")?
                        .execute([round])?;
                } else {
                    for i in 0..n {
                        w.prepare_cached("INSERT INTO t VALUES (?1, zeroblob(?2))")?
                            .execute(params![round * 1000 + i, pad])?;
                    }
                }
                Ok(())
            };
            // As the store's writer does: one transaction, rolled back on failure.
            w.prepare_cached("BEGIN IMMEDIATE")
                .unwrap()
                .execute([])
                .unwrap();
            let done = ops(&w).and_then(|()| w.prepare_cached("COMMIT")?.execute([]));
            match done {
                Ok(_) if lone => u_rows += 1,
                Ok(_) => t_rows += n,
                Err(_) => {
                    failed += 1;
                    if !w.is_autocommit() {
                        let _ = w.prepare_cached("ROLLBACK").and_then(|mut s| s.execute([]));
                    }
                }
            }
            set_failures(0);
            if round % 97 == 0 {
                let _ = w.query_row("PRAGMA wal_checkpoint(RESTART)", [], |_| Ok(()));
            }
        }
        stop.store(true, Ordering::Relaxed);
        beside.join().unwrap();
        assert!(failed > 100, "too few failures to mean anything: {failed}");
        assert_eq!(
            LATE_FAILURES.load(Ordering::Relaxed),
            0,
            "a commit was published whose frames could not be written"
        );
        drop(w);
        let again = Connection::open(&path).unwrap();
        let ok: String = again
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))
            .unwrap();
        assert_eq!(ok, "ok");
        let count = |table: &str| -> i64 {
            again
                .query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))
                .unwrap()
        };
        assert_eq!(
            (count("t"), count("u")),
            (t_rows, u_rows),
            "every commit that returned, and no other"
        );
    }

    /// Frames in the WAL after the latest commit of `a_commit_is_one_write`.
    static FRAMES: AtomicI32 = AtomicI32::new(0);

    fn note_frames(_: &rusqlite::hooks::Wal, frames: c_int) -> rusqlite::Result<()> {
        FRAMES.store(frames, Ordering::Relaxed);
        Ok(())
    }
}
