//! The browsers that asked to be pushed to: each one's `PushSubscription` (the
//! push service's URL for it and its keys), and the device it belongs to, kept in
//! the user's config folder (`push-subscriptions`, mode 0600, a JSON object a line)
//! and shared by every listener of the user, as devices are.
//!
//! A subscription made by a device ends with it: one whose device is no longer
//! logged in is dropped when a push finds it so (and at once when the device is
//! revoked); one made with the token lasts until it is deleted or its push service
//! says it is gone.

use std::{
    path::{Path, PathBuf},
    sync::Mutex,
};

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

use super::crypto::unb64;

/// At most this many subscriptions: a new one past it ends the oldest.
const MAX_SUBSCRIPTIONS: usize = 64;

/// One browser's subscription, as kept.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Subscription {
    /// The push service's URL for this browser (the secret that reaches it).
    pub endpoint: String,
    /// The browser's public key (P-256, uncompressed, base64url).
    pub p256dh: String,
    /// The browser's auth secret (16 bytes, base64url).
    pub auth: String,
    /// The device that subscribed, or none for the token's holder.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    /// When, seconds since the epoch.
    pub since: u64,
}

impl Subscription {
    /// A subscription from what a browser's `PushSubscription.toJSON()` says,
    /// checked: its keys read, its endpoint one `allowed` says may be pushed to.
    pub fn new(
        endpoint: &str,
        p256dh: &str,
        auth: &str,
        device: Option<String>,
        allowed: impl Fn(&str) -> Option<String>,
    ) -> Result<Subscription> {
        if let Some(why) = allowed(endpoint) {
            bail!("endpoint: {why}");
        }
        let key = unb64(p256dh).context("keys.p256dh")?;
        if key.len() != 65 || key[0] != 4 {
            bail!("keys.p256dh is not an uncompressed P-256 point (65 bytes)");
        }
        if unb64(auth).context("keys.auth")?.len() != 16 {
            bail!("keys.auth is not 16 bytes");
        }
        Ok(Subscription {
            endpoint: endpoint.to_string(),
            p256dh: p256dh.trim().to_string(),
            auth: auth.trim().to_string(),
            device,
            since: jiff::Timestamp::now().as_second().max(0) as u64,
        })
    }
}

/// The subscriptions file, read afresh each time (it is small, and other listeners
/// change it).
#[derive(Debug)]
pub struct Subscriptions {
    file: PathBuf,
    /// One change at a time in this process (others write whole files by rename).
    writing: Mutex<()>,
}

impl Subscriptions {
    /// The subscriptions kept in `file`.
    pub fn new(file: PathBuf) -> Subscriptions {
        Subscriptions {
            file,
            writing: Mutex::new(()),
        }
    }

    /// Every subscription kept (none if the file is missing; unreadable lines are
    /// skipped).
    pub fn all(&self) -> Vec<Subscription> {
        read(&self.file)
    }

    /// Keeps `sub`, in place of any with its endpoint.
    pub fn add(&self, sub: Subscription) -> Result<()> {
        self.change(|all| {
            all.retain(|s| s.endpoint != sub.endpoint);
            all.push(sub);
            let over = all.len().saturating_sub(MAX_SUBSCRIPTIONS);
            all.drain(..over);
        })
    }

    /// Forgets the subscriptions `gone` picks; how many there were.
    pub fn remove(&self, gone: impl Fn(&Subscription) -> bool) -> Result<usize> {
        let mut n = 0;
        self.change(|all| {
            let before = all.len();
            all.retain(|s| !gone(s));
            n = before - all.len();
        })?;
        Ok(n)
    }

    fn change(&self, f: impl FnOnce(&mut Vec<Subscription>)) -> Result<()> {
        let _one = self.writing.lock().unwrap_or_else(|p| p.into_inner());
        let mut all = read(&self.file);
        let before = all.clone();
        f(&mut all);
        if all == before {
            return Ok(());
        }
        let mut text = String::new();
        for s in &all {
            text.push_str(&serde_json::to_string(s)?);
            text.push('\n');
        }
        super::write_private(&self.file, text.as_bytes())
    }
}

fn read(file: &Path) -> Vec<Subscription> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str =
        "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4";
    const AUTH: &str = "BTBZMqHH6r4Tts7J_aSIgg";

    fn sub(endpoint: &str, device: Option<&str>) -> Subscription {
        Subscription::new(endpoint, KEY, AUTH, device.map(str::to_string), |_| None).unwrap()
    }

    #[test]
    fn subscriptions_are_kept_replaced_by_endpoint_and_removed() {
        let dir = tempfile::tempdir().unwrap();
        let subs = Subscriptions::new(dir.path().join("push-subscriptions"));
        assert!(subs.all().is_empty());
        subs.add(sub("https://a.example/1", Some("d1"))).unwrap();
        subs.add(sub("https://a.example/2", None)).unwrap();
        subs.add(sub("https://a.example/1", Some("d2"))).unwrap();
        let all = subs.all();
        assert_eq!(all.len(), 2);
        assert_eq!(all[1].device.as_deref(), Some("d2"));
        assert_eq!(
            subs.remove(|s| s.device.as_deref() == Some("d2")).unwrap(),
            1
        );
        assert_eq!(subs.all().len(), 1);
    }

    #[test]
    fn a_subscription_with_bad_keys_or_a_refused_endpoint_is_refused() {
        let refuse = |_: &str| Some("not a push service".to_string());
        let e = Subscription::new("https://x", KEY, AUTH, None, refuse).unwrap_err();
        assert!(e.to_string().contains("not a push service"), "{e}");
        let e = Subscription::new("https://x", "AAAA", AUTH, None, |_| None).unwrap_err();
        assert!(e.to_string().contains("p256dh"), "{e}");
        let e = Subscription::new("https://x", KEY, "AAAA", None, |_| None).unwrap_err();
        assert!(e.to_string().contains("auth"), "{e}");
    }
}
