//! Codex CLI, the real one (npm's `@openai/codex`, the version tools/test-all
//! installs), offline against a stand-in of the Responses API (tests/it/codex_api.py)
//! in a project wired by `hitl init --codex`: the hooks run without Codex's own
//! `--dangerously-bypass-hook-trust` (hitl recorded their trust), a dangerous command
//! is asked and denied with a comment that reaches the model's next request, a
//! harmless one asks nobody, and an approved one runs.

use std::{
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::Duration,
};

use serde_json::Value;

use crate::support::{
    ModelApi, Project, WRITE_SUMMARY, doctor_check, eventually, headless_task, wait_output,
};

/// The Codex CLI version these tests run (tools/test-all installs it).
const CODEX_VERSION: &str = "0.171.0";

/// The real `codex` binary (set `HITL_TEST_CODEX` to use another); `None` (skip)
/// outside CI only.
fn codex_binary() -> Option<PathBuf> {
    crate::support::installed_agent(
        "HITL_TEST_CODEX",
        &format!("codex/{CODEX_VERSION}/package/vendor/x86_64-unknown-linux-musl/bin/codex"),
        &[],
    )
}

const KEY: &str = "sk-test-codex";

/// The stand-in Responses API, playing `script` (its commands run in `workdir`).
fn responses_api(script: &Value, workdir: &Path) -> ModelApi {
    let workdir = workdir.display().to_string();
    ModelApi::start("codex_api.py", &[KEY, &script.to_string(), &workdir])
}

/// Codex's settings as a user has them: the stand-in as its model provider, and
/// `trusted` a trusted project (Codex asks on its first run there).
fn user_config(api: &ModelApi, trusted: &std::path::Path) -> String {
    format!(
        "model = \"gpt-5.5\"\nmodel_provider = \"stand-in\"\n\n\
         [model_providers.stand-in]\nname = \"stand-in\"\nbase_url = \"{}/v1\"\n\
         env_key = \"STAND_IN_KEY\"\nwire_api = \"responses\"\n\n\
         [projects.\"{}\"]\ntrust_level = \"trusted\"\n",
        api.base,
        trusted.display()
    )
}

/// A folder outside the temp folder (Codex's sandbox breaks under `$TMPDIR`).
fn outside_tmp(prefix: &str) -> tempfile::TempDir {
    let homes = PathBuf::from(std::env::var_os("HOME").unwrap()).join(".cache/hitl/tmp");
    std::fs::create_dir_all(&homes).unwrap();
    tempfile::Builder::new()
        .prefix(prefix)
        .tempdir_in(&homes)
        .unwrap()
}

/// `hitl init --codex [ARGS]` in the project, with `codex_home` Codex's settings'
/// folder; it must succeed.
fn init_codex(p: &Project, codex_home: &Path, args: &[&str]) -> std::process::Output {
    let out = p
        .hitl()
        .args(["init", "--codex"])
        .args(args)
        .env("CODEX_HOME", codex_home)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    out
}

