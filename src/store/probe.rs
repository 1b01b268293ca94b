//! A look at the history store that changes nothing, for `hitl doctor`: can it be
//! reached, and has it every migration this build expects. (Opening a [`super::Store`]
//! creates and migrates; a doctor must not.)

use std::{str::FromStr, time::Duration};

use anyhow::{Context, Result};
use sqlx::{Connection, postgres::PgConnectOptions};

use super::{is_postgres_url, redact_url, sqlite_path};

/// How long a database may take to answer the doctor.
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// What the store holds, as far as the doctor asks.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Probe {
    /// `sqlite` or `postgres`.
    pub backend: &'static str,
    /// Migrations applied; `None` when the SQLite file does not exist yet (made at
    /// the first start).
    pub applied: Option<usize>,
    /// Migrations this build of hitl has.
    pub expected: usize,
}

/// Reaches the store at `url` and counts its migrations. Errors: unreachable, or not
/// a database hitl can read.
pub async fn probe(url: &str) -> Result<Probe> {
    if is_postgres_url(url) {
        let expected = sqlx::migrate!("./migrations/postgres").iter().count();
        let options = PgConnectOptions::from_str(url)
            .with_context(|| format!("reading the database URL {}", redact_url(url)))?;
        let mut conn =
            tokio::time::timeout(PROBE_TIMEOUT, sqlx::PgConnection::connect_with(&options))
                .await
                .map_err(|_| anyhow::anyhow!("no answer within {} s", PROBE_TIMEOUT.as_secs()))?
                .with_context(|| format!("connecting to {}", redact_url(url)))?;
        // No table yet: nothing applied (the first start migrates).
        let applied: i64 =
            sqlx::query_scalar("SELECT count(*) FROM _sqlx_migrations WHERE success")
                .fetch_one(&mut conn)
                .await
                .unwrap_or(0);
        let _ = conn.close().await;
        return Ok(Probe {
            backend: "postgres",
            applied: Some(applied.max(0) as usize),
            expected,
        });
    }
    let expected = sqlx::migrate!("./migrations/sqlite").iter().count();
    let path = sqlite_path(url)?;
    if !path.exists() {
        return Ok(Probe {
            backend: "sqlite",
            applied: None,
            expected,
        });
    }
    let conn = rusqlite::Connection::open_with_flags(
        &path,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .with_context(|| format!("opening {}", path.display()))?;
    conn.busy_timeout(PROBE_TIMEOUT)?;
    let applied: i64 = match conn.query_row(
        "SELECT count(*) FROM _sqlx_migrations WHERE success",
        [],
        |r| r.get(0),
    ) {
        Ok(n) => n,
        Err(e) if e.to_string().contains("no such table") => 0,
        Err(e) => {
            return Err(e).with_context(|| format!("reading {}", path.display()));
        }
    };
    Ok(Probe {
        backend: "sqlite",
        applied: Some(applied.max(0) as usize),
        expected,
    })
}
