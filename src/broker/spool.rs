//! The file side of the broker: question files in each project's `.helpers/`, read
//! as they appear, and their answer files, the spool's way back.
//!
//! A question is queued once its file parses (a file still being written gets
//! [`PARTIAL_GRACE`] to become whole; a bad one is moved to `rejected/` and its asker
//! told where possible). Its answer is recorded in history as *delivering* and only
//! then written with an exclusive create, so of racing responders exactly one wins
//! and a broker killed in between delivers the same answer at its next start. The
//! `journal/` hard link keeps a question's text until history has its end.

use std::{
    collections::{HashMap, HashSet},
    path::{Path, PathBuf},
    sync::Arc,
    time::Instant,
};

use jiff::Timestamp;

use super::{
    Answer, Broker, PARTIAL_GRACE, PendingRequest, Place, RespondError, Status, StoreMsg, StoreOp,
    TIMEOUT_GRACE,
    way_back::{Delivered, Delivery, Ending, WayBack},
};
use crate::{
    agents,
    protocol::{Origin, ParsedQuestion, Request, Variant},
    spool::{
        Created, Spool, kept,
        questions::{self, Loaded},
        watch::SpoolEvent,
    },
    store::{Ack, Undelivered},
};

/// Where a spool question lives.
pub(super) struct SpoolPlace {
    /// Its spool's index.
    pub(super) spool: usize,
    /// Its spool.
    dir: Arc<Spool>,
    /// Whether its answer file is fsynced (`[spool] fsync`).
    fsync: bool,
    pub(super) question_path: PathBuf,
    /// The question's link in `journal/`, removed once history has its end.
    journal_path: Option<PathBuf>,
    pub(super) answer_path: PathBuf,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Folder {
    Questions,
    Answers,
    /// Hook events for the activity feed (see `broker::activity`).
    Activity,
}

/// A question file that does not parse yet: when it was last seen to change, and how.
struct Partial {
    give_up: Instant,
    size_and_mtime: Option<(u64, std::time::SystemTime)>,
}

impl Partial {
    /// Notes another look at `path`; a change starts the grace period again.
    fn look(&mut self, path: &Path, now: Instant) {
        let seen = size_and_mtime(path);
        if seen != self.size_and_mtime {
            self.size_and_mtime = seen;
            self.give_up = now + PARTIAL_GRACE;
        }
    }
}

fn size_and_mtime(path: &Path) -> Option<(u64, std::time::SystemTime)> {
    let m = std::fs::symlink_metadata(path).ok()?;
    Some((m.len(), m.modified().ok()?))
}

/// The broker's file-side state.
pub(super) struct Files {
    pub(super) spools: Vec<Arc<Spool>>,
    folders: HashMap<PathBuf, (usize, Folder)>,
    by_question: HashMap<PathBuf, u64>,
    by_answer: HashMap<PathBuf, u64>,
    /// Question files that do not parse yet, still open for writing.
    partial: HashMap<PathBuf, Partial>,
    /// Question files found already answered (their asker has not picked the answer up
    /// yet), with their modification time: the periodic rescan skips them while they
    /// stay as they are, instead of reading and recording them every time.
    settled: HashMap<PathBuf, std::time::SystemTime>,
    /// Answers recorded as being delivered when the last broker died: delivered again,
    /// not asked again. Keyed by (project, id, asked_at).
    undelivered: HashMap<(String, String, String), Undelivered>,
    /// Which spools' queue snapshots need rewriting.
    pub(super) snapshot_dirty: Vec<bool>,
    /// Questions taken since the last tick, for the agent registry.
    registry_notes: Vec<(usize, Request)>,
    /// What hook events said of their agents since the last tick.
    pub(super) reports: Vec<super::activity::Report>,
    /// Which spools' spare files for askers may need making again (see
    /// [`crate::spool::write_atomic_spared`]).
    spares_low: Vec<bool>,
    /// Activity notes that arrived since the last tick (see
    /// [`Broker::note_arrived`]).
    pub(super) notes: Vec<(usize, PathBuf)>,
}

impl Files {
    pub(super) fn new(spools: Vec<Spool>, undelivered: Vec<Undelivered>) -> Files {
        let mut folders = HashMap::new();
        for (i, s) in spools.iter().enumerate() {
            folders.insert(s.questions(), (i, Folder::Questions));
            folders.insert(s.answers(), (i, Folder::Answers));
            folders.insert(s.activity(), (i, Folder::Activity));
        }
        Files {
            snapshot_dirty: vec![true; spools.len()],
            spares_low: vec![true; spools.len()],
            notes: Vec::new(),
            spools: spools.into_iter().map(Arc::new).collect(),
            folders,
            by_question: HashMap::new(),
            by_answer: HashMap::new(),
            partial: HashMap::new(),
            settled: HashMap::new(),
            registry_notes: Vec::new(),
            reports: Vec::new(),
            undelivered: undelivered
                .into_iter()
                .map(|u| (u.key.clone(), u))
                .collect(),
        }
    }

