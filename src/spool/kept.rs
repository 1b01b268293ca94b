//! Questions kept for an asker stopped from outside.
//!
//! A tool's timeout (Claude Code ends a Bash command after two minutes), a closed
//! terminal or a service stop ends `hitl ask` with SIGTERM or SIGHUP while its human
//! may still be reading. Instead of withdrawing, the asker leaves its question in
//! place and a marker in `.helpers/kept/` named by what was asked (agent, kind, text,
//! options, context: [`fingerprint`]); the broker keeps the question pending for the
//! grace period (`[ask] keep_when_stopped`). The same agent asking the same question
//! again finds the marker: the answer given meanwhile at once, or the same question
//! to wait on. A person's Ctrl-C still withdraws.

use std::{
    fs, io,
    path::{Path, PathBuf},
};

use super::{
    Spool,
    questions::{Loaded, load_question, read_answer},
    write_atomic,
};
use crate::protocol::{Answer, Request};

/// What a marker may hold: one id, a line.
const MARKER_MAX_BYTES: u64 = 256;

/// What the same agent asking the same thing finds.
#[derive(Debug)]
pub enum Found {
    /// The kept question was answered (or ended) meanwhile.
    Answered {
        /// The kept question.
        request: Box<Request>,
        /// Its answer.
        answer: Box<Answer>,
    },
    /// The kept question still waits: ask it again under its own id.
    Pending(Box<Request>),
}

/// Names what was asked, whoever asked it and whenever: the same agent asking the
/// same question with the same choices and context gets the same name.
pub fn fingerprint(r: &Request) -> String {
    let what = serde_json::json!([
        r.agent_id,
        r.kind,
        r.content,
        r.options,
        r.questions,
        r.context,
    ]);
    let namespace = uuid::Uuid::from_u128(0x6869_746c_6b65_7074_0000_0000_0000_0001);
    uuid::Uuid::new_v5(&namespace, what.to_string().as_bytes())
        .simple()
        .to_string()
}

/// The marker of a question asked as `r` was.
pub fn marker_path(spool: &Spool, r: &Request) -> PathBuf {
    spool.kept().join(fingerprint(r))
}

/// Leaves the marker saying `r` is kept for its agent's next ask.
pub fn leave(spool: &Spool, r: &Request) -> io::Result<()> {
    fs::create_dir_all(spool.kept())?;
    let bytes = format!("{}\n", r.id);
    write_atomic(
        &spool.tmp(),
        &marker_path(spool, r),
        bytes.as_bytes(),
        false,
    )
}

/// Whether `r`'s marker names `r` itself (its asker was stopped and meant to keep it).
pub fn is_kept(spool: &Spool, r: &Request) -> bool {
    marked_id(&marker_path(spool, r)).as_deref() == Some(r.id.as_str())
}

/// When `r`'s asker was stopped and kept it, if it did.
pub fn kept_since(spool: &Spool, r: &Request) -> Option<std::time::SystemTime> {
    let marker = marker_path(spool, r);
    if marked_id(&marker).as_deref() != Some(r.id.as_str()) {
        return None;
    }
    fs::symlink_metadata(&marker)
        .and_then(|m| m.modified())
        .ok()
}

/// Removes `r`'s marker if it still names `r`.
pub fn forget(spool: &Spool, r: &Request) {
    if is_kept(spool, r) {
        let _ = fs::remove_file(marker_path(spool, r));
    }
}

/// The kept question `r` asks again, if there is one: its marker names a question
/// file that asks exactly this (a marker is a hint, never trusted alone). A marker
/// whose question is gone is removed.
pub fn find(spool: &Spool, r: &Request) -> Option<Found> {
    let marker = marker_path(spool, r);
    let id = marked_id(&marker)?;
    let name = format!("{id}.json");
    let kept = match load_question(&spool.questions().join(&name), 1 << 24) {
        Loaded::Question(q) => Some(q.request),
        _ => None,
    };
    let Some(kept) = kept.filter(|k| k.id == id && fingerprint(k) == fingerprint(r)) else {
        let _ = fs::remove_file(&marker);
        return None;
    };
    let answer_path = spool.answers().join(&name);
    // An answer written before its question file was made answered another
    // question under the same id: a question file made later, to collect an old
    // approval, is not the kept one. The file's birth time, which no one can set, and
    // the answer's modification time, which only the listener (whose `answers/` it
    // is) can.
    let filled = fs::symlink_metadata(&answer_path).and_then(|m| m.modified());
    let born = fs::symlink_metadata(spool.questions().join(&name)).and_then(|m| m.created());
    if let (Ok(filled), Ok(born)) = (filled, born)
        && filled < born
    {
        let _ = fs::remove_file(&marker);
        return None;
    }
    match read_answer(&answer_path) {
        Some(answer) => Some(Found::Answered {
            request: Box::new(kept),
            answer: Box::new(answer),
        }),
        None => Some(Found::Pending(Box::new(kept))),
    }
}

