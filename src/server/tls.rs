//! Inbound TLS: `[http] tls_cert` / `tls_key` serve the API and the dashboard over
//! https, so that a phone on the LAN or a tunnel can reach a listener without its
//! token and cookies crossing the network in the clear.
//!
//! The certificate and key are read once, at start, and checked against each other
//! there: a listener that cannot serve what it was told to refuses to start rather
//! than serving plain http where https was asked for. The handshake runs on the
//! connection's own task, within `[http] header_timeout` (a client that opens a
//! connection and never says hello is cut like one that never sends a head). HTTP/1.1
//! only, as the plain server: ALPN says so.

use std::{
    path::{Path, PathBuf},
    sync::Arc,
};

use anyhow::{Context, Result, bail};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject};
use sha2::{Digest, Sha256};

use crate::config::HttpSettings;

/// What a server needs to speak TLS: the acceptor, and the fingerprint of the
/// certificate it presents (which the user's own clients pin, see
/// `runtime::tls::remember_pin`).
#[derive(Clone)]
pub struct ServerTls {
    /// Wraps each accepted connection.
    pub acceptor: tokio_rustls::TlsAcceptor,
    /// SHA-256 of the leaf certificate's DER, lower-case hex.
    pub sha256: String,
}

impl std::fmt::Debug for ServerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerTls")
            .field("sha256", &self.sha256)
            .finish_non_exhaustive()
    }
}

/// Where a `[http]` path setting points: `~/` is the home folder, a relative path is
/// taken from hitl's config folder (where the token lives).
pub fn resolve(path: &str, config_dir: &Path) -> PathBuf {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let expanded = match home {
        Some(h) => crate::config::expand_home(path, &h),
        None => PathBuf::from(path),
    };
    if expanded.is_absolute() {
        expanded
    } else {
        config_dir.join(expanded)
    }
}

/// The TLS `settings` ask for, if any: `None` when neither `tls_cert` nor `tls_key`
/// is set. Errors say which file and what is wrong with it: missing, unreadable, not
/// PEM, no certificate or key in it, or a key that is not the certificate's.
pub fn load(settings: &HttpSettings, config_dir: &Path) -> Result<Option<ServerTls>> {
    let (cert_path, key_path) = match (&settings.tls_cert, &settings.tls_key) {
        (None, None) => return Ok(None),
        (Some(c), Some(k)) => (resolve(c, config_dir), resolve(k, config_dir)),
        _ => bail!(
            "[http] tls_cert and tls_key go together: set both (a PEM certificate chain \
             and its private key) or neither"
        ),
    };
    let chain = read_chain(&cert_path)?;
    let key = read_key(&key_path)?;
    warn_if_others_can_read(&key_path);
    let sha256 = hex(&Sha256::digest(chain[0].as_ref()));
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .context("setting up TLS")?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .with_context(|| {
            format!(
                "serving {} with the key in {}",
                cert_path.display(),
                key_path.display()
            )
        })?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Some(ServerTls {
        acceptor: tokio_rustls::TlsAcceptor::from(Arc::new(config)),
        sha256,
    }))
}

/// The certificates of a PEM file, leaf first.
fn read_chain(path: &Path) -> Result<Vec<CertificateDer<'static>>> {
    let bytes = std::fs::read(path)
        .with_context(|| format!("reading [http] tls_cert {}", path.display()))?;
    let chain = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .with_context(|| format!("reading [http] tls_cert {} as PEM", path.display()))?;
    if chain.is_empty() {
        bail!(
            "[http] tls_cert {} holds no certificate (a PEM file starting \
             \"-----BEGIN CERTIFICATE-----\", the server's own first)",
            path.display()
        );
    }
    Ok(chain)
}

/// The first private key of a PEM file (PKCS#8, PKCS#1 or SEC1).
fn read_key(path: &Path) -> Result<PrivateKeyDer<'static>> {
    let bytes = std::fs::read(path)
        .with_context(|| format!("reading [http] tls_key {}", path.display()))?;
    PrivateKeyDer::from_pem_slice(&bytes).map_err(|e| {
        let why = match e {
            rustls::pki_types::pem::Error::NoItemsFound => {
                "no private key in it (a PEM file starting \"-----BEGIN PRIVATE KEY-----\")"
                    .to_string()
            }
            other => format!("not a PEM private key ({other:?})"),
        };
        anyhow::anyhow!("[http] tls_key {}: {why}", path.display())
    })
}

/// A key others can read is a key others may have: said, not refused (the user may
/// have a reason, as a group of admins).
fn warn_if_others_can_read(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    if let Ok(meta) = std::fs::metadata(path)
        && meta.permissions().mode() & 0o077 != 0
    {
        eprintln!(
            "hitl: warning: {} can be read by other users (mode {:o}); `chmod 600` it",
            path.display(),
            meta.permissions().mode() & 0o777
        );
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