    /// A question that left the queue: no file of it is watched any more.
    pub(super) fn forget(&mut self, place: &SpoolPlace) {
        self.by_question.remove(&place.question_path);
        self.by_answer.remove(&place.answer_path);
        self.snapshot_dirty[place.spool] = true;
    }

    fn folder_of(&self, path: &Path) -> Option<(usize, Folder)> {
        self.folders.get(path.parent()?).copied()
    }
}

impl Broker {
    pub(super) fn on_spool_event(&mut self, ev: SpoolEvent) {
        match ev {
            SpoolEvent::Rescan => self.rescan(),
            SpoolEvent::Changed { path, closed } => match self.files.folder_of(&path) {
                Some((spool, Folder::Questions)) => {
                    self.files.spares_low[spool] = true;
                    self.question_changed(spool, path, closed)
                }
                Some((_, Folder::Answers)) => self.answer_appeared(&path),
                Some((spool, Folder::Activity)) => {
                    self.files.spares_low[spool] = true;
                    self.note_arrived(spool, path)
                }
                None => {}
            },
            SpoolEvent::Removed { path } => match self.files.folder_of(&path) {
                Some((_, Folder::Questions)) => self.question_removed(&path),
                Some((_, Folder::Answers | Folder::Activity)) | None => {}
            },
        }
    }

    fn question_changed(&mut self, spool: usize, path: PathBuf, closed: bool) {
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            return;
        };
        if !questions::is_question_name(name) {
            return;
        }
        if let Some(&seq) = self.files.by_question.get(&path) {
            self.question_rewritten(seq, &path);
            return;
        }
        match questions::load_question(&path, self.opts.max_question_bytes) {
            Loaded::Question(q) => {
                self.files.partial.remove(&path);
                self.admit_file(spool, path, *q);
            }
            Loaded::Gone => {
                self.files.partial.remove(&path);
            }
            Loaded::Partial(e) => {
                if closed {
                    // The writer closed the file and it is still not whole JSON.
                    self.files.partial.remove(&path);
                    self.reject(spool, &path, &e.to_string(), None);
                } else {
                    let now = Instant::now();
                    self.files
                        .partial
                        .entry(path.clone())
                        .or_insert_with(|| Partial {
                            give_up: now + PARTIAL_GRACE,
                            size_and_mtime: None,
                        })
                        .look(&path, now);
                }
            }
            Loaded::Bad(reason, bytes) => {
                self.files.partial.remove(&path);
                self.reject(spool, &path, &reason, bytes.as_deref());
            }
        }
    }

