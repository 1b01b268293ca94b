//! One-time login links for the dashboard: `/?code=…` logs a browser in once.
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

    /// A link to the dashboard at `addr` with a new code, good once within `ttl`.
    pub fn link(&self, addr: std::net::SocketAddr, ttl: Duration) -> String {
        format!("http://{addr}/?code={}", self.mint(ttl))
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

/// `POST /api/v1/login-links`: a link for `hitl dashboard` to print.
pub async fn create(
    State(state): State<Arc<super::AppState>>,
) -> (StatusCode, Json<serde_json::Value>) {
    (
        StatusCode::CREATED,
        Json(json!({
            "url": state.logins.link(state.local_addr, ON_REQUEST),
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
    fn minting_many_forgets_the_oldest() {
        let codes = LoginCodes::default();
        let first = codes.mint(Duration::from_secs(1));
        for _ in 0..MAX_CODES {
            codes.mint(ON_REQUEST);
        }
        assert!(!codes.redeem(&first));
    }
}
