//! History: every request and how it ended, in SQLite (the default) or PostgreSQL,
//! behind one [`Store`] (sqlx, with one migrations folder per backend).
//!
//! The backend is chosen from the URL: `postgres://…` or `postgresql://…` for
//! PostgreSQL, `sqlite://PATH` or a plain path for SQLite. Both run the same SQL (the
//! `$N` placeholders both understand, always in increasing order, which is what SQLite
//! needs to number them the same way); a macro expands each query for both pool types.
//!
//! The spool is the source of truth for what is pending — a question is durable the
//! moment its file is renamed into `questions/` — so the store is written *after* the
//! answer file, off the asker's critical path, in batches. A crash between the two is
//! repaired at the next start: the rescan finds the answer file and records it.
//!
//! Several processes share the database (the listener, `hitl answer` from another
//! terminal), so it runs in WAL mode with a busy timeout. Writes never downgrade a
//! finished request: an outcome is recorded only while the row is still `pending`.

mod pg_writer;
pub mod probe;
mod sql;
pub mod sqlite_writer;
mod wal_gather;
mod writer;

pub use writer::{Ack, StoreMsg, StoreSender, spawn_store_writer};

use std::sync::Arc;

use anyhow::{Context, Result};
use sqlx::{postgres::PgPool, sqlite::SqlitePool};

/// What the `content` column of `requests` holds: nothing. The text lives once, in
/// `request_json`; the column stays for the schema's sake.
pub(crate) const CONTENT_COLUMN: &str = "";

/// The `origin` column of a request that lives in the store: who asked. Never the
/// spool's, which marks the rows of question files (and so is how reads tell the two
/// apart): a request that says so anyway is recorded as made over HTTP, as it was.
pub(crate) fn stored_origin_column(r: &crate::protocol::Request) -> crate::protocol::Origin {
    match r.origin {
        crate::protocol::Origin::Spool => crate::protocol::Origin::Http,
        o => o,
    }
}

/// The history database.
#[derive(Debug, Clone)]
pub struct Store {
    backend: Backend,
    /// This process's name in change notifications, so it can skip its own.
    replica: std::sync::Arc<str>,
}

/// The PostgreSQL channel replicas announce changes on.
const CHANGES_CHANNEL: &str = "hitl_changes";

/// A change another replica made to a request made over HTTP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplicaChange {
    /// It created request `id`.
    Created(String),
    /// It ended request `id`.
    Settled(String),
    /// The notification stream was interrupted: changes may have been missed.
    Resync,
}

#[derive(Debug, Clone)]
enum Backend {
    /// Reads through sqlx; writes on one rusqlite connection ([`sqlite_writer`]).
    Sqlite(SqlitePool, Arc<sqlite_writer::SqliteWriter>),
    Postgres(PgPool),
}

/// Runs `$body` with `$pool` bound to whichever pool the store has; the body is
/// type-checked once per backend.
macro_rules! with_pool {
    ($store:expr, |$pool:ident| $body:expr) => {
        match &$store.backend {
            Backend::Sqlite($pool, _) => $body,
            Backend::Postgres($pool) => $body,
        }
    };
}

mod open;
mod ops;
mod reads;
mod retention;
pub use open::{is_postgres_url, redact_url, sqlite_path};
pub use ops::{NewEvent, Outcome, StoreOp, TrailStep};
pub use reads::{
    FilterOptions, HistoryEntry, HistoryQuery, Search, StoredEvent, StoredRequest, Undelivered,
};
pub use retention::{GcReport, Retention, spawn_sweeps};
mod series;
pub use series::{ANSWER_BINS_S, AgentCounts, AnswerBin, Bucket, Series, SeriesQuery};

/// The project name requests made over HTTP are recorded under.
pub const REMOTE_PROJECT: &str = "http";

impl Store {
    /// The SQLite write connection, for a writer thread of its own (`None` on
    /// PostgreSQL).
    pub fn sqlite_writer(&self) -> Option<Arc<sqlite_writer::SqliteWriter>> {
        match &self.backend {
            Backend::Sqlite(_, w) => Some(w.clone()),
            Backend::Postgres(_) => None,
        }
    }

