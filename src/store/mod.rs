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

use std::{path::PathBuf, str::FromStr, time::Duration};

use anyhow::{Context, Result, bail};
use serde::Serialize;
use sqlx::{
    Row,
    postgres::{PgConnectOptions, PgPool, PgPoolOptions},
    sqlite::{
        SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
    },
};

use crate::protocol::{Answer, Request, Status, Variant};

/// One write to history.
#[derive(Debug, Clone)]
pub enum StoreOp {
    /// A request was seen (recorded once; repeats are ignored).
    Asked {
        /// The project folder.
        project: String,
        /// The request.
        request: Box<Request>,
        /// The format it came in.
        variant: Variant,
    },
    /// The broker chose an answer and is about to deliver it. Recorded *before* the
    /// answer file is written, so a broker killed in between re-delivers this same
    /// answer at its next start instead of asking the human again.
    Delivering {
        /// The project folder.
        project: String,
        /// The request.
        request: Box<Request>,
        /// The format it came in.
        variant: Variant,
        /// The answer about to be written.
        answer: Box<Answer>,
    },
    /// A request ended.
    Finished {
        /// The project folder.
        project: String,
        /// The request (recorded too, in case it was never seen pending).
        request: Box<Request>,
        /// The format it came in.
        variant: Variant,
        /// How it ended.
        status: Status,
        /// The answer written, if any.
        answer: Option<Box<Answer>>,
        /// Why, for states without an answer (abandoned, rejected, withdrawn).
        reason: Option<String>,
    },
}

/// An answer recorded as `delivering` when the broker stopped.
#[derive(Debug, Clone)]
pub struct Undelivered {
    /// (project, id, asked_at).
    pub key: (String, String, String),
    /// The format the question came in.
    pub variant: Variant,
    /// The question.
    pub request: Request,
    /// The answer chosen for it.
    pub answer: Answer,
}

/// One row of history, as `hitl history --json` prints it.
#[derive(Debug, Clone, Serialize)]
pub struct HistoryEntry {
    /// The request's id.
    pub id: String,
    /// The project folder.
    pub project: String,
    /// The asking agent.
    pub agent_id: String,
    /// Its name for people.
    pub agent_name: String,
    /// The kind of question.
    #[serde(rename = "type")]
    pub kind: String,
    /// Its priority.
    pub priority: String,
    /// The question.
    pub content: String,
    /// When it was asked (RFC 3339).
    pub asked_at: String,
    /// Where it stands.
    pub status: String,
    /// The answer's text, if answered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub answer: Option<String>,
    /// The whole answer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub answer_detail: Option<serde_json::Value>,
    /// Who answered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub responded_by: Option<String>,
    /// When it ended.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<String>,
    /// Why it ended without an answer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Filters for [`Store::history`].
#[derive(Debug, Clone, Default)]
pub struct HistoryQuery {
    /// Only this request id.
    pub id: Option<String>,
    /// Only requests in this project folder.
    pub project: Option<String>,
    /// At most this many, newest first.
    pub limit: i64,
}

/// The history database.
#[derive(Debug, Clone)]
pub struct Store {
    backend: Backend,
}

#[derive(Debug, Clone)]
enum Backend {
    Sqlite(SqlitePool),
    Postgres(PgPool),
}

/// Runs `$body` with `$pool` bound to whichever pool the store has; the body is
/// type-checked once per backend.
macro_rules! with_pool {
    ($store:expr, |$pool:ident| $body:expr) => {
        match &$store.backend {
            Backend::Sqlite($pool) => $body,
            Backend::Postgres($pool) => $body,
        }
    };
}

/// Records a request once; a repeat (same project, id and time asked) changes nothing.
macro_rules! insert_request {
    ($conn:expr, $project:expr, $r:expr, $variant:expr) => {{
        let r: &Request = $r;
        sqlx::query(
            "INSERT INTO requests (key, project, id, asked_at, asked_ms, variant, agent_id,
                                   agent_name, kind, priority, content, request_json)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
             ON CONFLICT (project, id, asked_at) DO NOTHING",
        )
        .bind(uuid::Uuid::now_v7().to_string())
        .bind($project)
        .bind(&r.id)
        .bind(r.timestamp.to_string())
        .bind(r.timestamp.as_millisecond())
        .bind($variant.as_str())
        .bind(&r.agent_id)
        .bind(&r.agent_name)
        .bind(r.kind.as_str())
        .bind(r.priority.as_str())
        .bind(&r.content)
        .bind(serde_json::to_string(r)?)
        .execute($conn)
        .await?;
    }};
}

