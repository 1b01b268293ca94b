//! Presence: whether a human can answer now.
//!
//! A UI that puts questions in front of a person (the terminal prompt while its input
//! is open, a dashboard whose stream is connected, `--attended`, the `--auto-answer`
//! rule) holds an [`Attendance`] for as long as it does. Hooks read the result from
//! `.listener.json` and step aside at once when nobody is there: Claude Code's own
//! prompt is better than a question nobody will see.
//!
//! Leaving is told a little late ([`ABSENCE_GRACE`]): a dashboard reloading its page
//! drops its stream and opens another within a few hundred milliseconds, and that must
//! not send every waiting hook back to Claude Code.

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use tokio::sync::watch;

/// How long the last human may be gone before nobody is said to be present.
pub const ABSENCE_GRACE: Duration = Duration::from_millis(400);

/// Who is present: each kind of attendant (`terminal`, `dashboard`, …) with how many
/// of it are attached, in name order. Empty: nobody.
pub type Present = Vec<(String, usize)>;

/// The presence of every UI of one broker. Cheap to clone.
#[derive(Clone)]
pub struct Presence {
    inner: Arc<Inner>,
}

struct Inner {
    counts: Mutex<BTreeMap<String, usize>>,
    told: watch::Sender<Present>,
}

impl Default for Presence {
    fn default() -> Presence {
        Presence::new()
    }
}

impl Presence {
    /// Nobody present yet.
    pub fn new() -> Presence {
        Presence {
            inner: Arc::new(Inner {
                counts: Mutex::default(),
                told: watch::channel(Vec::new()).0,
            }),
        }
    }

    /// Marks one `kind` of UI as attached until the returned guard is dropped.
    pub fn attend(&self, kind: &str) -> Attendance {
        *self
            .inner
            .counts
            .lock()
            .unwrap()
            .entry(kind.to_string())
            .or_default() += 1;
        self.tell();
        Attendance {
            presence: self.clone(),
            kind: kind.to_string(),
        }
    }

    /// Follows who is present, as told (a departure [`ABSENCE_GRACE`] late).
    pub fn watch(&self) -> watch::Receiver<Present> {
        self.inner.told.subscribe()
    }

    /// Who is present now, as told.
    pub fn now(&self) -> Present {
        self.watch().borrow().clone()
    }

    /// Tells the counts as they are now.
    fn tell(&self) {
        let now: Present = self
            .inner
            .counts
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|(k, n)| (k.clone(), *n))
            .collect();
        self.inner.told.send_if_modified(|told| {
            let changed = *told != now;
            *told = now;
            changed
        });
    }

    fn leave(&self, kind: &str) {
        if let Some(n) = self.inner.counts.lock().unwrap().get_mut(kind) {
            *n = n.saturating_sub(1);
        }
        // Told at once when others are still there; the last one's leaving only once
        // nobody came back within the grace.
        let presence = self.clone();
        let still_there = self.inner.counts.lock().unwrap().values().any(|n| *n > 0);
        match tokio::runtime::Handle::try_current() {
            Ok(rt) if !still_there => {
                rt.spawn(async move {
                    tokio::time::sleep(ABSENCE_GRACE).await;
                    presence.tell();
                });
            }
            _ => presence.tell(),
        }
    }
}

/// One UI attached; dropped when it leaves.
pub struct Attendance {
    presence: Presence,
    kind: String,
}

impl Drop for Attendance {
    fn drop(&mut self) {
        self.presence.leave(&self.kind);
    }
}

/// `present` in words: "terminal, dashboard (2)"; "nobody".
pub fn describe(present: &[(String, usize)]) -> String {
    if present.is_empty() {
        return "nobody".to_string();
    }
    present
        .iter()
        .map(|(k, n)| match n {
            1 => k.clone(),
            n => format!("{k} ({n})"),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn the_last_one_leaving_is_told_after_the_grace_and_a_return_cancels_it() {
        let presence = Presence::new();
        let mut seen = presence.watch();
        assert!(presence.now().is_empty());
        let a = presence.attend("dashboard");
        let b = presence.attend("dashboard");
        assert_eq!(presence.now(), vec![("dashboard".to_string(), 2)]);
        drop(a);
        assert_eq!(presence.now(), vec![("dashboard".to_string(), 1)]);
        drop(b);
        // Still told as present: a reload reconnects within the grace.
        tokio::time::sleep(ABSENCE_GRACE / 2).await;
        assert_eq!(presence.now(), vec![("dashboard".to_string(), 1)]);
        let back = presence.attend("dashboard");
        tokio::time::sleep(ABSENCE_GRACE).await;
        assert_eq!(presence.now(), vec![("dashboard".to_string(), 1)]);
        drop(back);
        seen.borrow_and_update();
        tokio::time::sleep(ABSENCE_GRACE * 2).await;
        assert!(seen.has_changed().unwrap());
        assert!(presence.now().is_empty());
        assert_eq!(describe(&presence.now()), "nobody");
    }
}
