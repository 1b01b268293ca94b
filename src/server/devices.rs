//! Devices: every browser logged in to the dashboard, by a login link or by pairing
//! (`hitl pair`), is one, with a name, when and from where it was last seen; `hitl
//! devices` lists them and `hitl devices revoke ID` ends one at once.
//!
//! A device holds a session, whose id its cookie carries (never the token: see
//! `login.rs`). The session id is the secret; the device's id is not, and is what
//! lists show and revocations name. A device may read and answer, and log itself
//! out; minting login links, pairing another device and managing devices take the
//! token itself (`auth::Access::Owner`), so a phone that is lost, or a page that
//! learnt a session id, cannot make itself a way back in.
//!
//! Kept in the user config folder (`sessions`, mode 0600, a JSON object a line), so
//! a restarted listener keeps its devices; when each was last seen is kept in memory
//! and written at most once a minute. A revocation is written at once, and told to
//! whatever holds the device's connections open (its WebSockets close). Every
//! listener of the user shares the file: each looks at its modification time before
//! it trusts a session (one `stat`) and reads it again when another changed it, so a
//! device revoked through one listener is refused by all of them.

use std::{
    collections::HashMap,
    net::IpAddr,
    path::PathBuf,
    sync::{Arc, Mutex},
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use axum::{
    Json,
    extract::{Path, State},
    http::StatusCode,
};
use serde::{Deserialize, Serialize};

use super::{
    AppState,
    error::{ApiError, JsonBody},
};
pub use crate::api::{Device, PairBody, Pairing};

/// How long a device stays logged in without logging in again.
pub const SESSION_TTL: Duration = Duration::from_secs(7 * 24 * 3600);

/// At most this many devices: a new one past it ends the one seen longest ago.
const MAX_DEVICES: usize = 256;

/// How often what changes on every request (last seen, from where) is written.
const SAVE_SEEN_EVERY: u64 = 60;

/// A session and the device that holds it, as the file keeps them.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Held {
    session: String,
    device: Device,
}

/// The devices logged in, by session id.
#[derive(Debug)]
pub struct Devices {
    state: Mutex<Kept>,
    file: Option<PathBuf>,
    /// Bumped on each revocation, so open connections look again.
    revoked: tokio::sync::watch::Sender<u64>,
}