/// `codex exec PROMPT` in the project, with `codex_home` its settings' folder.
fn codex_exec(codex: &Path, p: &Project, codex_home: &Path, prompt: &str) -> Child {
    Command::new(codex)
        .args(["exec", "--skip-git-repo-check", prompt])
        .current_dir(&p.dir)
        .env("CODEX_HOME", codex_home)
        .env("STAND_IN_KEY", KEY)
        .env("HITL_HOME", &p.home)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// The output Codex gave the model for its `call_id`, from the request after it.
fn output_of(requests: &[Value], call_id: &str) -> Option<String> {
    requests.iter().rev().find_map(|r| {
        r["input"].as_array()?.iter().find_map(|i| {
            (matches!(
                i["type"].as_str(),
                Some("function_call_output" | "custom_tool_call_output")
            ) && i["call_id"] == call_id)
                .then(|| i["output"].to_string())
        })
    })
}

#[test]
fn a_wired_codex_asks_the_human_about_what_it_cannot_prove_harmless() {
    let Some(codex) = codex_binary() else { return };
    let p = Project::new();
    let codex_home = outside_tmp("codex-home-");
    let script = serde_json::json!([
        { "exec": "git push --force origin main" },
        { "exec": "ls" },
        { "exec": "echo approved > approved.txt" },
        { "say": "done" },
    ]);
    let api = responses_api(&script, &p.dir);
    let config = codex_home.path().join("config.toml");
    let theirs = user_config(&api, &p.dir);
    std::fs::write(&config, &theirs).unwrap();
    let out = init_codex(&p, codex_home.path(), &[]);
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("hooked   .codex/hooks.json"), "{said}");
    assert!(!said.contains("only once you trust"), "{said}");

    // `hitl doctor` finds them wired and trusted.
    let doctor = |p: &Project| {
        let mut doctor = p.hitl();
        doctor.env("CODEX_HOME", codex_home.path());
        doctor_check(doctor, "codex")
    };
    let check = doctor(&p);
    assert_eq!(check["status"], "ok", "{check}");
    assert!(
        check["summary"]
            .as_str()
            .unwrap()
            .contains("6 hooks of hitl's"),
        "{check}"
    );

    let _listener = p.listen(&["--attended", "--ui", "none"]);
    let run = codex_exec(
        &codex,
        &p,
        codex_home.path(),
        "Push the release, then list and mark it.",
    );

    // The force push is asked, by a Codex agent; denied with a comment.
    let q = p.wait_pending(1, Duration::from_secs(60)).remove(0);
    assert!(
        q["content"].as_str().unwrap().contains("git push --force"),
        "{q}"
    );
    assert!(q["agent_id"].as_str().unwrap().starts_with("codex-"), "{q}");
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
    eventually("the second question", Duration::from_secs(60), || {
        q = p.pending().into_iter().next().unwrap_or(Value::Null);
        q["content"]
            .as_str()
            .is_some_and(|c| c.contains("approved.txt"))
    });
    let answered = p.run(&["answer", q["id"].as_str().unwrap(), "--approve"]);
    assert!(answered.status.success(), "{answered:?}");
    let out = wait_output(run, Duration::from_secs(120));
    assert!(out.status.success(), "codex exec: {out:?}");

    let requests = api.requests();
    let denied = output_of(&requests, "call_0").expect("the push's output reached the model");
    assert!(denied.contains("push to a branch, not main"), "{denied}");
    assert!(
        output_of(&requests, "call_1").is_some(),
        "ls ran: {requests:#?}"
    );
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

    // Their trust lost (Codex's settings edited by hand): `hitl doctor` says Codex
    // would skip them, and how to put it back.
    std::fs::write(&config, &theirs).unwrap();
    let check = doctor(&p);
    assert_eq!(check["status"], "warn", "{check}");
    assert!(
        check["summary"].as_str().unwrap().contains("would skip 6"),
        "{check}"
    );

    // Taken out again: Codex's settings as they were, hitl's hooks gone.
    init_codex(&p, codex_home.path(), &["--remove"]);
    assert_eq!(std::fs::read_to_string(&config).unwrap(), theirs);
    assert!(!p.dir.join(".codex/hooks.json").exists());
}

