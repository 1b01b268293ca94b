//! Web Push to the user's phone and other browsers: a dashboard that was allowed
//! to notify subscribes (`POST /api/v1/push/subscriptions`), and each new request
//! is then pushed to it through its browser's push service (RFC 8030), encrypted
//! for that browser alone (RFC 8291) and signed as this server's (RFC 8292), so it
//! shows on a lock screen with Approve and Deny where the platform allows.
//!
//! What leaves the machine, and to whom, is bounded: pushes go only to the
//! browsers' own push services (Google's, Mozilla's, Apple's, Microsoft's) and the
//! hosts `[http] delivery_hosts` names, over https (plain http to loopback only),
//! and a push says who asks, the question, its kind and the command or the edit's
//! file (cut to size), never the request's context, a token or a session. The push
//! service sees only the encrypted body, its size and when.
//!
//! `crypto` encrypts and signs, `subscriptions` keeps who subscribed, `claims` which
//! requests were pushed (one push for brokers sharing a store), `notifier` follows
//! the broker and says what each push carries.

pub mod claims;
pub mod crypto;
pub mod notifier;
pub mod subscriptions;

use std::{
    path::Path,
    sync::{Arc, OnceLock},
    time::Duration,
};

use anyhow::{Context, Result, anyhow};
pub use subscriptions::{Subscription, Subscriptions};

use crate::config::HttpSettings;

/// The browsers' own push services, by the end of their host names: Chrome's and
/// most others' (Firebase), Firefox's, Safari's and Edge's.
pub const BROWSER_PUSH_SERVICES: &[&str] = &[
    "fcm.googleapis.com",
    "android.googleapis.com",
    "push.services.mozilla.com",
    "push.apple.com",
    "notify.windows.com",
];

/// How long one push may take.
const TRY_FOR: Duration = Duration::from_secs(10);

/// Web Push for one server: its VAPID keys, who subscribed, where pushes may go.
pub struct Push {
    vapid_file: std::path::PathBuf,
    vapid: OnceLock<std::result::Result<Arc<crypto::Vapid>, String>>,
    /// Who subscribed.
    pub subscriptions: Subscriptions,
    /// Which requests one of the user's listeners pushed.
    pub claims: claims::Claims,
    delivery_hosts: Vec<String>,
    /// Who the push services may write to about our pushes (VAPID's `sub`).
    contact: String,
    client: OnceLock<std::result::Result<reqwest::Client, String>>,
}

impl std::fmt::Debug for Push {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Push")
            .field("vapid_file", &self.vapid_file)
            .field("delivery_hosts", &self.delivery_hosts)
            .finish_non_exhaustive()
    }
}

/// How one push went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sent {
    /// The push service took it.
    Delivered,
    /// The push service says the subscription is no more (404, 410): forget it.
    Gone,
    /// It did not go; whether trying again may help.
    Failed(String, bool),
}

/// One push: its plaintext, how long the service may hold it, how urgent it is,
/// and the topic under which a newer push replaces it undelivered.
#[derive(Debug, Clone)]
pub struct Message {
    /// The JSON the service worker reads.
    pub body: Vec<u8>,
    /// Seconds the push service may keep it for an offline browser.
    pub ttl: u64,
    /// `very-low`, `low`, `normal` or `high` (RFC 8030 section 5.3).
    pub urgency: &'static str,
    /// At most 32 base64url characters.
    pub topic: Option<String>,
}

impl Push {
    /// Web Push with its keys and subscriptions in `config_dir`.
    pub fn new(config_dir: &Path, settings: &HttpSettings) -> Push {
        // VAPID's contact: the server's https address if it has one, else a mailbox
        // that says where the push came from.
        let contact = settings
            .public_url
            .as_deref()
            .filter(|u| u.starts_with("https://"))
            .map_or_else(|| "mailto:hitl@localhost".to_string(), str::to_string);
        Push {
            vapid_file: config_dir.join("vapid-key"),
            vapid: OnceLock::new(),
            subscriptions: Subscriptions::new(config_dir.join("push-subscriptions")),
            claims: claims::Claims::new(config_dir.join("pushed")),
            delivery_hosts: settings.delivery_hosts.clone(),
            contact,
            client: OnceLock::new(),
        }
    }

    /// The VAPID key pair, made the first time it is needed.
    pub fn vapid(&self) -> Result<Arc<crypto::Vapid>> {
        self.vapid
            .get_or_init(|| {
                crypto::Vapid::load_or_create(&self.vapid_file)
                    .map(Arc::new)
                    .map_err(|e| format!("{e:#}"))
            })
            .clone()
            .map_err(|e| anyhow!(e))
    }

    /// Why `endpoint` may not be pushed to, or `None`: a push service of the
    /// browsers' or a host in `[http] delivery_hosts`, over https (http only to
    /// loopback), with no user or password.
    pub fn refusal(&self, endpoint: &str) -> Option<String> {
        if endpoint.len() > 2048 || !endpoint.bytes().all(|b| b.is_ascii_graphic()) {
            return Some(
                "a push service's URL is printable ASCII without spaces, at most 2048 bytes".into(),
            );
        }
        let url = match reqwest::Url::parse(endpoint) {
            Ok(u) => u,
            Err(e) => return Some(format!("not a URL: {e}")),
        };
        let (host, loopback) = crate::runtime::tls::host_of(&url);
        match url.scheme() {
            "https" => {}
            "http" if loopback => {}
            "http" => return Some("plain http only to loopback".into()),
            s => return Some(format!("{s}:// is not https")),
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Some("a push service's URL has no user or password".into());
        }
        let browsers = BROWSER_PUSH_SERVICES
            .iter()
            .any(|s| host == *s || host.ends_with(&format!(".{s}")));
        let allowed = self
            .delivery_hosts
            .iter()
            .any(|h| h.eq_ignore_ascii_case(&host));
        if browsers || allowed {
            None
        } else {
            Some(format!(
                "{host} is not a browser's push service ({}) nor in [http] delivery_hosts",
                BROWSER_PUSH_SERVICES.join(", ")
            ))
        }
    }

