//! The HTTP client of the native API, for `hitl ask --server` and for `hitl answer` /
//! `hitl cancel` of requests that live on a server rather than in the spool.
//!
//! Waiting is a long poll (`/wait`, held open by the server until the request ends),
//! never a busy loop. Errors say which server and what it answered.
//!
//! [`Servers`] is the asker's side: one or more replicas sharing a store. A request is
//! safe in the store once created, so a server that restarts or dies is not the end
//! of the question: the asker tries again with backoff, moving to the next replica,
//! and keeps waiting for the same request (creates repeat safely: same idempotency
//! key).

use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use reqwest::StatusCode;
use serde_json::Value;

use crate::{
    api::{CreateRequest, RequestView, RespondBody, Responded},
    config::Paths,
    protocol::{Answer, Origin, Reply, Request, Status},
    spool::{ListenerInfo, Spool},
};

/// Longest single long poll; the loop asks again until the request ends.
const POLL_SECS: u64 = 60;

/// A client of one server.
#[derive(Debug, Clone)]
pub struct Client {
    base: String,
    token: Option<String>,
    http: reqwest::Client,
    credential: Credential,
}

/// Why the server refused an answer, with its message.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct Refused {
    /// The HTTP status.
    pub status: u16,
    /// The server's message.
    pub message: String,
}

/// Where a client's server comes from, which decides the token it presents: the
/// user's token answers every question, so it goes only to servers that are the
/// user's own by their settings, never to whatever listens at a URL an agent (or a
/// README) named.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Destination {
    /// The project's own listener, as its `.listener.json` says (written by the
    /// user's listener, in a folder only the user can write).
    Listener,
    /// A URL given with `--server` or `HITL_SERVER`: the user's token only if the
    /// user's settings name it (`[client] servers`), else the ask-only token.
    Given,
}

/// The credential a client presents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Credential {
    /// The user's token (answers, mints logins).
    User,
    /// A token the user handed over in `HITL_TOKEN` (not theirs here: another
    /// server's).
    Handed,
    /// The ask-only token: asks and waits, nothing else.
    Asker,
    /// None could be read.
    None,
}

impl Client {
    /// A client of `base` (like `http://127.0.0.1:4000`) presenting what `to`
    /// allows: the user's token to the project's listener and to the servers the
    /// user's settings name, a token handed over in `HITL_TOKEN` (one that is not the
    /// user's own), else the ask-only token.
    pub fn new(base: &str, to: Destination) -> Result<Client> {
        let config_dir = Paths::from_env().config_dir;
        let read = |name: &str| {
            std::fs::read_to_string(config_dir.join(name))
                .ok()
                .map(|t| t.trim().to_string())
                .filter(|t| !t.is_empty())
        };
        let user = read("token");
        let handed = std::env::var("HITL_TOKEN")
            .ok()
            .map(|t| t.trim().to_string())
            .filter(|t| !t.is_empty());
        let ours = match to {
            // The file can be written by whatever runs as the user (an agent among
            // them): the user's token goes only where a listener of this machine can
            // be, never to a host the file names.
            Destination::Listener => on_this_machine(base),
            Destination::Given => names_server(base),
        };
        let (token, credential) = match (handed, user) {
            // Handed over, and not the user's own: the user chose where it goes.
            (Some(h), u) if u.as_deref() != Some(h.as_str()) => (Some(h), Credential::Handed),
            (_, Some(u)) if ours => (Some(u), Credential::User),
            // Made by the user's listener or server at its start (or `hitl token
            // --asker`); none yet, none presented.
            _ => match read("asker-token") {
                Some(t) => (Some(t), Credential::Asker),
                None => (None, Credential::None),
            },
        };
        let mut client = Client::with_token(base, token)?;
        client.credential = credential;
        Ok(client)
    }

    /// What this client presents.
    pub fn credential(&self) -> Credential {
        self.credential
    }

