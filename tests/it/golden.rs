//! Golden tests of `hitl hook`: recorded payloads of every event
//! (`tests/golden/hook/*.json`, in Claude Code's format) in, the exact stdout out
//! (`tests/golden/hook/out/CASE.SCENARIO.json`; empty: no opinion), for each
//! scenario: no listener (broker down), the human approving, denying, nobody
//! answering in time, and the policy's "ask" and "deny" when nobody answers. Every
//! run checks the exit status is 0 and stdout is that JSON and nothing else.
//!
//! `HITL_BLESS=1 cargo test --test it golden` rewrites the expected files from what
//! the hook printed (then review the diff).

use std::{
    path::{Path, PathBuf},
    process::Child,
    time::Duration,
};

use serde_json::Value;

use crate::support::{Project, checkout, wait_output};

/// The recorded payloads, by case name.
fn cases() -> Vec<(String, PathBuf)> {
    let dir = checkout().join("tests/golden/hook");
    let mut cases: Vec<(String, PathBuf)> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .map(|p| (p.file_stem().unwrap().to_string_lossy().into_owned(), p))
        .collect();
    cases.sort();
    assert!(cases.len() >= 14, "the recorded payloads: {cases:?}");
    cases
}

/// The `hitl hook` argument for a case (`pre-tool-use.read` → `pre-tool-use`).
fn event_of(case: &str) -> &str {
    case.split('.').next().unwrap()
}

/// Whether the case's event decides (and so may ask the human).
fn decides(case: &str) -> bool {
    matches!(
        event_of(case),
        "pre-tool-use" | "permission-request" | "elicitation"
    ) && case != "pre-tool-use.read"
}

/// The payload of a case in project `p`.
fn payload(p: &Project, path: &Path) -> String {
    std::fs::read_to_string(path)
        .unwrap()
        .replace("{{PROJECT}}", p.dir.to_str().unwrap())
}

fn spawn(p: &Project, case: &str, path: &Path) -> Child {
    use std::io::Write;
    let mut child = p
        .hitl()
        .args(["hook", event_of(case)])
        .env("CLAUDE_PROJECT_DIR", &p.dir)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(payload(p, path).as_bytes()).unwrap();
    drop(stdin);
    child
}

/// Checks (or, blessing, writes) what the hook printed for `case` in `scenario`.
fn check(p: &Project, case: &str, scenario: &str, out: std::process::Output) {
    assert!(
        out.status.success(),
        "{case} ({scenario}): exit {:?}, stderr {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout)
        .unwrap()
        .replace(p.dir.to_str().unwrap(), "{{PROJECT}}");
    if !stdout.is_empty() {
        // One JSON value and a newline: nothing else.
        let body = stdout.strip_suffix('\n').expect("ends with a newline");
        let v: Value = serde_json::from_str(body).unwrap_or_else(|e| {
            panic!("{case} ({scenario}): stdout is not one JSON value: {e}: {stdout:?}")
        });
        assert_eq!(
            v.to_string(),
            body,
            "{case} ({scenario}): compact, one line"
        );
    }
    let expected = checkout()
        .join("tests/golden/hook/out")
        .join(format!("{case}.{scenario}.json"));
    if std::env::var_os("HITL_BLESS").is_some() {
        std::fs::write(&expected, &stdout).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&expected).unwrap_or_else(|_| {
        panic!(
            "no golden file {} (run with HITL_BLESS=1 to make it)",
            expected.display()
        )
    });
    assert_eq!(
        stdout,
        want,
        "{case} ({scenario}) differs from {}",
        expected.display()
    );
}

/// Runs every case with no listener in a project whose config is `config`.
fn without_listener(scenario: &str, config: &str) {
    let p = Project::new();
    p.project_config(config);
    for (case, path) in cases() {
        let out = wait_output(spawn(&p, &case, &path), Duration::from_secs(30));
        check(&p, &case, scenario, out);
    }
}

#[test]
fn golden_broker_down() {
    without_listener("down", "");
}

#[test]
fn golden_broker_down_policy_ask_and_deny() {
    without_listener(
        "down-ask",
        "[hook]\nunanswered_dangerous = \"ask\"\nunanswered_other = \"deny\"\n",
    );
}

/// Runs every case against a listener; each question is answered with what
/// `answer(case)` says (`hitl` arguments after the id) by `hitl answer` as user
/// `golden`, or (`None`) left to time out.
fn with_listener(scenario: &str, config: &str, answer: impl Fn(&str) -> Option<Vec<&'static str>>) {
    let p = Project::new();
    p.project_config(config);
    let _listener = p.listen(&["--attended", "--http", "127.0.0.1:0"]);
    for (case, path) in cases() {
        let child = spawn(&p, &case, &path);
        // Left to time out (in a second), it may be gone before a look could see it.
        if decides(&case)
            && let Some(args) = answer(&case)
        {
            let q = p.wait_pending(1, Duration::from_secs(20)).remove(0);
            {
                let id = q["id"].as_str().unwrap();
                let mut cmd = p.hitl();
                let out = match args[0] {
                    "cancel" => cmd.args(["cancel", id]).args(&args[1..]),
                    _ => cmd.args(["answer", id]).args(&args),
                }
                .env("USER", "golden")
                .output()
                .unwrap();
                assert!(out.status.success(), "{case}: {out:?}");
            }
        }
        let out = wait_output(child, Duration::from_secs(30));
        check(&p, &case, scenario, out);
        p.wait_pending(0, Duration::from_secs(20));
    }
}

#[test]
fn golden_approved() {
    with_listener("allow", "", |case| {
        Some(match case {
            "pre-tool-use.ask-user-question" => vec!["SQLite", "1,2"],
            "elicitation.form" => vec!["Staging", "2", "no"],
            _ => vec!["--approve", "--comment", "go ahead"],
        })
    });
}

#[test]
fn golden_denied() {
    with_listener("deny", "", |case| {
        Some(match case {
            "pre-tool-use.ask-user-question" | "elicitation.form" => {
                vec!["cancel", "--reason", "not now"]
            }
            _ => vec!["--deny", "--comment", "not now"],
        })
    });
}

#[test]
fn golden_timeout() {
    with_listener(
        "timeout",
        "[hook]\ntimeout = 1\ntimeouts = { AskUserQuestion = 1 }\n",
        |_| None,
    );
}
