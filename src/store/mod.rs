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

use std::{path::PathBuf, str::FromStr, sync::Arc, time::Duration};

use anyhow::{Context, Result, bail};
use serde::Serialize;
use sqlx::{
    Row,
    postgres::{PgConnectOptions, PgPool, PgPoolOptions},
    sqlite::{
        SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
    },
};

use crate::protocol::{Answer, Kind, Origin, Priority, Request, Status, Variant};

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
    /// A request made over HTTP, with the agent event that carried it. It is durable
    /// once this commits, and acknowledged only then. Its id is the event's id; a
    /// repeat with the same idempotency key creates nothing and reports the first.
    CreateRemote {
        /// The request (its id is filled in from the event's).
        request: Box<Request>,
        /// The way it came (any but the spool).
        origin: Origin,
        /// The event that carried it.
        event: Box<NewEvent>,
    },
    /// An agent event without a request, for the activity feed.
    Event(Box<NewEvent>),
    /// Ends a request made over HTTP if it is still pending. Of racing responders (on
    /// this broker or another replica) exactly one settles it: the outcome says which.
    Settle {
        /// The request's id.
        id: String,
        /// How it ended.
        status: Status,
        /// The answer, if any.
        answer: Option<Box<Answer>>,
        /// Why, for states without an answer.
        reason: Option<String>,
    },
}

/// What one [`StoreOp`] did, in the order the ops were given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Recorded; nothing to report.
    Done,
    /// An event (and its request, if any) was stored.
    Created {
        /// The event's id (also the request's, as text).
        event_id: i64,
        /// True when the idempotency key named an event stored before: nothing new
        /// was created and this is the first one's id.
        existing: bool,
    },
    /// A settle: `true` if this op ended the request, `false` if it had already ended.
    Settled(bool),
}

/// An agent event as POST /events receives it (seed 004's HookEvent).
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct NewEvent {
    /// The application that sent it.
    pub source_app: String,
    /// The agent's session.
    pub session_id: String,
    /// `PreToolUse`, `Notification`, …
    pub hook_event_type: String,
    /// The hook's own payload.
    pub payload: serde_json::Value,
    /// Other top-level fields (chat, summary, model_name…), kept as sent.
    pub extra: serde_json::Map<String, serde_json::Value>,
    /// When it happened, in milliseconds since the epoch.
    pub timestamp_ms: i64,
    /// The `humanInTheLoop` object, when the event asks a human.
    pub hitl: Option<serde_json::Value>,
    /// Makes a repeated POST return the first event instead of a new one.
    pub idempotency_key: Option<String>,
}

impl NewEvent {
    /// The `humanInTheLoop` object as stored: without its `question` and `context`,
    /// which the request made from it keeps. A question's text (and its tool
    /// context, a diff say) is stored once, in the request; [`stored_event`] puts
    /// them back on the way out.
    pub fn hitl_json(&self) -> serde_json::Result<Option<String>> {
        /// An object's entries but the two the request keeps, written as they are
        /// met (not a copy of the object with two removed).
        struct Stored<'a>(&'a serde_json::Map<String, serde_json::Value>);
        impl serde::Serialize for Stored<'_> {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_map(
                    (self.0.iter()).filter(|(k, _)| !matches!(k.as_str(), "question" | "context")),
                )
            }
        }
        match &self.hitl {
            None => Ok(None),
            Some(serde_json::Value::Object(o)) => serde_json::to_string(&Stored(o)).map(Some),
            Some(other) => serde_json::to_string(other).map(Some),
        }
    }
}

/// [`Store::find_request`]'s lookup among requests that live in the store.
const FIND_STORED_REQUEST: &str =
    "SELECT request_json, origin, status, answer_json, reason, finished_at
     FROM requests WHERE origin <> 'spool' AND id = $1";

/// [`Store::find_request`]'s lookup among spool questions: the newest asking.
const FIND_SPOOL_REQUEST: &str =
    "SELECT request_json, origin, status, answer_json, reason, finished_at
     FROM requests WHERE origin = 'spool' AND id = $1
     ORDER BY asked_ms DESC, key DESC LIMIT 1";

