//! One-time login links for the dashboard: `/?code=…` logs a browser in once, and
//! the sessions such a login starts.
//!
//! The cookie a browser keeps holds a session id, never the API token: cookies do
//! not tell ports apart, so another loopback service the browser visits may be sent
//! it; a session id it learns that way ends (`POST /api/v1/logout`, or a week) and
//! is not the key to everything. Sessions are kept in the user config folder
//! (`sessions`, mode 0600), so a restarted listener keeps its browsers logged in;
//! deleting the file and restarting ends them all.
//!
//! The token itself never has to appear in a URL (the terminal's scrollback, the
//! browser's history, a screen share): the server mints a random code, and the first
//! browser to open it gets the login cookie; the code is then spent. Codes live in
//! memory only — a restart forgets them, which is safe — and expire: the link printed
//! at start in a day, one asked for later (`hitl dashboard`) in ten minutes.

use std::{
    collections::HashMap,
    path::PathBuf,
    sync::{Arc, Mutex},
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use axum::{Json, extract::State, http::StatusCode};
use serde_json::json;

/// How long the link printed at start stays good (if nobody opens it).
pub const AT_START: Duration = Duration::from_secs(24 * 3600);
/// How long a link asked for later stays good.
pub const ON_REQUEST: Duration = Duration::from_secs(600);

/// At most this many unspent codes: minting more forgets the oldest.
const MAX_CODES: usize = 64;

/// The unspent codes and when each expires.
#[derive(Debug, Default)]
pub struct LoginCodes {
    codes: Mutex<HashMap<String, Instant>>,
}

impl LoginCodes {
    /// A new code, good once within `ttl`.
    pub fn mint(&self, ttl: Duration) -> String {
        let code = format!(
            "{}{}",
            uuid::Uuid::new_v4().simple(),
            uuid::Uuid::new_v4().simple()
        );
        let now = Instant::now();
        let mut codes = self.codes.lock().unwrap_or_else(|p| p.into_inner());
        codes.retain(|_, until| *until > now);
        while codes.len() >= MAX_CODES {
            let oldest = codes
                .iter()
                .min_by_key(|(_, until)| **until)
                .map(|(c, _)| c.clone());
            match oldest {
                Some(c) => codes.remove(&c),
                None => break,
            };
        }
        codes.insert(code.clone(), now + ttl);
        code
    }

    /// A link to the dashboard at `base` (the server's URL) with a new code, good
    /// once within `ttl`.
    pub fn link(&self, base: &str, ttl: Duration) -> String {
        format!("{base}/?code={}", self.mint(ttl))
    }

    /// Spends `code`: true once, if it was minted here and has not expired.
    pub fn redeem(&self, code: &str) -> bool {
        let mut codes = self.codes.lock().unwrap_or_else(|p| p.into_inner());
        // Looked up by the map (hashing every byte), not compared in a loop that
        // stops at the first difference.
        codes
            .remove(code)
            .is_some_and(|until| until > Instant::now())
    }
}

/// How long a browser stays logged in.
pub const SESSION_TTL: Duration = Duration::from_secs(7 * 24 * 3600);

/// At most this many live sessions: a new one past it ends the oldest.
const MAX_SESSIONS: usize = 256;

/// The dashboard's logged-in browsers: session id → when it ends (seconds since
/// the epoch, so the file outlives a restart).
#[derive(Debug)]
pub struct Sessions {
    live: Mutex<HashMap<String, u64>>,
    file: Option<PathBuf>,
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl Sessions {
    /// The sessions kept in `file` (none if it is missing or unreadable).
    pub fn load(file: Option<PathBuf>) -> Sessions {
        let now = now_secs();
        let live = file
            .as_ref()
            .and_then(|f| std::fs::read_to_string(f).ok())
            .unwrap_or_default()
            .lines()
            .filter_map(|l| {
                let (id, until) = l.split_once(' ')?;
                let until: u64 = until.trim().parse().ok()?;
                (until > now && id.len() == 64).then(|| (id.to_string(), until))
            })
            .collect();
        Sessions {
            live: Mutex::new(live),
            file,
        }
    }

    /// Starts a session: its id, for the cookie.
    pub fn start(&self) -> String {
        let id = format!(
            "{}{}",
            uuid::Uuid::new_v4().simple(),
            uuid::Uuid::new_v4().simple()
        );
        let now = now_secs();
        let mut live = self.live.lock().unwrap_or_else(|p| p.into_inner());
        live.retain(|_, until| *until > now);
        while live.len() >= MAX_SESSIONS {
            let oldest = live.iter().min_by_key(|(_, u)| **u).map(|(i, _)| i.clone());
            match oldest {
                Some(i) => live.remove(&i),
                None => break,
            };
        }
        live.insert(id.clone(), now + SESSION_TTL.as_secs());
        self.save(&live);
        id
    }

    /// Whether `id` is a live session.
    pub fn valid(&self, id: &str) -> bool {
        let live = self.live.lock().unwrap_or_else(|p| p.into_inner());
        live.get(id).is_some_and(|until| *until > now_secs())
    }

    /// Ends the session `id`.
    pub fn end(&self, id: &str) {
        let mut live = self.live.lock().unwrap_or_else(|p| p.into_inner());
        if live.remove(id).is_some() {
            self.save(&live);
        }
    }

    /// Best effort: a session not saved only ends at the next restart.
    fn save(&self, live: &HashMap<String, u64>) {
        use std::os::unix::fs::OpenOptionsExt;
        let Some(file) = &self.file else { return };
        let text: String = live.iter().map(|(id, u)| format!("{id} {u}\n")).collect();
        let tmp = file.with_extension(format!("tmp{}", std::process::id()));
        let written = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)
            .and_then(|mut f| std::io::Write::write_all(&mut f, text.as_bytes()))
            .and_then(|()| std::fs::rename(&tmp, file));
        if let Err(e) = written {
            let _ = std::fs::remove_file(&tmp);
            tracing::warn!(
                "could not save the dashboard's sessions in {}: {e}",
                file.display()
            );
        }
    }
}

/// The cookie the dashboard keeps the token in, for the server on `port`.
pub fn cookie_name(port: u16) -> String {
    format!("hitl_token_{port}")
}

/// What every cookie of this server says besides its value: only for HTTP (never
/// scripts), only this site, the whole server; over TLS, never sent in the clear.
pub fn cookie_attributes(tls: bool) -> &'static str {
    if tls {
        "HttpOnly; Secure; SameSite=Strict; Path=/"
    } else {
        "HttpOnly; SameSite=Strict; Path=/"
    }
}