    /// Refuses unless this client may act for the user (answer, mint a login):
    /// a server the user's settings do not name gets no such power.
    pub fn require_user(&self, what: &str) -> Result<()> {
        match self.credential {
            Credential::User | Credential::Handed => Ok(()),
            _ => bail!(
                "{what} needs your hitl token, which is sent only to your own listener and \
                 to the servers your settings name: {} is not one of them. Add it to \
                 [client] servers in {} if it is yours, or set HITL_TOKEN to its token",
                self.base,
                Paths::from_env().user_config().display()
            ),
        }
    }

    /// A client of `base` presenting `token` (or none).
    pub fn with_token(base: &str, token: Option<String>) -> Result<Client> {
        let base = base.trim_end_matches('/').to_string();
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            bail!("{base:?} is not an http:// URL");
        }
        let http = crate::runtime::tls::http_client_for(&base)?
            .connect_timeout(Duration::from_secs(5))
            .build()
            .context("starting the HTTP client")?;
        let credential = match token {
            Some(_) => Credential::Handed,
            None => Credential::None,
        };
        Ok(Client {
            base,
            token,
            http,
            credential,
        })
    }

    fn authorize(&self, r: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match &self.token {
            Some(t) => r.bearer_auth(t),
            None => r,
        }
    }

    async fn send(&self, r: reqwest::RequestBuilder, what: &str) -> Result<(StatusCode, Value)> {
        let response = self
            .authorize(r)
            .send()
            .await
            .with_context(|| format!("{what}: cannot reach {}", self.base))?;
        let status = response.status();
        let body = response.json::<Value>().await.with_context(|| {
            format!(
                "{what}: {} answered {status} with a body that is not JSON",
                self.base
            )
        })?;
        Ok((status, body))
    }

    fn refused(status: StatusCode, body: &Value) -> Refused {
        Refused {
            status: status.as_u16(),
            message: body
                .get("error")
                .and_then(Value::as_str)
                .unwrap_or("no reason given")
                .to_string(),
        }
    }

    /// Creates a request come by `origin`; returns its id. `idempotency_key` makes a
    /// retry safe.
    pub async fn create(
        &self,
        request: &Request,
        origin: Origin,
        idempotency_key: &str,
    ) -> Result<String> {
        let body = CreateRequest::from_request(request, origin, idempotency_key);
        let url = format!("{}/api/v1/requests", self.base);
        let (status, v) = self.send(self.http.post(url).json(&body), "asking").await?;
        if !status.is_success() {
            return Err(anyhow!(Client::refused(status, &v)))
                .with_context(|| format!("{} refused the question ({status})", self.base));
        }
        v.get("id")
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| anyhow!("{} answered without a request id", self.base))
    }

    /// Creates the request and holds the call up to `wait` for its end: `Ended` with
    /// its answer (`None`: it ended without one) when it ended in time, else
    /// `Pending` with its id. A repeated key names the first request.
    pub async fn create_and_wait(
        &self,
        request: &Request,
        origin: Origin,
        idempotency_key: &str,
        wait: Duration,
    ) -> Result<Created> {
        let body = CreateRequest::from_request(request, origin, idempotency_key);
        let url = format!("{}/api/v1/requests?wait={}", self.base, wait.as_secs_f64());
        let r = self
            .http
            .post(url)
            .json(&body)
            .timeout(wait + Duration::from_secs(30));
        let (status, v) = self.send(r, "asking").await?;
        if !status.is_success() {
            return Err(anyhow!(Client::refused(status, &v)))
                .with_context(|| format!("{} refused the question ({status})", self.base));
        }
        let view: RequestView = serde_json::from_value(v).context("reading the request")?;
        Ok(if view.status == Status::Pending {
            Created::Pending(view.id)
        } else {
            Created::Ended(view.answer.map(Box::new))
        })
    }

    /// Waits until request `id` ends and returns its answer (a timeout's too).
    /// `None`: it ended without one (withdrawn, abandoned).
    pub async fn wait(&self, id: &str) -> Result<Option<Answer>> {
        loop {
            let url = format!(
                "{}/api/v1/requests/{id}/wait?timeout={POLL_SECS}",
                self.base
            );
            let r = self
                .http
                .get(url)
                .timeout(Duration::from_secs(POLL_SECS + 30));
            let (status, v) = self.send(r, "waiting for the answer").await?;
            match status {
                StatusCode::ACCEPTED => continue,
                s if s.is_success() => {
                    let view: RequestView =
                        serde_json::from_value(v).context("reading the answer")?;
                    return Ok(view.answer);
                }
                s => {
                    return Err(anyhow!(Client::refused(s, &v)))
                        .with_context(|| format!("waiting for request {id} on {}", self.base));
                }
            }
        }
    }

    /// The request `id` and its status, as the server has it.
    pub async fn get(&self, id: &str) -> Result<Option<(Request, Status)>> {
        Ok(self.view(id).await?.map(|v| (v.request, v.status)))
    }

    /// Request `id` as the server shows it (where it stands, its project), or `None`
    /// when it has no such request.
    pub async fn view(&self, id: &str) -> Result<Option<RequestView>> {
        let url = format!("{}/api/v1/requests/{id}", self.base);
        let (status, v) = self
            .send(self.http.get(url), "looking the request up")
            .await?;
        if status == StatusCode::NOT_FOUND {
            return Ok(None);
        }
        if !status.is_success() {
            return Err(anyhow!(Client::refused(status, &v)))
                .with_context(|| format!("looking request {id} up on {}", self.base));
        }
        let view: RequestView = serde_json::from_value(v).context("reading the request")?;
        Ok(Some(view))
    }

    /// Calls `method path` with `body` (for the routes without a method of their
    /// own: the task runner's); the status and JSON of any 2xx answer, else the
    /// server's refusal as the error (a [`Refused`]).
    pub async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&Value>,
        what: &str,
    ) -> Result<(StatusCode, Value)> {
        let mut r = self.http.request(method, format!("{}{path}", self.base));
        if let Some(b) = body {
            r = r.json(b);
        }
        let (status, v) = self.send(r, what).await?;
        if !status.is_success() {
            return Err(anyhow!(Client::refused(status, &v))).context(what.to_string());
        }
        Ok((status, v))
    }

    /// Every pending request the server holds, in answering order.
    pub async fn pending(&self) -> Result<Vec<RequestView>> {
        let url = format!("{}/api/v1/requests?status=pending", self.base);
        let (status, v) = self
            .send(self.http.get(url), "listing pending requests")
            .await?;
        if !status.is_success() {
            return Err(anyhow!(Client::refused(status, &v)))
                .with_context(|| format!("listing pending requests on {}", self.base));
        }
        serde_json::from_value(v).context("reading the pending requests")
    }

    /// A one-time link that logs a browser into the server's dashboard, and how many
    /// seconds it stays good.
    pub async fn login_link(&self) -> Result<(String, u64)> {
        let url = format!("{}/api/v1/login-links", self.base);
        let (status, v) = self
            .send(self.http.post(url), "asking for a login link")
            .await?;
        if !status.is_success() {
            return Err(anyhow!(Client::refused(status, &v)))
                .with_context(|| format!("asking {} for a login link", self.base));
        }
        let link = v["url"]
            .as_str()
            .ok_or_else(|| anyhow!("{} sent a login link without its url", self.base))?;
        Ok((
            link.to_string(),
            v["expires_in_seconds"].as_u64().unwrap_or(0),
        ))
    }

    /// A single-use link that logs one device in, named `name` (empty: as its
    /// browser says).
    pub async fn pair(&self, name: &str) -> Result<crate::api::Pairing> {
        let url = format!("{}/api/v1/pairings", self.base);
        let body = serde_json::json!({ "name": name });
        let (status, v) = self
            .send(self.http.post(url).json(&body), "asking for a pairing link")
            .await?;
        if !status.is_success() {
            return Err(anyhow!(Client::refused(status, &v)))
                .with_context(|| format!("asking {} for a pairing link", self.base));
        }
        serde_json::from_value(v).context("reading the pairing link")
    }

    /// The devices logged in to the dashboard.
    pub async fn devices(&self) -> Result<Vec<crate::api::Device>> {
        let url = format!("{}/api/v1/devices", self.base);
        let (status, v) = self.send(self.http.get(url), "listing devices").await?;
        if !status.is_success() {
            return Err(anyhow!(Client::refused(status, &v)))
                .with_context(|| format!("listing the devices of {}", self.base));
        }
        serde_json::from_value(v).context("reading the devices")
    }

    /// Ends device `id`'s session at once. A device that is not there comes back as
    /// a [`Refused`] error (404).
    pub async fn revoke_device(&self, id: &str) -> Result<()> {
        let url = format!("{}/api/v1/devices/{id}", self.base);
        let (status, v) = self
            .send(self.http.delete(url), "revoking a device")
            .await?;
        if !status.is_success() {
            return Err(anyhow!(Client::refused(status, &v)))
                .with_context(|| format!("revoking device {id} at {}", self.base));
        }
        Ok(())
    }

    /// Answers request `id` with `reply`, as `by`. A refusal (already answered, timed
    /// out, wrong field) comes back as a [`Refused`] error.
    pub async fn respond(&self, request: &Request, reply: &Reply, by: &str) -> Result<Answer> {
        let body = RespondBody::from_reply(request.kind, reply, by);
        let url = format!("{}/api/v1/requests/{}/respond", self.base, request.id);
        let (status, v) = self
            .send(self.http.post(url).json(&body), "answering")
            .await?;
        // 202: an approval counted toward a request that needs several people's,
        // which still waits (a `Refused` with that status says so).
        if !status.is_success() || status == reqwest::StatusCode::ACCEPTED {
            return Err(anyhow!(Client::refused(status, &v)));
        }
        let done: Responded =
            serde_json::from_value(v).context("reading the answer the server wrote")?;
        Ok(done.answer)
    }
}