/// Where a SQLite database lives, from `--db`/`HITL_DB` or the default path.
pub fn sqlite_path(url: &str) -> Result<PathBuf> {
    if let Some(rest) = url.strip_prefix("sqlite://") {
        Ok(PathBuf::from(rest))
    } else if let Some(rest) = url.strip_prefix("sqlite:") {
        Ok(PathBuf::from(rest))
    } else if url.contains("://") {
        bail!(
            "unsupported database URL {url:?}: use sqlite://PATH (or a plain path) or \
             postgres://USER@HOST/DB"
        )
    } else {
        Ok(PathBuf::from(url))
    }
}

/// True for URLs naming a PostgreSQL database.
pub fn is_postgres_url(url: &str) -> bool {
    url.starts_with("postgres://") || url.starts_with("postgresql://")
}

/// The URL with any password replaced, for messages and logs.
pub fn redact_url(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let creds = &url[scheme + 3..at];
            match creds.split_once(':') {
                Some((user, _)) => format!("{}{user}:***{}", &url[..scheme + 3], &url[at..]),
                None => url.to_string(),
            }
        }
        _ => url.to_string(),
    }
}

impl Store {
    /// Opens (creating if needed) and migrates the database at `url`.
    pub async fn open(url: &str) -> Result<Store> {
        if is_postgres_url(url) {
            let options = PgConnectOptions::from_str(url)
                .with_context(|| format!("reading the database URL {}", redact_url(url)))?;
            Store::open_postgres(options, url).await
        } else {
            Store::open_sqlite(&sqlite_path(url)?).await
        }
    }

    /// Opens a PostgreSQL database with these options (tests use them to pick a schema).
    pub async fn open_postgres(options: PgConnectOptions, url: &str) -> Result<Store> {
        let pool = PgPoolOptions::new()
            .max_connections(8)
            .acquire_timeout(Duration::from_secs(10))
            .connect_with(options)
            .await
            .with_context(|| format!("connecting to {}", redact_url(url)))?;
        sqlx::migrate!("./migrations/postgres")
            .run(&pool)
            .await
            .with_context(|| format!("migrating {}", redact_url(url)))?;
        Ok(Store {
            backend: Backend::Postgres(pool),
        })
    }

