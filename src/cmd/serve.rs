//! `hitl serve`: the broker without a local UI or project spools, for a shared host.
//! Agents ask over HTTP; people answer over HTTP (or the dashboard). With a PostgreSQL
//! store (`--db postgres://…`) several of these may share one database.

use anyhow::Result;
use tokio::sync::{mpsc, oneshot};

use super::listen::StopSignals;
use crate::{
    broker::{Broker, BrokerOptions, spawn_store_writer},
    config::{self, Paths},
    server,
    store::Store,
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
}

/// Serves until SIGINT or SIGTERM.
pub async fn run(opts: ServeOptions) -> Result<()> {
    let mut stop_signals = StopSignals::catch()?;
    let paths = Paths::from_env();
    let settings = config::load(&paths, None)?;
    let db_url = opts.db.clone().unwrap_or_else(|| paths.db_url());
    let store = Store::open(&db_url).await?;
    let reader = store.clone();
    let remote_pending = store.pending_remote().await?;
    let (store_tx, store_task) = spawn_store_writer(store);
    let (broker, handle) = Broker::new(
        Vec::new(),
        BrokerOptions {
            max_question_bytes: settings.listen.max_question_bytes,
            durable: settings.listen.fsync,
        },
        store_tx,
        Vec::new(),
        remote_pending,
    );
    // No spools: the broker's event channel stays open and quiet.
    let (_events_tx, events_rx) = mpsc::unbounded_channel();
    let (stop_tx, stop_rx) = oneshot::channel::<()>();
    let mut broker_task = tokio::spawn(broker.run(events_rx, async {
        let _ = stop_rx.await;
    }));

    // Requests made or ended by other replicas sharing the store.
    let replica_task = crate::replica::spawn(reader.clone(), handle.clone());
    let http = server::start(
        &opts.http,
        false,
        handle.clone(),
        reader,
        &settings.http,
        &paths.config_dir,
        Vec::new(),
    )
    .await?;
    let local = http.local;
    if !local.ip().is_loopback() {
        eprintln!("hitl: serving on {local}, not loopback: every route needs the token");
    }
    eprintln!(
        "hitl: HTTP API on http://{local} (store: {})",
        crate::store::redact_url(&db_url)
    );
    eprintln!("hitl: ready");
    tokio::select! {
        _ = stop_signals.recv() => {}
        r = &mut broker_task => {
            anyhow::bail!("the broker stopped unexpectedly ({r:?}); pending requests stay in the store");
        }
    }
    eprintln!("hitl: stopping; pending requests stay in the store for the next start");
    http.stop().await;
    replica_task.abort();
    let _ = stop_tx.send(());
    let _ = broker_task.await;
    drop(handle);
    // Connections still open hold a handle (and so the writer's channel) for a moment
    // longer; everything sent has been written by then.
    let _ = tokio::time::timeout(std::time::Duration::from_secs(5), store_task).await;
    Ok(())
}