/// Whether an error is worth trying again (the server could not be reached, dropped
/// the connection, or said it is overloaded or stopping) rather than a refusal.
pub fn is_transient(e: &anyhow::Error) -> bool {
    e.chain().any(|cause| {
        if let Some(r) = cause.downcast_ref::<Refused>() {
            return r.status >= 500 || r.status == 429 || r.status == 408;
        }
        cause.downcast_ref::<reqwest::Error>().is_some()
    })
}

/// Backoff between tries: 100 ms doubling to 1 s. A server restarting comes back
/// within a second or two, and a try is one connection: sparser tries can all land
/// while a flapping server is down (the soak saw eleven in 30 s do so).
const BACKOFF_FIRST: Duration = Duration::from_millis(100);
const BACKOFF_MOST: Duration = Duration::from_secs(1);

/// One or more replicas of a server, tried in turn.
#[derive(Debug)]
pub struct Servers {
    clients: Vec<Client>,
    current: usize,
}

impl Servers {
    /// The servers in `list` (`URL[,URL…]`), each presenting what `to` allows
    /// ([`Client::new`]).
    pub fn new(list: &str, to: Destination) -> Result<Servers> {
        let clients = list
            .split(',')
            .map(str::trim)
            .filter(|u| !u.is_empty())
            .map(|u| Client::new(u, to))
            .collect::<Result<Vec<_>>>()?;
        if clients.is_empty() {
            bail!("no server URL in {list:?}");
        }
        Ok(Servers {
            clients,
            current: 0,
        })
    }

