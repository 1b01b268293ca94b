//! `hitl serve`: the broker without a local UI or project spools, for a shared host.
//! Agents ask over HTTP; people answer over HTTP (or the dashboard). With a PostgreSQL
//! store (`--db postgres://…`) several of these may share one database.

use anyhow::Result;

use super::listen::StopSignals;
use crate::{
    config::{self, Paths},
    daemon::{self, DaemonOptions},
};

/// The flags of `hitl serve` (their doc comments are its help text).
#[derive(Debug, Clone, clap::Args)]
pub struct ServeOptions {
    /// Address to serve on. Anything but loopback requires the token on every route.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:4000")]
    pub http: String,
    /// Store: sqlite://PATH (default: the user data folder's hitl.db) or postgres://…
    #[arg(long, env = "HITL_DB")]
    pub db: Option<String>,
    /// Relay the mailbox runs (`hitl mailbox`) whose folders match GLOB, as they appear
    /// (e.g. '/tmp/historian-*'; any number).
    #[arg(long, value_name = "GLOB")]
    pub mailbox: Vec<String>,
}

/// Serves until SIGINT or SIGTERM.
pub async fn run(opts: ServeOptions) -> Result<()> {
    let mut stop_signals = StopSignals::catch()?;
    let paths = Paths::from_env();
    let settings = config::load(&paths, None)?;
    let db_url = opts.db.clone().unwrap_or_else(|| paths.db_url());
    let mut daemon = daemon::start(DaemonOptions {
        spools: Vec::new(),
        db_url: db_url.clone(),
        settings,
        http: Some((opts.http.clone(), false)),
        config_dir: paths.config_dir.clone(),
        responders: Vec::new(),
        auto_answer: None,
        mailboxes: opts.mailbox.clone(),
        notify: false,
    })
    .await?;
    let local = daemon.http_addr.expect("serve always serves HTTP");
    if !local.ip().is_loopback() {
        eprintln!("hitl: serving on {local}, not loopback: every route needs the token");
    }
    eprintln!(
        "hitl: HTTP API on {} (store: {})",
        daemon.http_url.as_deref().unwrap_or_default(),
        crate::store::redact_url(&db_url)
    );
    if local.ip().is_loopback()
        && let Some(link) = daemon.login_link()
    {
        eprintln!(
            "hitl: dashboard on {link} (a one-time login link; `hitl dashboard` makes another)"
        );
    }
    eprintln!("hitl: ready");
    tokio::select! {
        _ = stop_signals.recv() => {}
        r = daemon.crashed() => return r,
    }
    eprintln!("hitl: stopping; pending requests stay in the store for the next start");
    daemon.stop().await;
    Ok(())
}
