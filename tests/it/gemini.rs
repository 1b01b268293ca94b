//! Gemini CLI, the real one (npm's `@google/gemini-cli`, the version tools/test-all
//! installs), offline against a stand-in of the Gemini API (tests/it/gemini_api.py)
//! in a project wired by `hitl init --gemini`: a dangerous command is asked and
//! denied with a comment that reaches the model's next request, a harmless one asks
//! nobody, and an approved one runs.

use std::{
    path::PathBuf,
    process::{Command, Stdio},
    time::Duration,
};

use serde_json::Value;

use crate::support::{
    ModelApi, Project, WRITE_SUMMARY, doctor_check, eventually, headless_task, wait_output,
};

/// The Gemini CLI version these tests run (tools/test-all installs it).
const GEMINI_VERSION: &str = "0.61.0";

/// Gemini CLI's entry script (set `HITL_TEST_GEMINI` to use another), and node to
/// run it; `None` (skip) outside CI only.
fn gemini_script() -> Option<PathBuf> {
    crate::support::installed_agent(
        "HITL_TEST_GEMINI",
        &format!("gemini/{GEMINI_VERSION}/package/bundle/gemini.js"),
        &["node"],
    )
}

const KEY: &str = "test-gemini-key";

/// The stand-in Gemini API, playing `script`.
fn gemini_api(script: &Value) -> ModelApi {
    ModelApi::start("gemini_api.py", &[KEY, &script.to_string()])
}

/// A home as a user has it: an API key chosen, and the project's folder trusted.
fn user_home(p: &Project) -> PathBuf {
    let home = p.dir.parent().unwrap().join("gemini-home");
    std::fs::create_dir_all(home.join(".gemini")).unwrap();
    std::fs::write(
        home.join(".gemini/settings.json"),
        r#"{"security":{"auth":{"selectedType":"gemini-api-key"}}}"#,
    )
    .unwrap();
    std::fs::write(
        home.join(".gemini/trustedFolders.json"),
        serde_json::json!({ p.dir.display().to_string(): "TRUST_FOLDER" }).to_string(),
    )
    .unwrap();
    home
}

#[test]
fn a_wired_gemini_asks_the_human_about_what_it_cannot_prove_harmless() {
    let Some(gemini) = gemini_script() else {
        return;
    };
    let p = Project::new();
    let script = serde_json::json!([
        { "exec": "git push --force origin main" },
        { "exec": "ls" },
        { "exec": "echo approved > approved.txt" },
        { "say": "done" },
    ]);
    let api = gemini_api(&script);
    let home = user_home(&p);
    let out = p.run(&["init", "--gemini"]);
    assert!(out.status.success(), "{out:?}");
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("hooked   .gemini/settings.json"), "{said}");
    // `hitl doctor` finds them wired, in a folder Gemini trusts.
    let doctor = || {
        let mut doctor = p.hitl();
        doctor.env("HOME", &home).env_remove("GEMINI_CLI_HOME");
        doctor_check(doctor, "gemini")
    };
    let check = doctor();
    assert_eq!(check["status"], "ok", "{check}");

    let _listener = p.listen(&["--attended", "--ui", "none"]);
    let run = Command::new("node")
        .arg(&gemini)
        .args([
            "-p",
            "Push the release, then list and mark it.",
            "--approval-mode",
            "yolo",
        ])
        .args(["-m", "gemini-2.5-flash"])
        .current_dir(&p.dir)
        .env("HOME", &home)
        .env("GEMINI_API_KEY", KEY)
        .env("GOOGLE_GEMINI_BASE_URL", &api.base)
        .env("HITL_HOME", &p.home)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();

    // The force push is asked, by a Gemini agent; denied with a comment.
    let q = p.wait_pending(1, Duration::from_secs(90)).remove(0);
    assert!(
        q["content"].as_str().unwrap().contains("git push --force"),
        "{q}"
    );
    assert!(
        q["agent_id"].as_str().unwrap().starts_with("gemini-"),
        "{q}"
    );
    let id = q["id"].as_str().unwrap().to_string();
    let answered = p.run(&[
        "answer",
        &id,
        "--deny",
        "--comment",
        "push to a branch, not main",
    ]);
    assert!(answered.status.success(), "{answered:?}");
    // The echo into a file is asked too (`ls` was not): approved.
    let mut q = Value::Null;
    eventually("the second question", Duration::from_secs(90), || {
        q = p.pending().into_iter().next().unwrap_or(Value::Null);
        q["content"]
            .as_str()
            .is_some_and(|c| c.contains("approved.txt"))
    });
    let answered = p.run(&["answer", q["id"].as_str().unwrap(), "--approve"]);
    assert!(answered.status.success(), "{answered:?}");
    let out = wait_output(run, Duration::from_secs(120));
    assert!(out.status.success(), "gemini -p: {out:?}");

    // The denial's comment reached the model in the request after the push.
    let requests = api.requests();
    assert!(requests.len() >= 4, "{requests:#?}");
    let second = requests[1].to_string();
    assert!(second.contains("push to a branch, not main"), "{second}");
    assert!(
        p.dir.join("approved.txt").exists(),
        "the approved command ran"
    );
    let history = p.history();
    assert_eq!(
        history.len(),
        2,
        "only two questions (ls asked nobody): {history:#?}"
    );

    // The folder no longer trusted: `hitl doctor` says Gemini runs none of them.
    std::fs::write(home.join(".gemini/trustedFolders.json"), "{}").unwrap();
    let check = doctor();
    assert_eq!(check["status"], "warn", "{check}");
    assert!(
        check["summary"]
            .as_str()
            .unwrap()
            .contains("does not trust this folder"),
        "{check}"
    );

    // Taken out again: the project's Gemini settings gone with hitl's hooks.
    let out = p.run(&["init", "--gemini", "--remove"]);
    assert!(out.status.success(), "{out:?}");
    assert!(!p.dir.join(".gemini/settings.json").exists());
}

