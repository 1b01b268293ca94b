//! `hitl gc`: applies the retention policy (`[history]`) to history now, or says what
//! it would delete. A running broker does the same every hour.

use anyhow::Result;

use crate::{
    config::{self, Paths},
    spool::Spool,
    store::Store,
};

/// What `hitl gc` was asked.
#[derive(Debug, Clone, clap::Args)]
pub struct GcOptions {
    /// Delete ended requests and events older than this many days (default: the
    /// [history] keep_days setting, 90; 0 keeps them).
    #[arg(long, value_name = "DAYS")]
    pub keep_days: Option<u64>,
    /// Then delete the oldest ended ones while history is over this many MiB
    /// (default: the [history] max_mb setting, 1024; 0: no limit).
    #[arg(long, value_name = "MIB")]
    pub max_mb: Option<u64>,
    /// Only count what the age limit would delete.
    #[arg(long)]
    pub dry_run: bool,
    /// History database URL.
    #[arg(long, env = "HITL_DB")]
    pub db: Option<String>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// Runs the sweep and reports it.
pub async fn run(opts: GcOptions) -> Result<()> {
    let paths = Paths::from_env();
    // In a project, its settings count too.
    let project_config = Spool::locate(None).ok().map(|s| s.config_file());
    let settings = config::load(&paths, project_config.as_deref())?;
    let mut history = settings.history;
    if let Some(d) = opts.keep_days {
        history.keep_days = d;
    }
    if let Some(m) = opts.max_mb {
        history.max_mb = m;
    }
    let url = opts.db.unwrap_or_else(|| paths.db_url());
    let store = Store::open(&url).await?;
    let now = jiff::Timestamp::now().as_millisecond();
    let report = store.gc(&history.retention(), now, opts.dry_run).await;
    store.close().await;
    let report = report?;
    if opts.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    let verb = if report.dry_run {
        "would delete"
    } else {
        "deleted"
    };
    println!(
        "{verb} {} ended requests and {} events older than {} days; history {} → {} KiB ({})",
        report.requests_deleted,
        report.events_deleted,
        history.keep_days,
        report.bytes_before / 1024,
        report.bytes_after / 1024,
        crate::store::redact_url(&url),
    );
    Ok(())
}
