//! Who is calling: the token, where it may come from, and what each caller may do.
//!
//! A token is made on first start (`token` in the user config folder, mode 0600);
//! `HITL_TOKEN` overrides it. Clients send it as `Authorization: Bearer …`, as
//! `X-Hitl-Token`, or — the dashboard — once as `?token=…` or a one-time `?code=…`
//! (see `login.rs`), either of which starts a session whose id an HttpOnly,
//! SameSite=Strict cookie keeps (never the token). Cookies ignore ports, so its name
//! carries the server's port (`hitl_token_4000`): two servers on one machine do not
//! read each other's, and which pages may send it at all is the guard's to say.
//!
//! Without the token a caller may only do what seed 004's clients do, and only from
//! loopback while the server itself is bound to loopback: create requests, and poll or
//! wait for answers — the latter only when the caller runs as the same OS user as the
//! server (the kernel's socket table says who owns the client's end), so another user
//! on the machine cannot read answers by guessing ids. `[http] open_loopback = false`
//! closes both.
//!
//! A request relayed by a proxy on this machine (Tailscale's `serve`, `cloudflared`,
//! a reverse proxy: whatever lets a phone in) arrives from loopback too, as the proxy's
//! OS user — often the user's own. It is not local: it says so by a forwarding header
//! (`Forwarded`, `X-Forwarded-For`, `X-Real-IP`, `Via`) or by naming the server by a
//! name from `[http] allowed_hosts`, which only such a relay needs; it then needs the
//! token or a dashboard session for everything, as a remote client does.

use std::{
    net::{IpAddr, SocketAddr},
    path::Path,
    sync::{Arc, OnceLock},
};

use anyhow::{Context, Result};
use axum::{
    extract::{ConnectInfo, Request, State},
    http::{HeaderValue, StatusCode, header},
    middleware::Next,
    response::{IntoResponse, Response},
};

use super::{
    AppState,
    devices::{SESSION_TTL, name_from_user_agent},
    error::ApiError,
    login::{cookie_attributes, cookie_name, cookie_value},
};

/// What a route needs of its caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Anyone (`/healthz`).
    Public,
    /// Creating requests: without a token from loopback (seed clients send none).
    Agent,
    /// Polling or waiting for an answer: without a token from loopback by the
    /// server's own OS user.
    Poll,
    /// Everything else: the token, or a device's session.
    Token,
    /// What makes a way in (login links, pairing, devices): the token itself, never
    /// a device's session, so that a device cannot outlast its revocation.
    Owner,
}

/// The client's end of one TCP connection, shared by every request on it.
///
/// Who owns it is looked up once per connection, when a token-less poll first needs
/// it: reading the kernel's socket table costs time in proportion to the sockets on
/// the machine, and a seed client polls `/events/{id}/response` over one connection.
#[derive(Debug, Clone)]
pub struct Peer {
    /// The client's address.
    pub addr: SocketAddr,
    owner: Arc<OnceLock<Option<u32>>>,
}

impl Peer {
    /// The client at `addr`, its owner not looked up yet.
    pub fn new(addr: SocketAddr) -> Peer {
        Peer {
            addr,
            owner: Arc::default(),
        }
    }

    /// The client at `addr`, owned by `owner` (as the accept loop found).
    pub fn with_owner(addr: SocketAddr, owner: Option<u32>) -> Peer {
        let peer = Peer::new(addr);
        let _ = peer.owner.set(owner);
        peer
    }

    /// The OS user owning the client's end, if the kernel's table has it.
    fn owner(&self, server: SocketAddr) -> Option<u32> {
        *self
            .owner
            .get_or_init(|| super::peer::owner(self.addr, server))
    }
}

/// Who a caller is, as far as the machine can tell.
enum Identity {
    /// The user: the token, or a loopback client running as the server's OS user.
    User,
    /// Another OS user of this machine, by uid.
    OtherUser(u32),
}

/// The caller of one HTTP request, as the auth layer found it.
#[derive(Debug, Clone)]
pub struct Caller {
    /// It presented the right token.
    pub authenticated: bool,
    /// It presented the ask-only token: it may create and poll.
    pub asker: bool,
    /// It connects from loopback to a server bound to loopback.
    pub local: bool,
    /// It came with a dashboard session's cookie, not the token: a person at the
    /// dashboard (its answers are credited to the dashboard).
    pub dashboard: bool,
    /// That session's id (the cookie's value) and its device's id.
    pub session: Option<(String, String)>,
    /// That device's name, for whom an answer is credited to.
    pub device_name: Option<String>,
    /// Its connection.
    pub peer: Peer,
}