    async fn open_sqlite(path: &std::path::Path) -> Result<Store> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            // History holds every question and answer: private to its user.
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .with_context(|| format!("creating the data folder {}", dir.display()))?;
        }
        let options = SqliteConnectOptions::from_str("sqlite://")?
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            // NORMAL in WAL mode: a commit survives a process crash (kill -9); only a
            // power cut can take back the last commits, and the spool still has those.
            .synchronous(SqliteSynchronous::Normal)
            .busy_timeout(Duration::from_secs(10));
        let pool = SqlitePoolOptions::new()
            .max_connections(4)
            .connect_with(options)
            .await
            .with_context(|| format!("opening the history database {}", path.display()))?;
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600));
        sqlx::migrate!("./migrations/sqlite")
            .run(&pool)
            .await
            .with_context(|| format!("migrating the history database {}", path.display()))?;
        Ok(Store {
            backend: Backend::Sqlite(pool),
        })
    }

    /// Which backend this is: `sqlite` or `postgres`.
    pub fn backend_name(&self) -> &'static str {
        match self.backend {
            Backend::Sqlite(_) => "sqlite",
            Backend::Postgres(_) => "postgres",
        }
    }

    /// Applies `ops` in one transaction.
    pub async fn apply(&self, ops: &[StoreOp]) -> Result<()> {
        with_pool!(self, |pool| {
            let mut tx = pool.begin().await?;
            for op in ops {
                match op {
                    StoreOp::Asked {
                        project,
                        request,
                        variant,
                    } => {
                        insert_request!(&mut *tx, project, request, *variant);
                    }
                    StoreOp::Delivering {
                        project,
                        request,
                        variant,
                        answer,
                    } => {
                        insert_request!(&mut *tx, project, request, *variant);
                        sqlx::query(
                            "UPDATE requests SET status = 'delivering', answer_json = $1
                             WHERE project = $2 AND id = $3 AND asked_at = $4 AND status = 'pending'",
                        )
                        .bind(serde_json::to_string(answer)?)
                        .bind(project)
                        .bind(&request.id)
                        .bind(request.timestamp.to_string())
                        .execute(&mut *tx)
                        .await?;
                    }
                    StoreOp::Finished {
                        project,
                        request,
                        variant,
                        status,
                        answer,
                        reason,
                    } => {
                        insert_request!(&mut *tx, project, request, *variant);
                        let answer_json = answer.as_ref().map(serde_json::to_string).transpose()?;
                        sqlx::query(
                            "UPDATE requests SET status = $1, answer_json = $2, responded_by = $3,
                                    finished_at = $4, reason = $5
                             WHERE project = $6 AND id = $7 AND asked_at = $8
                               AND status IN ('pending', 'delivering')",
                        )
                        .bind(status.as_str())
                        .bind(answer_json)
                        .bind(answer.as_ref().map(|a| a.responded_by.clone()))
                        .bind(jiff::Timestamp::now().to_string())
                        .bind(reason)
                        .bind(project)
                        .bind(&request.id)
                        .bind(request.timestamp.to_string())
                        .execute(&mut *tx)
                        .await?;
                    }
                }
            }
            tx.commit().await?;
            Ok(())
        })
    }

    /// History, newest first.
    pub async fn history(&self, q: &HistoryQuery) -> Result<Vec<HistoryEntry>> {
        let limit = if q.limit > 0 { q.limit } else { i64::MAX };
        with_pool!(self, |pool| {
            let rows = sqlx::query(
                "SELECT id, project, agent_id, agent_name, kind, priority, content, asked_at,
                        status, answer_json, responded_by, finished_at, reason
                 FROM requests
                 WHERE (CAST($1 AS TEXT) IS NULL OR id = $1)
                   AND (CAST($2 AS TEXT) IS NULL OR project = $2)
                 ORDER BY asked_ms DESC, key DESC
                 LIMIT $3",
            )
            .bind(&q.id)
            .bind(&q.project)
            .bind(limit)
            .fetch_all(pool)
            .await?;
            Ok(rows
                .into_iter()
                .map(|r| {
                    let answer_detail: Option<serde_json::Value> = r
                        .get::<Option<String>, _>("answer_json")
                        .and_then(|j| serde_json::from_str(&j).ok());
                    HistoryEntry {
                        id: r.get("id"),
                        project: r.get("project"),
                        agent_id: r.get("agent_id"),
                        agent_name: r.get("agent_name"),
                        kind: r.get("kind"),
                        priority: r.get("priority"),
                        content: r.get("content"),
                        asked_at: r.get("asked_at"),
                        status: r.get("status"),
                        answer: answer_detail
                            .as_ref()
                            .and_then(|a| a.get("content"))
                            .and_then(|c| c.as_str())
                            .map(str::to_string),
                        answer_detail,
                        responded_by: r.get("responded_by"),
                        finished_at: r.get("finished_at"),
                        reason: r.get("reason"),
                    }
                })
                .collect())
        })
    }

    /// Answers the broker chose but may not have delivered (it died in between).
    pub async fn undelivered(&self) -> Result<Vec<Undelivered>> {
        with_pool!(self, |pool| {
            let rows = sqlx::query(
                "SELECT project, id, asked_at, variant, request_json, answer_json
                 FROM requests WHERE status = 'delivering'",
            )
            .fetch_all(pool)
            .await?;
            Ok(rows
                .into_iter()
                .filter_map(|r| {
                    Some(Undelivered {
                        key: (r.get("project"), r.get("id"), r.get("asked_at")),
                        variant: Variant::parse(r.get("variant"))?,
                        request: serde_json::from_str(&r.get::<String, _>("request_json")).ok()?,
                        answer: serde_json::from_str(&r.get::<Option<String>, _>("answer_json")?)
                            .ok()?,
                    })
                })
                .collect())
        })
    }

    /// Closes the pool, waiting for writes in flight.
    pub async fn close(&self) {
        with_pool!(self, |pool| pool.close().await)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
