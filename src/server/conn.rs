//! Connections: the accept loop in front of the router, with the limits that keep one
//! client — or another OS user on the machine — from starving everyone else.
//!
//! - At most `[http] max_connections` at once. One more is accepted and closed at
//!   once: left in the kernel's backlog it would hold a file descriptor anyway.
//! - A connection must send a whole request head within `[http] header_timeout`,
//!   counted from when it opens or its previous response went out, so idle keep-alive
//!   connections and slowloris clients (a header byte now and then) are closed. Long
//!   polls and WebSockets are not idle: their request has arrived.
//! - When the process runs out of file descriptors, accepting pauses instead of
//!   spinning, and [`reserve_descriptors`] keeps room for what matters more than one
//!   more client: the spool's files, the store, inotify and answer pushes.

use std::{
    convert::Infallible,
    net::SocketAddr,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use anyhow::Result;
use axum::{Router, extract::ConnectInfo};
use hyper::{body::Incoming, server::conn::http1};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::{net::TcpListener, sync::Semaphore};
use tower::ServiceExt;

use super::auth::Peer;

/// File descriptors kept for everything but HTTP clients: the store's connections,
/// spool files, inotify, journal and answer writes, WebSocket pushes to agents.
pub const RESERVED_DESCRIPTORS: u64 = 256;

/// How many connections were turned away at the cap (for `/metrics`).
pub static REFUSED_AT_CAP: AtomicU64 = AtomicU64::new(0);

/// The limits one server applies to its connections.
#[derive(Debug, Clone, Copy)]
pub struct ConnLimits {
    /// Connections open at once.
    pub max_connections: usize,
    /// How long a connection may take to send a request head.
    pub header_timeout: Duration,
}

/// Raises the soft limit on open files to the hard one, and caps `wanted` connections
/// so that [`RESERVED_DESCRIPTORS`] stay free whatever clients do. Returns the cap.
pub fn reserve_descriptors(wanted: usize) -> usize {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else {
        return wanted;
    };
    let mut limit = soft;
    if soft < hard && setrlimit(Resource::RLIMIT_NOFILE, hard, hard).is_ok() {
        limit = hard;
    }
    let room = limit.saturating_sub(RESERVED_DESCRIPTORS).max(16);
    let cap = wanted.min(usize::try_from(room).unwrap_or(usize::MAX));
    if cap < wanted {
        tracing::warn!(
            "serving at most {cap} HTTP connections, not {wanted}: the open-file limit is \
             {limit} and {RESERVED_DESCRIPTORS} are kept for the spool and the store"
        );
    }
    cap
}

/// Serves `router` on `listener` until `shutdown` completes; then stops accepting and
/// asks open connections to finish what they are doing.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: ConnLimits,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<()> {
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let mut http = http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout);
    tokio::pin!(shutdown);
    loop {
        let (stream, addr) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    pause_after_accept_error(&e).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            REFUSED_AT_CAP.fetch_add(1, Ordering::Relaxed);
            drop(stream);
            continue;
        };
        let _ = stream.set_nodelay(true);
        let service = per_connection(router.clone(), addr);
        let conn = http
            .serve_connection(TokioIo::new(stream), service)
            .with_upgrades();
        let mut stop = stop_rx.clone();
        tokio::spawn(async move {
            tokio::pin!(conn);
            tokio::select! {
                _ = conn.as_mut() => {}
                _ = async { stop.wait_for(|stopping| *stopping).await.map(|_| ()) } => {
                    conn.as_mut().graceful_shutdown();
                    let _ = conn.await;
                }
            }
            drop(slot);
        });
    }
    drop(listener);
    let _ = stop_tx.send(true);
    Ok(())
}

/// The router as a hyper service for one connection, telling the routes who connected.
fn per_connection(
    router: Router,
    addr: SocketAddr,
) -> impl hyper::service::Service<
    hyper::Request<Incoming>,
    Response = axum::response::Response,
    Error = Infallible,
    Future = impl Send,
> + Clone {
    let peer = Peer::new(addr);
    hyper::service::service_fn(move |mut req: hyper::Request<Incoming>| {
        req.extensions_mut().insert(ConnectInfo(peer.clone()));
        router.clone().oneshot(req.map(axum::body::Body::new))
    })
}

/// Accepting failed. Out of file descriptors (or kernel memory), trying again at once
/// would spin: wait a moment for connections to close. A connection that was reset
/// before it was accepted is nothing to wait for.
async fn pause_after_accept_error(e: &std::io::Error) {
    use std::io::ErrorKind::*;
    if matches!(e.kind(), ConnectionAborted | ConnectionReset | Interrupted) {
        return;
    }
    static LAST_WARNED: std::sync::Mutex<Option<std::time::Instant>> = std::sync::Mutex::new(None);
    if let Ok(mut last) = LAST_WARNED.lock()
        && last.is_none_or(|t| t.elapsed() > Duration::from_secs(10))
    {
        tracing::warn!("accepting HTTP connections failed ({e}); pausing new ones");
        *last = Some(std::time::Instant::now());
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
}