/// Codex's file edits are patches (`apply_patch`): one that writes an ordinary file
/// asks nobody; one that would add a rule to hitl's settings is asked, and denied
/// with a comment that reaches the model; the settings stay as they were.
#[test]
fn a_wired_codex_asks_before_a_patch_writes_the_guards_files() {
    let Some(codex) = codex_binary() else { return };
    let p = Project::new();
    let codex_home = outside_tmp("codex-home-");
    let script = serde_json::json!([
        { "patch": "*** Begin Patch\n*** Add File: notes.md\n+release notes\n*** End Patch\n" },
        { "patch": "*** Begin Patch\n*** Update File: notes.md\n@@\n-release notes\n+release notes, pushed\n*** Update File: .helpers/config.toml\n@@\n+[hook]\n+allow = [\"Bash(*)\"]\n*** End Patch\n" },
        { "say": "done" },
    ]);
    let api = responses_api(&script, &p.dir);
    std::fs::write(
        codex_home.path().join("config.toml"),
        user_config(&api, &p.dir),
    )
    .unwrap();
    init_codex(&p, codex_home.path(), &[]);
    let settings = p.dir.join(".helpers/config.toml");
    let before = std::fs::read(&settings).unwrap();

    let _listener = p.listen(&["--attended", "--ui", "none"]);
    let run = codex_exec(&codex, &p, codex_home.path(), "Write the notes.");
    let q = p.wait_pending(1, Duration::from_secs(60)).remove(0);
    let content = q["content"].as_str().unwrap();
    assert!(
        content.starts_with("Allow Codex to patch .helpers/config.toml?")
            && content.contains("+allow = [\"Bash(*)\"]"),
        "{q}"
    );
    let answered = p.run(&[
        "answer",
        q["id"].as_str().unwrap(),
        "--deny",
        "--comment",
        "no new rules",
    ]);
    assert!(answered.status.success(), "{answered:?}");
    let out = wait_output(run, Duration::from_secs(120));
    assert!(out.status.success(), "codex exec: {out:?}");

    let requests = api.requests();
    let denied = output_of(&requests, "call_1").expect("the patch's output reached the model");
    assert!(denied.contains("no new rules"), "{denied}");
    assert_eq!(std::fs::read(&settings).unwrap(), before);
    assert_eq!(
        std::fs::read_to_string(p.dir.join("notes.md")).unwrap(),
        "release notes\n",
        "the first patch ran unasked, the second not at all"
    );
    assert_eq!(p.history().len(), 1, "only the second patch was asked");
}

/// Codex's own approval prompt, in its interactive screen (`-a on-request`, in real
/// tmux): a command it would run outside its sandbox is a PermissionRequest, which
/// hitl asks of the human; approved in hitl, it runs, and Codex never shows its own
/// prompt.
#[test]
fn a_codex_permission_request_is_answered_in_hitl() {
    let Some(codex) = codex_binary() else { return };
    let p = Project::new();
    let codex_home = outside_tmp("codex-home-");
    // Outside the project and the temp folders, where Codex's sandbox lets no write.
    let outside = outside_tmp("outside-");
    let mark = outside.path().join("released");
    let script = serde_json::json!([
        { "exec": format!("touch {}", mark.display()), "escalate": "Mark the release outside the project?" },
        { "say": "done" },
    ]);
    let api = responses_api(&script, &p.dir);
    // As a user has it after a first run: the screens of new models seen.
    let config = user_config(&api, &p.dir)
        + "\n[tui]\nscreen_reader_detection_done = true\n\n\
           [tui.model_availability_nux]\n\"gpt-6.1-sol\" = 2\n\n\
           [notice.model_migrations]\n\"gpt-5.5\" = \"gpt-6-sol\"\n";
    std::fs::write(codex_home.path().join("config.toml"), config).unwrap();
    init_codex(&p, codex_home.path(), &[]);
    let _listener = p.listen(&["--attended", "--ui", "none"]);

    let tmux = crate::support::Tmux::new(&p.tmp.path().join("tmux"), "codex");
    tmux.run(&[
        "new-session",
        "-d",
        "-s",
        "codex",
        "-x",
        "150",
        "-y",
        "40",
        "-c",
        p.dir.to_str().unwrap(),
        &format!(
            "env CODEX_HOME='{}' HITL_HOME='{}' STAND_IN_KEY={KEY} TERM=xterm-256color '{}' -a on-request 'Mark the release.'; sleep 60",
            codex_home.path().display(),
            p.home.display(),
            codex.display()
        ),
    ]);
    let q = p.wait_pending(1, Duration::from_secs(60)).remove(0);
    assert_eq!(q["type"], "permission", "{q}");
    assert!(q["agent_id"].as_str().unwrap().starts_with("codex-"), "{q}");
    assert!(
        q["content"].as_str().unwrap().contains("touch"),
        "{q}\n{}",
        tmux.screen()
    );
    let answered = p.run(&["answer", q["id"].as_str().unwrap(), "--approve"]);
    assert!(answered.status.success(), "{answered:?}");
    let screen = tmux.wait_for("done", Duration::from_secs(60));
    assert!(
        mark.exists(),
        "the approved command ran outside the sandbox:\n{screen}"
    );
    assert!(
        !screen.contains("Would you like to run"),
        "Codex showed its own prompt:\n{screen}"
    );
}

