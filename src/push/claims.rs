//! Which requests one of the user's listeners has pushed already.
//!
//! Brokers that share a store (replicas of `hitl serve` on one PostgreSQL, several
//! `hitl listen` on the user's SQLite file) each queue every request made over HTTP,
//! and each one's escalation ladder reaches the phone; they also share the user's
//! push subscriptions, kept in the same folder. So a request is pushed by the first
//! of them to claim it here: a file named for the request, made exclusively. Its end
//! is pushed by whoever ends it, when anyone pushed it.
//!
//! Listeners on other machines keep their own subscriptions and claims: their
//! devices are theirs to push to.

use std::{
    fs,
    io::ErrorKind,
    os::unix::fs::{DirBuilderExt, OpenOptionsExt},
    path::PathBuf,
    sync::Mutex,
    time::{Duration, Instant, SystemTime},
};

use sha2::{Digest, Sha256};

use crate::protocol::Request;

/// A claim is kept this long: past the longest a request may wait (a week).
const KEEP: Duration = Duration::from_secs(8 * 24 * 3600);
/// Old claims are looked for at most this often.
const SWEEP_EVERY: Duration = Duration::from_secs(3600);

/// The claims in one folder (`pushed/` beside the subscriptions).
#[derive(Debug)]
pub struct Claims {
    dir: PathBuf,
    /// When old claims were last looked for.
    swept: Mutex<Option<Instant>>,
}

impl Claims {
    /// The claims kept in `dir`.
    pub fn new(dir: PathBuf) -> Claims {
        Claims {
            dir,
            swept: Mutex::new(None),
        }
    }

    /// Claims `request` for pushing: true for the first to ask. A claim that cannot
    /// be kept (the folder unwritable) says true: a request pushed twice is better
    /// than one never pushed.
    pub fn claim(&self, request: &Request) -> bool {
        self.sweep_now_and_then();
        let _ = fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir);
        match fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(self.dir.join(name(request)))
        {
            Ok(_) => true,
            Err(e) if e.kind() == ErrorKind::AlreadyExists => false,
            Err(e) => {
                tracing::warn!(
                    "push: cannot note in {} that a request was pushed ({e}); pushing it anyway",
                    self.dir.display()
                );
                true
            }
        }
    }

    /// Whether one of the user's listeners pushed `request`.
    pub fn claimed(&self, request: &Request) -> bool {
        self.dir.join(name(request)).exists()
    }

    fn sweep_now_and_then(&self) {
        let mut swept = self.swept.lock().unwrap_or_else(|e| e.into_inner());
        if swept.is_some_and(|t| t.elapsed() < SWEEP_EVERY) {
            return;
        }
        *swept = Some(Instant::now());
        self.sweep(KEEP);
    }

    /// Removes the claims made more than `age` ago.
    fn sweep(&self, age: Duration) {
        let Ok(entries) = fs::read_dir(&self.dir) else {
            return;
        };
        let now = SystemTime::now();
        for entry in entries.flatten() {
            let old = entry
                .metadata()
                .and_then(|m| m.modified())
                .is_ok_and(|t| now.duration_since(t).unwrap_or_default() >= age);
            if old {
                let _ = fs::remove_file(entry.path());
            }
        }
    }
}

/// A claim's file name: the request's id and when it was made (two stores may
/// both have a request `1`), hashed to a safe name.
fn name(request: &Request) -> String {
    let mut h = Sha256::new();
    h.update(request.id.as_bytes());
    h.update([0]);
    h.update(request.timestamp.to_string().as_bytes());
    h.finalize()[..16]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::Kind;

    #[test]
    fn a_request_is_claimed_once_and_old_claims_go() {
        let dir = tempfile::tempdir().unwrap();
        let claims = Claims::new(dir.path().join("pushed"));
        let one = Request::new("a", "A", Kind::Text, "x");
        let mut same_id_other_store = one.clone();
        same_id_other_store.timestamp = one.timestamp + jiff::SignedDuration::from_secs(1);
        assert!(!claims.claimed(&one));
        assert!(claims.claim(&one), "the first claim wins");
        assert!(!claims.claim(&one), "the second does not");
        assert!(claims.claimed(&one));
        assert!(claims.claim(&same_id_other_store), "another request");
        claims.sweep(Duration::ZERO);
        assert!(!claims.claimed(&one), "swept");
        // An unwritable folder: pushed anyway.
        let blocked = Claims::new(dir.path().join("file/pushed"));
        fs::write(dir.path().join("file"), "").unwrap();
        assert!(blocked.claim(&one));
        assert!(blocked.claim(&one));
    }
}