/// What the `content` column of `requests` holds: nothing. The text lives once, in
/// `request_json`; the column stays for the schema's sake.
pub(crate) const CONTENT_COLUMN: &str = "";

/// A stored event with how its request stands.
#[derive(Debug, Clone)]
pub struct StoredEvent {
    /// The event's id.
    pub id: i64,
    /// The event as it was sent.
    pub event: NewEvent,
    /// The request it made, if any: its status and answer.
    pub request: Option<StoredRequest>,
}

/// A request as history holds it.
#[derive(Debug, Clone)]
pub struct StoredRequest {
    /// The request.
    pub request: Request,
    /// How it was asked.
    pub origin: Origin,
    /// Where it stands.
    pub status: Status,
    /// The answer, once there is one.
    pub answer: Option<Answer>,
    /// Why it ended without an answer.
    pub reason: Option<String>,
    /// When it ended.
    pub finished_at: Option<String>,
}

impl StoredRequest {
    /// The id of the agent event that carried a request made over HTTP (its id is
    /// that number as text); `None` for every other origin.
    pub fn event_id(&self) -> Option<i64> {
        self.origin
            .is_stored()
            .then(|| self.request.id.parse().ok())
            .flatten()
    }
}

/// The distinct values the dashboard's filters offer.
#[derive(Debug, Clone, Default, Serialize)]
pub struct FilterOptions {
    /// Every source_app seen.
    pub source_apps: Vec<String>,
    /// Every session_id seen.
    pub session_ids: Vec<String>,
    /// Every hook_event_type seen.
    pub hook_event_types: Vec<String>,
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
    /// The project folder (`http` for requests that live in the store).
    pub project: String,
    /// How it came (as shown: a hook's question file shows as `hook`).
    pub origin: Origin,
    /// The asking agent.
    pub agent_id: String,
    /// Its name for people.
    pub agent_name: String,
    /// The kind of question.
    #[serde(rename = "type")]
    pub kind: Kind,
    /// Its priority.
    pub priority: Priority,
    /// The question.
    pub content: String,
    /// When it was asked (RFC 3339).
    pub asked_at: String,
    /// Where it stands.
    pub status: Status,
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
    /// Only requests whose id starts so (`hitl history 01a2179b`).
    pub id_prefix: Option<String>,
    /// Only requests in this project folder.
    pub project: Option<String>,
    /// Only requests that stand so.
    pub status: Option<Status>,
    /// Only this agent's (by id or name).
    pub agent: Option<String>,
    /// Only requests whose question, answer or agent holds this text (any case).
    pub text: Option<String>,
    /// Only requests asked before this instant (milliseconds since 1970): the page
    /// after one that ended with a request asked then.
    pub before_ms: Option<i64>,
    /// At most this many, newest first.
    pub limit: i64,
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

mod retention;
pub use retention::{GcReport, Retention, spawn_sweeps};
mod series;
pub use series::{ANSWER_BINS_S, AgentCounts, AnswerBin, Bucket, Series, SeriesQuery};

/// The project name requests made over HTTP are recorded under.
pub const REMOTE_PROJECT: &str = "http";

/// Reads the request columns of a row (`request_json`, `origin`, `status`…).
fn stored_request<R: Row>(r: &R) -> Option<StoredRequest>
where
    for<'a> &'a str: sqlx::ColumnIndex<R>,
    for<'a> Option<String>: sqlx::Decode<'a, R::Database> + sqlx::Type<R::Database>,
{
    let request_json: Option<String> = r.try_get("request_json").ok()?;
    let request = serde_json::from_str(&request_json?).ok()?;
    let status: Option<String> = r.try_get("status").ok()?;
    let answer: Option<String> = r.try_get("answer_json").ok()?;
    Some(StoredRequest {
        request,
        origin: Origin::parse(&r.try_get::<Option<String>, _>("origin").ok()??)?,
        status: Status::parse(&status?).unwrap_or(Status::Pending),
        answer: answer.and_then(|a| serde_json::from_str(&a).ok()),
        reason: r.try_get("reason").ok()?,
        finished_at: r.try_get("finished_at").ok()?,
    })
}

/// Reads an events row joined with its request.
fn stored_event<R: Row>(r: &R) -> Option<StoredEvent>
where
    for<'a> &'a str: sqlx::ColumnIndex<R>,
    for<'a> Option<String>: sqlx::Decode<'a, R::Database> + sqlx::Type<R::Database>,
    for<'a> String: sqlx::Decode<'a, R::Database> + sqlx::Type<R::Database>,
    for<'a> i64: sqlx::Decode<'a, R::Database> + sqlx::Type<R::Database>,
{
    let json = |col: &str| -> Option<serde_json::Value> {
        let text: Option<String> = r.try_get(col).ok()?;
        serde_json::from_str(&text?).ok()
    };
    let extra = match json("extra_json") {
        Some(serde_json::Value::Object(m)) => m,
        _ => serde_json::Map::new(),
    };
    let request = stored_request(r);
    let mut hitl = json("hitl_json");
    // The question and its context are stored once, in the request (see
    // `NewEvent::hitl_json`).
    if let (Some(serde_json::Value::Object(h)), Some(req)) = (hitl.as_mut(), &request) {
        if !h.contains_key("question") {
            h.insert("question".into(), req.request.content.clone().into());
        }
        if !h.contains_key("context") && !req.request.context.is_null() {
            h.insert("context".into(), req.request.context.clone());
        }
    }
    Some(StoredEvent {
        id: r.try_get("id").ok()?,
        event: NewEvent {
            source_app: r.try_get("source_app").ok()?,
            session_id: r.try_get("session_id").ok()?,
            hook_event_type: r.try_get("hook_event_type").ok()?,
            payload: json("payload_json").unwrap_or(serde_json::Value::Null),
            extra,
            timestamp_ms: r.try_get("timestamp_ms").ok()?,
            hitl,
            idempotency_key: r.try_get("idempotency_key").ok()?,
        },
        request,
    })
}

/// Events joined with their requests (a request has its event's id), for
/// [`stored_event`]; the callers add the filter and order.
macro_rules! events_select {
    () => {
        "SELECT e.id, e.source_app, e.session_id, e.hook_event_type, e.payload_json,
                e.extra_json, e.timestamp_ms, e.hitl_json, e.idempotency_key,
                r.request_json, r.origin, r.status, r.answer_json, r.reason, r.finished_at
         FROM events e
         LEFT JOIN requests r
           ON e.hitl_json IS NOT NULL AND r.origin <> 'spool' AND r.id = CAST(e.id AS TEXT)"
    };
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
            .test_before_acquire(false)
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
            replica: uuid::Uuid::now_v7().simple().to_string().into(),
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
            // A local file needs no health check: it costs a round trip per use.
            .test_before_acquire(false)
            .connect_with(options)
            .await
            .with_context(|| format!("opening the history database {}", path.display()))?;
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600));
        sqlx::migrate!("./migrations/sqlite")
            .run(&pool)
            .await
            .with_context(|| format!("migrating the history database {}", path.display()))?;
        let writer = sqlite_writer::SqliteWriter::open(path)
            .with_context(|| format!("opening the history database {}", path.display()))?;
        Ok(Store {
            backend: Backend::Sqlite(pool, Arc::new(writer)),
            replica: uuid::Uuid::now_v7().simple().to_string().into(),
        })
    }

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

    /// Requests living in the store (every origin but the spool) that are still
    /// pending, oldest first, with their origin and the id of the event that carried
    /// each: a starting broker queues them again.
    pub async fn pending_remote(&self) -> Result<Vec<(Request, Origin, i64)>> {
        with_pool!(self, |pool| {
            let rows = sqlx::query(
                "SELECT request_json, origin FROM requests
                 WHERE origin <> 'spool' AND status = 'pending' ORDER BY asked_ms",
            )
            .fetch_all(pool)
            .await?;
            Ok(rows
                .into_iter()
                .filter_map(|r| {
                    let request: Request =
                        serde_json::from_str(&r.get::<String, _>("request_json")).ok()?;
                    let origin = Origin::parse(&r.get::<String, _>("origin"))?;
                    let event_id = request.id.parse().ok()?;
                    Some((request, origin, event_id))
                })
                .collect())
        })
    }

    /// The ids of the requests living in the store that are still pending.
    pub async fn pending_remote_ids(&self) -> Result<Vec<String>> {
        with_pool!(self, |pool| {
            Ok(sqlx::query_scalar(
                "SELECT id FROM requests WHERE origin <> 'spool' AND status = 'pending'",
            )
            .fetch_all(pool)
            .await?)
        })
    }

    /// The newest request with this id; one made over HTTP first.
    ///
    /// Two lookups, each through the index of its own rows (`requests_stored_id`,
    /// unique; `requests_spool_id`, where an id is asked again and again): one index
    /// over every id would be written for every request.
    pub async fn find_request(&self, id: &str) -> Result<Option<StoredRequest>> {
        with_pool!(self, |pool| {
            let mut row = sqlx::query(FIND_STORED_REQUEST)
                .bind(id)
                .fetch_optional(pool)
                .await?;
            if row.is_none() {
                row = sqlx::query(FIND_SPOOL_REQUEST)
                    .bind(id)
                    .fetch_optional(pool)
                    .await?;
            }
            Ok(row.and_then(|r| stored_request(&r)))
        })
    }

    /// The newest events, newest first, with their requests: at most `limit`, and
    /// no more once their text passes `max_bytes` (the first always comes). Rows are
    /// read one at a time, so a feed of large events costs memory in proportion to
    /// the budget, not to the limit.
    pub async fn recent_events(&self, limit: i64, max_bytes: usize) -> Result<Vec<StoredEvent>> {
        use futures_util::TryStreamExt;
        with_pool!(self, |pool| {
            let mut rows = sqlx::query(concat!(events_select!(), " ORDER BY e.id DESC LIMIT $1"))
                .bind(limit.max(0))
                .fetch(pool);
            let (mut out, mut bytes) = (Vec::new(), 0usize);
            while let Some(row) = rows.try_next().await? {
                let size: usize = [
                    "payload_json",
                    "extra_json",
                    "hitl_json",
                    "request_json",
                    "answer_json",
                ]
                .iter()
                .filter_map(|c| row.try_get::<Option<String>, _>(*c).ok().flatten())
                .map(|t| t.len())
                .sum();
                if !out.is_empty() && bytes + size > max_bytes {
                    break;
                }
                bytes += size;
                out.extend(stored_event(&row));
            }
            Ok(out)
        })
    }

    /// One event, with its request.
    pub async fn event(&self, id: i64) -> Result<Option<StoredEvent>> {
        with_pool!(self, |pool| {
            let row = sqlx::query(concat!(events_select!(), " WHERE e.id = $1"))
                .bind(id)
                .fetch_optional(pool)
                .await?;
            Ok(row.as_ref().and_then(stored_event))
        })
    }

    /// The distinct apps, sessions and event types seen, for the dashboard's filters.
    pub async fn filter_options(&self) -> Result<FilterOptions> {
        with_pool!(self, |pool| {
            let mut out = FilterOptions::default();
            for (column, into) in [
                ("source_app", &mut out.source_apps),
                ("session_id", &mut out.session_ids),
                ("hook_event_type", &mut out.hook_event_types),
            ] {
                let sql =
                    format!("SELECT DISTINCT {column} AS v FROM events ORDER BY v LIMIT 1000");
                let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
                    .fetch_all(pool)
                    .await?;
                *into = rows.into_iter().map(|r| r.get("v")).collect();
            }
            Ok(out)
        })
    }

    /// History, newest first.
    pub async fn history(&self, q: &HistoryQuery) -> Result<Vec<HistoryEntry>> {
        let limit = if q.limit > 0 { q.limit } else { i64::MAX };
        // Where one text holds another: SQLite's INSTR, PostgreSQL's STRPOS (no LIKE,
        // whose wildcards the searched text would have to escape).
        let contains = match self.backend {
            Backend::Sqlite(..) => "INSTR",
            Backend::Postgres(_) => "STRPOS",
        };
        let sql = format!(
            "SELECT id, project, origin, agent_id, agent_name, kind, priority, request_json,
                        asked_at, status, answer_json, responded_by, finished_at, reason
                 FROM requests
                 WHERE (CAST($1 AS TEXT) IS NULL OR id = $1)
                   AND (CAST($2 AS TEXT) IS NULL OR project = $2)
                   AND (CAST($4 AS TEXT) IS NULL OR status = $4)
                   AND (CAST($5 AS TEXT) IS NULL OR agent_id = $5 OR agent_name = $5)
                   AND (CAST($6 AS TEXT) IS NULL
                        OR {contains}(LOWER(COALESCE(request_json, '')), LOWER($6)) > 0
                        OR {contains}(LOWER(COALESCE(answer_json, '')), LOWER($6)) > 0
                        OR {contains}(LOWER(agent_name), LOWER($6)) > 0)
                   AND (CAST($7 AS BIGINT) IS NULL OR asked_ms < $7)
                   AND (CAST($8 AS TEXT) IS NULL OR substr(id, 1, length($8)) = $8)
                 ORDER BY asked_ms DESC, key DESC
                 LIMIT $3"
        );
        with_pool!(self, |pool| {
            let rows = sqlx::query(sqlx::AssertSqlSafe(sql.as_str()))
                .bind(&q.id)
                .bind(&q.project)
                .bind(limit)
                .bind(q.status.map(Status::as_str))
                .bind(&q.agent)
                // Lowered by the database on both sides: its idea of case holds for both.
                .bind(&q.text)
                .bind(q.before_ms)
                .bind(&q.id_prefix)
                .fetch_all(pool)
                .await?;
            Ok(rows
                .into_iter()
                .filter_map(|r| {
                    let id: String = r.get("id");
                    let (origin, kind, priority, status) = match (
                        Origin::parse(r.get("origin")),
                        Kind::parse(r.get("kind")),
                        Priority::parse(r.get("priority")),
                        Status::parse(r.get("status")),
                    ) {
                        (Some(o), Some(k), Some(p), Some(s)) => (o, k, p, s),
                        // Only this program writes these columns: a row it cannot
                        // read was changed by hand, and is left out, not guessed at.
                        _ => {
                            tracing::warn!(id, "a history row has an unknown origin, type, priority or status; left out");
                            return None;
                        }
                    };
                    let answer_detail: Option<serde_json::Value> = r
                        .get::<Option<String>, _>("answer_json")
                        .and_then(|j| serde_json::from_str(&j).ok());
                    let request = r
                        .get::<Option<String>, _>("request_json")
                        .and_then(|j| serde_json::from_str::<Request>(&j).ok());
                    Some(HistoryEntry {
                        id,
                        project: r.get("project"),
                        // A question file's writer (a hook) shows as its origin.
                        origin: request.as_ref().map_or(origin, |q| q.shown_origin(origin)),
                        agent_id: r.get("agent_id"),
                        agent_name: r.get("agent_name"),
                        kind,
                        priority,
                        // The text is stored once, in the request's JSON.
                        content: request.map(|q| q.content).unwrap_or_default(),
                        asked_at: r.get("asked_at"),
                        status,
                        answer: answer_detail
                            .as_ref()
                            .and_then(|a| a.get("content"))
                            .and_then(|c| c.as_str())
                            .map(str::to_string),
                        answer_detail,
                        responded_by: r.get("responded_by"),
                        finished_at: r.get("finished_at"),
                        reason: r.get("reason"),
                    })
                })
                .collect())
        })
    }

    /// Answers the broker chose but may not have delivered (it died in between).
    pub async fn undelivered(&self) -> Result<Vec<Undelivered>> {
        with_pool!(self, |pool| {
            let rows = sqlx::query(
                "SELECT project, id, asked_at, variant, request_json, answer_json
                 FROM deliveries",
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
                        answer: serde_json::from_str(&r.get::<String, _>("answer_json")).ok()?,
                    })
                })
                .collect())
        })
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
            store.find_request("1").await.unwrap().unwrap().origin,
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
