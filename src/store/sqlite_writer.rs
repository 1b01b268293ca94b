//! SQLite writes on one rusqlite connection, a whole batch per trip to a blocking
//! thread.
//!
//! Through sqlx every statement is a round trip to its SQLite worker thread, which on
//! this class of machine costs more than the statement itself (~70 µs against a few);
//! a batch of a hundred requests paid for hundreds of them. Here the batch runs as one
//! transaction in one thread, statement after statement. Reads stay on sqlx.
//!
//! Commits do not checkpoint the WAL (that fsyncs, and would land on some unlucky
//! request's latency); a background thread checkpoints once a second instead. A
//! passive checkpoint never waits, so under steady writes it never catches up with
//! the newest frame and the WAL is never started over: it would grow without bound.
//! Once the WAL holds [`WAL_RESTART_FRAMES`] frames (SQLite's WAL hook counts them
//! at each commit) the writer runs a RESTART checkpoint between batches (it is the
//! only writer, so only readers of older snapshots are waited for): every frame is
//! folded in and the next commit writes the WAL from its start again. The file is
//! written over, not emptied: emptying it (TRUNCATE) had the next 16 MB of commits
//! allocate page-cache pages and disk blocks anew, a fifth of the writer's time
//! under load. `journal_size_limit` trims the file whenever the WAL restarts.

use std::{
    path::Path,
    sync::{
        Arc, Mutex, Weak,
        atomic::{AtomicI32, Ordering},
    },
    time::{Duration, Instant},
};

use anyhow::{Context, Result};
use rusqlite::{Connection, OpenFlags, params};

use super::{NewEvent, Outcome, REMOTE_PROJECT, StoreOp, sql, wal_gather};
use crate::protocol::{Answer, Origin, Request, Variant};

/// How often the WAL is folded back into the database file.
const CHECKPOINT_EVERY: Duration = Duration::from_secs(1);

/// A WAL holding this much (in 4 KiB pages) is checkpointed in full and started
/// over, whatever the load.
pub const WAL_RESTART_BYTES: u64 = 16 << 20;
const WAL_RESTART_FRAMES: i32 = (WAL_RESTART_BYTES / 4096) as i32;

/// The WAL's file is cut back to this size when the WAL starts over: room for a
/// full WAL and the batch that went past it, so the file is written over in place.
pub const WAL_KEEP_BYTES: u64 = 2 * WAL_RESTART_BYTES;

/// How long a RESTART checkpoint waits for readers of older snapshots before the
/// writer goes on; it tries again [`RESTART_RETRY`] later.
const RESTART_WAIT: Duration = Duration::from_millis(500);
const RESTART_RETRY: Duration = Duration::from_secs(1);

/// Frames in the WAL after the writer's latest commit, as SQLite's WAL hook reports
/// them. The hook is a plain function, so this is one per process: with several
/// writers in one process (tests), one's big WAL makes the others checkpoint early,
/// which costs a checkpoint and nothing else.
static WAL_FRAMES: AtomicI32 = AtomicI32::new(0);

fn note_wal_frames(_: &rusqlite::hooks::Wal, frames: std::ffi::c_int) -> rusqlite::Result<()> {
    WAL_FRAMES.fetch_max(frames, Ordering::Relaxed);
    Ok(())
}

/// The SQLite write connection.
#[derive(Debug)]
pub struct SqliteWriter {
    conn: Mutex<Connection>,
    /// When a RESTART checkpoint that readers held back may be tried again.
    restart_after: Mutex<Option<Instant>>,
    /// Keeps the checkpoint thread going while this writer lives.
    _alive: Arc<()>,
}

/// How long a batch waits for another process's write lock.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// Opens `path`; `gathered`: through [`wal_gather`], as the writer does.
fn open(path: &Path, gathered: bool) -> Result<Connection> {
    let conn = if gathered {
        wal_gather::register().map_err(anyhow::Error::msg)?;
        Connection::open_with_flags_and_vfs(path, OpenFlags::default(), wal_gather::NAME)?
    } else {
        Connection::open(path)?
    };
    conn.busy_timeout(BUSY_TIMEOUT)?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    // As the sqlx pool: a commit survives a process crash; only a power cut can
    // take back the last ones, and the spool still has those.
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    conn.pragma_update(None, "wal_autocheckpoint", 0)?;
    // When the WAL starts over, its file is cut back to this size.
    conn.pragma_update(None, "journal_size_limit", WAL_KEEP_BYTES as i64)?;
    Ok(conn)
}