/// This server's cookie, if the request carries it: a dashboard session's id.
pub fn cookie_value<'r>(req: &'r axum::extract::Request, cookie: &str) -> Option<&'r str> {
    req.headers()
        .get_all(axum::http::header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|kv| kv.trim().strip_prefix(cookie)?.strip_prefix('='))
}

/// `POST /api/v1/logout`: ends the caller's session and clears its cookie.
pub async fn logout(
    State(state): State<Arc<super::AppState>>,
    req: axum::extract::Request,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let cookie = cookie_name(state.local_addr.port());
    if let Some(id) = cookie_value(&req, &cookie) {
        state.sessions.end(id);
    }
    let mut response = (StatusCode::OK, Json(json!({ "logged_out": true }))).into_response();
    if let Ok(v) = axum::http::HeaderValue::from_str(&format!(
        "{cookie}=; {}; Max-Age=0",
        cookie_attributes(state.tls)
    )) {
        response
            .headers_mut()
            .append(axum::http::header::SET_COOKIE, v);
    }
    response
}

/// `POST /api/v1/login-links`: a link for `hitl dashboard` to print.
pub async fn create(
    State(state): State<Arc<super::AppState>>,
) -> (StatusCode, Json<serde_json::Value>) {
    (
        StatusCode::CREATED,
        Json(json!({
            "url": state.logins.link(&state.base_url, ON_REQUEST),
            "expires_in_seconds": ON_REQUEST.as_secs(),
        })),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_code_works_once_and_not_after_it_expires() {
        let codes = LoginCodes::default();
        let c = codes.mint(AT_START);
        assert_eq!(c.len(), 64);
        assert!(!codes.redeem("nonsense"));
        assert!(codes.redeem(&c));
        assert!(!codes.redeem(&c), "spent");
        let late = codes.mint(Duration::ZERO);
        assert!(!codes.redeem(&late), "expired");
    }

    #[test]
    fn sessions_end_and_outlive_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("sessions");
        let sessions = Sessions::load(Some(file.clone()));
        let a = sessions.start();
        let b = sessions.start();
        assert!(sessions.valid(&a) && sessions.valid(&b));
        assert!(!sessions.valid("nonsense"));
        sessions.end(&a);
        assert!(!sessions.valid(&a));
        let again = Sessions::load(Some(file.clone()));
        assert!(again.valid(&b) && !again.valid(&a));
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn minting_many_forgets_the_oldest() {
        let codes = LoginCodes::default();
        let first = codes.mint(Duration::from_secs(1));
        for _ in 0..MAX_CODES {
            codes.mint(ON_REQUEST);
        }
        assert!(!codes.redeem(&first));
    }
}
