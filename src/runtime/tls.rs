//! Outbound TLS: the one client configuration every `https://` connection hitl
//! makes uses (webhooks, `hitl ask --server`, the channels to come).
//!
//! The certificate authorities trusted are the system's, found as OpenSSL and curl
//! find them, and `SSL_CERT_FILE` / `SSL_CERT_DIR` replace them as they do for curl
//! (`rustls-native-certs`), so a private CA or a corporate proxy's is one variable
//! away. Read once per process, on the first `https://` client: a short-lived
//! command that talks plain http to its own listener never reads them.
//!
//! The user's own listener serving TLS (`[http] tls_cert`) is trusted another way:
//! by the exact certificate it says it presents (`.listener.json`'s `tls_sha256`),
//! for its URL only. Its certificate may be self-signed, or issued for a name that
//! 127.0.0.1 is not (a tailnet's), and neither should make `hitl answer` fail.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, OnceLock},
};

use anyhow::{Result, anyhow};

/// A `reqwest` client builder with hitl's TLS set up. `https`: whether this client
/// may connect to `https://` URLs (the trusted CAs are read then); one that only
/// talks to loopback over plain http gets a configuration that trusts nobody, so a
/// redirect or a misconfigured URL to https fails instead of trusting anything.
/// Errors: `https` and no CA certificate could be read.
pub fn http_client(https: bool) -> Result<reqwest::ClientBuilder> {
    install_default_provider();
    let config = if https {
        client_config()?
    } else {
        trusting_nobody()
    };
    Ok(reqwest::Client::builder().tls_backend_preconfigured(config))
}

/// A client builder for `base` (a server's URL): pinned to the certificate
/// [`remember_pin`] noted for it, else trusting the CAs when it is `https://`, else
/// trusting nobody (see [`http_client`]).
pub fn http_client_for(base: &str) -> Result<reqwest::ClientBuilder> {
    if !base.starts_with("https://") {
        return http_client(false);
    }
    match pin_for(base) {
        Some(pin) => {
            install_default_provider();
            Ok(reqwest::Client::builder().tls_backend_preconfigured(pinned_config(pin)))
        }
        None => http_client(true),
    }
}

/// Pins `base` (`https://HOST:PORT`) to the certificate whose DER has SHA-256
/// `sha256_hex`, for the rest of this process: the user's own listener said so in
/// its `.listener.json`. A malformed fingerprint is ignored (the CAs decide then).
pub fn remember_pin(base: &str, sha256_hex: &str) {
    let Some(pin) = parse_sha256(sha256_hex) else {
        return;
    };
    pins().insert(pin_key(base), pin);
}

/// The pins noted in this process, by [`pin_key`].
fn pins() -> std::sync::MutexGuard<'static, HashMap<String, [u8; 32]>> {
    static PINS: OnceLock<Mutex<HashMap<String, [u8; 32]>>> = OnceLock::new();
    PINS.get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner())
}

/// A URL as pins are looked up by: lower case, no trailing slash.
fn pin_key(base: &str) -> String {
    base.trim_end_matches('/').to_ascii_lowercase()
}

fn pin_for(base: &str) -> Option<[u8; 32]> {
    pins().get(&pin_key(base)).copied()
}

