//! Connections: the accept loop in front of the router, with the limits that keep one
//! client — or another OS user on the machine — from starving everyone else.
//!
//! - At most `[http] max_connections` at once. One more is accepted and closed at
//!   once: left in the kernel's backlog it would hold a file descriptor anyway.
//! - A connection must send a whole request head within `[http] header_timeout`,
//!   counted from when it opens or its previous response went out, so idle keep-alive
//!   connections and slowloris clients (a header byte now and then) are closed. Long
//!   polls and WebSockets are not idle: their request has arrived.
//! - No other OS user (and no remote address) holds more than an eighth of them,
//!   and all of them together no more than half: the user's own dashboard, agents
//!   and `hitl ask --server` always find room (the kernel says who owns a loopback
//!   client's socket, one `sock_diag` query per connection).
//! - A request body must arrive whole within `[http] body_timeout` of its head: a
//!   body sent a byte now and then is cut, not waited on.
//! - Over TLS (`[http] tls_cert`), the handshake must end within the same
//!   `header_timeout`, and a client that speaks plain http to it is told to use https.
//! - When the process runs out of file descriptors, accepting pauses instead of
//!   spinning, and [`reserve_descriptors`] keeps room for what matters more than one
//!   more client: the spool's files, the store, inotify and answer pushes.

use std::{
    collections::HashMap,
    convert::Infallible,
    net::IpAddr,
    pin::Pin,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
    task::{Context, Poll},
    time::Duration,
};

use anyhow::Result;
use axum::{Router, extract::ConnectInfo};
use hyper::{body::Incoming, server::conn::http1};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::{net::TcpListener, sync::Semaphore};
use tokio_rustls::TlsAcceptor;
use tower::ServiceExt;

use super::{auth::Peer, error::BODY_LATE};

/// File descriptors kept for everything but HTTP clients: the store's connections,
/// spool files, inotify, journal and answer writes, WebSocket pushes to agents.
pub const RESERVED_DESCRIPTORS: u64 = 256;

/// How many connections were turned away at the cap (for `/metrics`).
pub static REFUSED_AT_CAP: AtomicU64 = AtomicU64::new(0);

/// Who holds a connection, for the caps: another OS user (by uid; `None` when the
/// kernel could not say) or a remote address. The user's own connections are not
/// counted here.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Holder {
    OtherUser(Option<u32>),
    Remote(IpAddr),
}

/// Connections held by others than the user, by holder.
#[derive(Debug, Default)]
struct OthersTally {
    by_holder: Mutex<HashMap<Holder, usize>>,
}

/// One connection counted in an [`OthersTally`], uncounted when dropped.
struct Counted {
    tally: Arc<OthersTally>,
    holder: Holder,
}

impl Drop for Counted {
    fn drop(&mut self) {
        let mut by = self
            .tally
            .by_holder
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if let Some(n) = by.get_mut(&self.holder) {
            *n -= 1;
            if *n == 0 {
                by.remove(&self.holder);
            }
        }
    }
}

impl OthersTally {
    /// Counts one more connection of `holder`, if it stays within its share (an
    /// eighth of `max`, at least 4) and all others within half of `max`.
    fn admit(self: &Arc<Self>, holder: Holder, max: usize) -> Option<Counted> {
        let mut by = self.by_holder.lock().unwrap_or_else(|p| p.into_inner());
        let total: usize = by.values().sum();
        let mine = by.get(&holder).copied().unwrap_or(0);
        if mine >= (max / 8).max(4) || total >= (max / 2).max(4) {
            return None;
        }
        *by.entry(holder).or_insert(0) += 1;
        Some(Counted {
            tally: self.clone(),
            holder,
        })
    }
}

/// The limits one server applies to its connections.
#[derive(Debug, Clone, Copy)]
pub struct ConnLimits {
    /// Connections open at once.
    pub max_connections: usize,
    /// How long a connection may take to send a request head.
    pub header_timeout: Duration,
    /// How long a request's body may take to arrive after its head.
    pub body_timeout: Duration,
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
    tls: Option<TlsAcceptor>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<()> {
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let others = Arc::new(OthersTally::default());
    let server = listener.local_addr()?;
    let me = crate::runtime::process::euid();
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
        // Who holds it: the user's own connections are not counted.
        let (owner, holder) = if addr.ip().is_loopback() {
            match super::peer::owner(addr, server) {
                Some(uid) if uid == me => (Some(uid), None),
                found => (found, Some(Holder::OtherUser(found))),
            }
        } else {
            (None, Some(Holder::Remote(addr.ip())))
        };
        let counted = match holder {
            None => None,
            Some(h) => match others.admit(h, limits.max_connections) {
                Some(c) => Some(c),
                None => {
                    REFUSED_AT_CAP.fetch_add(1, Ordering::Relaxed);
                    drop(stream);
                    continue;
                }
            },
        };
        let _ = stream.set_nodelay(true);
        let peer = if addr.ip().is_loopback() {
            Peer::with_owner(addr, owner)
        } else {
            Peer::new(addr)
        };
        let service = per_connection(router.clone(), peer, limits.body_timeout);
        let stop = stop_rx.clone();
        let (http, tls) = (http.clone(), tls.clone());
        tokio::spawn(async move {
            match tls {
                None => serve_one(&http, stream, service, stop).await,
                Some(tls) => {
                    // The hello counts as the first request's head: within its time.
                    let handshake = tokio::time::timeout(limits.header_timeout, async {
                        if speaks_plain_http(&stream).await {
                            say_use_https(stream).await;
                            return None;
                        }
                        tls.accept(stream).await.ok()
                    });
                    if let Ok(Some(stream)) = handshake.await {
                        serve_one(&http, stream, service, stop).await;
                    }
                }
            }
            drop(counted);
            drop(slot);
        });
    }
    drop(listener);
    let _ = stop_tx.send(true);
    Ok(())
}

