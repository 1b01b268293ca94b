//! Mailboxes (seed 003): the KEY=VALUE files hitl writes are read back exactly by
//! our reader, by bash's `source` and by dash's `.`.

use std::process::Command;

use hitl::mailbox::keyvalue::KeyValues;
use proptest::prelude::*;

/// A value with what breaks naive quoting: quotes of both kinds, `$`, backticks,
/// backslashes, newlines, blanks, `#`, and Unicode.
fn value() -> impl Strategy<Value = String> {
    proptest::collection::vec(
        prop_oneof![
            Just("'".to_string()),
            Just("\"".to_string()),
            Just("$".to_string()),
            Just("$(echo pwned)".to_string()),
            Just("`id`".to_string()),
            Just("\\".to_string()),
            Just("\n".to_string()),
            Just(" ".to_string()),
            Just("\t".to_string()),
            Just("#".to_string()),
            Just("'\\''".to_string()),
            "[a-zA-Z0-9 ]{1,8}",
            "\\PC{1,4}",
        ],
        0..12,
    )
    .prop_map(|parts| parts.concat())
}

/// What `shell` makes of `file`'s `K` (`source` or `.` then `printf %s "$K"`).
fn read_by(shell: &str, dir: &std::path::Path) -> String {
    let load = if shell == "bash" { "source" } else { "." };
    let out = Command::new(shell)
        .current_dir(dir)
        .arg("-c")
        .arg(format!("{load} ./kv; printf %s \"$K\""))
        .output()
        .unwrap_or_else(|e| panic!("{shell}: {e}"));
    assert!(out.status.success(), "{shell}: {out:?}");
    String::from_utf8(out.stdout).expect("UTF-8 back")
}

#[test]
fn written_values_are_read_back_exactly_by_us_bash_and_dash() {
    let dir = tempfile::tempdir().unwrap();
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: 200,
        ..ProptestConfig::default()
    });
    runner
        .run(&(value(), value()), |(k, other)| {
            let mut kv = KeyValues::new();
            kv.set("FIRST", other.clone());
            kv.set("K", k.clone());
            kv.set("LAST", "end");
            let text = kv.to_text().unwrap();
            std::fs::write(dir.path().join("kv"), &text).unwrap();
            let ours = KeyValues::parse(&text);
            prop_assert_eq!(ours.get("K"), Some(k.as_str()), "ours, on {:?}", text);
            prop_assert_eq!(ours.get("FIRST"), Some(other.as_str()));
            prop_assert_eq!(ours.get("LAST"), Some("end"));
            prop_assert_eq!(
                read_by("bash", dir.path()),
                k.clone(),
                "bash, on {:?}",
                text
            );
            prop_assert_eq!(read_by("dash", dir.path()), k, "dash, on {:?}", text);
            Ok(())
        })
        .unwrap();
}
