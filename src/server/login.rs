//! One-time login links for the dashboard: `/?code=…` logs a browser in once, and
//! the sessions such a login starts.
//!
//! The cookie a browser keeps holds a session id, never the API token: cookies do
//! not tell ports apart, so another loopback service the browser visits may be sent
//! it; a session id it learns that way ends (`POST /api/v1/logout`, `hitl devices
//! revoke`, or a week) and is not the key to everything. The sessions, each a
//! device's, are `devices.rs`'s.
//!
//! The token itself never has to appear in a URL (the terminal's scrollback, the
//! browser's history, a screen share): the server mints a random code, and the first
//! browser to open it gets the login cookie; the code is then spent. Codes live in
//! memory only — a restart forgets them, which is safe — and expire: the link printed
//! at start in a day, one asked for later (`hitl dashboard`) in ten minutes.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use axum::{Json, extract::State, http::StatusCode};
use serde_json::json;

/// How long the link printed at start stays good (if nobody opens it).
pub const AT_START: Duration = Duration::from_secs(24 * 3600);
/// How long a link asked for later stays good.
pub const ON_REQUEST: Duration = Duration::from_secs(600);

/// At most this many unspent codes: minting more forgets the oldest.
const MAX_CODES: usize = 64;

/// The unspent codes: when each expires, and the name of the device it pairs
/// (`hitl pair --name`), if it was minted for one.
#[derive(Debug, Default)]
pub struct LoginCodes {
    codes: Mutex<HashMap<String, Code>>,
}

#[derive(Debug, Clone)]
struct Code {
    until: Instant,
    pairs: Option<String>,
}

/// A code spent: how its browser logged in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Redeemed {
    /// A dashboard login link (`hitl dashboard`, the link printed at start).
    Link,
    /// `hitl pair`, naming the device (empty: let its browser say).
    Pair(String),
}

impl LoginCodes {
    /// A new code, good once within `ttl`.
    pub fn mint(&self, ttl: Duration) -> String {
        self.mint_code(ttl, None)
    }

    /// A new code that pairs a device called `name` (empty: as its browser says),
    /// good once within `ttl`.
    pub fn mint_pairing(&self, ttl: Duration, name: &str) -> String {
        self.mint_code(ttl, Some(name.to_string()))
    }

    fn mint_code(&self, ttl: Duration, pairs: Option<String>) -> String {
        let code = format!(
            "{}{}",
            uuid::Uuid::new_v4().simple(),
            uuid::Uuid::new_v4().simple()
        );
        let now = Instant::now();
        let mut codes = self.codes.lock().unwrap_or_else(|p| p.into_inner());
        codes.retain(|_, c| c.until > now);
        while codes.len() >= MAX_CODES {
            let oldest = codes
                .iter()
                .min_by_key(|(_, c)| c.until)
                .map(|(c, _)| c.clone());
            match oldest {
                Some(c) => codes.remove(&c),
                None => break,
            };
        }
        codes.insert(
            code.clone(),
            Code {
                until: now + ttl,
                pairs,
            },
        );
        code
    }

    /// A link to the dashboard at `base` (the server's URL) with a new code, good
    /// once within `ttl`.
    pub fn link(&self, base: &str, ttl: Duration) -> String {
        format!("{base}/?code={}", self.mint(ttl))
    }

    /// Spends `code`: how it logs in, once, if it was minted here and has not
    /// expired.
    pub fn redeem(&self, code: &str) -> Option<Redeemed> {
        let mut codes = self.codes.lock().unwrap_or_else(|p| p.into_inner());
        // Looked up by the map (hashing every byte), not compared in a loop that
        // stops at the first difference.
        let spent = codes.remove(code).filter(|c| c.until > Instant::now())?;
        Some(match spent.pairs {
            Some(name) => Redeemed::Pair(name),
            None => Redeemed::Link,
        })
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
        state.devices.end(id);
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
        assert_eq!(codes.redeem("nonsense"), None);
        assert_eq!(codes.redeem(&c), Some(Redeemed::Link));
        assert_eq!(codes.redeem(&c), None, "spent");
        let late = codes.mint(Duration::ZERO);
        assert_eq!(codes.redeem(&late), None, "expired");
        let pairing = codes.mint_pairing(ON_REQUEST, "phone");
        assert_eq!(codes.redeem(&pairing), Some(Redeemed::Pair("phone".into())));
        assert_eq!(codes.redeem(&pairing), None, "once");
    }

    #[test]
    fn minting_many_forgets_the_oldest() {
        let codes = LoginCodes::default();
        let first = codes.mint(Duration::from_secs(1));
        for _ in 0..MAX_CODES {
            codes.mint(ON_REQUEST);
        }
        assert_eq!(codes.redeem(&first), None);
    }
}
