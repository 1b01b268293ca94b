//! Finding and opening the history database: SQLite by path or `sqlite://` URL,
//! PostgreSQL by `postgres://` URL, migrated on open; URLs shown without passwords.

use std::{path::PathBuf, str::FromStr, sync::Arc, time::Duration};

use anyhow::{Context, Result, bail};
use sqlx::{
    postgres::{PgConnectOptions, PgPoolOptions},
    sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous},
};

use super::{Backend, Store, sqlite_writer};

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
}