    /// Which backend this is: `sqlite` or `postgres`.
    pub fn backend_name(&self) -> &'static str {
        match self.backend {
            Backend::Sqlite(..) => "sqlite",
            Backend::Postgres(_) => "postgres",
        }
    }

    /// Applies `ops` in one transaction; returns what each did, in order. SQLite's
    /// run on its writer (`sqlite_writer.rs`), PostgreSQL's in `pg_writer.rs`, with
    /// NOTIFYs for the other replicas in the same transaction.
    pub async fn apply(&self, ops: &[StoreOp]) -> Result<Vec<Outcome>> {
        let pool = match &self.backend {
            Backend::Sqlite(_, writer) => return writer.apply(ops.to_vec()).await,
            Backend::Postgres(pool) => pool,
        };
        if let [op] = ops
            && let Some(outcome) = pg_writer::apply_alone(pool, op, &self.replica).await?
        {
            return Ok(vec![outcome]);
        }
        let mut tx = pool.begin().await?;
        let outcomes = pg_writer::apply(&mut tx, ops, &self.replica).await?;
        tx.commit().await?;
        Ok(outcomes)
    }

    /// Follows the changes other replicas make (PostgreSQL only; `None` on SQLite).
    /// A dropped connection is re-made and reported as [`ReplicaChange::Resync`].
    pub async fn follow_replicas(
        &self,
    ) -> Result<Option<tokio::sync::mpsc::UnboundedReceiver<ReplicaChange>>> {
        let Backend::Postgres(pool) = &self.backend else {
            return Ok(None);
        };
        let mut listener = sqlx::postgres::PgListener::connect_with(pool)
            .await
            .context("listening for other replicas' changes")?;
        listener.listen(CHANGES_CHANNEL).await?;
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let me = self.replica.clone();
        tokio::spawn(async move {
            loop {
                let changes = match listener.try_recv().await {
                    Ok(Some(n)) => {
                        let Ok(notice) = serde_json::from_str::<pg_writer::Notice>(n.payload())
                        else {
                            tracing::debug!("not a hitl change notice: {}", n.payload());
                            continue;
                        };
                        if notice.r == *me {
                            continue;
                        }
                        let change: fn(String) -> ReplicaChange = match notice.k.as_str() {
                            "created" => ReplicaChange::Created,
                            "settled" => ReplicaChange::Settled,
                            _ => continue,
                        };
                        notice.ids.into_iter().map(change).collect()
                    }
                    // The connection dropped and was re-made: something may be missed.
                    Ok(None) => vec![ReplicaChange::Resync],
                    Err(e) => {
                        tracing::warn!("following other replicas: {e}; retrying");
                        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
                        vec![ReplicaChange::Resync]
                    }
                };
                if changes.into_iter().any(|c| tx.send(c).is_err()) {
                    return;
                }
            }
        });
        Ok(Some(rx))
    }

    /// Checks that the database answers.
    pub async fn ping(&self) -> Result<()> {
        with_pool!(self, |pool| {
            sqlx::query("SELECT 1").execute(pool).await?;
            Ok(())
        })
    }

    /// Closes the pool, waiting for writes in flight.
    pub async fn close(&self) {
        with_pool!(self, |pool| pool.close().await)
    }
}

#[cfg(test)]
mod tests {
    use std::{path::PathBuf, str::FromStr};

    use sqlx::{
        Row,
        sqlite::{SqliteConnectOptions, SqlitePoolOptions},
    };

    use super::{
        reads::{FIND_SPOOL_REQUEST, FIND_STORED_REQUEST},
        *,
    };
    use crate::protocol::{Origin, Request, Variant};

    #[test]
    fn urls_pick_the_backend_and_hide_passwords() {
        assert!(is_postgres_url("postgres://u@h/db"));
        assert!(is_postgres_url("postgresql://u@h/db"));
        assert!(!is_postgres_url("sqlite:///tmp/x.db"));
        assert_eq!(
            sqlite_path("sqlite:///tmp/x.db").unwrap(),
            PathBuf::from("/tmp/x.db")
        );
        assert_eq!(
            sqlite_path("/tmp/y.db").unwrap(),
            PathBuf::from("/tmp/y.db")
        );
        assert!(sqlite_path("mysql://h/db").is_err());
        assert_eq!(
            redact_url("postgres://u:secret@h:5432/db"),
            "postgres://u:***@h:5432/db"
        );
        assert_eq!(redact_url("postgres://u@h/db"), "postgres://u@h/db");
    }