    /// The server in use.
    pub fn current(&self) -> &Client {
        &self.clients[self.current]
    }

    /// Runs `call` on the current server, and after a transient failure on the next
    /// one, with backoff, until it succeeds, fails for good, or `deadline` passes
    /// (then the last error is returned).
    /// (The call takes its own `Client`, a cheap clone, rather than a borrowed one:
    /// a future over a borrow made in a higher-ranked closure is not `Send`, and the
    /// MCP server's tool futures must be.)
    async fn with_retries<T, Call, Fut>(
        &mut self,
        deadline: Option<tokio::time::Instant>,
        mut call: Call,
    ) -> Result<T>
    where
        Call: FnMut(Client) -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        let mut pause = BACKOFF_FIRST;
        let mut said = false;
        loop {
            let client = self.clients[self.current].clone();
            let e = match call(client).await {
                Ok(v) => return Ok(v),
                Err(e) if is_transient(&e) => e,
                Err(e) => return Err(e),
            };
            if deadline.is_some_and(|d| tokio::time::Instant::now() + pause >= d) {
                return Err(e);
            }
            if !said {
                eprintln!("hitl: {e:#}; trying again");
                said = true;
            }
            self.current = (self.current + 1) % self.clients.len();
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(BACKOFF_MOST);
        }
    }

    /// Creates `request`, come by `origin` (retrying, on any replica, with the same
    /// `key`); its id.
    pub async fn create(
        &mut self,
        request: &Request,
        origin: Origin,
        key: &str,
        deadline: Option<tokio::time::Instant>,
    ) -> Result<String> {
        self.with_retries(
            deadline,
            |c| async move { c.create(request, origin, key).await },
        )
        .await
    }

    /// Waits for request `id` to end, riding out restarts and moving between
    /// replicas, until `deadline` (when given).
    pub async fn wait(
        &mut self,
        id: &str,
        deadline: Option<tokio::time::Instant>,
    ) -> Result<Option<Answer>> {
        self.with_retries(deadline, |c| async move { c.wait(id).await })
            .await
    }
}