/// A Codex task through the task runner: `--command "codex exec"` runs Codex CLI
/// headless once per task, the task's text on its stdin; the task ends on its summary
/// file, which the model (a stand-in) writes with a shell command; the result has it
/// and the tokens Codex reported, and `peek` shows what it did.
#[test]
fn a_codex_task_runs_headless_and_its_summary_is_read() {
    let Some(codex) = codex_binary() else { return };
    let p = Project::new();
    let codex_home = outside_tmp("codex-home-");
    let workspace = p.dir.parent().unwrap().join("ws");
    std::fs::create_dir_all(&workspace).unwrap();
    let script = serde_json::json!([{ "exec": WRITE_SUMMARY }, { "say": "Finished." }]);
    let api = responses_api(&script, &workspace);
    std::fs::write(
        codex_home.path().join("config.toml"),
        user_config(&api, &workspace),
    )
    .unwrap();
    p.user_config("[tasks]\nagents = [\"codex\"]\n");
    // Inside the boundary (`[tasks] boundary`, on by default), with Codex's own
    // sandbox off: as root (CI) bubblewrap cannot start there (`hitl run` says so).
    let command = format!("{} exec --sandbox danger-full-access", codex.display());
    let screen = headless_task(
        &p,
        &[
            ("CODEX_HOME", codex_home.path().as_os_str()),
            ("STAND_IN_KEY", KEY.as_ref()),
        ],
        "coder",
        &workspace,
        &command,
    );
    assert!(
        screen.contains("● Bash(") && screen.contains("Finished."),
        "{}",
        screen
    );
}

/// `hitl run codex`: Codex CLI inside the boundary, in its own folder (`~/.codex`,
/// no `CODEX_HOME`), and with its own sandbox off as a user of the boundary runs it:
/// it keeps its sessions, but a command the human approved still cannot change
/// Codex's settings (a `notify` command there would run later as the user, outside),
/// and the model reads why.
#[test]
fn hitl_run_starts_codex_which_keeps_its_sessions_but_not_its_settings() {
    let Some(codex) = codex_binary() else { return };
    if !crate::boundary::require_boundary() {
        return;
    }
    let p = Project::new();
    let home = outside_tmp("home-");
    let script = serde_json::json!([
        { "exec": "ls" },
        { "exec": "echo 'notify = [\"touch\", \"/tmp/pwned\"]' >> ~/.codex/config.toml" },
        { "say": "done" },
    ]);
    let api = responses_api(&script, &p.dir);
    let config = home.path().join(".codex/config.toml");
    std::fs::create_dir_all(config.parent().unwrap()).unwrap();
    let theirs = user_config(&api, &p.dir);
    std::fs::write(&config, &theirs).unwrap();
    let wired = p
        .hitl()
        .args(["init", "--codex"])
        .env("HOME", home.path())
        .env_remove("CODEX_HOME")
        .output()
        .unwrap();
    assert!(wired.status.success(), "{wired:?}");
    let wired_config = std::fs::read_to_string(&config).unwrap();

    let _listener = p.listen(&["--attended", "--ui", "none"]);
    let run = p
        .hitl()
        .arg("run")
        .arg("--")
        .arg(&codex)
        .args([
            "exec",
            "--skip-git-repo-check",
            "--sandbox",
            "danger-full-access",
            "List, then note it.",
        ])
        .env("HOME", home.path())
        .env_remove("CODEX_HOME")
        .env_remove("XDG_RUNTIME_DIR")
        .env("STAND_IN_KEY", KEY)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // `ls` asked nobody; the change to Codex's settings is asked, and approved.
    let q = p.wait_pending(1, Duration::from_secs(60)).remove(0);
    assert!(
        q["content"].as_str().unwrap().contains("config.toml"),
        "{q}"
    );
    assert!(q["agent_id"].as_str().unwrap().starts_with("codex-"), "{q}");
    let answered = p.run(&["answer", q["id"].as_str().unwrap(), "--approve"]);
    assert!(answered.status.success(), "{answered:?}");
    let out = wait_output(run, Duration::from_secs(120));
    assert!(out.status.success(), "hitl run codex exec: {out:?}");

    let requests = api.requests();
    assert!(output_of(&requests, "call_0").is_some(), "{requests:#?}");
    let refused = output_of(&requests, "call_1").expect("the echo's output reached the model");
    assert!(refused.contains("Read-only file system"), "{refused}");
    assert_eq!(std::fs::read_to_string(&config).unwrap(), wired_config);
    // Its state was written: the session's rollout, in its own folder.
    let sessions = home.path().join(".codex/sessions");
    let mut rollouts = 0;
    let mut dirs = vec![sessions.clone()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            if e.path().is_dir() {
                dirs.push(e.path());
            } else if e.file_name().to_string_lossy().starts_with("rollout-") {
                rollouts += 1;
            }
        }
    }
    assert_eq!(rollouts, 1, "no session kept in {}", sessions.display());
}

