//! `queue/question_queue.json`: each spool's queue as a file, for scripts and the
//! seed's tools that read it. Rewritten at most every `SNAPSHOT_EVERY`, and only for
//! spools whose queue changed.

use std::collections::HashSet;

use jiff::Timestamp;
use serde::Serialize;

use super::Broker;
use crate::protocol::{Kind, Priority, Request};

impl Broker {
    /// Rewrites the snapshot of each spool whose queue changed (every one if `force`).
    pub(super) fn flush_snapshots(&mut self, force: bool) {
        let mut wrote = false;
        for i in 0..self.files.spools.len() {
            if !(force || self.files.snapshot_dirty[i]) {
                continue;
            }
            self.files.snapshot_dirty[i] = false;
            wrote = true;
            let items: Vec<SnapshotItem> = self
                .requests
                .in_order()
                .filter(|e| e.spool().is_some_and(|p| p.spool == i))
                .map(|e| SnapshotItem::of(&e.pending.request))
                .collect();
            let agents: HashSet<&str> = items.iter().map(|q| q.agent_id).collect();
            let body = Snapshot {
                version: crate::protocol::VERSION,
                updated: Timestamp::now(),
                total_questions: items.len(),
                active_agents: agents.len(),
                queue: items,
            };
            let spool = &self.files.spools[i];
            let mut bytes = serde_json::to_vec_pretty(&body).unwrap_or_default();
            bytes.push(b'\n');
            if let Err(e) = spool.replace_file(&spool.queue_snapshot(), &bytes) {
                tracing::warn!("writing {}: {e}", spool.queue_snapshot().display());
            }
        }
        if wrote {
            release_free_memory();
        }
    }
}

/// Hands freed heap back to the system. A burst of thousands of questions leaves the
/// allocator holding pages that would otherwise count as the listener's memory for ever.
fn release_free_memory() {
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim only walks the allocator's own free lists.
    #[allow(unsafe_code)] // malloc_trim: glibc's, with no safe wrapper
    unsafe {
        nix::libc::malloc_trim(0);
    }
}

/// The snapshot, in seed 001's shape plus ids and priorities.
#[derive(Serialize)]
struct Snapshot<'a> {
    version: u32,
    updated: Timestamp,
    total_questions: usize,
    active_agents: usize,
    queue: Vec<SnapshotItem<'a>>,
}

/// One queued question in the snapshot; its text cut to 100 characters as in seed 001.
#[derive(Serialize)]
struct SnapshotItem<'a> {
    id: &'a str,
    agent_id: &'a str,
    agent_name: &'a str,
    #[serde(rename = "type")]
    kind: Kind,
    priority: Priority,
    content: std::borrow::Cow<'a, str>,
    timestamp: Timestamp,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    options: &'a [String],
}

impl<'a> SnapshotItem<'a> {
    fn of(r: &'a Request) -> SnapshotItem<'a> {
        let content = match r.content.char_indices().nth(100) {
            Some((cut, _)) => std::borrow::Cow::Owned(format!("{}...", &r.content[..cut])),
            None => std::borrow::Cow::Borrowed(r.content.as_str()),
        };
        SnapshotItem {
            id: &r.id,
            agent_id: &r.agent_id,
            agent_name: &r.agent_name,
            kind: r.kind,
            priority: r.priority,
            content,
            timestamp: r.timestamp,
            options: &r.options,
        }
    }
}