impl Caller {
    /// Who an answer this caller sends is from, unless it says: the dashboard, this
    /// machine's user and the device (`dashboard:ana (my phone)`) for a dashboard
    /// page, else `http`.
    pub fn responder(&self) -> String {
        let user = crate::runtime::process::user_name();
        match (self.dashboard, &self.device_name) {
            (true, Some(device)) => format!("dashboard:{user} ({device})"),
            (true, None) => format!("dashboard:{user}"),
            (false, _) => "http".to_string(),
        }
    }
}

impl Caller {
    /// Refuses the caller unless it may do what `access` needs.
    pub fn require(&self, access: Access, state: &AppState) -> Result<(), ApiError> {
        let ok = match access {
            Access::Public => true,
            Access::Agent => {
                self.authenticated || self.asker || (self.local && state.settings.open_loopback)
            }
            Access::Poll => {
                self.authenticated
                    || self.asker
                    || (self.local
                        && state.settings.open_loopback
                        && self.peer.owner(state.local_addr)
                            == Some(crate::runtime::process::euid()))
            }
            Access::Token => self.authenticated,
            Access::Owner => self.authenticated && !self.dashboard,
        };
        if !ok && access == Access::Owner && self.dashboard {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "a device logged in to the dashboard may answer and read, but not make \
                 login links, pair devices or manage them: that takes the hitl token \
                 (`hitl dashboard`, `hitl pair`, `hitl devices` on your own machine)",
            ));
        }
        if ok {
            Ok(())
        } else {
            Err(ApiError::new(
                StatusCode::UNAUTHORIZED,
                "this needs the hitl token: send `Authorization: Bearer TOKEN` (the token is \
                 in the `token` file of the hitl config folder, or HITL_TOKEN)",
            ))
        }
    }
}

impl Caller {
    /// Whose idempotency keys this caller's creates use. Keys name requests, and a
    /// replay returns the request with its answer, so each caller gets its own
    /// namespace: the user (the token, or a loopback client running as the server's
    /// OS user), else the loopback client's own OS user. `None` when the kernel cannot
    /// say who it is: its keys are then not honoured at all.
    pub fn key_scope(&self, state: &AppState) -> Option<String> {
        Some(match self.identity(state)? {
            Identity::User => "user".into(),
            Identity::OtherUser(uid) => format!("uid{uid}"),
        })
    }

    /// Whether this caller is the user or another OS user; `None` when the kernel
    /// cannot say (the client is gone).
    fn identity(&self, state: &AppState) -> Option<Identity> {
        if self.authenticated {
            return Some(Identity::User);
        }
        match self.peer.owner(state.local_addr)? {
            uid if uid == crate::runtime::process::euid() => Some(Identity::User),
            uid => Some(Identity::OtherUser(uid)),
        }
    }
}

impl Caller {
    /// Who this caller is, for [`crate::protocol::Request::created_by`]: the user (the
    /// token, or a loopback client running as the server's OS user), else the loopback
    /// client's OS user by uid and name, else `unknown`.
    pub fn who(&self, state: &AppState) -> String {
        match self.identity(state) {
            Some(Identity::User) => crate::protocol::CREATED_BY_USER.into(),
            Some(Identity::OtherUser(uid)) => match nix::unistd::User::from_uid(uid.into()) {
                Ok(Some(u)) => format!("uid {uid} ({})", u.name),
                _ => format!("uid {uid}"),
            },
            None => "unknown".into(),
        }
    }

    /// Takes one create from this caller's budget (`[http] create_rate_limit`).
    ///
    /// Token holders share one budget, remote addresses have one each. Loopback
    /// callers without the token draw on one shared budget while it lasts: finding
    /// out which OS user is calling reads the kernel's socket table, which costs
    /// milliseconds on a busy machine. Once it runs dry each OS user gets a budget of
    /// its own, so one user's flood cannot starve another's agents.
    pub fn take_create(&self, state: &AppState) -> Result<(), ApiError> {
        let limiter = &state.limiter;
        if self.authenticated {
            return limiter.check_create("user", &state.settings);
        }
        if !self.local {
            return limiter.check_create(&format!("ip {}", self.peer.addr.ip()), &state.settings);
        }
        if limiter.check_create("loopback", &state.settings).is_ok() {
            return Ok(());
        }
        let who = self.key_scope(state).unwrap_or_else(|| "unknown".into());
        limiter.check_create(&who, &state.settings)
    }
}

/// The token: `HITL_TOKEN`, else the `token` file in `config_dir`, made (0600) if absent.
pub fn load_or_create_token(config_dir: &Path) -> Result<String> {
    if let Ok(t) = std::env::var("HITL_TOKEN")
        && !t.trim().is_empty()
    {
        return Ok(t.trim().to_string());
    }
    load_or_create_secret(config_dir, "token")
}