#[derive(Debug, Default)]
struct Kept {
    by_session: HashMap<String, Device>,
    /// The file's [`stamp`] when it was last read or written here.
    file_mtime: Option<(u64, SystemTime)>,
    /// When last seen times were last written.
    saved_seen_at: u64,
    /// Some were seen since.
    seen_unsaved: bool,
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn random_hex(bytes: usize) -> String {
    let mut s = String::new();
    while s.len() < bytes * 2 {
        s.push_str(&uuid::Uuid::new_v4().simple().to_string());
    }
    s.truncate(bytes * 2);
    s
}

impl Devices {
    /// The devices kept in `file` (none if it is missing or unreadable). Lines of the
    /// older format (`SESSION UNTIL`) are read as devices logged in by a link.
    pub fn load(file: Option<PathBuf>) -> Devices {
        let now = now_secs();
        let (by_session, file_mtime) = match &file {
            Some(f) => read_file(f),
            None => (HashMap::new(), None),
        };
        Devices {
            state: Mutex::new(Kept {
                by_session,
                file_mtime,
                saved_seen_at: now,
                seen_unsaved: false,
            }),
            file,
            revoked: tokio::sync::watch::channel(0).0,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Kept> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        self.refresh(&mut state);
        state
    }

    /// Reads the file again if another process changed it since, keeping what this
    /// one knows of when its devices were last seen.
    fn refresh(&self, state: &mut Kept) {
        let Some(file) = &self.file else { return };
        let mtime = stamp(file);
        if mtime == state.file_mtime {
            return;
        }
        let (mut by_session, mtime) = read_file(file);
        for (session, device) in &mut by_session {
            if let Some(mine) = state.by_session.get(session)
                && mine.last_seen > device.last_seen
            {
                device.last_seen = mine.last_seen;
                device.from.clone_from(&mine.from);
            }
        }
        state.by_session = by_session;
        state.file_mtime = mtime;
    }
}

/// What tells one version of the file from another: its inode (each save renames a
/// new file into place) and modification time.
fn stamp(file: &std::path::Path) -> Option<(u64, SystemTime)> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(file).ok()?;
    Some((meta.ino(), meta.modified().ok()?))
}

/// The live devices of `file`, and its [`stamp`].
fn read_file(file: &std::path::Path) -> (HashMap<String, Device>, Option<(u64, SystemTime)>) {
    let now = now_secs();
    let mtime = stamp(file);
    let text = std::fs::read_to_string(file).unwrap_or_default();
    let by_session = text
        .lines()
        .filter_map(|line| {
            let held: Held = match serde_json::from_str(line) {
                Ok(h) => h,
                Err(_) => {
                    let (session, until) = line.split_once(' ')?;
                    Held {
                        session: session.to_string(),
                        device: Device {
                            id: random_hex(6),
                            name: "a browser".into(),
                            by: "link".into(),
                            since: now,
                            last_seen: now,
                            from: String::new(),
                            until: until.trim().parse().ok()?,
                        },
                    }
                }
            };
            (held.device.until > now && held.session.len() == 64)
                .then_some((held.session, held.device))
        })
        .collect();
    (by_session, mtime)
}

impl Devices {
    /// Logs a device in: its session id, for the cookie. `by` is how (`pair`,
    /// `link`), `name` what it is called, `from` where it is.
    pub fn start(&self, name: &str, by: &str, from: IpAddr) -> String {
        let session = random_hex(32);
        let now = now_secs();
        let mut state = self.lock();
        state.by_session.retain(|_, d| d.until > now);
        while state.by_session.len() >= MAX_DEVICES {
            let oldest = state
                .by_session
                .iter()
                .min_by_key(|(_, d)| d.last_seen)
                .map(|(s, _)| s.clone());
            match oldest {
                Some(s) => state.by_session.remove(&s),
                None => break,
            };
        }
        let device = Device {
            id: random_hex(6),
            name: crate::protocol::text::visible_line(name.trim())
                .chars()
                .take(80)
                .collect(),
            by: by.to_string(),
            since: now,
            last_seen: now,
            from: from.to_string(),
            until: now + SESSION_TTL.as_secs(),
        };
        state.by_session.insert(session.clone(), device);
        self.save(&mut state);
        session
    }

    /// The device holding session `session` (its id and name), if it is live; notes
    /// that it was seen now, from `from`.
    pub fn seen(&self, session: &str, from: IpAddr) -> Option<(String, String)> {
        let now = now_secs();
        let mut state = self.lock();
        let device = state.by_session.get_mut(session)?;
        if device.until <= now {
            return None;
        }
        let id = (device.id.clone(), device.name.clone());
        let from = from.to_string();
        if device.last_seen != now || device.from != from {
            device.last_seen = now;
            device.from = from;
            state.seen_unsaved = true;
            if now >= state.saved_seen_at + SAVE_SEEN_EVERY {
                self.save(&mut state);
            }
        }
        Some(id)
    }

    /// Whether `session` is live (without noting it as seen).
    pub fn valid(&self, session: &str) -> bool {
        let now = now_secs();
        self.lock()
            .by_session
            .get(session)
            .is_some_and(|d| d.until > now)
    }

    /// Ends the session `session` (its own logout).
    pub fn end(&self, session: &str) {
        let mut state = self.lock();
        if state.by_session.remove(session).is_some() {
            self.save(&mut state);
            drop(state);
            self.revoked.send_modify(|n| *n += 1);
        }
    }

    /// Whether the device `id` is logged in now.
    pub fn is_live(&self, id: &str) -> bool {
        let now = now_secs();
        self.lock()
            .by_session
            .values()
            .any(|d| d.id == id && d.until > now)
    }

