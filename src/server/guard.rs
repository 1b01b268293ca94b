//! The browser boundary: which names the server answers to, and which web pages may
//! use it.
//!
//! Loopback is not a boundary against the user's own browser. A page on any site can
//! point a name it controls at 127.0.0.1 (DNS rebinding) and read whatever the server
//! gives token-less callers; a page on another loopback port is "same site" to the
//! cookie, and a form or `fetch` with no content type needs no CORS preflight. So,
//! before anything else runs:
//!
//! - the `Host` must be this server's: a loopback address, `localhost`, the address
//!   it is bound to, or a name in `[http] allowed_hosts`;
//! - a request that carries an `Origin` must come from the server's own origin or one
//!   in `[http] allowed_origins`;
//! - a state-changing request or a WebSocket upgrade that a browser marks as coming
//!   from another site (`Sec-Fetch-Site: cross-site | same-site`) is refused unless its
//!   origin is allowed.
//!
//! Clients that are not browsers (the CLI, seed 004's hook scripts, curl) send no
//! `Origin` and no `Sec-Fetch-Site`, and pass.

use std::net::{IpAddr, SocketAddr};

use axum::http::{HeaderMap, Method, StatusCode, header};

use super::error::ApiError;
use crate::config::{HttpSettings, normalise_origin};

/// The names and origins one server accepts, worked out once at start.
#[derive(Debug, Clone)]
pub struct Guard {
    /// The address the server is bound to.
    local: SocketAddr,
    /// `[http] allowed_hosts`, lower case.
    hosts: Vec<String>,
    /// `[http] allowed_origins`, normalised.
    origins: Vec<String>,
    /// The scheme of the server's own pages: `https` when it serves TLS.
    scheme: &'static str,
}

impl Guard {
    /// The guard of a server bound to `local` with these settings (already validated
    /// by [`HttpSettings::validate`]).
    pub fn new(local: SocketAddr, settings: &HttpSettings) -> Guard {
        Guard {
            local,
            hosts: settings
                .allowed_hosts
                .iter()
                .map(|h| h.trim().to_ascii_lowercase())
                .collect(),
            origins: settings
                .allowed_origins
                .iter()
                .filter_map(|o| normalise_origin(o))
                .collect(),
            scheme: if settings.tls_cert.is_some() {
                "https"
            } else {
                "http"
            },
        }
    }

    /// Whether a host name (no port) names this server.
    fn host_name_ok(&self, name: &str) -> bool {
        let name = name.to_ascii_lowercase();
        let bare = name.trim_start_matches('[').trim_end_matches(']');
        if let Ok(ip) = bare.parse::<IpAddr>() {
            return ip.is_loopback() || ip == self.local.ip();
        }
        if name == "localhost" || self.hosts.contains(&name) {
            return true;
        }
        // Bound to a non-loopback address without a list of names: every route needs
        // the token there, and a rebinding page has no token, so any name will do.
        !self.local.ip().is_loopback() && self.hosts.is_empty()
    }

    /// Checks the `Host` header (`name`, `name:port`, `[v6]:port`).
    fn check_host(&self, headers: &HeaderMap) -> Result<(), ApiError> {
        let Some(host) = headers.get(header::HOST) else {
            // HTTP/1.0 clients may send none; they are not browsers.
            return Ok(());
        };
        let host = host
            .to_str()
            .map_err(|_| refuse("the Host header is not text"))?;
        let (name, _) = split_authority(host);
        if self.host_name_ok(name) {
            Ok(())
        } else {
            Err(refuse(format!(
                "this server does not answer to the name {:?}; use 127.0.0.1 or localhost, \
                 or add the name to [http] allowed_hosts",
                visible(name)
            )))
        }
    }