impl SqliteWriter {
    /// Opens the (already migrated) database at `path` for writing.
    pub fn open(path: &Path) -> Result<SqliteWriter> {
        let conn = open(path, crate::runtime::tuning::fast_paths())?;
        // After `wal_autocheckpoint`, which replaces any WAL hook with its own.
        conn.wal_hook(Some(note_wal_frames));
        let alive = Arc::new(());
        let weak = Arc::downgrade(&alive);
        let checkpoint_path = path.to_path_buf();
        std::thread::Builder::new()
            .name("hitl-checkpoint".into())
            .spawn(move || checkpoint_loop(&checkpoint_path, weak))
            .context("starting the checkpoint thread")?;
        Ok(SqliteWriter {
            conn: Mutex::new(conn),
            restart_after: Mutex::new(None),
            _alive: alive,
        })
    }

    /// Checkpoints a WAL of [`WAL_RESTART_FRAMES`] or more in full, so that the next
    /// commit starts it over. Called between batches, after their acknowledgements ran.
    pub fn maintain(&self) {
        if !self.restart_due() {
            return;
        }
        let mut restart_after = self.restart_after.lock().unwrap_or_else(|e| e.into_inner());
        let conn = self.conn.lock().unwrap_or_else(|e| e.into_inner());
        let _ = conn.busy_timeout(RESTART_WAIT);
        match conn.query_row("PRAGMA wal_checkpoint(RESTART)", [], |r| r.get::<_, i64>(0)) {
            Ok(0) => {
                tracing::debug!("WAL checkpointed; the next commit starts it over");
                WAL_FRAMES.store(0, Ordering::Relaxed);
                *restart_after = None;
            }
            Ok(_) => {
                tracing::debug!("readers held the WAL restart back; trying later");
                *restart_after = Some(Instant::now() + RESTART_RETRY);
            }
            Err(e) => {
                tracing::debug!("WAL restart: {e}");
                *restart_after = Some(Instant::now() + RESTART_RETRY);
            }
        }
        let _ = conn.busy_timeout(BUSY_TIMEOUT);
    }

    /// Whether the WAL is to be started over after the next batch: it holds
    /// [`WAL_RESTART_FRAMES`], and no restart that readers held back waits to be
    /// tried again. Never waits: a restart under way counts as due.
    fn restart_due(&self) -> bool {
        WAL_FRAMES.load(Ordering::Relaxed) >= WAL_RESTART_FRAMES
            && self
                .restart_after
                .try_lock()
                .map_or(true, |retry| !retry.is_some_and(|t| Instant::now() < t))
    }

    /// Applies `ops` in one transaction on this thread if that needs no waiting: no
    /// batch in progress here and no other process holding the write lock. `None`
    /// when it would have had to wait, or failed (the caller then queues them for the
    /// writer, which retries).
    pub fn try_apply_now(&self, ops: &[StoreOp]) -> Option<Vec<Outcome>> {
        // A WAL due to start over goes to the writer, which restarts it after the
        // batch: writes made here alone would let it grow.
        if self.restart_due() {
            return None;
        }
        let mut conn = self.conn.try_lock().ok()?;
        conn.busy_timeout(Duration::ZERO).ok()?;
        let done = apply(&mut conn, ops);
        let _ = conn.busy_timeout(BUSY_TIMEOUT);
        done.map_err(|e| tracing::debug!("writing at once: {e:#}; queued instead"))
            .ok()
    }

    /// Applies `ops` in one transaction, on this thread; returns what each did.
    pub fn apply_blocking(&self, ops: &[StoreOp]) -> Result<Vec<Outcome>> {
        let mut conn = self.conn.lock().unwrap_or_else(|e| e.into_inner());
        apply(&mut conn, ops)
    }

    /// Applies `ops` in one transaction on the blocking pool; returns what each did.
    pub async fn apply(self: &Arc<Self>, ops: Vec<StoreOp>) -> Result<Vec<Outcome>> {
        let me = self.clone();
        tokio::task::spawn_blocking(move || {
            let done = {
                let mut conn = me.conn.lock().unwrap_or_else(|e| e.into_inner());
                apply(&mut conn, &ops)
            };
            me.maintain();
            done
        })
        .await
        .context("the SQLite writer thread failed")?
    }
}

fn checkpoint_loop(path: &Path, alive: Weak<()>) {
    let Ok(conn) = open(path, false) else {
        return;
    };
    while alive.upgrade().is_some() {
        std::thread::sleep(CHECKPOINT_EVERY);
        // PASSIVE: never waits for readers or blocks the writer.
        if let Err(e) = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(())) {
            tracing::debug!("WAL checkpoint: {e}");
        }
    }
}

/// Records a request once. `column` is its `origin` column: the spool's for a row
/// whose request lives in a question file, else who asked (never the spool's).
fn insert_request(
    c: &Connection,
    project: &str,
    r: &Request,
    variant: Variant,
    column: Origin,
) -> Result<()> {
    c.prepare_cached(sql::INSERT_REQUEST)?.execute(params![
        uuid::Uuid::now_v7().to_string(),
        project,
        r.id,
        r.timestamp.to_string(),
        r.timestamp.as_millisecond(),
        variant.as_str(),
        r.agent_id,
        r.agent_name,
        r.kind.as_str(),
        r.priority.as_str(),
        super::CONTENT_COLUMN,
        serde_json::to_string(r)?,
        column.as_str(),
        r.deadline().map(|d| d.as_millisecond()),
    ])?;
    Ok(())
}

