//! Retention: history does not grow for ever.
//!
//! Ended requests and agent events older than `[history] keep_days` are deleted;
//! then, while history is bigger than `[history] max_mb`, the oldest of them go too.
//! A pending request, and the event that carries one, is never deleted: somebody is
//! waiting for it. Deletes run in batches, each its own short transaction, so the
//! broker's writes are held back for moments, not for the whole sweep. The daemon
//! runs this hourly; `hitl gc` runs it now.

use anyhow::Result;
use serde::Serialize;
use sqlx::Row;

use super::{Backend, Store};

/// Rows deleted per transaction.
const BATCH: i64 = 1000;

/// How often a running broker sweeps, and how long after its start it first does.
const SWEEP_EVERY: std::time::Duration = std::time::Duration::from_secs(3600);
const FIRST_SWEEP_AFTER: std::time::Duration = std::time::Duration::from_secs(60);

/// Sweeps `store` by `keep` now and then, for as long as the task lives.
pub fn spawn_sweeps(store: Store, keep: Retention) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        if keep.keep_days == 0 && keep.max_bytes == 0 {
            return;
        }
        tokio::time::sleep(FIRST_SWEEP_AFTER).await;
        loop {
            let now = jiff::Timestamp::now().as_millisecond();
            match store.gc(&keep, now, false).await {
                Ok(r) if r.requests_deleted + r.events_deleted > 0 => tracing::info!(
                    "history: {} ended requests and {} events deleted ({} → {} bytes)",
                    r.requests_deleted,
                    r.events_deleted,
                    r.bytes_before,
                    r.bytes_after
                ),
                Ok(_) => {}
                Err(e) => tracing::warn!("sweeping history failed: {e:#}"),
            }
            tokio::time::sleep(SWEEP_EVERY).await;
        }
    })
}

/// What to keep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    /// Ended requests and events older than this many days go; 0 keeps them all.
    pub keep_days: u64,
    /// History bigger than this many bytes loses its oldest ended rows; 0: no limit.
    pub max_bytes: u64,
}

/// What a sweep did (or, dry, would do by age).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct GcReport {
    /// Ended requests deleted.
    pub requests_deleted: u64,
    /// Agent events deleted.
    pub events_deleted: u64,
    /// The size of history's rows before, in bytes.
    pub bytes_before: u64,
    /// And after.
    pub bytes_after: u64,
    /// Nothing was deleted: the counts say what the age limit would take.
    pub dry_run: bool,
}

/// Ended requests asked before `$1` (ms), oldest first, at most `$2`: the column
/// that names them.
macro_rules! old_requests {
    ($by:literal) => {
        concat!(
            "SELECT ",
            $by,
            " FROM requests WHERE status <> 'pending' AND asked_ms < $1
             ORDER BY asked_ms LIMIT $2"
        )
    };
}
/// Events from before `$1` (ms) that carry no pending request, oldest first, at most `$2`.
macro_rules! old_events {
    () => {
        "SELECT id FROM events e WHERE e.timestamp_ms < $1
         AND NOT EXISTS (SELECT 1 FROM requests r WHERE r.origin <> 'spool'
                         AND r.status = 'pending' AND r.id = CAST(e.id AS TEXT))
         ORDER BY e.timestamp_ms LIMIT $2"
    };
}
const COUNT_OLD_REQUESTS: &str = concat!(
    "SELECT COUNT(*) AS n FROM (",
    old_requests!("key"),
    ") AS old"
);
const COUNT_OLD_EVENTS: &str = concat!("SELECT COUNT(*) AS n FROM (", old_events!(), ") AS old");
/// Every row history holds (`$1`, `$2` unused, for [`Store::count`]'s binds).
const COUNT_ROWS: &str = "SELECT (SELECT COUNT(*) FROM requests) + (SELECT COUNT(*) FROM events)
     + 0 * $1 + 0 * $2 AS n";
const DELETE_OLD_REQUESTS: &str = concat!(
    "DELETE FROM requests WHERE key IN (",
    old_requests!("key"),
    ")"
);
/// [`DELETE_OLD_REQUESTS`] for SQLite, whose `key` has no index (migration 0007).
pub(super) const SQLITE_DELETE_OLD_REQUESTS: &str = concat!(
    "DELETE FROM requests WHERE rowid IN (",
    old_requests!("rowid"),
    ")"
);
const DELETE_OLD_EVENTS: &str = concat!("DELETE FROM events WHERE id IN (", old_events!(), ")");

