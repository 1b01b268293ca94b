//! The HTTP adapter: seed 004's `/events` API, the native `/api/v1`, WebSocket
//! streams, metrics and health, over the broker's [`BrokerHandle`] and the store.
//!
//! Nothing here owns state: requests made over HTTP are committed to the store and
//! queued by the broker before the reply goes out; answers go through the broker like
//! any responder's. One route table ([`routes`]) builds both the router and
//! `/api/v1/openapi.json`, with each route's access rule, so they cannot disagree.

mod auth;
mod conn;
mod dashboard;
mod deliver;
pub mod devices;
mod error;
mod guard;
pub mod holder;
mod json;
mod limits;
pub mod login;
mod metrics;
mod native;
mod peer;
mod push;
mod respond;
mod routes;
mod schema;
mod seed;
pub mod seed004;
mod stream;
mod tasks;
pub mod tls;

use std::{net::SocketAddr, sync::Arc, time::Instant};

use anyhow::{Context, Result};
use tokio::net::TcpListener;

pub use auth::{load_or_create_asker_token, load_or_create_token};
pub use deliver::{Deliverer, DeliveryStatus};

use crate::{broker::BrokerHandle, config::HttpSettings, spool::Spool, store::Store};

/// Everything the routes share.
pub struct AppState {
    /// The broker.
    pub broker: BrokerHandle,
    /// The store, for reads (writes go through the broker).
    pub store: Store,
    /// The token callers present.
    pub token: String,
    /// The ask-only token: create and poll, nothing else.
    pub asker_token: String,
    /// `[http]` settings.
    pub settings: HttpSettings,
    /// The server listens on loopback only (else every route needs the token).
    pub loopback_bound: bool,
    /// The address it listens on.
    pub local_addr: SocketAddr,
    /// Its own URL, `http://ADDR` or, serving TLS, `https://ADDR`.
    pub base_url: String,
    /// It serves TLS (`[http] tls_cert`): its cookies are `Secure`.
    pub tls: bool,
    /// The projects served, for the agents list.
    pub spools: Vec<Spool>,
    /// The task runner, where tasks run (`hitl listen` in a project).
    pub tasks: Option<crate::tasks::TaskHandle>,
    /// The dashboard's unspent one-time login codes.
    pub logins: Arc<login::LoginCodes>,
    /// The dashboard's logged-in browsers and paired devices.
    pub devices: devices::Devices,
    /// Web Push to the devices that subscribed.
    pub push: Arc<crate::push::Push>,
    limiter: limits::RateLimiter,
    /// Which names and web pages may reach the server at all.
    guard: guard::Guard,
    /// The way back for requests made over HTTP, and the `/stream` feed.
    deliverer: Arc<Deliverer>,
    started: Instant,
}

/// What a server serves: the broker, the store it reads, the way back, and the
/// projects whose agents it lists.
pub struct Backends {
    /// The broker.
    pub broker: BrokerHandle,
    /// The store, for reads.
    pub store: Store,
    /// The way back for requests made over HTTP, and the `/stream` feed.
    pub deliverer: Arc<Deliverer>,
    /// The projects served.
    pub spools: Vec<Spool>,
    /// The task runner, if tasks run here.
    pub tasks: Option<crate::tasks::TaskHandle>,
}

impl AppState {
    /// The shared state of one server.
    pub fn new(
        backends: Backends,
        tokens: (String, String),
        settings: HttpSettings,
        local_addr: SocketAddr,
        logins: Arc<login::LoginCodes>,
        devices: devices::Devices,
        push: Arc<crate::push::Push>,
    ) -> Arc<AppState> {
        let (token, asker_token) = tokens;
        let Backends {
            broker,
            store,
            deliverer,
            spools,
            tasks,
        } = backends;
        let guard = guard::Guard::new(local_addr, &settings);
        let tls = settings.tls_cert.is_some();
        Arc::new(AppState {
            base_url: base_url(local_addr, tls),
            tls,
            broker,
            store,
            token,
            asker_token,
            settings,
            loopback_bound: local_addr.ip().is_loopback(),
            local_addr,
            spools,
            tasks,
            logins,
            devices,
            push,
            limiter: limits::RateLimiter::default(),
            guard,
            deliverer,
            started: Instant::now(),
        })
    }
}