    #[test]
    fn the_stored_hitl_object_leaves_out_what_the_request_keeps() {
        let mut e = NewEvent {
            source_app: "a".into(),
            session_id: "s".into(),
            hook_event_type: "PreToolUse".into(),
            payload: serde_json::json!({}),
            extra: serde_json::Map::new(),
            timestamp_ms: 1,
            hitl: Some(serde_json::json!({
                "type": "choice", "question": "Which?", "choices": ["a", "b"],
                "context": "a diff", "timeout": 30,
            })),
            idempotency_key: None,
        };
        assert_eq!(
            e.hitl_json().unwrap().as_deref(),
            Some(r#"{"type":"choice","choices":["a","b"],"timeout":30}"#)
        );
        e.hitl = None;
        assert_eq!(e.hitl_json().unwrap(), None);
    }

    /// Migration 0007 makes `requests` and `events` again with fewer indexes: their
    /// rows stay, an event id is never given twice (not even one deleted before),
    /// and what the dropped constraints guarded still holds: a spool question
    /// recorded twice is one row, an idempotency key one event, events without a
    /// key as many as were sent.
    #[tokio::test]
    async fn migration_0007_keeps_rows_ids_and_what_the_constraints_guarded() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("h.db");
        // The schema as migration 0006 left it, with rows in it.
        let before = dir.path().join("migrations");
        std::fs::create_dir(&before).unwrap();
        for entry in
            std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/migrations/sqlite")).unwrap()
        {
            let entry = entry.unwrap();
            if entry.file_name().to_string_lossy().as_ref() < "0007" {
                std::fs::copy(entry.path(), before.join(entry.file_name())).unwrap();
            }
        }
        let options = SqliteConnectOptions::from_str("sqlite://")
            .unwrap()
            .filename(&path)
            .create_if_missing(true);
        let pool = SqlitePoolOptions::new()
            .connect_with(options)
            .await
            .unwrap();
        sqlx::migrate::Migrator::new(before.as_path())
            .await
            .unwrap()
            .run(&pool)
            .await
            .unwrap();
        let asked_at = jiff::Timestamp::from_second(1_700_000_000).unwrap();
        let request = |id: &str| -> Request {
            serde_json::from_value(serde_json::json!({
                "version": 1, "id": id, "agent_id": "a", "agent_name": "a",
                "timestamp": asked_at, "type": "text", "content": "Why?",
            }))
            .unwrap()
        };
        for sql in [
            "INSERT INTO events (source_app, session_id, hook_event_type, payload_json,
                 extra_json, timestamp_ms, idempotency_key)
             VALUES ('a', 's', 'PreToolUse', '{}', '{}', 1, 'k1'),
                    ('a', 's', 'Notification', '{}', '{}', 2, NULL),
                    ('a', 's', 'Notification', '{}', '{}', 3, NULL)",
            "DELETE FROM events WHERE id = 3",
        ] {
            sqlx::query(sql).execute(&pool).await.unwrap();
        }
        for (id, origin) in [("1", "http"), ("q1", "spool")] {
            sqlx::query(
                "INSERT INTO requests (key, project, id, asked_at, asked_ms, variant,
                     agent_id, agent_name, kind, priority, content, request_json, origin)
                 VALUES ($1, 'p', $2, $3, 0, 'canonical', 'a', 'a', 'text', 'normal', '',
                     $4, $5)",
            )
            .bind(format!("key-{id}"))
            .bind(id)
            .bind(asked_at.to_string())
            .bind(serde_json::to_string(&request(id)).unwrap())
            .bind(origin)
            .execute(&pool)
            .await
            .unwrap();
        }
        pool.close().await;

        let store = Store::open(&format!("sqlite://{}", path.display()))
            .await
            .unwrap();
        let event = |key: Option<&str>| {
            StoreOp::Event(Box::new(NewEvent {
                source_app: "a".into(),
                session_id: "s".into(),
                hook_event_type: "Notification".into(),
                payload: serde_json::json!({}),
                extra: serde_json::Map::new(),
                timestamp_ms: 4,
                hitl: None,
                idempotency_key: key.map(str::to_string),
            }))
        };
        let asked = || StoreOp::Asked {
            project: "p".into(),
            request: Box::new(request("q1")),
            variant: Variant::Canonical,
        };
        let out = store
            .apply(&[
                event(None),
                event(None),
                event(Some("k1")),
                asked(),
                asked(),
            ])
            .await
            .unwrap();
        let created = |event_id, existing| Outcome::Created { event_id, existing };
        assert_eq!(
            out[..3],
            [created(4, false), created(5, false), created(1, true)],
            "ids go on after the deleted 3; a known key gives its event"
        );
        assert_eq!(store.event(2).await.unwrap().unwrap().id, 2);
        assert_eq!(
            store
                .find_request("1")
                .await
                .unwrap()
                .unwrap()
                .request
                .origin,
            Origin::Http
        );
        let Backend::Sqlite(pool, _) = &store.backend else {
            unreachable!()
        };
        let spool_rows: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM requests WHERE id = 'q1'")
            .fetch_one(pool)
            .await
            .unwrap();
        assert_eq!(spool_rows, 1, "a spool question recorded again is one row");
    }

    /// How SQLite would run `query` (with `args` bound) on a new, migrated store: the
    /// plan's lines.
    async fn sqlite_query_plan(query: &str, args: &[&str]) -> Vec<String> {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&format!("sqlite://{}", dir.path().join("h.db").display()))
            .await
            .unwrap();
        let Backend::Sqlite(pool, _) = &store.backend else {
            unreachable!()
        };
        let sql = format!("EXPLAIN QUERY PLAN {query}");
        let mut q = sqlx::query(sqlx::AssertSqlSafe(sql.as_str()));
        for a in args {
            q = q.bind(*a);
        }
        q.fetch_all(pool)
            .await
            .unwrap()
            .iter()
            .map(|r| r.get::<String, _>("detail"))
            .collect()
    }

    /// The stored requests still pending are found through their own small index
    /// (migration 0005), not by reading every request.
    #[tokio::test]
    async fn pending_stored_requests_are_read_through_their_index() {
        let plan = sqlite_query_plan(
            "SELECT request_json, origin FROM requests
             WHERE origin <> 'spool' AND status = 'pending' ORDER BY asked_ms",
            &[],
        )
        .await;
        assert!(
            plan.iter().any(|d| d.contains("requests_pending_stored")),
            "{plan:?}"
        );
    }

    /// A request is found by id through the index of its own kind of rows
    /// (migration 0006), an event by idempotency key through the index of the
    /// events that have one (0007), and every write finds its row through an index:
    /// none reads every row (a partial index serves only a statement that names its
    /// condition, and a scan per answer grows with the history).
    #[tokio::test]
    async fn rows_are_found_through_their_indexes() {
        for (query, index) in [
            (FIND_STORED_REQUEST, "requests_stored_id"),
            (FIND_SPOOL_REQUEST, "requests_spool_id"),
            (sql::EVENT_BY_KEY, "events_idempotency"),
            (sql::FINISH_REQUEST, "requests_spool_asking"),
            (sql::SETTLE, "requests_stored_id"),
            (sql::DELETE_DELIVERY, "PRIMARY KEY"),
        ] {
            let binds = query.matches('$').count();
            let plan = sqlite_query_plan(query, &vec!["x"; binds]).await;
            assert!(plan.iter().any(|d| d.contains(index)), "{query}: {plan:?}");
            assert!(
                !plan.iter().any(|d| d.starts_with("SCAN")),
                "{query}: {plan:?}"
            );
        }
    }

    /// Retention deletes old requests by rowid, found through their time index:
    /// `key` has no index on SQLite (migration 0007) and is not read.
    #[tokio::test]
    async fn old_requests_are_deleted_without_reading_every_row() {
        let plan = sqlite_query_plan(retention::SQLITE_DELETE_OLD_REQUESTS, &["1", "10"]).await;
        assert!(
            plan.iter().any(|d| d.contains("requests_by_time")),
            "{plan:?}"
        );
        assert!(!plan.iter().any(|d| d == "SCAN requests"), "{plan:?}");
    }
}