/// `hitl run gemini`: Gemini CLI inside the boundary keeps its state in `~/.gemini`
/// (its history, its projects), but a command the human approved still cannot
/// change its settings (its hooks are there), and the model reads why.
#[test]
fn hitl_run_starts_gemini_which_keeps_its_state_but_not_its_settings() {
    let Some(gemini) = gemini_script() else {
        return;
    };
    if !crate::boundary::require_boundary() {
        return;
    }
    let p = Project::new();
    let script = serde_json::json!([
        { "exec": "ls" },
        { "exec": "echo '{}' > ~/.gemini/settings.json" },
        { "say": "done" },
    ]);
    let api = gemini_api(&script);
    let home = user_home(&p);
    let settings = home.join(".gemini/settings.json");
    let theirs = std::fs::read_to_string(&settings).unwrap();
    let out = p.run(&["init", "--gemini"]);
    assert!(out.status.success(), "{out:?}");
    let _listener = p.listen(&["--attended", "--ui", "none"]);
    let run = p
        .hitl()
        .args(["run", "--", "node"])
        .arg(&gemini)
        .args(["-p", "List, then note it.", "--approval-mode", "yolo"])
        .args(["-m", "gemini-2.5-flash"])
        .env("HOME", &home)
        .env_remove("GEMINI_CLI_HOME")
        .env_remove("XDG_RUNTIME_DIR")
        .env("GEMINI_API_KEY", KEY)
        .env("GOOGLE_GEMINI_BASE_URL", &api.base)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // `ls` asked nobody; the change to Gemini's settings is asked, and approved.
    let q = p.wait_pending(1, Duration::from_secs(90)).remove(0);
    assert!(
        q["content"].as_str().unwrap().contains("settings.json"),
        "{q}"
    );
    assert!(
        q["agent_id"].as_str().unwrap().starts_with("gemini-"),
        "{q}"
    );
    let answered = p.run(&["answer", q["id"].as_str().unwrap(), "--approve"]);
    assert!(answered.status.success(), "{answered:?}");
    let out = wait_output(run, Duration::from_secs(120));
    assert!(out.status.success(), "hitl run gemini -p: {out:?}");
    let requests = api.requests();
    let last = requests.last().unwrap().to_string();
    assert!(last.contains("Read-only file system"), "{requests:#?}");
    assert_eq!(std::fs::read_to_string(&settings).unwrap(), theirs);
    assert!(
        home.join(".gemini/projects.json").is_file(),
        "its state was kept"
    );
}

/// A Gemini CLI task through the task runner, inside the boundary: `--command
/// "gemini -p --approval-mode yolo"` runs it headless once per task, the task's text
/// on its stdin; the task ends on its summary file, which the model (a stand-in)
/// writes with a shell command; the result has it and the tokens Gemini reported,
/// and `peek` shows what it did.
#[test]
fn a_gemini_task_runs_headless_and_its_summary_is_read() {
    let Some(gemini) = gemini_script() else {
        return;
    };
    let p = Project::new();
    let workspace = p.dir.parent().unwrap().join("ws");
    std::fs::create_dir_all(&workspace).unwrap();
    let script = serde_json::json!([{ "exec": WRITE_SUMMARY }, { "say": "Finished." }]);
    let api = gemini_api(&script);
    let home = user_home(&p);
    std::fs::write(
        home.join(".gemini/trustedFolders.json"),
        serde_json::json!({ workspace.display().to_string(): "TRUST_FOLDER" }).to_string(),
    )
    .unwrap();
    // `gemini` as npm installs it: a program of that name.
    let bin = p.dir.parent().unwrap().join("bin/gemini");
    std::fs::create_dir_all(bin.parent().unwrap()).unwrap();
    std::fs::write(
        &bin,
        format!("#!/bin/sh\nexec node '{}' \"$@\"\n", gemini.display()),
    )
    .unwrap();
    std::fs::set_permissions(&bin, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    p.user_config("[tasks]\nagents = [\"gemini\"]\n");
    let command = format!(
        "{} -p --approval-mode yolo -m gemini-2.5-flash",
        bin.display()
    );
    let screen = headless_task(
        &p,
        &[
            ("HOME", home.as_os_str()),
            ("GEMINI_API_KEY", KEY.as_ref()),
            ("GOOGLE_GEMINI_BASE_URL", api.base.as_ref()),
        ],
        "writer",
        &workspace,
        &command,
    );
    assert!(
        screen.contains("● Bash(mkdir -p summaries") && screen.contains("● Finished."),
        "{}",
        screen
    );
    // Its state kept in its own folder, inside the boundary.
    assert!(home.join(".gemini/projects.json").is_file());
}