/// Reads an address to serve on as people write it: `4001` and `localhost:4001`
/// (loopback), `127.0.0.1:4001`, `0.0.0.0:4001`, `[::1]:4001`. No other names:
/// they would need a DNS lookup to mean anything.
pub fn listen_address(addr: &str) -> Result<SocketAddr> {
    let addr = addr.trim();
    let loopback = |port: &str| -> Result<SocketAddr> {
        let port: u16 = port
            .parse()
            .with_context(|| format!("{port:?} is not a port number (0 to 65535)"))?;
        Ok(SocketAddr::from(([127, 0, 0, 1], port)))
    };
    if addr.bytes().all(|b| b.is_ascii_digit()) && !addr.is_empty() {
        return loopback(addr);
    }
    if let Some(port) = addr
        .strip_prefix("localhost:")
        .or_else(|| addr.strip_prefix(':'))
    {
        return loopback(port);
    }
    addr.parse().with_context(|| {
        format!(
            "{addr:?} is not an address to serve on: write a port (4000), localhost:PORT, \
             or IP:PORT (127.0.0.1:4000, 0.0.0.0:4000, [::1]:4000)"
        )
    })
}

/// Binds `addr`. With `fallback` (the default address, which the user did not
/// choose), a port taken by one of this user's own programs (another project's
/// listener) gives way, said on stderr: first to port `fallback` (this project's
/// own, [`project_port`], so its dashboard tab and links still work after a
/// restart), else to any free one on the same address. A port the user chose, or
/// one taken by another OS user or by a holder the tables do not show, is refused,
/// saying by whom: a listener that moved would leave its usual port to whoever
/// takes it next, with everything agents and pages send there.
pub async fn bind(addr: &str, fallback: Option<u16>) -> Result<TcpListener> {
    let parsed = listen_address(addr)?;
    match TcpListener::bind(parsed).await {
        Ok(l) => Ok(l),
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => {
            let held = holder::holder(parsed);
            let by = held
                .as_ref()
                .map_or_else(|| "a program hitl cannot see".to_string(), |h| h.describe());
            if let Some(port) = fallback
                && held.as_ref().is_some_and(holder::Holder::is_this_user)
            {
                let own = SocketAddr::new(parsed.ip(), port);
                let l = match TcpListener::bind(own).await {
                    Ok(l) => l,
                    Err(_) => {
                        let any = SocketAddr::new(parsed.ip(), 0);
                        TcpListener::bind(any)
                            .await
                            .with_context(|| format!("binding {any}"))?
                    }
                };
                if let Ok(local) = l.local_addr() {
                    eprintln!(
                        "hitl: {parsed} is taken by your own {by}: serving on {local} instead \
                         (set [http] listen_addr to keep a port of your choosing)"
                    );
                }
                return Ok(l);
            }
            Err(e).with_context(|| {
                format!(
                    "{parsed} is taken by {by}. hitl does not move to another port on its own \
                     (whoever takes the port it left gets what agents send there): stop that \
                     program, set [http] listen_addr (or --http) to a free port, or pass \
                     --http {}:0 for any free port",
                    parsed.ip()
                )
            })
        }
        Err(e) => Err(e).with_context(|| format!("binding {addr}")),
    }
}