    /// Whether a page at `origin` may use the server.
    fn origin_ok(&self, origin: &str) -> bool {
        let Some(origin) = normalise_origin(origin) else {
            return false; // "null" (sandboxed frames, file://) and anything malformed
        };
        if self.origins.contains(&origin) {
            return true;
        }
        // The server's own pages come by its own scheme: over TLS, a page at
        // http://the-same-host:port is not one of them (whoever sees the network
        // can write it).
        let Some(authority) = origin
            .strip_prefix(self.scheme)
            .and_then(|rest| rest.strip_prefix("://"))
        else {
            return false;
        };
        let default_port = if self.scheme == "https" { 443 } else { 80 };
        let (name, port) = split_authority(authority);
        let port = port.unwrap_or(default_port);
        port == self.local.port() && self.host_name_ok(name)
    }

    /// Runs every check on one request.
    pub fn check(&self, method: &Method, headers: &HeaderMap) -> Result<(), ApiError> {
        self.check_host(headers)?;
        let origin = match headers.get(header::ORIGIN) {
            Some(v) => Some(
                v.to_str()
                    .map_err(|_| refuse("the Origin header is not text"))?,
            ),
            None => None,
        };
        if let Some(origin) = origin
            && !self.origin_ok(origin)
        {
            return Err(refuse(format!(
                "requests from pages at {:?} are refused; add the origin to [http] \
                 allowed_origins to let it in",
                visible(origin)
            )));
        }
        let changes_state = !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
            || headers.contains_key(header::UPGRADE);
        let from_other_site = headers
            .get("sec-fetch-site")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| {
                v.eq_ignore_ascii_case("cross-site") || v.eq_ignore_ascii_case("same-site")
            });
        if changes_state && from_other_site && origin.is_none() {
            return Err(refuse(
                "a page from another site may not change anything here (Sec-Fetch-Site)",
            ));
        }
        Ok(())
    }
}

fn refuse(message: impl Into<String>) -> ApiError {
    ApiError::new(StatusCode::FORBIDDEN, message)
}

/// Text from a header, shortened and with control characters shown, for a message.
fn visible(s: &str) -> String {
    let short: String = s.chars().take(100).collect();
    crate::protocol::text::visible_line(&short).into_owned()
}