impl Store {
    /// The bytes history's rows take: live pages on SQLite, column bytes on
    /// PostgreSQL (whose files shrink only when vacuumed).
    pub async fn history_bytes(&self) -> Result<u64> {
        let bytes: i64 = match &self.backend {
            Backend::Sqlite(pool, _) => sqlx::query(
                "SELECT (p.page_count - f.freelist_count) * s.page_size AS bytes
                     FROM pragma_page_count() p, pragma_freelist_count() f, pragma_page_size() s",
            )
            .fetch_one(pool)
            .await?
            .try_get("bytes")?,
            Backend::Postgres(pool) => sqlx::query(
                "SELECT CAST(
                        (SELECT COALESCE(SUM(octet_length(request_json) + octet_length(content)
                             + COALESCE(octet_length(answer_json), 0)), 0) FROM requests)
                      + (SELECT COALESCE(SUM(octet_length(payload_json) + octet_length(extra_json)
                             + COALESCE(octet_length(hitl_json), 0)), 0) FROM events)
                     AS BIGINT) AS bytes",
            )
            .fetch_one(pool)
            .await?
            .try_get("bytes")?,
        };
        Ok(bytes.max(0) as u64)
    }

    /// Deletes what `keep` says goes, as of `now_ms`; with `dry_run`, only counts
    /// what the age limit would take.
    pub async fn gc(&self, keep: &Retention, now_ms: i64, dry_run: bool) -> Result<GcReport> {
        let mut report = GcReport {
            bytes_before: self.history_bytes().await?,
            dry_run,
            ..GcReport::default()
        };
        if keep.keep_days > 0 {
            let day_ms: i64 = 24 * 3600 * 1000;
            let cutoff = now_ms.saturating_sub(day_ms.saturating_mul(keep.keep_days as i64));
            if dry_run {
                report.requests_deleted = self.count(COUNT_OLD_REQUESTS, cutoff).await?;
                report.events_deleted = self.count(COUNT_OLD_EVENTS, cutoff).await?;
                report.bytes_after = report.bytes_before;
                return Ok(report);
            }
            let (r, e) = self.delete_before(cutoff, u64::MAX, BATCH).await?;
            report.requests_deleted += r;
            report.events_deleted += e;
            self.sweep_trail(Some(cutoff)).await?;
        }
        if keep.max_bytes > 0 && !dry_run {
            // Oldest first, about as many rows as the excess takes, until it fits.
            loop {
                let bytes = self.history_bytes().await?;
                if bytes <= keep.max_bytes {
                    break;
                }
                let rows = self.count(COUNT_ROWS, 0).await?.max(1);
                let per_row = (bytes / rows).max(1);
                let n = ((bytes - keep.max_bytes).div_ceil(per_row) as i64).clamp(1, BATCH);
                let (r, e) = self.delete_before(i64::MAX, 1, n).await?;
                if r + e == 0 {
                    break; // only pending requests are left
                }
                report.requests_deleted += r;
                report.events_deleted += e;
            }
        }
        if keep.max_bytes > 0 && !dry_run {
            self.sweep_trail(None).await?;
        }
        report.bytes_after = self.history_bytes().await?;
        Ok(report)
    }

    /// Deletes trail steps from before `cutoff` (ms), or, without one, those older
    /// than every request history still holds.
    async fn sweep_trail(&self, cutoff: Option<i64>) -> Result<()> {
        let sql = match cutoff {
            Some(_) => "DELETE FROM trail WHERE at_ms < $1",
            None => {
                "DELETE FROM trail WHERE at_ms < COALESCE((SELECT MIN(asked_ms) FROM requests), $1)"
            }
        };
        with_pool!(self, |pool| sqlx::query(sql)
            .bind(cutoff.unwrap_or(i64::MAX))
            .execute(pool)
            .await?
            .rows_affected());
        Ok(())
    }

    /// How many rows a `COUNT_OLD_*` query counts before `cutoff`.
    async fn count(&self, sql: &'static str, cutoff: i64) -> Result<u64> {
        let n: i64 = with_pool!(self, |pool| sqlx::query(sql)
            .bind(cutoff)
            .bind(i64::MAX)
            .fetch_one(pool)
            .await?
            .try_get("n")?);
        Ok(n as u64)
    }

    /// Deletes ended requests and events from before `cutoff`, at most `batches`
    /// batches of `size` of each; returns how many of each went.
    async fn delete_before(&self, cutoff: i64, batches: u64, size: i64) -> Result<(u64, u64)> {
        let (mut requests, mut events) = (0u64, 0u64);
        for _ in 0..batches {
            let delete_requests = match &self.backend {
                Backend::Sqlite(..) => SQLITE_DELETE_OLD_REQUESTS,
                Backend::Postgres(_) => DELETE_OLD_REQUESTS,
            };
            let r = with_pool!(self, |pool| sqlx::query(delete_requests)
                .bind(cutoff)
                .bind(size)
                .execute(pool)
                .await?
                .rows_affected());
            let e = with_pool!(self, |pool| sqlx::query(DELETE_OLD_EVENTS)
                .bind(cutoff)
                .bind(size)
                .execute(pool)
                .await?
                .rows_affected());
            requests += r;
            events += e;
            if r + e == 0 {
                break;
            }
        }
        Ok((requests, events))
    }
}