/// `hitl run codex` as a user other than root, Codex's own sandbox on (its default,
/// `workspace-write`): bubblewrap makes its user namespace inside the boundary's, so
/// both hold, and a command in the project runs.
#[test]
fn as_another_user_codexs_own_sandbox_runs_inside_hitl_run() {
    use std::os::unix::fs::PermissionsExt;
    let Some(codex) = codex_binary() else { return };
    if !crate::boundary::require_boundary() {
        return;
    }
    if !crate::support::can_be_another_user() {
        return;
    }
    // Outside /tmp (Codex's sandbox breaks with its home there), where the other user
    // can reach everything: the programs linked in, the project and home its own.
    let tmp = tempfile::Builder::new()
        .prefix("hitl-codex-user-")
        .tempdir_in("/var/tmp")
        .unwrap();
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let vendor = codex.parent().unwrap().parent().unwrap();
    // Linked where it can be (one file system), else copied.
    let copied = ["-al", "-a"].iter().any(|how| {
        Command::new("cp")
            .arg(how)
            .arg(vendor)
            .arg(tmp.path().join("codex"))
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    });
    assert!(copied, "copying {}", vendor.display());
    let codex = tmp.path().join("codex/bin/codex");
    let hitl = tmp.path().join("hitl");
    if std::fs::hard_link(crate::support::hitl_bin(), &hitl).is_err() {
        std::fs::copy(crate::support::hitl_bin(), &hitl).unwrap();
    }
    let (project, home) = (tmp.path().join("project"), tmp.path().join("home"));
    std::fs::create_dir_all(&project).unwrap();
    std::fs::create_dir_all(home.join(".codex")).unwrap();
    let script = serde_json::json!([
        { "exec": "touch inside.txt && echo made" },
        { "say": "done" },
    ]);
    let api = responses_api(&script, &project);
    std::fs::write(home.join(".codex/config.toml"), user_config(&api, &project)).unwrap();
    for p in [
        &project,
        &home,
        &home.join(".codex"),
        &home.join(".codex/config.toml"),
    ] {
        nix::unistd::chown(p.as_path(), Some(65534.into()), Some(65534.into())).unwrap();
    }
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "sh", "-c"])
        .arg("\"$0\" init >/dev/null 2>&1 && exec \"$0\" run -- \"$1\" exec --skip-git-repo-check 'Make it.'")
        .arg(&hitl)
        .arg(&codex)
        .current_dir(&project)
        .env("HOME", &home)
        .env("STAND_IN_KEY", KEY)
        .env_remove("CODEX_HOME")
        .env_remove("HITL_HOME")
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("XDG_DATA_HOME")
        .env_remove("XDG_RUNTIME_DIR")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let ran = output_of(&api.requests(), "call_0").expect("the command's output reached the model");
    assert!(ran.contains("made") && !ran.contains("bwrap"), "{ran}");
    assert!(project.join("inside.txt").exists());
}