    /// Ends the device `id` at once; false when there is none.
    pub fn revoke(&self, id: &str) -> bool {
        let mut state = self.lock();
        let before = state.by_session.len();
        state.by_session.retain(|_, d| d.id != id);
        let found = state.by_session.len() != before;
        if found {
            self.save(&mut state);
            drop(state);
            self.revoked.send_modify(|n| *n += 1);
        }
        found
    }

    /// The live devices, the one seen last first.
    pub fn list(&self) -> Vec<Device> {
        let now = now_secs();
        let mut all: Vec<Device> = self
            .lock()
            .by_session
            .values()
            .filter(|d| d.until > now)
            .cloned()
            .collect();
        all.sort_by(|a, b| b.last_seen.cmp(&a.last_seen).then(a.id.cmp(&b.id)));
        all
    }

    /// Changes whenever a device is revoked or logs out: a connection a device holds
    /// open looks again whether its session is still live.
    pub fn revocations(&self) -> tokio::sync::watch::Receiver<u64> {
        self.revoked.subscribe()
    }

    /// Best effort: a device not saved is forgotten at the next restart (logged out),
    /// a revocation not saved is said in the log.
    fn save(&self, state: &mut Kept) {
        use std::os::unix::fs::OpenOptionsExt;
        state.saved_seen_at = now_secs();
        state.seen_unsaved = false;
        let Some(file) = &self.file else { return };
        let mut text = String::new();
        for (session, device) in &state.by_session {
            let held = Held {
                session: session.clone(),
                device: device.clone(),
            };
            if let Ok(line) = serde_json::to_string(&held) {
                text.push_str(&line);
                text.push('\n');
            }
        }
        let tmp = file.with_extension(format!("tmp{}", std::process::id()));
        let written = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)
            .and_then(|mut f| std::io::Write::write_all(&mut f, text.as_bytes()))
            .and_then(|()| std::fs::rename(&tmp, file));
        match written {
            Ok(()) => state.file_mtime = stamp(file),
            Err(e) => {
                let _ = std::fs::remove_file(&tmp);
                tracing::warn!(
                    "could not save the dashboard's devices in {}: {e}",
                    file.display()
                );
            }
        }
    }
}

impl Drop for Devices {
    /// When devices were last seen, written as the server stops.
    fn drop(&mut self) {
        let mut state = self.lock();
        if state.seen_unsaved {
            self.save(&mut state);
        }
    }
}

/// What a browser's `User-Agent` says it is, in a few words ("Chrome on Android").
pub fn name_from_user_agent(ua: &str) -> String {
    let browser = [
        ("Edg/", "Edge"),
        ("OPR/", "Opera"),
        ("Firefox/", "Firefox"),
        ("Chrome/", "Chrome"),
        ("Safari/", "Safari"),
    ]
    .iter()
    .find(|(mark, _)| ua.contains(mark))
    .map_or("A browser", |(_, name)| name);
    let system = [
        ("Android", "Android"),
        ("iPhone", "iPhone"),
        ("iPad", "iPad"),
        ("Mac OS X", "macOS"),
        ("Windows", "Windows"),
        ("CrOS", "ChromeOS"),
        ("Linux", "Linux"),
    ]
    .iter()
    .find(|(mark, _)| ua.contains(mark))
    .map(|(_, name)| *name);
    match system {
        Some(s) => format!("{browser} on {s}"),
        None => browser.to_string(),
    }
}

/// `POST /api/v1/pairings`: a single-use link that logs one device in.
pub async fn pair(
    State(state): State<Arc<AppState>>,
    JsonBody(body): JsonBody<PairBody>,
) -> (StatusCode, Json<Pairing>) {
    let name: String = body
        .name
        .map(|n| {
            crate::protocol::text::visible_line(n.trim())
                .chars()
                .take(80)
                .collect()
        })
        .unwrap_or_default();
    let ttl = super::login::ON_REQUEST;
    let base = state
        .settings
        .public_url
        .as_deref()
        .map_or(state.base_url.as_str(), |u| u.trim_end_matches('/'));
    let code = state.logins.mint_pairing(ttl, &name);
    (
        StatusCode::CREATED,
        Json(Pairing {
            url: format!("{base}/?code={code}"),
            name,
            expires_in_seconds: ttl.as_secs(),
        }),
    )
}