/// The ask-only token (`asker-token` in `config_dir`, made 0600 if absent): it may
/// create requests and read their answers, and nothing else. For agents run as
/// another OS user, who must ask and hear back but never answer or change
/// anything (README, security model).
pub fn load_or_create_asker_token(config_dir: &Path) -> Result<String> {
    load_or_create_secret(config_dir, "asker-token")
}

/// A random secret kept in `config_dir/name`, made (0600) if absent.
fn load_or_create_secret(config_dir: &Path, name: &str) -> Result<String> {
    let path = config_dir.join(name);
    match std::fs::read_to_string(&path) {
        Ok(t) if !t.trim().is_empty() => return Ok(t.trim().to_string()),
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    }
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(config_dir)
        .with_context(|| format!("creating {}", config_dir.display()))?;
    let token = format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    );
    let tmp = config_dir.join(format!(".{name}.{}", std::process::id()));
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .with_context(|| format!("creating {}", tmp.display()))?;
    std::io::Write::write_all(&mut f, format!("{token}\n").as_bytes())?;
    f.sync_all()?;
    // Another process may have made one meanwhile: link(2) fails then, and theirs wins.
    let result = std::fs::hard_link(&tmp, &path);
    let _ = std::fs::remove_file(&tmp);
    match result {
        Ok(()) => Ok(token),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            Ok(std::fs::read_to_string(&path)?.trim().to_string())
        }
        Err(e) => Err(e).with_context(|| format!("creating {}", path.display())),
    }
}

/// Compares without leaking, through timing, how much of a guess was right.
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

/// The token the request presents: `Authorization: Bearer` (the scheme in any case,
/// as RFC 9110 says) or `X-Hitl-Token`.
fn presented_token(req: &Request) -> Option<&str> {
    let h = req.headers();
    if let Some(v) = h.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok())
        && let Some((scheme, t)) = v.trim_start().split_once(' ')
        && scheme.eq_ignore_ascii_case("bearer")
    {
        return Some(t.trim());
    }
    if let Some(v) = h.get("x-hitl-token").and_then(|v| v.to_str().ok()) {
        return Some(v.trim());
    }
    None
}

/// The query parameter `name` (`token`, `code`), decoded.
fn query_param(req: &Request, name: &str) -> Option<String> {
    req.uri()
        .query()?
        .split('&')
        .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
        .map(percent_decode)
}

