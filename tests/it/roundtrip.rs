//! Hostile text round-trips exactly: quotes, backslashes, newlines, tabs, `$(…)`,
//! backticks, Cyrillic, emoji, and 100 KB of it, through `hitl ask` and through the
//! generated script with jq, with python3 only, and with neither.

use std::{
    fs,
    os::unix::fs::symlink,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::Duration,
};

use crate::support::{Project, wait_output};

const SPECIAL: &str = "He said \"stop\" \\ C:\\path\\n\nsecond line\tTAB $(rm -rf /) `id` ${HOME} \
                       'single' Привет, мир 🎉🚀 \r\nlast";

fn big_text() -> String {
    let mut s = String::new();
    while s.len() < 100 * 1024 {
        s.push_str(SPECIAL);
        s.push('\n');
    }
    s
}

/// Finds a tool on the real PATH (following pyenv-style shims to the real binary).
fn real_tool(name: &str) -> Option<PathBuf> {
    if name == "python3" {
        let out = Command::new("python3")
            .args(["-c", "import sys; print(sys.executable)"])
            .output()
            .ok()?;
        let p = String::from_utf8(out.stdout).ok()?.trim().to_string();
        return (!p.is_empty()).then(|| PathBuf::from(p));
    }
    let out = Command::new("bash")
        .args(["-c", &format!("command -v {name}")])
        .output()
        .ok()?;
    let p = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (!p.is_empty()).then(|| PathBuf::from(p))
}

/// A PATH holding only what the script needs, plus `extra` (jq, python3).
fn restricted_path(root: &Path, extra: &[&str]) -> PathBuf {
    let bin = root.join(format!("bin-{}", extra.join("-")));
    fs::create_dir_all(&bin).unwrap();
    let base = [
        "bash", "env", "dirname", "sed", "date", "ps", "mkdir", "mv", "rm", "sleep", "grep",
    ];
    for tool in base.iter().chain(extra) {
        let real = real_tool(tool).unwrap_or_else(|| panic!("{tool} is not installed"));
        let _ = symlink(&real, bin.join(tool));
    }
    bin
}

/// Asks `text` with `cmd`, checks the broker got it exactly, answers it with the same
/// text, and checks the asker printed exactly that.
fn round_trip(p: &Project, mut cmd: Command, text: &str) {
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Generous: the bash fallback escapes a big text character by character, which
    // takes seconds on a loaded machine (the suite runs tests side by side).
    let pending = p.wait_pending(1, Duration::from_secs(90));
    let q = &pending[0];
    assert_eq!(
        q["content"].as_str().unwrap(),
        text,
        "the question arrived changed"
    );
    let id = q["id"].as_str().unwrap();
    let out = p.run(&["answer", id, text]);
    assert!(out.status.success(), "{out:?}");
    let out = wait_output(child, Duration::from_secs(60));
    assert_eq!(
        out.status.code(),
        Some(0),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got = String::from_utf8(out.stdout).unwrap();
    assert_eq!(got.len(), text.len() + 1, "answer length differs");
    assert_eq!(got, format!("{text}\n"), "the answer arrived changed");
    p.wait_pending(0, Duration::from_secs(5));
}

#[test]
fn hitl_ask_keeps_every_byte() {
    let p = Project::new();
    let _l = p.listen(&["--ui", "none"]);
    for text in [
        SPECIAL.to_string(),
        "ctrl \u{1}\u{7f} chars".to_string(),
        big_text(),
    ] {
        let mut cmd = p.hitl();
        cmd.args(["ask", "--timeout", "60", "--", &text]);
        round_trip(&p, cmd, &text);
    }
}

#[test]
fn hitl_ask_reads_a_question_of_any_size_from_stdin() {
    use std::io::Write;
    let p = Project::new();
    let _l = p.listen(&["--ui", "none"]);
    // 400 KB: more than one command-line argument may hold.
    let text = big_text().repeat(4);
    let mut child = p
        .hitl()
        .args(["ask", "--timeout", "60", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(text.as_bytes()).unwrap();
    drop(stdin);
    let pending = p.wait_pending(1, Duration::from_secs(20));
    assert_eq!(pending[0]["content"].as_str().unwrap(), text);
    let id = pending[0]["id"].as_str().unwrap();
    assert!(p.run(&["answer", id, "got it"]).status.success());
    let out = wait_output(child, Duration::from_secs(20));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "got it\n");
}

#[test]
fn generated_script_with_jq_python_or_neither() {
    let p = Project::new();
    let _l = p.listen(&["--ui", "none"]);
    let script = p.dir.join("scripts/ask-human.sh");
    for readers in [&["jq"][..], &["python3"][..], &[][..]] {
        let path = restricted_path(p.tmp.path(), readers);
        for text in [
            SPECIAL.to_string(),
            "ctrl \u{1} char".to_string(),
            big_text(),
        ] {
            let mut cmd = Command::new(&script);
            cmd.arg(&text)
                .current_dir(&p.dir)
                .env_clear()
                .env("PATH", &path)
                .env("HITL_TIMEOUT", "60")
                .env("LANG", "C.UTF-8");
            round_trip(&p, cmd, &text);
        }
    }
}

#[test]
fn generated_script_execs_hitl_when_on_path() {
    let p = Project::new();
    let _l = p.listen(&["--ui", "none", "--auto-answer", "via hitl"]);
    let hitl_dir = crate::support::hitl_bin().parent().unwrap().to_path_buf();
    let path = format!("{}:{}", hitl_dir.display(), std::env::var("PATH").unwrap());
    let out = Command::new(p.dir.join("scripts/ask-human.sh"))
        .args(["Which?", "select", "Red,Green"])
        .current_dir(&p.dir)
        .env("PATH", path)
        .env("HITL_HOME", &p.home)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "Red\n");
    crate::support::eventually("history has the question", Duration::from_secs(5), || {
        p.history().first().is_some_and(|h| h["type"] == "select")
    });
    // hitl ask registers the agent; the bash fallback does not need to.
    assert!(p.helpers().join("agents").read_dir().unwrap().count() >= 1);
}

/// The generated script must run on macOS's bash 3.2, which this machine does not have:
/// it may use nothing newer. `bash -n` checks the syntax; the list below is what bash
/// 4 and 5 added that scripts commonly reach for.
#[test]
fn generated_script_uses_only_bash_3_2() {
    let script = hitl::cmd::init::ASK_HUMAN_SCRIPT;
    for newer in [
        "declare -A",
        "local -A",
        "typeset -A",
        "mapfile",
        "readarray",
        ",,}",
        "^^}",
        "|&",
        "&>>",
        "coproc",
        "EPOCHREALTIME",
        "EPOCHSECONDS",
        "BASHPID",
        "wait -n",
        "printf '%(",
        "${!",
        "[[ -v",
        "shopt -s globstar",
        "lastpipe",
        "declare -n",
        "local -n",
    ] {
        assert!(
            !script.contains(newer),
            "ask-human.sh uses {newer:?}, which bash 3.2 lacks"
        );
    }
    let out = Command::new("bash")
        .args(["-n", "-c", script])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
}