/// `GET /api/v1/devices`: the devices logged in.
pub async fn list(State(state): State<Arc<AppState>>) -> Json<Vec<Device>> {
    Json(state.devices.list())
}

/// `DELETE /api/v1/devices/{id}`: ends a device's session at once.
pub async fn revoke(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
) -> Result<Json<serde_json::Value>, ApiError> {
    if state.devices.revoke(&id) {
        // Its pushes end with it.
        if let Err(e) = state
            .push
            .subscriptions
            .remove(|s| s.device.as_deref() == Some(&id))
        {
            tracing::warn!("push: the revoked device's subscriptions: {e:#}");
        }
        Ok(Json(serde_json::json!({ "revoked": id })))
    } else {
        Err(ApiError::not_found(format!(
            "no device {:?} is logged in (`hitl devices` lists them)",
            crate::protocol::text::visible_line(&id.chars().take(40).collect::<String>())
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn here() -> IpAddr {
        "127.0.0.1".parse().unwrap()
    }

    #[test]
    fn devices_are_listed_revoked_at_once_and_outlive_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("sessions");
        let devices = Devices::load(Some(file.clone()));
        let told = devices.revocations();
        let phone = devices.start("phone", "pair", "192.168.1.20".parse().unwrap());
        let laptop = devices.start("Chrome on Linux", "link", here());
        assert!(devices.valid(&phone) && devices.valid(&laptop));
        assert!(!devices.valid("nonsense"));
        let listed = devices.list();
        assert_eq!(listed.len(), 2);
        let (phone_id, name) = devices.seen(&phone, here()).unwrap();
        assert_eq!(name, "phone");
        let entry = devices
            .list()
            .into_iter()
            .find(|d| d.id == phone_id)
            .unwrap();
        assert_eq!((entry.name.as_str(), entry.by.as_str()), ("phone", "pair"));
        assert_eq!(entry.from, "127.0.0.1", "where it was seen last");

        assert!(devices.revoke(&phone_id));
        assert!(!devices.revoke(&phone_id), "once");
        assert!(told.has_changed().unwrap(), "open connections are told");
        assert!(!devices.valid(&phone) && devices.seen(&phone, here()).is_none());
        let again = Devices::load(Some(file.clone()));
        assert!(again.valid(&laptop) && !again.valid(&phone));
        again.end(&laptop);
        assert!(!again.valid(&laptop));
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn a_device_revoked_through_one_listener_is_refused_by_another_sharing_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("sessions");
        let one = Devices::load(Some(file.clone()));
        let other = Devices::load(Some(file.clone()));
        let phone = one.start("phone", "pair", here());
        assert!(other.valid(&phone), "read again once the file changed");
        let (id, _) = other.seen(&phone, here()).unwrap();
        assert!(one.revoke(&id));
        assert!(!other.valid(&phone) && other.seen(&phone, here()).is_none());
    }

    #[test]
    fn sessions_of_the_older_file_are_kept_as_devices() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("sessions");
        let session = "a".repeat(64);
        let until = now_secs() + 3600;
        std::fs::write(&file, format!("{session} {until}\n{} 1\n", "b".repeat(64))).unwrap();
        let devices = Devices::load(Some(file));
        assert!(devices.valid(&session));
        assert!(!devices.valid(&"b".repeat(64)), "expired");
        assert_eq!(devices.list().len(), 1);
    }

    #[test]
    fn a_browser_is_named_by_what_it_says_it_is() {
        let android = "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 \
                       (KHTML, like Gecko) Chrome/131.0 Mobile Safari/537.36";
        assert_eq!(name_from_user_agent(android), "Chrome on Android");
        let iphone = "Mozilla/5.0 (iPhone; CPU iPhone OS 18_0 like Mac OS X) \
                      AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.0 Mobile/15E148 Safari/604.1";
        assert_eq!(name_from_user_agent(iphone), "Safari on iPhone");
        assert_eq!(name_from_user_agent("curl/8.0"), "A browser");
    }
}