/// What [`Client::create_and_wait`] found.
#[derive(Debug)]
pub enum Created {
    /// Still pending: its id.
    Pending(String),
    /// Ended in the call: its answer, if it has one.
    Ended(Option<Box<Answer>>),
}

/// How long handing a question to a listener may take before the asker gives up.
const CREATE_WITHIN: Duration = Duration::from_secs(5);

/// How long the call that creates a question also waits for its end.
const FIRST_WAIT: Duration = Duration::from_secs(2);

/// How long an asker keeps trying one listener address before looking in
/// `.listener.json` for a new one.
const RELOCATE_EVERY: Duration = Duration::from_secs(3);

/// Asks the project's listener at `url` (come by `origin`) and waits for the end:
/// the answer, a timeout's answer, or `None` when it ended without one. When `stop`
/// finishes first (the asker gave up), the question is withdrawn with the reason
/// `stop` gives. The question is safe in the store once created: a listener that
/// restarts meanwhile (perhaps on another port, found again through
/// `.listener.json`) queues it again and is waited on.
pub async fn ask_listener(
    spool: &Spool,
    url: &str,
    request: &Request,
    origin: Origin,
    stop: impl Future<Output = String>,
) -> Result<Option<Answer>> {
    let mut stop = std::pin::pin!(stop);
    let mut url = url.to_string();
    let mut servers = Servers::new(&url, Destination::Listener)?;
    // The key makes every try name the one request, whichever listener takes it.
    let key = uuid::Uuid::now_v7().to_string();
    let now = tokio::time::Instant::now();
    let deadline = request.timeout.map(|t| now + Duration::from_secs(t + 30));
    // Until a listener may have taken it, one must do so soon; after, it is in a
    // store, and a listener that restarts (perhaps elsewhere) queues it again.
    let create_by = now + CREATE_WITHIN;
    let mut sent = false;
    let mut id: Option<String> = None;
    loop {
        let attempt = tokio::time::Instant::now() + RELOCATE_EVERY;
        let until = deadline.map_or(attempt, |d| d.min(attempt));
        let step = async {
            match &id {
                // Created and waited on in one call: an answer at once needs no other.
                None => {
                    servers
                        .current()
                        .create_and_wait(request, origin, &key, FIRST_WAIT)
                        .await
                }
                Some(id) => servers
                    .wait(id, Some(until))
                    .await
                    .map(|answer| Created::Ended(answer.map(Box::new))),
            }
        };
        tokio::select! {
            step = step => match step {
                Ok(Created::Ended(answer)) => return Ok(answer.map(|a| *a)),
                Ok(Created::Pending(taken)) => id = Some(taken),
                Err(e) if is_transient(&e) => {
                    sent |= id.is_some() || !never_reached(&e);
                    let limit = if sent { deadline } else { Some(create_by) };
                    if limit.is_some_and(|l| tokio::time::Instant::now() >= l) {
                        return Err(e);
                    }
                    if id.is_none() {
                        tokio::time::sleep(BACKOFF_FIRST).await;
                    }
                    if let Some(now_at) = ListenerInfo::running(spool).and_then(|l| l.http)
                        && now_at != url
                    {
                        servers = Servers::new(&now_at, Destination::Listener)?;
                        url = now_at;
                    }
                }
                Err(e) => return Err(e),
            },
            reason = &mut stop => {
                let client = servers.current();
                // Given up while handing it over: the key finds it, if it was made.
                let id = match id {
                    Some(id) => Some(id),
                    None => match client.create_and_wait(request, origin, &key, Duration::ZERO).await {
                        Ok(Created::Pending(id)) => Some(id),
                        _ => None,
                    },
                };
                if let Some(id) = id {
                    let mut withdrawn = request.clone();
                    withdrawn.id = id;
                    let reply = Reply::Cancel { reason: Some(reason) };
                    let _ = client.respond(&withdrawn, &reply, &request.agent_name).await;
                }
                return Ok(None);
            }
        }
    }
}

