//! Inbound TLS: `[http] tls_cert` / `tls_key` serve the API and the dashboard over
//! https, so that a phone on the LAN or a tunnel can reach a listener without its
//! token and cookies crossing the network in the clear.
//!
//! The certificate and key are read at start and checked against each other there:
//! a listener that cannot serve what it was told to refuses to start rather than
//! serving plain http where https was asked for. Certificates are renewed under a
//! running listener (Let's Encrypt's and Tailscale's last 90 days): the files are
//! looked at every [`LOOK_EVERY`], and a renewed pair that reads and matches is
//! served from the next handshake on, its fingerprint told to whoever follows
//! [`ServerTls::sha256`] (`hitl listen` writes it into `.listener.json`); a pair that
//! does not read is said in the log and the one before is kept. The handshake runs on
//! the connection's own task, within `[http] header_timeout` (a client that opens a
//! connection and never says hello is cut like one that never sends a head). HTTP/1.1
//! only, as the plain server: ALPN says so.

use std::{
    path::{Path, PathBuf},
    sync::{Arc, Mutex, RwLock},
    time::{Duration, SystemTime},
};

use anyhow::{Context, Result, bail};
use rustls::{
    crypto::CryptoProvider,
    pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject},
    server::{ClientHello, ResolvesServerCert},
    sign::CertifiedKey,
};
use sha2::{Digest, Sha256};

use crate::config::HttpSettings;

/// How often the certificate and key files are looked at for a renewal.
pub const LOOK_EVERY: Duration = Duration::from_secs(2);

/// What a server needs to speak TLS: the acceptor, and the fingerprint of the
/// certificate it presents now (which the user's own clients pin, see
/// `runtime::tls::remember_pin`).
pub struct ServerTls {
    /// Wraps each accepted connection.
    pub acceptor: tokio_rustls::TlsAcceptor,
    /// SHA-256 of the leaf certificate's DER served now, lower-case hex; changes
    /// when renewed files are served.
    pub sha256: tokio::sync::watch::Receiver<String>,
    served: Arc<Served>,
}

impl std::fmt::Debug for ServerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerTls")
            .field("sha256", &*self.sha256.borrow())
            .finish_non_exhaustive()
    }
}

impl ServerTls {
    /// Looks at the files every [`LOOK_EVERY`] until the server stops, serving a
    /// renewed pair once it reads and matches.
    pub fn follow_renewals(&self) -> tokio::task::JoinHandle<()> {
        let served = self.served.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(LOOK_EVERY).await;
                let served = served.clone();
                // File reads, off the runtime's threads.
                let _ = tokio::task::spawn_blocking(move || served.look()).await;
            }
        })
    }
}

/// The key pair served, and where it comes from.
#[derive(Debug)]
struct Served {
    cert_path: PathBuf,
    key_path: PathBuf,
    provider: Arc<CryptoProvider>,
    current: RwLock<Arc<CertifiedKey>>,
    /// The files' stamps when they were last read.
    stamps: Mutex<(Option<Stamp>, Option<Stamp>)>,
    sha256: tokio::sync::watch::Sender<String>,
}

/// What tells one version of a file from another: its inode (a renewal often
/// renames a new file into place) and its modification time.
type Stamp = (u64, SystemTime);

fn stamp(path: &Path) -> Option<Stamp> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(path).ok()?;
    Some((meta.ino(), meta.modified().ok()?))
}

impl ResolvesServerCert for Served {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(
            self.current
                .read()
                .unwrap_or_else(|p| p.into_inner())
                .clone(),
        )
    }
}

impl Served {
    /// Serves the files anew if they changed since they were read and now read and
    /// match; says so, or why not, in the log.
    fn look(&self) {
        let now = (stamp(&self.cert_path), stamp(&self.key_path));
        {
            let mut stamps = self.stamps.lock().unwrap_or_else(|p| p.into_inner());
            if *stamps == now {
                return;
            }
            *stamps = now;
        }
        match certified(&self.cert_path, &self.key_path, &self.provider) {
            Ok((key, sha256)) => {
                if *self.sha256.borrow() == sha256 {
                    return;
                }
                *self.current.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(key);
                tracing::info!(
                    "serving the renewed certificate in {} (SHA-256 {sha256})",
                    self.cert_path.display()
                );
                self.sha256.send_replace(sha256);
            }
            // Half written (a certificate before its key), or broken: the pair
            // before goes on being served, and the next change is looked at again.
            Err(e) => tracing::warn!(
                "the certificate or key changed but cannot be served ({e:#}); still \
                 serving the one before"
            ),
        }
    }
}

/// The key pair in `cert_path` and `key_path`, checked against each other, and the
/// certificate's SHA-256.
fn certified(
    cert_path: &Path,
    key_path: &Path,
    provider: &CryptoProvider,
) -> Result<(CertifiedKey, String)> {
    let chain = read_chain(cert_path)?;
    let key = read_key(key_path)?;
    let sha256 = hex(&Sha256::digest(chain[0].as_ref()));
    let certified = CertifiedKey::from_der(chain, key, provider).with_context(|| {
        format!(
            "serving {} with the key in {}",
            cert_path.display(),
            key_path.display()
        )
    })?;
    Ok((certified, sha256))
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
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let stamps = (stamp(&cert_path), stamp(&key_path));
    let (key, sha256) = certified(&cert_path, &key_path, &provider)?;
    warn_if_others_can_read(&key_path);
    let (sha_tx, sha_rx) = tokio::sync::watch::channel(sha256);
    let served = Arc::new(Served {
        cert_path,
        key_path,
        provider: provider.clone(),
        current: RwLock::new(Arc::new(key)),
        stamps: Mutex::new(stamps),
        sha256: sha_tx,
    });
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .context("setting up TLS")?
        .with_no_client_auth()
        .with_cert_resolver(served.clone());
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Some(ServerTls {
        acceptor: tokio_rustls::TlsAcceptor::from(Arc::new(config)),
        sha256: sha_rx,
        served,
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