/// Serves one connection's requests until it closes, or finishes the one under way
/// once the server stops.
async fn serve_one<S, Svc>(
    http: &http1::Builder,
    io: S,
    service: Svc,
    mut stop: tokio::sync::watch::Receiver<bool>,
) where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    Svc: hyper::service::Service<
            hyper::Request<Incoming>,
            Response = axum::response::Response,
            Error = Infallible,
        > + Send
        + 'static,
    Svc::Future: Send + 'static,
{
    let conn = http
        .serve_connection(TokioIo::new(io), service)
        .with_upgrades();
    tokio::pin!(conn);
    tokio::select! {
        _ = conn.as_mut() => {}
        _ = async { stop.wait_for(|stopping| *stopping).await.map(|_| ()) } => {
            conn.as_mut().graceful_shutdown();
            let _ = conn.await;
        }
    }
}

/// Whether a client of a TLS server began with plain text (a request line) rather
/// than a TLS record (whose first byte, a handshake's, is 0x16).
async fn speaks_plain_http(stream: &tokio::net::TcpStream) -> bool {
    let mut first = [0u8; 1];
    matches!(stream.peek(&mut first).await, Ok(1) if first[0].is_ascii_alphabetic())
}

/// Tells a plain-http client of a TLS server what went wrong, in its own protocol,
/// instead of a TLS alert it would show as garbage or "connection reset".
async fn say_use_https(mut stream: tokio::net::TcpStream) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    // The head read first: closing on unread bytes would reset the connection, and
    // the client might never see the answer.
    let mut head = Vec::with_capacity(1024);
    let mut buf = [0u8; 1024];
    while head.len() < 16 * 1024 && !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    const BODY: &str = "{\"error\":\"this server speaks https only: use an https:// URL\"}";
    let response = format!(
        "HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n{BODY}",
        BODY.len()
    );
    let _ = stream.write_all(response.as_bytes()).await;
    let _ = stream.shutdown().await;
}

/// The router as a hyper service for one connection, telling the routes who connected;
/// each request's body is given `body_timeout` to arrive.
fn per_connection(
    router: Router,
    peer: Peer,
    body_timeout: Duration,
) -> impl hyper::service::Service<
    hyper::Request<Incoming>,
    Response = axum::response::Response,
    Error = Infallible,
    Future = impl Send,
> + Clone {
    hyper::service::service_fn(move |mut req: hyper::Request<Incoming>| {
        req.extensions_mut().insert(ConnectInfo(peer.clone()));
        router
            .clone()
            .oneshot(req.map(|b| axum::body::Body::new(DeadlineBody::new(b, body_timeout))))
    })
}

/// A request body that fails once `deadline` has passed before its end.
struct DeadlineBody<B> {
    inner: B,
    deadline: Pin<Box<tokio::time::Sleep>>,
    within: Duration,
}

impl<B> DeadlineBody<B> {
    fn new(inner: B, within: Duration) -> DeadlineBody<B> {
        DeadlineBody {
            inner,
            deadline: Box::pin(tokio::time::sleep(within)),
            within,
        }
    }
}

impl<B> http_body::Body for DeadlineBody<B>
where
    B: http_body::Body<Data = axum::body::Bytes> + Unpin,
    B::Error: Into<axum::BoxError>,
{
    type Data = axum::body::Bytes;
    type Error = axum::BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        if let Poll::Ready(frame) = Pin::new(&mut self.inner).poll_frame(cx) {
            return Poll::Ready(frame.map(|f| f.map_err(Into::into)));
        }
        if self.deadline.as_mut().poll(cx).is_ready() {
            let within = self.within;
            return Poll::Ready(Some(Err(format!("{BODY_LATE} ({within:?})").into())));
        }
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
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