fn parse_sha256(hex: &str) -> Option<[u8; 32]> {
    let hex = hex.trim();
    if hex.len() != 64 || !hex.is_ascii() {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}

/// A client configuration that trusts one certificate, by its fingerprint, and
/// nothing else; the handshake's signatures are still checked against it.
fn pinned_config(pin: [u8; 32]) -> rustls::ClientConfig {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = Arc::new(Pinned {
        sha256: pin,
        algorithms: provider.signature_verification_algorithms,
    });
    rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("rustls's defaults are valid")
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth()
}

/// Accepts exactly the certificate whose SHA-256 is `sha256`, whatever names it is
/// for and whoever signed it: the user's own listener named it.
#[derive(Debug)]
struct Pinned {
    sha256: [u8; 32],
    algorithms: rustls::crypto::WebPkiSupportedAlgorithms,
}

impl rustls::client::danger::ServerCertVerifier for Pinned {
    fn verify_server_cert(
        &self,
        end_entity: &rustls::pki_types::CertificateDer<'_>,
        _intermediates: &[rustls::pki_types::CertificateDer<'_>],
        _server_name: &rustls::pki_types::ServerName<'_>,
        _ocsp_response: &[u8],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        use sha2::Digest;
        if sha2::Sha256::digest(end_entity.as_ref()).as_slice() == self.sha256 {
            Ok(rustls::client::danger::ServerCertVerified::assertion())
        } else {
            Err(rustls::Error::InvalidCertificate(
                rustls::CertificateError::ApplicationVerificationFailure,
            ))
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

/// Makes ring the process's rustls provider, for anything that builds a client
/// without [`http_client`] (`reqwest::Client::default()` panics without one).
pub fn install_default_provider() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // Refused only when one is installed already: that one serves as well.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// The client configuration for `https://`: the trusted CAs, TLS 1.2 and 1.3 with
/// rustls's safe defaults, no client certificate. Built once per process.
/// Errors: no CA certificate could be read (said with where to put one).
pub fn client_config() -> Result<rustls::ClientConfig> {
    static CONFIG: OnceLock<Result<rustls::ClientConfig, String>> = OnceLock::new();
    CONFIG
        .get_or_init(|| build(trusted_roots()?))
        .clone()
        .map_err(|e| anyhow!(e))
}

fn trusting_nobody() -> rustls::ClientConfig {
    build(rustls::RootCertStore::empty()).expect("rustls's defaults are valid")
}

fn build(roots: rustls::RootCertStore) -> Result<rustls::ClientConfig, String> {
    rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .map(|b| b.with_root_certificates(roots).with_no_client_auth())
        .map_err(|e| format!("setting up TLS: {e}"))
}

/// The CAs to trust: `SSL_CERT_FILE` / `SSL_CERT_DIR` when set, else the system's.
/// Unreadable entries are skipped (as OpenSSL does); none at all is an error.
fn trusted_roots() -> Result<rustls::RootCertStore, String> {
    let found = rustls_native_certs::load_native_certs();
    let mut roots = rustls::RootCertStore::empty();
    let (added, _ignored) = roots.add_parsable_certificates(found.certs);
    if added > 0 {
        return Ok(roots);
    }
    let given = ["SSL_CERT_FILE", "SSL_CERT_DIR"]
        .into_iter()
        .filter_map(|v| std::env::var(v).ok().map(|p| format!("{v}={p}")))
        .collect::<Vec<_>>();
    let why = found
        .errors
        .first()
        .map(|e| format!(" ({e})"))
        .unwrap_or_default();
    Err(if given.is_empty() {
        format!(
            "no trusted CA certificates were found on this system{why}: install the \
             ca-certificates package, or name a PEM bundle in SSL_CERT_FILE"
        )
    } else {
        format!(
            "no CA certificate could be read from {}{why}",
            given.join(" or ")
        )
    })
}

/// Whether `e` (or an error beneath it) is the server's certificate refused: not
/// trusted, expired, for another name. Trying again will not change that.
pub fn certificate_refused(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut level = Some(e);
    while let Some(err) = level {
        if matches!(
            err.downcast_ref::<rustls::Error>(),
            Some(rustls::Error::InvalidCertificate(_) | rustls::Error::NoCertificatesPresented)
        ) {
            return true;
        }
        // An I/O error shows the error it wraps but does not give it as its source.
        level = match err
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
        {
            Some(inner) => Some(inner as &(dyn std::error::Error + 'static)),
            None => err.source(),
        };
    }
    false
}

/// `e` and every error beneath it, `: `-joined: a failed connection's reason is
/// often three levels down ("error sending request: client error (Connect):
/// invalid peer certificate: UnknownIssuer").
pub fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let part = s.to_string();
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = s.source();
    }
    text
}

/// The host `url` names, in lower case without an IPv6 address's brackets, and
/// whether it is this machine's loopback (`localhost` or a loopback address): where
/// plain http may go, and what outbound settings name hosts by.
pub fn host_of(url: &reqwest::Url) -> (String, bool) {
    let host = url
        .host_str()
        .unwrap_or_default()
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_ascii_lowercase();
    let loopback = host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    (host, loopback)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_for_plain_http_reads_no_certificates_and_builds() {
        http_client(false).unwrap().build().unwrap();
    }

    #[test]
    fn a_refused_certificate_is_found_under_io_errors_and_a_refused_connection_is_not_one() {
        let refused = rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer);
        let wrapped = std::io::Error::other(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            refused,
        ));
        let outer = anyhow::Error::new(wrapped).context("error sending request");
        assert!(certificate_refused(outer.as_ref()));
        let closed = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        let outer = anyhow::Error::new(closed).context("error sending request");
        assert!(!certificate_refused(outer.as_ref()));
    }

    #[test]
    fn a_pin_is_read_from_hex_and_kept_for_its_url_only() {
        let hex = "00ff".repeat(16);
        assert_eq!(parse_sha256(&hex).unwrap()[..2], [0x00, 0xff]);
        assert!(parse_sha256("00ff").is_none());
        assert!(parse_sha256(&"zz".repeat(32)).is_none());
        remember_pin("https://127.0.0.1:4999/", &hex);
        assert!(pin_for("https://127.0.0.1:4999").is_some());
        assert!(pin_for("https://127.0.0.1:4998").is_none());
        http_client_for("https://127.0.0.1:4999")
            .unwrap()
            .build()
            .unwrap();
    }

    #[test]
    fn an_error_chain_says_every_level_once() {
        let inner = std::io::Error::other("invalid peer certificate: UnknownIssuer");
        let outer = anyhow::Error::new(inner).context("error sending request");
        let chain = error_chain(outer.as_ref());
        assert_eq!(
            chain,
            "error sending request: invalid peer certificate: UnknownIssuer"
        );
    }
}