/// Removes markers older than `grace` (and a minute, for the broker to withdraw
/// what they name first) whose question is not pending (`live`: the pending
/// questions' answer file names), with the question file of one answered meanwhile
/// that nobody came back for. Its answer stays as a tombstone. Returns how many went.
pub fn clear_expired(
    spool: &Spool,
    grace: std::time::Duration,
    live: &std::collections::HashSet<String>,
) -> usize {
    let Ok(entries) = fs::read_dir(spool.kept()) else {
        return 0;
    };
    let grace = grace + std::time::Duration::from_secs(60);
    let mut removed = 0;
    for e in entries.filter_map(Result::ok) {
        let old = e
            .metadata()
            .and_then(|m| m.modified())
            .is_ok_and(|t| t.elapsed().unwrap_or_default() > grace);
        if !old {
            continue;
        }
        let name = marked_id(&e.path()).map(|id| format!("{id}.json"));
        if name.as_ref().is_some_and(|n| live.contains(n)) {
            continue;
        }
        if let Some(name) = name
            && super::questions::answer_exists(&spool.answers().join(&name))
        {
            let _ = fs::remove_file(spool.questions().join(&name));
        }
        if fs::remove_file(e.path()).is_ok() {
            removed += 1;
        }
    }
    removed
}

fn marked_id(marker: &Path) -> Option<String> {
    let bytes = super::read_untrusted(marker, MARKER_MAX_BYTES).ok()?;
    let id = std::str::from_utf8(&bytes).ok()?.trim();
    crate::protocol::is_valid_id(id).then(|| id.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(content: &str) -> Request {
        let mut r: Request = serde_json::from_value(serde_json::json!({
            "version": 1, "id": uuid::Uuid::now_v7().simple().to_string(),
            "agent_id": "agent-1", "agent_name": "a", "timestamp": "2026-11-26T10:00:00Z",
            "type": "text", "content": content,
        }))
        .unwrap();
        r.timeout = Some(60);
        r
    }

    #[test]
    fn the_same_question_has_the_same_name_whenever_and_however_long_it_waits() {
        let (a, mut b) = (request("Deploy?"), request("Deploy?"));
        b.timeout = Some(3600);
        b.priority = crate::protocol::Priority::Urgent;
        assert_eq!(fingerprint(&a), fingerprint(&b));
        assert_ne!(fingerprint(&a), fingerprint(&request("Deploy now?")));
        b.agent_id = "agent-2".into();
        assert_ne!(fingerprint(&a), fingerprint(&b));
    }

    #[test]
    fn a_marker_is_found_only_with_its_question_and_names_the_answer() {
        let dir = tempfile::tempdir().unwrap();
        let spool = Spool::new(dir.path());
        spool.ensure_layout().unwrap();
        let kept = request("Deploy?");
        let again = request("Deploy?");
        leave(&spool, &kept).unwrap();
        // No question file: the marker is stale and goes.
        assert!(find(&spool, &again).is_none());
        assert!(!marker_path(&spool, &kept).exists());

        leave(&spool, &kept).unwrap();
        let q = spool.questions().join(format!("{}.json", kept.id));
        fs::write(&q, serde_json::to_vec(&kept).unwrap()).unwrap();
        assert!(matches!(find(&spool, &again), Some(Found::Pending(r)) if r.id == kept.id));
        assert!(is_kept(&spool, &kept));
        assert!(!is_kept(&spool, &again));

        let answer = Answer::from_reply(&kept, crate::protocol::Reply::Text("yes".into()), "test");
        fs::write(
            spool.answers().join(format!("{}.json", kept.id)),
            serde_json::to_vec(&answer).unwrap(),
        )
        .unwrap();
        assert!(
            matches!(find(&spool, &again), Some(Found::Answered { answer, .. }) if answer.content == "yes")
        );
        forget(&spool, &kept);
        assert!(find(&spool, &again).is_none());
    }

    #[test]
    fn an_old_answer_is_not_collected_by_a_question_file_written_after_it() {
        let dir = tempfile::tempdir().unwrap();
        let spool = Spool::new(dir.path());
        spool.ensure_layout().unwrap();
        // An approval of some earlier question, still there as a tombstone.
        let old = request("Clean the build?");
        let answer = Answer::from_reply(&old, crate::protocol::Reply::Text("yes".into()), "test");
        fs::write(
            spool.answers().join(format!("{}.json", old.id)),
            serde_json::to_vec(&answer).unwrap(),
        )
        .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        // Then a question file under its id asking something else, and its marker.
        let mut forged = request("Drop the database?");
        forged.id = old.id.clone();
        leave(&spool, &forged).unwrap();
        fs::write(
            spool.questions().join(format!("{}.json", forged.id)),
            serde_json::to_vec(&forged).unwrap(),
        )
        .unwrap();
        let mut again = request("Drop the database?");
        again.agent_id = forged.agent_id.clone();
        assert!(find(&spool, &again).is_none());
        assert!(!marker_path(&spool, &forged).exists());
    }
}