    fn client(&self) -> Result<reqwest::Client> {
        self.client
            .get_or_init(|| {
                crate::runtime::tls::http_client(true)
                    .and_then(|b| {
                        Ok(b.redirect(reqwest::redirect::Policy::none())
                            .timeout(TRY_FOR)
                            .user_agent(concat!("hitl/", env!("CARGO_PKG_VERSION")))
                            .build()?)
                    })
                    .map_err(|e| format!("{e:#}"))
            })
            .clone()
            .map_err(|e| anyhow!(e))
    }

    /// Pushes `message` to `sub` once.
    pub async fn send(&self, sub: &Subscription, message: &Message) -> Sent {
        if let Some(why) = self.refusal(&sub.endpoint) {
            return Sent::Failed(why, false);
        }
        let prepared = (|| -> Result<(reqwest::Client, Vec<u8>, String)> {
            let body = crypto::encrypt(
                &message.body,
                &crypto::unb64(&sub.p256dh)?,
                &crypto::unb64(&sub.auth)?,
            )?;
            let url = reqwest::Url::parse(&sub.endpoint)?;
            let audience = url.origin().ascii_serialization();
            let now = jiff::Timestamp::now().as_second();
            let auth = self.vapid()?.authorization(&audience, &self.contact, now)?;
            Ok((self.client()?, body, auth))
        })();
        let (client, body, auth) = match prepared {
            Ok(p) => p,
            Err(e) => return Sent::Failed(format!("{e:#}"), false),
        };
        let mut req = client
            .post(&sub.endpoint)
            .header("content-type", "application/octet-stream")
            .header("content-encoding", "aes128gcm")
            .header("ttl", message.ttl.to_string())
            .header("urgency", message.urgency)
            .header("authorization", auth)
            .body(body);
        if let Some(topic) = &message.topic {
            req = req.header("topic", topic);
        }
        match req.send().await {
            Ok(r) if r.status().is_success() => Sent::Delivered,
            Ok(r) if matches!(r.status().as_u16(), 404 | 410) => Sent::Gone,
            Ok(r) => {
                let status = r.status();
                let said: String = r
                    .text()
                    .await
                    .unwrap_or_default()
                    .chars()
                    .take(200)
                    .collect();
                Sent::Failed(
                    format!(
                        "the push service said {status}: {}",
                        crate::protocol::text::visible_line(said.trim())
                    ),
                    status.is_server_error() || status.as_u16() == 429,
                )
            }
            // Said without the URL: the endpoint is the secret that reaches the browser.
            Err(e) => {
                let e = e.without_url();
                let again = !crate::runtime::tls::certificate_refused(&e);
                Sent::Failed(crate::runtime::tls::error_chain(&e), again)
            }
        }
    }
}

/// Writes `bytes` to `file`, readable by its owner alone (0600, its folder 0700),
/// whole or not at all: a temporary file of this process's, synced, then renamed.
fn write_private(file: &Path, bytes: &[u8]) -> Result<()> {
    use std::{
        io::Write,
        os::unix::fs::{DirBuilderExt, OpenOptionsExt},
    };
    if let Some(dir) = file.parent() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .with_context(|| format!("making {}", dir.display()))?;
    }
    let tmp = file.with_extension(format!("tmp{}", std::process::id()));
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .with_context(|| format!("writing {}", tmp.display()))?;
    f.write_all(bytes)
        .and_then(|()| f.sync_all())
        .with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, file).with_context(|| format!("writing {}", file.display()))
}

/// An endpoint as it may be shown or logged: its scheme and host (the path is the
/// secret that reaches one browser).
pub fn shown_endpoint(endpoint: &str) -> String {
    reqwest::Url::parse(endpoint)
        .map(|u| format!("{}://{}", u.scheme(), u.authority()))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pushes_go_only_to_browsers_push_services_and_the_users_hosts() {
        let dir = tempfile::tempdir().unwrap();
        let settings = HttpSettings {
            delivery_hosts: vec!["push.example.net".into(), "127.0.0.1".into()],
            ..HttpSettings::default()
        };
        let push = Push::new(dir.path(), &settings);
        for ok in [
            "https://fcm.googleapis.com/fcm/send/abc",
            "https://updates.push.services.mozilla.com/wpush/v2/abc",
            "https://web.push.apple.com/abc",
            "https://wns2-par02p.notify.windows.com/w/?token=abc",
            "https://push.example.net/x",
            "http://127.0.0.1:9/push",
        ] {
            assert_eq!(push.refusal(ok), None, "{ok}");
        }
        for bad in [
            "http://fcm.googleapis.com/fcm/send/abc",
            "https://evil.example/fcm.googleapis.com",
            "https://fcm.googleapis.com.evil.example/x",
            "https://user:pw@fcm.googleapis.com/x",
            "https://10.0.0.1/push",
            "http://10.0.0.1/push",
            "ftp://fcm.googleapis.com/x",
            "not a url",
        ] {
            assert!(push.refusal(bad).is_some(), "{bad}");
        }
        // Loopback over plain http only when the user names it.
        let bare = Push::new(dir.path(), &HttpSettings::default());
        assert!(bare.refusal("http://127.0.0.1:9/push").is_some());
    }
}