/// The port a project's listener takes when the default is held by another of the
/// user's listeners: the same for the same folder every run, from 40000 to 48999
/// (within Linux's range for outgoing connections, where no service of its own
/// waits; if one of those holds it, any free port is taken).
pub fn project_port(project: &std::path::Path) -> u16 {
    // FNV-1a: stable across runs and builds, unlike the standard library's hasher.
    let hash = project
        .as_os_str()
        .as_encoded_bytes()
        .iter()
        .fold(0xcbf2_9ce4_8422_2325_u64, |h, &b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
    40_000 + (hash % 9_000) as u16
}

/// A server's own URL: `https://` when it serves TLS.
pub fn base_url(local: SocketAddr, tls: bool) -> String {
    format!("{}://{local}", if tls { "https" } else { "http" })
}

/// Serves until `shutdown` completes, within `limits`.
async fn serve(
    listener: TcpListener,
    state: Arc<AppState>,
    limits: conn::ConnLimits,
    tls: Option<tokio_rustls::TlsAcceptor>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<()> {
    let app = routes::router(state);
    conn::serve(listener, app, limits, tls, shutdown)
        .await
        .context("serving HTTP")
}

/// A server running in the background, from [`start`].
pub struct Running {
    /// The address it listens on.
    pub local: SocketAddr,
    /// Its URL: `http://ADDR`, or `https://ADDR` when it serves TLS.
    pub url: String,
    /// The SHA-256 of the certificate it presents now (hex), when it serves TLS;
    /// changes when renewed files are served.
    pub tls_sha256: Option<tokio::sync::watch::Receiver<String>>,
    logins: Arc<login::LoginCodes>,
    /// What it serves from, for the notifiers it feeds (Web Push).
    state: Arc<AppState>,
    /// Follows the certificate's renewals, when it serves TLS.
    renewals: Option<tokio::task::JoinHandle<()>>,
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<Result<()>>,
}

/// Binds `addr` (with `fallback`, the default address, which gives way to the first
/// project's own port as [`bind`] says), reads or makes the token in `config_dir`,
/// and serves in the background.
pub async fn start(
    addr: &str,
    fallback: bool,
    backends: Backends,
    settings: &HttpSettings,
    config_dir: &std::path::Path,
) -> Result<Running> {
    settings.validate()?;
    // Before the port is taken: a listener told to serve TLS never serves plain.
    let tls = tls::load(settings, config_dir)?;
    let own_port = fallback.then(|| {
        backends
            .spools
            .first()
            .map_or(0, |s| project_port(s.project()))
    });
    let listener = bind(addr, own_port).await?;
    let local = listener.local_addr()?;
    let token = load_or_create_token(config_dir).context("making the API token")?;
    let asker_token =
        load_or_create_asker_token(config_dir).context("making the ask-only token")?;
    // Worked out (and any warning given) before the caller says it is ready.
    let limits = conn::ConnLimits {
        max_connections: conn::reserve_descriptors(settings.max_connections),
        header_timeout: std::time::Duration::from_secs(settings.header_timeout),
        body_timeout: std::time::Duration::from_secs(settings.body_timeout),
    };
    let logins = Arc::new(login::LoginCodes::default());
    let devices = devices::Devices::load(Some(config_dir.join("sessions")));
    let push = Arc::new(crate::push::Push::new(config_dir, settings));
    let state = AppState::new(
        backends,
        (token, asker_token),
        settings.clone(),
        local,
        logins.clone(),
        devices,
        push,
    );
    let for_push = state.clone();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let tls_sha256 = tls.as_ref().map(|t| t.sha256.clone());
    let renewals = tls.as_ref().map(tls::ServerTls::follow_renewals);
    let task = tokio::spawn(serve(
        listener,
        state,
        limits,
        tls.map(|t| t.acceptor),
        async {
            let _ = stopped.await;
        },
    ));
    Ok(Running {
        local,
        url: base_url(local, tls_sha256.is_some()),
        tls_sha256,
        renewals,
        logins,
        state: for_push,
        stop,
        task,
    })
}

impl Running {
    /// A link that logs one browser into the dashboard, good for `ttl` or until opened.
    pub fn login_link(&self, ttl: std::time::Duration) -> String {
        self.logins.link(&self.url, ttl)
    }

    /// A maker of such links for UIs, each good for [`login::ON_REQUEST`] or until
    /// opened (as `hitl dashboard`'s).
    pub fn login_links(&self) -> std::sync::Arc<dyn Fn() -> String + Send + Sync> {
        let (logins, url) = (self.logins.clone(), self.url.clone());
        std::sync::Arc::new(move || logins.link(&url, login::ON_REQUEST))
    }

    /// Web Push, and whether a device (by id) is still logged in, for the notifier
    /// that pushes to the devices that subscribed here.
    pub fn push(&self) -> (Arc<crate::push::Push>, crate::push::notifier::DeviceLive) {
        let state = self.state.clone();
        (
            self.state.push.clone(),
            Arc::new(move |id: &str| state.devices.is_live(id)),
        )
    }

    /// Stops taking connections; open long polls and streams are cut after a moment,
    /// not waited for.
    pub async fn stop(self) {
        let Running {
            stop,
            mut task,
            renewals,
            ..
        } = self;
        if let Some(r) = renewals {
            r.abort();
        }
        let _ = stop.send(());
        let _ = tokio::time::timeout(std::time::Duration::from_secs(2), &mut task).await;
        task.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_projects_own_port_is_the_same_each_run_and_in_its_range() {
        let a = project_port(std::path::Path::new("/home/u/proj"));
        // FNV-1a of the path: fixed, whatever the build or the run.
        assert_eq!(a, project_port(std::path::Path::new("/home/u/proj")));
        assert_ne!(a, project_port(std::path::Path::new("/home/u/proj2")));
        for i in 0..1000 {
            let p = project_port(std::path::Path::new(&format!("/p/{i}")));
            assert!((40_000..49_000).contains(&p), "{p}");
        }
    }

    #[test]
    fn addresses_are_read_as_people_write_them() {
        let ok = |a: &str| listen_address(a).unwrap().to_string();
        assert_eq!(ok("4001"), "127.0.0.1:4001");
        assert_eq!(ok("localhost:4001"), "127.0.0.1:4001");
        assert_eq!(ok(":0"), "127.0.0.1:0");
        assert_eq!(ok("0.0.0.0:4000"), "0.0.0.0:4000");
        assert_eq!(ok("[::1]:4000"), "[::1]:4000");
        for bad in ["", "70000", "example.com:4000", "localhost", "127.0.0.1"] {
            assert!(listen_address(bad).is_err(), "{bad:?}");
        }
    }
}
