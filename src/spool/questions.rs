//! Questions and answers as files: load one, list the pending ones, deliver an answer,
//! move a bad file aside. Shared by the broker and by the commands that work without a
//! broker (`hitl pending`, `hitl answer`, `hitl cancel`), so both follow one set of rules.

use std::{
    fs, io,
    path::{Path, PathBuf},
};

use serde_json::Value;

use super::{
    Created, Refusal, Spool, create_exclusive, is_ignored_name, read_untrusted,
    read_untrusted_file, write_atomic,
};
use crate::protocol::{
    Answer, ParseError, ParsedQuestion, Variant, is_valid_id, parse_question_at,
};

/// Default size limit for a question file.
pub use crate::protocol::DEFAULT_MAX_QUESTION_BYTES;

/// What reading a question file gave.
#[derive(Debug)]
pub enum Loaded {
    /// A question.
    Question(Box<ParsedQuestion>),
    /// The file is gone (withdrawn or renamed away).
    Gone,
    /// Not readable yet; it may still be being written.
    Partial(ParseError),
    /// Bad input, with the reason.
    Bad(String, Option<Vec<u8>>),
}

/// The file stem a question file's name gives: `x.json` → `x`.
pub fn stem(path: &Path) -> Option<&str> {
    path.file_name()?.to_str()?.strip_suffix(".json")
}

/// True for names in `questions/` that are questions (and not temp files).
pub fn is_question_name(name: &str) -> bool {
    name.ends_with(".json") && !is_ignored_name(name)
}

/// Reads and parses one question file.
pub fn load_question(path: &Path, limit: u64) -> Loaded {
    let Some(stem) = stem(path) else {
        return Loaded::Gone;
    };
    match read_untrusted_file(path, limit) {
        Ok((bytes, meta)) => match parse_question_at(&bytes, stem, modified_at(&meta)) {
            Ok(q) => Loaded::Question(Box::new(q)),
            Err(e) if e.maybe_partial() => Loaded::Partial(e),
            Err(e) => Loaded::Bad(e.to_string(), Some(bytes)),
        },
        Err(Refusal::Gone) => Loaded::Gone,
        Err(Refusal::Io(e)) => Loaded::Partial(ParseError::Json(e.to_string())),
        Err(r) => Loaded::Bad(r.to_string(), None),
    }
}

/// When a file was last written, as a timestamp (now if the file system cannot say).
fn modified_at(meta: &fs::Metadata) -> jiff::Timestamp {
    meta.modified()
        .ok()
        .and_then(|t| jiff::Timestamp::try_from(t).ok())
        .unwrap_or_else(jiff::Timestamp::now)
}

/// Every entry of `questions/` that may be a question, oldest name first.
pub fn question_paths(spool: &Spool) -> io::Result<Vec<PathBuf>> {
    let mut out: Vec<PathBuf> = fs::read_dir(spool.questions())?
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_str().is_some_and(is_question_name))
        .map(|e| e.path())
        .collect();
    out.sort();
    Ok(out)
}

/// Where the asker of `q` waits for its answer.
pub fn answer_path(spool: &Spool, q: &ParsedQuestion) -> PathBuf {
    spool.answers().join(q.answer_file_name())
}

/// The questions in the spool that have no answer yet, in queue order (most urgent,
/// then oldest, first). Unreadable files are skipped; the broker deals with them.
pub fn pending_questions(spool: &Spool, limit: u64) -> Vec<(PathBuf, ParsedQuestion)> {
    let mut out: Vec<(PathBuf, ParsedQuestion)> = question_paths(spool)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|p| match load_question(&p, limit) {
            Loaded::Question(q) if !answer_exists(&answer_path(spool, &q)) => Some((p, *q)),
            _ => None,
        })
        .collect();
    out.sort_by(|a, b| {
        b.1.request
            .priority
            .cmp(&a.1.request.priority)
            .then(a.1.request.timestamp.cmp(&b.1.request.timestamp))
    });
    out
}

/// Reads an answer file written by any responder.
pub fn read_answer(path: &Path) -> Option<Answer> {
    let bytes = read_untrusted(path, 16 << 20).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// Writes `answer` where the asker of `q` (whose file is `question`) reads it.
///
/// Of racing responders exactly one wins: the answer goes in with an exclusive create,
/// so a responder that comes second writes nothing and gets `AlreadyExists`. Askers
/// remove their question file when they have read the answer but leave the answer file
/// behind as the slot's tombstone (the listener clears old ones), so even a responder
/// that comes after the asker has gone finds the slot taken. A question already gone
/// before the create gets `AlreadyExists` as well. Then nudges the asker, if the
/// question says who it is (`hitl ask` waits to be woken: see [`super::wait`]), and
/// removes seed 000's queue marker.
pub fn deliver(
    spool: &Spool,
    question: &Path,
    q: &ParsedQuestion,
    answer: &Answer,
    durable: bool,
) -> io::Result<Created> {
    let dest = answer_path(spool, q);
    if fs::symlink_metadata(question).is_err() {
        return Ok(Created::AlreadyExists);
    }
    let bytes = q.variant.render_answer(answer);
    let mut outcome = create_exclusive(&spool.tmp(), &dest, &bytes, durable)?;
    if outcome == Created::AlreadyExists && clear_planted_answer(&dest) {
        outcome = create_exclusive(&spool.tmp(), &dest, &bytes, durable)?;
    }
    if outcome == Created::AlreadyExists && q.variant == Variant::ClaudeHelpers {
        // claude-helpers reuses one answer path per agent: an answer older than this
        // question belongs to the previous one and was never picked up.
        let stale = read_answer(&dest).is_none_or(|old| old.timestamp < q.request.timestamp);
        if stale {
            write_atomic(&spool.tmp(), &dest, &bytes, durable)?;
            outcome = Created::Created;
        }
    }
    if outcome == Created::Created {
        if let Some(asker) = q.request.asker {
            super::wait::nudge(asker.pid, asker.start_time);
        }
        if q.variant == Variant::Seed000 {
            let _ = fs::remove_file(spool.queue().join(format!("{}.queue", q.request.id)));
        }
    }
    Ok(outcome)
}

/// Whether a plain file (an answer) is at `path`; symlinks are not followed.
pub fn answer_exists(path: &Path) -> bool {
    fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_file())
}