    fn admit_file(&mut self, spool: usize, path: PathBuf, q: ParsedQuestion) {
        let s = self.files.spools[spool].clone();
        let answer_path = questions::answer_path(&s, &q);
        if let Some(&other) = self.files.by_answer.get(&answer_path) {
            let other_path = self
                .requests
                .get(other)
                .and_then(|e| e.spool())
                .map(|p| p.question_path.display().to_string())
                .unwrap_or_default();
            let reason = format!(
                "id {:?} is already pending in {other_path}; ids must be unique",
                q.request.id
            );
            self.reject(spool, &path, &reason, None);
            return;
        }
        let project = s.project().display().to_string();
        questions::clear_planted_answer(&answer_path);
        if questions::answer_exists(&answer_path) {
            let existing = questions::read_answer(&answer_path);
            let stale = q.variant == Variant::ClaudeHelpers
                && existing
                    .as_ref()
                    .is_none_or(|a| a.timestamp < q.request.timestamp);
            if !stale {
                // Answered while no broker ran, or by another responder: record it.
                let status = existing
                    .as_ref()
                    .map_or(Status::Answered, |a| a.status.into());
                self.record(StoreOp::Finished {
                    project,
                    request: Box::new(q.request),
                    variant: q.variant,
                    status,
                    answer: existing.map(Box::new),
                    reason: None,
                });
                if let Some(mtime) = modified(&path) {
                    self.files.settled.insert(path, mtime);
                }
                return;
            }
        }
        self.record(StoreOp::Asked {
            project: project.clone(),
            request: Box::new(q.request.clone()),
            variant: q.variant,
        });
        // The registry is the broker's to keep, off the asker's path: noted with the
        // next tick's batch.
        self.files.registry_notes.push((spool, q.request.clone()));
        let journal_path = s.journal().join(format!(
            "{}.{}.json",
            questions::stem(&path).unwrap_or("q"),
            q.request.timestamp.as_millisecond()
        ));
        let journal_path = match std::fs::hard_link(&path, &journal_path) {
            Ok(()) => {
                // First seen (a question replayed after a restart is journaled already):
                // a hook's call goes in the activity feed.
                if q.request.origin == Origin::Hook {
                    self.note_asked_call(spool, &q.request);
                }
                Some(journal_path)
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Some(journal_path),
            Err(e) => {
                tracing::warn!("journaling {}: {e}", path.display());
                None
            }
        };
        let deadline = q
            .request
            .deadline()
            .and_then(|d| d.checked_add(TIMEOUT_GRACE).ok());
        let key = (
            project,
            q.request.id.clone(),
            q.request.timestamp.to_string(),
        );
        let place = Place::Spool(SpoolPlace {
            spool,
            dir: s.clone(),
            fsync: self.opts.durable,
            question_path: path.clone(),
            journal_path,
            answer_path: answer_path.clone(),
        });
        let pending = self.enqueue(s.project().to_path_buf(), None, q, place, deadline);
        self.files.by_question.insert(path, pending.seq);
        self.files.by_answer.insert(answer_path, pending.seq);
        self.files.snapshot_dirty[spool] = true;
        if let Some(u) = self.files.undelivered.remove(&key) {
            // Chosen before the last broker died, never delivered: deliver it now.
            self.start_answer(pending.seq, u.answer, true, None);
            return;
        }
        self.announce_queued(pending);
    }

    /// An answer file appeared: a responder outside this broker (`hitl answer`, another
    /// broker) answered, unless it is our own write finishing.
    fn answer_appeared(&mut self, path: &Path) {
        let Some(&seq) = self.files.by_answer.get(path) else {
            return;
        };
        if self.requests.get(seq).is_some_and(|e| e.answering) {
            return;
        }
        // Only a plain file is an answer; anything else planted there is removed.
        if questions::clear_planted_answer(path) || !questions::answer_exists(path) {
            return;
        }
        let existing = questions::read_answer(path);
        let status = existing
            .as_ref()
            .map_or(Status::Answered, |a| a.status.into());
        self.finish(seq, status, existing, None);
    }

    fn question_removed(&mut self, path: &Path) {
        self.files.partial.remove(path);
        let Some(&seq) = self.files.by_question.get(path) else {
            return;
        };
        let Some(entry) = self.requests.get(seq) else {
            return;
        };
        if entry.answering {
            return;
        }
        if let Some(answer_path) = entry
            .spool()
            .map(|p| p.answer_path.clone())
            .filter(|p| questions::answer_exists(p))
        {
            self.answer_appeared(&answer_path);
            return;
        }
        self.remove_seed_marker(seq);
        self.finish(
            seq,
            Status::Withdrawn,
            None,
            Some("the asker withdrew the question".into()),
        );
    }

    /// A pending question's file was put in place again: its agent asking it again
    /// after its asker was stopped (`hitl ask`, see [`crate::spool::kept`]) takes it
    /// over: the new asker, and its time to wait. Anything else is ignored, as ever.
    fn question_rewritten(&mut self, seq: u64, path: &Path) {
        let Some(entry) = self.requests.get(seq).filter(|e| !e.answering) else {
            return;
        };
        let Loaded::Question(q) = questions::load_question(path, self.opts.max_question_bytes)
        else {
            return;
        };
        let old = &entry.pending.request;
        if q.request.id != old.id
            || q.request.asker == old.asker
            || kept::fingerprint(&q.request) != kept::fingerprint(old)
        {
            return;
        }
        let deadline = q
            .request
            .deadline()
            .and_then(|d| d.checked_add(TIMEOUT_GRACE).ok());
        self.requests.set_deadline(seq, deadline);
        tracing::info!("question {} asked again by its agent", q.request.id);
        self.update_pending(seq, |p| {
            p.request.asker = q.request.asker;
            p.request.timeout = q.request.timeout;
            p.request.metadata = q.request.metadata;
            p.kept_until = None;
        });
    }

    /// Keeps a spool question whose asker died, when the asker was stopped from
    /// outside and left its marker ([`crate::spool::kept`]): pending until the grace
    /// after the marker was left. False when it is not to be kept.
    pub(super) fn keep_for_its_asker(&mut self, seq: u64) -> bool {
        let grace = self.opts.keep_when_stopped;
        let Some((entry, place)) = self
            .requests
            .get(seq)
            .and_then(|e| e.spool().map(|p| (e, p)))
        else {
            return false;
        };
        if grace.is_zero() || std::fs::symlink_metadata(&place.question_path).is_err() {
            return false;
        }
        let spool = &self.files.spools[place.spool];
        let Some(since) = kept::kept_since(spool, &entry.pending.request) else {
            return false;
        };
        let until = Timestamp::try_from(since + grace).unwrap_or_else(|_| Timestamp::now());
        self.update_pending(seq, |p| p.kept_until = Some(until));
        true
    }

    /// Withdraws a kept question nobody asked again within the grace.
    pub(super) fn withdraw_kept(&mut self, seq: u64) {
        if let Some((e, p)) = self
            .requests
            .get(seq)
            .and_then(|e| e.spool().map(|p| (e, p)))
        {
            kept::forget(&self.files.spools[p.spool], &e.pending.request);
        }
        self.withdraw_question_file(seq);
        let secs = self.opts.keep_when_stopped.as_secs();
        let grace = match secs {
            0..120 => format!("{secs} s"),
            _ => format!("{} min", secs.div_ceil(60)),
        };
        self.finish(
            seq,
            Status::Withdrawn,
            None,
            Some(format!(
                "its asker was stopped and did not ask again within {grace}"
            )),
        );
    }

    /// Removes a spool question's file (and seed 000's queue marker) because its
    /// asker is gone; nothing for other origins.
    pub(super) fn withdraw_question_file(&mut self, seq: u64) {
        if let Some(p) = self.requests.get(seq).and_then(|e| e.spool()) {
            let _ = std::fs::remove_file(&p.question_path);
        }
        self.remove_seed_marker(seq);
    }

    fn remove_seed_marker(&self, seq: u64) {
        if let Some(e) = self.requests.get(seq)
            && e.pending.variant == Variant::Seed000
            && let Some(p) = e.spool()
        {
            let marker = self.files.spools[p.spool]
                .queue()
                .join(format!("{}.queue", e.pending.request.id));
            let _ = std::fs::remove_file(marker);
        }
    }

    /// Records `op` and, once it is committed, removes the question's journal link.
    fn record_then_forget(&mut self, op: StoreOp, journal: Option<PathBuf>) {
        let Some(journal) = journal else {
            self.record(op);
            return;
        };
        // On the writer, once committed: unlinking is cheaper than a task's wake-up.
        let forget = Ack::Then(Box::new(move |committed| {
            if committed.is_some() {
                let _ = std::fs::remove_file(journal);
            }
        }));
        self.write(StoreMsg {
            op,
            ack: Some(forget),
        });
    }

    fn reject(&mut self, spool: usize, path: &Path, reason: &str, bytes: Option<&[u8]>) {
        let s = &self.files.spools[spool];
        let claimed = |answer: &Path| self.files.by_answer.contains_key(answer);
        match questions::reject(s, path, reason, bytes, self.opts.durable, &claimed) {
            Ok(dest) => {
                tracing::warn!(
                    "rejected {}: {reason} (moved to {})",
                    path.display(),
                    dest.display()
                );
                let stem = questions::stem(path).unwrap_or("invalid");
                let id = if crate::protocol::is_valid_id(stem) {
                    stem
                } else {
                    "invalid"
                };
                let preview: String = bytes
                    .map(|b| String::from_utf8_lossy(&b[..b.len().min(200)]).into_owned())
                    .unwrap_or_default();
                let request = Request {
                    id: id.to_string(),
                    ..Request::new("unknown", "unknown", crate::protocol::Kind::Text, preview)
                };
                self.stats.total_errors += 1;
                self.record(StoreOp::Finished {
                    project: s.project().display().to_string(),
                    request: Box::new(request),
                    variant: Variant::Canonical,
                    status: Status::Rejected,
                    answer: None,
                    reason: Some(format!("{reason} (file kept as {})", dest.display())),
                });
            }
            Err(e) => tracing::error!("could not move bad file {} aside: {e}", path.display()),
        }
    }

    /// Reads every spool again: after start and whenever the kernel dropped events.
    pub(super) fn rescan(&mut self) {
        for spool in 0..self.files.spools.len() {
            let paths = match questions::question_paths(&self.files.spools[spool]) {
                Ok(p) => p,
                Err(e) => {
                    tracing::error!(
                        "reading {}: {e}",
                        self.files.spools[spool].questions().display()
                    );
                    continue;
                }
            };
            let present: HashSet<&PathBuf> = paths.iter().collect();
            let gone: Vec<PathBuf> = self
                .files
                .by_question
                .keys()
                .filter(|p| {
                    self.files.folder_of(p).is_some_and(|(s, _)| s == spool) && !present.contains(p)
                })
                .cloned()
                .collect();
            for p in gone {
                self.question_removed(&p);
            }
            let folder = self.files.spools[spool].questions();
            self.files
                .settled
                .retain(|p, _| p.parent() != Some(folder.as_path()) || present.contains(p));
            for p in paths.clone() {
                if self
                    .files
                    .settled
                    .get(&p)
                    .is_some_and(|t| modified(&p) == Some(*t))
                {
                    continue;
                }
                self.question_changed(spool, p, false);
            }
        }
        let answered: Vec<PathBuf> = self
            .files
            .by_answer
            .keys()
            .filter(|p| questions::answer_exists(p))
            .cloned()
            .collect();
        for p in answered {
            self.answer_appeared(&p);
        }
        self.rescan_activity();
    }

    /// Replays the journal: questions a previous broker took whose end history never
    /// recorded (it was killed). Each is recorded as asked; one whose question file is
    /// still there is queued again by the rescan that follows; one whose asker already
    /// has its answer is recorded from the answer file; one that is simply gone was
    /// withdrawn while no broker ran.
    pub(super) fn replay_journal(&mut self) {
        for spool in 0..self.files.spools.len() {
            let s = self.files.spools[spool].clone();
            let Ok(entries) = std::fs::read_dir(s.journal()) else {
                continue;
            };
            let asked: HashSet<(u64, u64)> = questions::question_paths(&s)
                .unwrap_or_default()
                .iter()
                .filter_map(|p| file_id(p))
                .collect();
            for e in entries.filter_map(Result::ok) {
                let link = e.path();
                let Loaded::Question(q) =
                    questions::load_question(&link, self.opts.max_question_bytes)
                else {
                    let _ = std::fs::remove_file(&link);
                    continue;
                };
                let q = *q;
                let project = s.project().display().to_string();
                self.record(StoreOp::Asked {
                    project: project.clone(),
                    request: Box::new(q.request.clone()),
                    variant: q.variant,
                });
                if file_id(&link).is_some_and(|id| asked.contains(&id)) {
                    // The rescan queues it again and links it anew; this link goes.
                    let _ = std::fs::remove_file(&link);
                    continue;
                }
                let answer = questions::read_answer(&questions::answer_path(&s, &q))
                    .filter(|a| a.id == q.request.id);
                let (status, reason) = match &answer {
                    Some(a) => (Status::from(a.status), None),
                    None => (
                        Status::Withdrawn,
                        Some("the asker withdrew the question while no broker ran".to_string()),
                    ),
                };
                let op = StoreOp::Finished {
                    project,
                    request: Box::new(q.request),
                    variant: q.variant,
                    status,
                    answer: answer.map(Box::new),
                    reason,
                };
                self.record_then_forget(op, Some(link));
            }
        }
    }

    /// Answers recorded as `delivering` whose question is gone from the spool were
    /// delivered and picked up before the last broker died: record them as finished.
    pub(super) fn settle_undelivered(&mut self) {
        for (_, u) in std::mem::take(&mut self.files.undelivered) {
            self.record(StoreOp::Finished {
                project: u.key.0,
                request: Box::new(u.request),
                variant: u.variant,
                status: u.answer.status.into(),
                answer: Some(Box::new(u.answer)),
                reason: None,
            });
        }
    }

    pub(super) fn retry_partials(&mut self, now: Instant) {
        if self.files.partial.is_empty() {
            return;
        }
        let paths: Vec<(PathBuf, Instant)> = self
            .files
            .partial
            .iter_mut()
            .map(|(p, partial)| {
                partial.look(p, now);
                (p.clone(), partial.give_up)
            })
            .collect();
        for (path, give_up) in paths {
            let Some((spool, _)) = self.files.folder_of(&path) else {
                self.files.partial.remove(&path);
                continue;
            };
            // Unchanged for the whole grace period, the file counts as closed: reject it
            // if it is still bad.
            self.question_changed(spool, path, now >= give_up);
        }
    }

    /// Makes the spare files askers have taken again, on the blocking pool: called
    /// once the spool is quiet, so that making them (most of a file's cost on a busy
    /// disk) is on nobody's path.
    pub(super) fn refill_spares(&mut self) {
        let low: Vec<PathBuf> = self
            .files
            .spares_low
            .iter_mut()
            .zip(&self.files.spools)
            .filter_map(|(low, s)| std::mem::take(low).then(|| s.tmp()))
            .collect();
        if low.is_empty() {
            return;
        }
        tokio::task::spawn_blocking(move || {
            for tmp in low {
                crate::spool::keep_named_spares(&tmp);
            }
        });
    }

    /// Notes the questions taken since the last tick in the agent registry, in one
    /// job on the blocking pool.
    pub(super) fn flush_registry_notes(&mut self) {
        if self.files.registry_notes.is_empty() {
            return;
        }
        // One write per agent per batch: an agent asking a hundred questions a tick
        // costs one record write, not a hundred.
        let mut by_agent: Vec<((usize, String), Vec<Request>)> = Vec::new();
        for (spool, request) in std::mem::take(&mut self.files.registry_notes) {
            let key = (spool, request.agent_id.clone());
            match by_agent.iter_mut().find(|(k, _)| *k == key) {
                Some((_, requests)) => requests.push(request),
                None => by_agent.push((key, vec![request])),
            }
        }
        let spools = self.files.spools.clone();
        tokio::task::spawn_blocking(move || {
            for ((spool, _), requests) in by_agent {
                if let Err(e) = agents::note_questions(&spools[spool], &requests) {
                    tracing::debug!("agent registry not updated: {e:#}");
                }
            }
        });
    }

    /// Keeps the registry current and clears old answer tombstones.
    pub(super) fn sweep_agents(&self) {
        for (i, spool) in self.files.spools.iter().enumerate() {
            let here = || {
                self.requests
                    .iter()
                    .filter_map(|e| e.spool().filter(|p| p.spool == i).map(|p| (e, p)))
            };
            let live: HashSet<String> = here()
                .filter_map(|(_, p)| {
                    p.answer_path
                        .file_name()
                        .map(|n| n.to_string_lossy().into_owned())
                })
                .collect();
            let waiting: HashSet<String> = here()
                .map(|(e, _)| e.pending.request.agent_id.clone())
                .collect();
            let spool = spool.clone();
            let grace = self.opts.keep_when_stopped;
            tokio::task::spawn_blocking(move || {
                agents::sweep(&spool, &waiting);
                kept::clear_expired(&spool, grace, &live);
                questions::clear_old_answers(&spool, &live, grace);
                crate::spool::clear_stale_temp(&spool.tmp());
                crate::spool::clear_stale_temp(&spool.slots());
            });
        }
    }
}

/// A file's modification time, if it exists.
/// A spool question's way back: its answer file. History records the answer as
/// *delivering* first (so a broker that dies before the file is written delivers
/// the same answer at its next start instead of asking the human again, and what
/// the human said survives a crash whether or not the spool is fsynced), and the
/// file is created the moment that commits, exclusively: of racing responders
/// exactly one wins.
impl WayBack for SpoolPlace {
    fn delivery(&self, pending: &PendingRequest, answer: &Answer, record: bool) -> Delivery {
        let spool = self.dir.clone();
        let (question, answer_path) = (self.question_path.clone(), self.answer_path.clone());
        let fsync = self.fsync;
        // A copy for the writer, made only now: 10,000 pending requests should not
        // cost two copies each.
        let parsed = ParsedQuestion {
            request: pending.request.clone(),
            variant: pending.variant,
        };
        let record = record.then(|| StoreOp::Delivering {
            project: pending.project.display().to_string(),
            request: Box::new(parsed.request.clone()),
            variant: parsed.variant,
            answer: Box::new(answer.clone()),
        });
        let answer = answer.clone();
        let deliver = move |committed: Option<crate::store::Outcome>| {
            if committed.is_none() {
                // The asker is waiting: deliver anyway. The start-up reconciliation
                // records any answer file history missed.
                tracing::warn!(
                    "history did not record the answer to {} before delivery",
                    parsed.request.id
                );
            }
            let created = questions::deliver(&spool, &question, &parsed, &answer, fsync);
            // The asker has been nudged: now, off its path, the next answer's file.
            crate::spool::keep_spare(&spool.answers());
            match created {
                Ok(Created::Created) => Delivered::Done,
                // Another responder's file is there: theirs ends it.
                Ok(Created::AlreadyExists) => match questions::read_answer(&answer_path) {
                    Some(theirs) => Delivered::Lost {
                        by: theirs.responded_by.clone(),
                        theirs: Some(Box::new(theirs)),
                    },
                    None => Delivered::Gone,
                },
                Err(e) => Delivered::Failed(RespondError::Io(e.to_string())),
            }
        };
        Delivery {
            record,
            deliver: Box::new(deliver),
        }
    }

    /// Its end, always (the *delivering* record is not one); once that commits, the
    /// question's journal link goes.
    fn end_record(&self, pending: &PendingRequest, end: &Ending<'_>) -> Option<StoreMsg> {
        let op = StoreOp::Finished {
            project: pending.project.display().to_string(),
            request: Box::new(pending.request.clone()),
            variant: pending.variant,
            status: end.status,
            answer: end.answer.cloned().map(Box::new),
            reason: end.reason.clone(),
        };
        // On the writer, once committed: unlinking is cheaper than a task's wake-up.
        let ack = self.journal_path.clone().map(|journal| {
            Ack::Then(Box::new(move |committed| {
                if committed.is_some() {
                    let _ = std::fs::remove_file(journal);
                }
            }))
        });
        Some(StoreMsg { op, ack })
    }
}

fn modified(path: &Path) -> Option<std::time::SystemTime> {
    std::fs::symlink_metadata(path)
        .and_then(|m| m.modified())
        .ok()
}

/// A file's identity (device, inode): a hard link has its original's.
fn file_id(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(path)
        .ok()
        .map(|m| (m.dev(), m.ino()))
}
