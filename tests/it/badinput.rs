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