/// Tokens are hex, but a pasted one may be escaped.
fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && i + 2 < b.len()
            && let Ok(v) =
                u8::from_str_radix(std::str::from_utf8(&b[i + 1..i + 3]).unwrap_or("zz"), 16)
        {
            out.push(v);
            i += 3;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Whether a request came through a proxy rather than from a program on this
/// machine: a forwarding header, or a `Host` that is one of `[http] allowed_hosts`
/// (local programs name the server by a loopback address or `localhost`).
fn relayed(headers: &axum::http::HeaderMap, settings: &crate::config::HttpSettings) -> bool {
    const FORWARDING: [&str; 4] = ["forwarded", "x-forwarded-for", "x-real-ip", "via"];
    if FORWARDING.iter().any(|h| headers.contains_key(*h)) {
        return true;
    }
    let Some(host) = headers.get(header::HOST).and_then(|h| h.to_str().ok()) else {
        return false;
    };
    let name = host
        .rsplit_once(':')
        .filter(|(_, port)| port.parse::<u16>().is_ok())
        .map_or(host, |(name, _)| name);
    settings
        .allowed_hosts
        .iter()
        .any(|h| h.trim().eq_ignore_ascii_case(name))
}

/// The guard, then authentication: the one layer every request passes before its
/// route. [`Guard::check`](super::guard::Guard::check) refuses foreign Host names
/// and cross-site writes before anything else is looked at; then the [`Caller`] is
/// worked out and, when the token came in the query (the dashboard's login link),
/// the cookie set. One layer, not two: each costs every request a copy of the
/// service below it and a boxed future.
pub async fn admit(
    State(state): State<Arc<AppState>>,
    ConnectInfo(peer): ConnectInfo<Peer>,
    mut req: Request,
    next: Next,
) -> Response {
    if let Err(e) = state.guard.check(req.method(), req.headers()) {
        return e.into_response();
    }
    let relayed = relayed(req.headers(), &state.settings);
    let from = client_address(req.headers(), peer.addr.ip(), relayed);
    // The token itself in the query, or a one-time code for the dashboard's page
    // (spent only there: a code sent to an API route stays good for the page): the
    // page's browser is logged in as a device.
    let token_in_query = query_param(&req, "token").is_some_and(|t| same(&t, &state.token));
    let page = req.method() == axum::http::Method::GET && req.uri().path() == "/";
    let login = if token_in_query {
        Some(super::login::Redeemed::Link)
    } else if page {
        query_param(&req, "code").and_then(|c| state.logins.redeem(&c))
    } else {
        None
    };
    let cookie = cookie_name(state.local_addr.port());
    // The cookie holds a session, never the token (see `devices.rs`).
    let by_token = token_in_query
        || login.is_some()
        || presented_token(&req).is_some_and(|t| same(t, &state.token));
    let session = if by_token {
        None
    } else {
        cookie_value(&req, &cookie).and_then(|id| state.devices.seen(id, from).map(|d| (id, d)))
    };
    let (session, device_name) = match session {
        Some((id, (device, name))) => (Some((id.to_string(), device)), Some(name)),
        None => (None, None),
    };
    let dashboard = session.is_some();
    let authenticated = by_token || dashboard;
    let asker =
        !authenticated && presented_token(&req).is_some_and(|t| same(t, &state.asker_token));
    let caller = Caller {
        authenticated,
        asker,
        local: state.loopback_bound && peer.addr.ip().is_loopback() && !relayed,
        dashboard,
        session,
        device_name,
        peer,
    };
    if let Err(e) = state
        .limiter
        .check(caller.peer.addr.ip(), caller.local, &state.settings)
    {
        return e.into_response();
    }
    req.extensions_mut().insert(caller);
    let user_agent = req
        .headers()
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let mut response = next.run(req).await;
    if let Some(login) = login {
        let (by, name) = match login {
            super::login::Redeemed::Pair(name) if !name.trim().is_empty() => ("pair", name),
            super::login::Redeemed::Pair(_) => ("pair", name_from_user_agent(&user_agent)),
            super::login::Redeemed::Link => ("link", name_from_user_agent(&user_agent)),
        };
        let session = state.devices.start(&name, by, from);
        if let Ok(v) = HeaderValue::from_str(&format!(
            "{cookie}={session}; {}; Max-Age={}",
            cookie_attributes(state.tls),
            SESSION_TTL.as_secs()
        )) {
            response.headers_mut().append(header::SET_COOKIE, v);
        }
    }
    response
}

/// Where a request comes from: the client a proxy on this machine says it relays
/// (the first address of `X-Forwarded-For`, or `X-Real-IP`), else the connection's.
fn client_address(headers: &axum::http::HeaderMap, peer: IpAddr, relayed: bool) -> IpAddr {
    if !relayed {
        return peer;
    }
    let forwarded = headers
        .get("x-forwarded-for")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(',').next())
        .or_else(|| headers.get("x-real-ip").and_then(|v| v.to_str().ok()));
    forwarded
        .and_then(|a| a.trim().parse().ok())
        .unwrap_or(peer)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_file_is_private_and_stable() {
        let dir = tempfile::tempdir().unwrap();
        let a = load_or_create_token(dir.path()).unwrap();
        let b = load_or_create_token(dir.path()).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.len(), 64);
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.path().join("token"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        assert!(same("abc", "abc") && !same("abc", "abd") && !same("abc", "ab"));
        assert_eq!(percent_decode("a%20b"), "a b");
        assert_eq!(percent_decode("a%2"), "a%2");
    }

    #[test]
    fn a_request_through_a_proxy_is_told_apart_from_a_local_program() {
        let settings = crate::config::HttpSettings {
            allowed_hosts: vec!["box.tail1234.ts.net".into()],
            ..Default::default()
        };
        let headers = |pairs: &[(&'static str, &'static str)]| {
            let mut h = axum::http::HeaderMap::new();
            for (k, v) in pairs {
                h.insert(*k, HeaderValue::from_static(v));
            }
            h
        };
        assert!(!relayed(&headers(&[("host", "127.0.0.1:4000")]), &settings));
        assert!(!relayed(&headers(&[("host", "localhost")]), &settings));
        assert!(!relayed(&headers(&[]), &settings));
        assert!(relayed(
            &headers(&[("host", "box.tail1234.ts.net")]),
            &settings
        ));
        assert!(relayed(
            &headers(&[("host", "BOX.tail1234.ts.net:443")]),
            &settings
        ));
        for h in ["forwarded", "x-forwarded-for", "x-real-ip", "via"] {
            let with = headers(&[("host", "127.0.0.1:4000"), (h, "1.2.3.4")]);
            assert!(relayed(&with, &settings), "{h}");
        }
    }
}