fn insert_event(c: &Connection, e: &NewEvent) -> Result<(i64, bool)> {
    let inserted = c
        .prepare_cached(sql::SQLITE_INSERT_EVENT)?
        .execute(params![
            e.source_app,
            e.session_id,
            e.hook_event_type,
            serde_json::to_string(&e.payload)?,
            serde_json::to_string(&e.extra)?,
            e.timestamp_ms,
            e.hitl_json()?,
            e.idempotency_key,
        ])?;
    if inserted == 1 {
        return Ok((c.last_insert_rowid(), false));
    }
    let id = c
        .prepare_cached(sql::EVENT_BY_KEY)?
        .query_row(params![e.idempotency_key], |row| row.get(0))?;
    Ok((id, true))
}

fn answer_json(a: &Option<Box<Answer>>) -> Result<Option<String>> {
    Ok(a.as_ref().map(serde_json::to_string).transpose()?)
}

/// Applies `ops` in one transaction. BEGIN and COMMIT are prepared once, as every
/// other statement here: rusqlite's `Transaction` parses them anew each time, which
/// was a tenth of the instructions of a lone request's commit.
fn apply(conn: &mut Connection, ops: &[StoreOp]) -> Result<Vec<Outcome>> {
    conn.prepare_cached("BEGIN IMMEDIATE")?.execute([])?;
    let done = apply_ops(conn, ops).and_then(|outcomes| {
        conn.prepare_cached("COMMIT")?.execute([])?;
        Ok(outcomes)
    });
    if done.is_err() && !conn.is_autocommit() {
        let _ = conn
            .prepare_cached("ROLLBACK")
            .and_then(|mut s| s.execute([]));
    }
    done
}

fn apply_ops(tx: &Connection, ops: &[StoreOp]) -> Result<Vec<Outcome>> {
    let mut outcomes = Vec::with_capacity(ops.len());
    let now = || jiff::Timestamp::now().to_string();
    for op in ops {
        let outcome = match op {
            StoreOp::Asked {
                project,
                request,
                variant,
            } => {
                insert_request(tx, project, request, *variant, Origin::Spool)?;
                Outcome::Done
            }
            StoreOp::Delivering {
                project,
                request,
                variant,
                answer,
            } => {
                tx.prepare_cached(sql::INSERT_DELIVERY)?.execute(params![
                    project,
                    request.id,
                    request.timestamp.to_string(),
                    variant.as_str(),
                    serde_json::to_string(request)?,
                    serde_json::to_string(answer)?,
                ])?;
                Outcome::Done
            }
            StoreOp::Finished {
                project,
                request,
                variant,
                status,
                answer,
                reason,
            } => {
                insert_request(tx, project, request, *variant, Origin::Spool)?;
                tx.prepare_cached(sql::FINISH_REQUEST)?.execute(params![
                    status.as_str(),
                    answer_json(answer)?,
                    answer.as_ref().map(|a| a.responded_by.clone()),
                    now(),
                    reason,
                    project,
                    request.id,
                    request.timestamp.to_string(),
                ])?;
                tx.prepare_cached(sql::DELETE_DELIVERY)?.execute(params![
                    project,
                    request.id,
                    request.timestamp.to_string(),
                ])?;
                Outcome::Done
            }
            StoreOp::Event(event) => {
                let (event_id, existing) = insert_event(tx, event)?;
                Outcome::Created { event_id, existing }
            }
            StoreOp::Trail(t) => {
                tx.prepare_cached(sql::INSERT_TRAIL)?.execute(params![
                    t.id,
                    t.at_ms,
                    t.step,
                    t.surface,
                    t.detail.to_string()
                ])?;
                Outcome::Done
            }
            StoreOp::CreateRemote { request, event } => {
                let (event_id, existing) = insert_event(tx, event)?;
                if !existing {
                    let mut r = (**request).clone();
                    r.id = event_id.to_string();
                    insert_request(
                        tx,
                        REMOTE_PROJECT,
                        &r,
                        Variant::Canonical,
                        super::stored_origin_column(&r),
                    )?;
                }
                Outcome::Created { event_id, existing }
            }
            StoreOp::Settle {
                id,
                status,
                answer,
                reason,
            } => {
                let changed = tx.prepare_cached(sql::SETTLE)?.execute(params![
                    status.as_str(),
                    answer_json(answer)?,
                    answer.as_ref().map(|a| a.responded_by.clone()),
                    now(),
                    reason,
                    id,
                ])?;
                Outcome::Settled(changed == 1)
            }
        };
        outcomes.push(outcome);
    }
    Ok(outcomes)
}
