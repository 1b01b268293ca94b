//! Bad input in the spool gets a clear reason, is moved to `.helpers/rejected/`, its
//! asker is answered where its answer path can be worked out, and the listener keeps
//! serving everyone else.

use std::{fs, os::unix::fs::symlink, path::Path, time::Duration};

use serde_json::Value;

use crate::support::{Project, eventually};

fn rejected_reason(helpers: &Path, name: &str) -> Option<String> {
    fs::read_to_string(helpers.join("rejected").join(format!("{name}.reason"))).ok()
}

#[test]
fn bad_files_are_rejected_with_reasons_and_the_rest_are_served() {
    let p = Project::new();
    let q = p.helpers().join("questions");
    let _l = p.listen(&["--ui", "none", "--auto-answer", "fine"]);

    let mut huge = b"{\"content\":\"".to_vec();
    huge.extend(std::iter::repeat_n(b'x', 10 * 1024 * 1024));
    huge.extend(b"\"}");
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "malformed.json",
            b"{\"content\": \"half".to_vec(),
            "not valid JSON",
        ),
        ("empty.json", Vec::new(), "empty"),
        (
            "binary.json",
            vec![0xff, 0xfe, 0x00, 0x01, 0x80, 0x7b],
            "not valid JSON",
        ),
        ("array.json", b"[1,2,3]".to_vec(), "expected a JSON object"),
        (
            "wrongtype.json",
            br#"{"content":"ok","timeout":"soon"}"#.to_vec(),
            "timeout",
        ),
        (
            "notext.json",
            br#"{"content":5}"#.to_vec(),
            "no question text",
        ),
        (
            "badopts.json",
            br#"{"content":"a","type":"select","options":"a,b"}"#.to_vec(),
            "options",
        ),
        (
            "escape.json",
            br#"{"id":"../../etc/passwd","content":"hi"}"#.to_vec(),
            "bad id",
        ),
        ("huge.json", huge, "limit"),
    ];
    for (name, bytes, _) in &cases {
        fs::write(q.join(name), bytes).unwrap();
    }
    symlink("/etc/passwd", q.join("link.json")).unwrap();
    fs::create_dir(q.join("folder.json")).unwrap();
    nix::unistd::mkfifo(&q.join("fifo.json"), nix::sys::stat::Mode::S_IRWXU).unwrap();

    // Meanwhile a good question is answered.
    let out = p.run(&["ask", "--timeout", "30", "still there?"]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "fine\n");

    let helpers = p.helpers();
    for (name, _, why) in &cases {
        eventually(&format!("{name} rejected"), Duration::from_secs(10), || {
            rejected_reason(&helpers, name).is_some()
        });
        let reason = rejected_reason(&helpers, name).unwrap();
        assert!(reason.contains(why), "{name}: {reason}");
        assert!(!q.join(name).exists(), "{name} still in questions/");
    }
    for (name, why) in [
        ("link.json", "symbolic link"),
        ("folder.json", "folder"),
        ("fifo.json", "FIFO"),
    ] {
        eventually(&format!("{name} rejected"), Duration::from_secs(10), || {
            rejected_reason(&helpers, name).is_some()
        });
        assert!(rejected_reason(&helpers, name).unwrap().contains(why));
    }
    // The symlink was moved, not followed.
    assert!(
        fs::symlink_metadata(helpers.join("rejected/link.json"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert!(fs::metadata("/etc/passwd").is_ok());

    // Askers whose answer path can be derived are told, in their own format.
    let told: Value =
        serde_json::from_slice(&fs::read(helpers.join("answers/wrongtype.json")).unwrap()).unwrap();
    assert_eq!(told["status"], "cancelled");
    assert_eq!(told["cancelled"], true);
    assert!(
        told["content"]
            .as_str()
            .unwrap()
            .starts_with("ERROR: question rejected"),
        "{told}"
    );
    // The escaping id cannot be answered at the path it names.
    assert!(
        !helpers.join("answers/../../etc/passwd").exists() || fs::metadata("/etc/passwd").is_ok()
    );

    // History records the rejections.
    eventually("history records rejections", Duration::from_secs(5), || {
        p.history()
            .iter()
            .filter(|h| h["status"] == "rejected")
            .count()
            >= cases.len() + 3
    });
}

#[test]
fn files_written_in_pieces_are_retried_not_rejected() {
    use std::io::Write;
    let p = Project::new();
    let _l = p.listen(&["--ui", "none"]);
    let path = p.helpers().join("questions/slow.json");
    let mut f = fs::File::create(&path).unwrap();
    f.write_all(b"{\"content\": \"written ").unwrap();
    f.flush().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    f.write_all(b"slowly\", \"agent_id\": \"slowpoke\"}")
        .unwrap();
    drop(f);
    let pending = p.wait_pending(1, Duration::from_secs(5));
    assert_eq!(pending[0]["content"], "written slowly");
    assert!(!p.helpers().join("rejected/slow.json").exists());
}

#[test]
fn a_writer_that_pauses_mid_write_is_waited_for() {
    use std::io::Write;
    let p = Project::new();
    let _l = p.listen(&["--ui", "none"]);
    let path = p.helpers().join("questions/pause.json");
    let mut f = fs::File::create(&path).unwrap();
    f.write_all(b"{\"content\": \"after a ").unwrap();
    f.flush().unwrap();
    // Longer than the broker once waited for a file to become whole (2 s).
    std::thread::sleep(Duration::from_millis(3000));
    assert!(!p.helpers().join("rejected/pause.json").exists());
    f.write_all(b"pause\"}").unwrap();
    drop(f);
    let pending = p.wait_pending(1, Duration::from_secs(5));
    assert_eq!(pending[0]["content"], "after a pause");
}

#[test]
fn a_bad_file_never_answers_another_questions_slot() {
    let p = Project::new();
    let q = p.helpers().join("questions");
    let _l = p.listen(&["--ui", "none"]);
    // A legitimate seed-001 question, waiting for a_agentA_123.json.
    fs::write(
        q.join("q_agentA_123_abcd.json"),
        r#"{"id":"123","agent_id":"agentA","content":"Deploy?","timestamp":"2026-01-01T00:00:00Z"}"#,
    )
    .unwrap();
    p.wait_pending(1, Duration::from_secs(5));
    // A malformed file naming the same slot.
    fs::write(
        q.join("q_agentA_123_evil.json"),
        r#"{"id":"123","agent_id":"agentA","content":5}"#,
    )
    .unwrap();
    eventually("the bad file is rejected", Duration::from_secs(5), || {
        rejected_reason(&p.helpers(), "q_agentA_123_evil.json").is_some()
    });
    assert!(!p.helpers().join("answers/a_agentA_123.json").exists());
    let pending = p.pending();
    assert_eq!(pending.len(), 1, "{pending:?}");
    assert_eq!(pending[0]["content"], "Deploy?");
}

#[test]
fn a_symlink_planted_at_an_answer_path_is_no_answer() {
    let p = Project::new();
    let a = p.helpers().join("answers");
    let q = p.helpers().join("questions");
    let outside = p.tmp.path().join("outside.json");
    fs::write(
        &outside,
        r#"{"version":1,"id":"x","status":"answered","content":"forged"}"#,
    )
    .unwrap();
    // Planted before the questions come: one to a file, one dangling.
    symlink(&outside, a.join("linked.json")).unwrap();
    symlink(p.tmp.path().join("nowhere"), a.join("dangling.json")).unwrap();
    let _l = p.listen(&["--ui", "none"]);
    for id in ["linked", "dangling"] {
        fs::write(
            q.join(format!("{id}.json")),
            format!(r#"{{"version":1,"id":"{id}","content":"{id}?"}}"#),
        )
        .unwrap();
    }
    let pending = p.wait_pending(2, Duration::from_secs(5));
    assert_eq!(pending.len(), 2, "both are queued: {pending:?}");
    // Planted while the question waits: not an answer either.
    symlink(&outside, a.join("dangling.json")).unwrap_or(());
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(p.pending().len(), 2);
    // Real answers reach both.
    for id in ["linked", "dangling"] {
        let out = p.run(&["answer", id, "real"]);
        assert!(out.status.success(), "{out:?}");
        let answer: Value =
            serde_json::from_slice(&fs::read(a.join(format!("{id}.json"))).unwrap()).unwrap();
        assert_eq!(answer["content"], "real");
    }
    p.wait_pending(0, Duration::from_secs(5));
    assert!(
        fs::read_to_string(&outside).unwrap().contains("forged"),
        "the target is untouched"
    );
}

#[test]
fn a_question_without_a_timestamp_keeps_its_age_across_restarts() {
    let p = Project::new();
    let path = p.helpers().join("questions/undated.json");
    fs::write(&path, r#"{"version":1,"id":"undated","content":"when?"}"#).unwrap();
    let old = std::time::SystemTime::now() - Duration::from_secs(600);
    fs::File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_modified(old)
        .unwrap();
    let mut dates = Vec::new();
    for _ in 0..2 {
        let l = p.listen(&["--ui", "none"]);
        let pending = p.wait_pending(1, Duration::from_secs(5));
        let asked: jiff::Timestamp = pending[0]["timestamp"].as_str().unwrap().parse().unwrap();
        let age = jiff::Timestamp::now().duration_since(asked).as_secs();
        assert!(
            age >= 590,
            "dated by its file, not by the read: {pending:?}"
        );
        dates.push(asked);
        drop(l);
    }
    assert_eq!(dates[0], dates[1]);
    let history = p.history();
    let rows = history.iter().filter(|r| r["id"] == "undated").count();
    assert_eq!(rows, 1, "one history row, not one per start: {history:#?}");
}