/// Whether `e` says the server was never reached (nothing sent: a refused or
/// timed-out connection), so no request can have been made.
fn never_reached(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<reqwest::Error>()
            .is_some_and(reqwest::Error::is_connect)
    })
}

/// Whether the user's own settings (`[client] servers` in the user config file, never
/// a project's) name the server at `base`: same scheme, host and port.
fn names_server(base: &str) -> bool {
    let Some(wanted) = origin_of(base) else {
        return false;
    };
    // The user's file alone: a project's settings sit beside the agents.
    let Ok(settings) = crate::config::load(&Paths::from_env(), None) else {
        return false;
    };
    settings
        .client
        .servers
        .iter()
        .any(|named| origin_of(named).as_ref() == Some(&wanted))
}

/// Whether `base` names this machine: `localhost`, or an address one of its
/// interfaces has (loopback, the unspecified address, the LAN address a listener
/// bound to). A listener writes its bound address, never a name; whether an address
/// is this machine's is what binding a socket to it says, so nothing is guessed.
fn on_this_machine(base: &str) -> bool {
    let Ok(url) = reqwest::Url::parse(base.trim()) else {
        return false;
    };
    let Some(host) = url.host_str() else {
        return false;
    };
    match host.trim_start_matches('[').trim_end_matches(']').parse() {
        Ok(ip) => is_local_address(ip),
        Err(_) => host.eq_ignore_ascii_case("localhost"),
    }
}

fn is_local_address(ip: std::net::IpAddr) -> bool {
    ip.is_loopback()
        || ip.is_unspecified()
        || std::net::UdpSocket::bind(std::net::SocketAddr::new(ip, 0)).is_ok()
}

/// A URL's scheme, host (lower case) and port (the scheme's own when not written).
fn origin_of(url: &str) -> Option<(String, String, u16)> {
    let url = reqwest::Url::parse(url.trim()).ok()?;
    let scheme = url.scheme().to_ascii_lowercase();
    if scheme != "http" && scheme != "https" {
        return None;
    }
    let host = url.host_str()?.to_ascii_lowercase();
    Some((scheme, host, url.port_or_known_default()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_this_machines_addresses_are_a_listeners() {
        for local in [
            "http://127.0.0.1:4000",
            "https://127.0.0.1:4443",
            "http://localhost:4000",
            "http://[::1]:4000",
            "http://0.0.0.0:4000",
        ] {
            assert!(on_this_machine(local), "{local}");
        }
        for elsewhere in [
            "http://192.0.2.1:4000",
            "https://hooks.example.com",
            "http://localhost.example.com:4000",
            "not a url",
        ] {
            assert!(!on_this_machine(elsewhere), "{elsewhere}");
        }
    }
}