/// `name:port`, `[v6]:port` or `name` → (name, port). The name keeps its brackets.
fn split_authority(authority: &str) -> (&str, Option<u16>) {
    if authority.starts_with('[') {
        return match authority.find(']') {
            Some(end) => {
                let port = authority[end + 1..]
                    .strip_prefix(':')
                    .and_then(|p| p.parse().ok());
                (&authority[..=end], port)
            }
            None => (authority, None),
        };
    }
    match authority.rsplit_once(':') {
        Some((name, port)) => match port.parse() {
            Ok(p) => (name, Some(p)),
            Err(_) => (authority, None),
        },
        None => (authority, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn guard(addr: &str, hosts: &[&str], origins: &[&str]) -> Guard {
        let settings = HttpSettings {
            allowed_hosts: hosts.iter().map(|s| s.to_string()).collect(),
            allowed_origins: origins.iter().map(|s| s.to_string()).collect(),
            ..HttpSettings::default()
        };
        Guard::new(addr.parse().unwrap(), &settings)
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn only_this_servers_names_are_answered() {
        let g = guard("127.0.0.1:4000", &["hitl.internal"], &[]);
        for ok in [
            "127.0.0.1:4000",
            "localhost:4000",
            "LOCALHOST",
            "[::1]:4000",
            "127.0.0.2:4000",
            "hitl.internal:4000",
        ] {
            assert!(
                g.check(&Method::GET, &headers(&[("host", ok)])).is_ok(),
                "{ok}"
            );
        }
        for bad in [
            "rebind.evil.example:4000",
            "localhost.evil.example",
            "10.0.0.1:4000",
            "",
        ] {
            assert!(
                g.check(&Method::GET, &headers(&[("host", bad)])).is_err(),
                "{bad}"
            );
        }
        // Bound to every interface without names: the token guards every route.
        let open = guard("0.0.0.0:4000", &[], &[]);
        assert!(
            open.check(&Method::GET, &headers(&[("host", "box.lan:4000")]))
                .is_ok()
        );
        let named = guard("0.0.0.0:4000", &["box.lan"], &[]);
        assert!(
            named
                .check(&Method::GET, &headers(&[("host", "other:4000")]))
                .is_err()
        );
    }

    #[test]
    fn over_tls_its_own_pages_are_https_ones_and_plain_http_on_its_port_is_not() {
        let settings = HttpSettings {
            tls_cert: Some("cert.pem".into()),
            tls_key: Some("key.pem".into()),
            ..HttpSettings::default()
        };
        let g = Guard::new("127.0.0.1:4443".parse().unwrap(), &settings);
        let post = |origin: &str| {
            let h = headers(&[("host", "127.0.0.1:4443"), ("origin", origin)]);
            g.check(&Method::POST, &h)
        };
        assert!(post("https://127.0.0.1:4443").is_ok());
        assert!(post("https://localhost:4443").is_ok());
        assert!(post("http://127.0.0.1:4443").is_err());
        assert!(post("https://127.0.0.1").is_err(), "443 is not ours");
        // And a plain server's pages are http ones.
        let plain = guard("127.0.0.1:4000", &[], &[]);
        let h = headers(&[
            ("host", "127.0.0.1:4000"),
            ("origin", "https://127.0.0.1:4000"),
        ]);
        assert!(plain.check(&Method::POST, &h).is_err());
    }

    #[test]
    fn pages_from_other_origins_are_refused() {
        let g = guard("127.0.0.1:4000", &[], &["http://localhost:5173"]);
        let post = |origin: &str, site: Option<&str>| {
            let mut h = headers(&[("host", "127.0.0.1:4000"), ("origin", origin)]);
            if let Some(s) = site {
                h.insert("sec-fetch-site", HeaderValue::from_str(s).unwrap());
            }
            g.check(&Method::POST, &h)
        };
        assert!(post("http://127.0.0.1:4000", Some("same-origin")).is_ok());
        assert!(post("http://localhost:4000", None).is_ok());
        assert!(post("http://localhost:5173", Some("same-site")).is_ok());
        assert!(post("http://localhost:5173/", None).is_ok());
        assert!(post("http://127.0.0.1:8080", Some("same-site")).is_err());
        assert!(post("http://evil.example", Some("cross-site")).is_err());
        assert!(post("null", Some("cross-site")).is_err());
        assert!(
            post("http://127.0.0.1", None).is_err(),
            "port 80 is not ours"
        );

        // No Origin but marked as from another site: a state change is refused.
        let h = headers(&[("host", "127.0.0.1:4000"), ("sec-fetch-site", "cross-site")]);
        assert!(g.check(&Method::POST, &h).is_err());
        assert!(
            g.check(&Method::GET, &h).is_ok(),
            "a link followed from elsewhere"
        );
        let mut ws = h.clone();
        ws.insert("upgrade", HeaderValue::from_static("websocket"));
        assert!(g.check(&Method::GET, &ws).is_err());
        // Not a browser: nothing to check beyond the host.
        assert!(
            g.check(&Method::POST, &headers(&[("host", "localhost:4000")]))
                .is_ok()
        );
    }

    #[test]
    fn origins_are_normalised_or_refused() {
        assert_eq!(
            normalise_origin("HTTP://Example.com:8080/").as_deref(),
            Some("http://example.com:8080")
        );
        for bad in [
            "*",
            "example.com",
            "http://",
            "http://a/b",
            "ftp://a",
            "http://*.a",
            "null",
        ] {
            assert_eq!(normalise_origin(bad), None, "{bad}");
        }
        assert_eq!(split_authority("[::1]:4000"), ("[::1]", Some(4000)));
        assert_eq!(split_authority("a:b"), ("a:b", None));
    }
}