/// Removes what is at an answer path if it is not a plain file: a symlink (to an
/// existing file it would pass for an answer; dangling, it would block every real
/// one), a FIFO or a socket. Only the broker and `hitl answer` write `answers/`, and
/// only plain files. Says whether something was removed.
pub fn clear_planted_answer(path: &Path) -> bool {
    let Ok(meta) = fs::symlink_metadata(path) else {
        return false;
    };
    let kind = meta.file_type();
    if kind.is_file() || kind.is_dir() {
        return false;
    }
    match fs::remove_file(path) {
        Ok(()) => {
            tracing::warn!(
                "removed {}: not a plain file, so not an answer (planted?)",
                path.display()
            );
            true
        }
        Err(e) => {
            tracing::warn!("{} is not an answer but stays: {e}", path.display());
            false
        }
    }
}

/// Answer files are kept this long after they are written, as tombstones.
pub const ANSWER_KEPT_FOR: std::time::Duration = std::time::Duration::from_secs(60 * 60);

/// Removes answer files older than [`ANSWER_KEPT_FOR`] (or `kept_for`, the grace of
/// a question kept for a stopped asker, when longer) whose question is not pending.
/// An answer whose question still waits is kept whatever its age.
pub fn clear_old_answers(
    spool: &Spool,
    live_answer_names: &std::collections::HashSet<String>,
    kept_for: std::time::Duration,
) -> usize {
    let keep = ANSWER_KEPT_FOR.max(kept_for + std::time::Duration::from_secs(60));
    let Ok(entries) = fs::read_dir(spool.answers()) else {
        return 0;
    };
    let mut removed = 0;
    for e in entries.filter_map(Result::ok) {
        let name = e.file_name().to_string_lossy().into_owned();
        if live_answer_names.contains(&name) {
            continue;
        }
        let old = e
            .metadata()
            .and_then(|m| m.modified())
            .map(|t| t.elapsed().unwrap_or_default() > keep)
            .unwrap_or(false);
        if old && fs::remove_file(e.path()).is_ok() {
            removed += 1;
        }
    }
    removed
}

/// Moves a bad spool entry to `rejected/` with a `.reason` file beside it, and when the
/// asker's answer path can still be worked out, answers it with the error so the asker
/// stops waiting. Returns where the entry went.
pub fn reject(
    spool: &Spool,
    path: &Path,
    reason: &str,
    bytes: Option<&[u8]>,
    durable: bool,
    claimed: &dyn Fn(&Path) -> bool,
) -> io::Result<PathBuf> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "unnamed".into());
    fs::create_dir_all(spool.rejected())?;
    let mut moved = spool.rejected().join(&name);
    if fs::symlink_metadata(&moved).is_ok() {
        moved = spool
            .rejected()
            .join(format!("{name}.{}", uuid::Uuid::now_v7().simple()));
    }
    // rename moves the entry itself: a symlink stays a symlink, a FIFO is never opened.
    fs::rename(path, &moved)?;
    let note = format!("{}: {reason}\n", jiff::Timestamp::now());
    let reason_path = PathBuf::from(format!("{}.reason", moved.display()));
    let _ = fs::write(reason_path, note);

    if let Some((variant, id, agent_id)) = answer_target(&name, bytes) {
        let answer = Answer::rejected(&id, &agent_id, reason);
        let dest = spool
            .answers()
            .join(variant.answer_file_name(&id, &agent_id));
        // A bad file may name the answer slot of a good question that waits: that
        // slot is its asker's, and a rejection there would end the wrong question.
        if claimed(&dest) {
            return Ok(moved);
        }
        let _ = create_exclusive(
            &spool.tmp(),
            &dest,
            &variant.render_answer(&answer),
            durable,
        );
    }
    Ok(moved)
}

/// Best effort: which answer file the writer of a bad question file waits for.
fn answer_target(name: &str, bytes: Option<&[u8]>) -> Option<(Variant, String, String)> {
    let stem = name.strip_suffix(".json")?;
    let obj = bytes
        .and_then(|b| serde_json::from_slice::<Value>(b).ok())
        .and_then(|v| v.as_object().cloned())
        .unwrap_or_default();
    let field = |k: &str| obj.get(k).and_then(Value::as_str).map(str::to_string);
    let variant = if obj.contains_key("prompt") {
        Variant::ClaudeHelpers
    } else if stem.starts_with("q_") {
        Variant::Seed001
    } else {
        Variant::Canonical
    };
    let id = field("id").unwrap_or_else(|| stem.to_string());
    let agent_id = field("agent_id").unwrap_or_else(|| match variant {
        Variant::ClaudeHelpers => stem.to_string(),
        _ => "unknown".to_string(),
    });
    // seed 001's answer name needs both ids from inside the file.
    if variant == Variant::Seed001 && (!obj.contains_key("id") || !obj.contains_key("agent_id")) {
        return None;
    }
    (is_valid_id(&id) && is_valid_id(&agent_id)).then_some((variant, id, agent_id))
}
