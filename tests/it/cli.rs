//! The command-line contract: init, ask's exit codes, answering from elsewhere, queue
//! order, the terminal prompt, agent identity, the listener lock.

use std::{
    fs,
    io::Write,
    os::unix::fs::PermissionsExt,
    process::{Child, Stdio},
    time::Duration,
};

use serde_json::Value;

use crate::support::{Project, eventually, spawn_ask, wait_output};

fn mode(path: &std::path::Path) -> u32 {
    fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[test]
fn init_is_idempotent_and_keeps_edits() {
    let p = Project::new();
    for d in ["questions", "answers", "agents", "queue"] {
        assert_eq!(mode(&p.helpers().join(d)), 0o700, "{d}");
    }
    let script = p.dir.join("scripts/ask-human.sh");
    assert_eq!(mode(&script), 0o755);
    let config = fs::read_to_string(p.helpers().join("config.toml")).unwrap();
    assert!(config.contains("# timeout = 300"));

    let again = p.run(&["init"]);
    assert!(again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("ok       scripts/ask-human.sh"));

    fs::write(&script, "#!/bin/sh\necho mine\n").unwrap();
    let kept = p.run(&["init"]);
    assert!(String::from_utf8_lossy(&kept.stderr).contains("kept"));
    assert_eq!(
        fs::read_to_string(&script).unwrap(),
        "#!/bin/sh\necho mine\n"
    );
    let forced = p.run(&["init", "--force"]);
    assert!(forced.status.success());
    assert!(fs::read_to_string(&script).unwrap().contains("hitl ask"));
}

#[test]
fn ask_exit_codes() {
    let p = Project::new();
    let _l = p.listen(&["--ui", "none"]);

    // 2: timed out, and the question is withdrawn.
    let out = p.run(&["ask", "--timeout", "1", "anyone?"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(out.stdout.is_empty());
    p.wait_pending(0, Duration::from_secs(5));

    // 1: cancelled.
    let child = spawn_ask(&p, &["--timeout", "30", "cancel me"]);
    let id = p.wait_pending(1, Duration::from_secs(10))[0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let out = p.run(&["cancel", &id, "--reason", "not now"]);
    assert!(out.status.success(), "{out:?}");
    let out = wait_output(child, Duration::from_secs(10));
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not now"));

    // 1: denied, 0: approved.
    // A denial carries its reason; an approval prints the word alone.
    for (flag, code, text) in [
        ("--deny", 1, "denied: because\n"),
        ("--approve", 0, "approved\n"),
    ] {
        let child = spawn_ask(&p, &["--type", "approval", "--timeout", "30", "deploy?"]);
        let id = p.wait_pending(1, Duration::from_secs(10))[0]["id"]
            .as_str()
            .unwrap()
            .to_string();
        let out = p.run(&["answer", &id, flag, "--comment", "because"]);
        assert!(out.status.success(), "{out:?}");
        let out = wait_output(child, Duration::from_secs(10));
        assert_eq!(out.status.code(), Some(code), "{flag}");
        assert_eq!(String::from_utf8_lossy(&out.stdout), text);
    }

    // --json prints the whole answer.
    let child = spawn_ask(
        &p,
        &[
            "--type",
            "multiselect",
            "-o",
            "a",
            "-o",
            "b",
            "-o",
            "c",
            "--json",
            "pick",
        ],
    );
    let id = p.wait_pending(1, Duration::from_secs(10))[0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let bad = p.run(&["answer", &id, "9"]);
    assert_eq!(bad.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("not one of the options"));
    assert!(p.run(&["answer", &id, "1,c"]).status.success());
    let out = wait_output(child, Duration::from_secs(10));
    let answer: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(answer["choices"], serde_json::json!(["a", "c"]));
    assert_eq!(answer["version"], 1);

    // 3: cannot ask.
    let elsewhere = tempfile::tempdir().unwrap();
    let out = p
        .hitl()
        .current_dir(elsewhere.path())
        .args(["ask", "hello?"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&out.stderr).contains("hitl init"));
    let out = p.run(&["ask", "--type", "select", "no options?"]);
    assert_eq!(out.status.code(), Some(3));
    let out = p.run(&["ask", "--type", "sonnet", "what?"]);
    assert_eq!(out.status.code(), Some(3));
    let out = p.run(&["ask", "--context", "{not json", "what?"]);
    assert_eq!(out.status.code(), Some(3));
}

/// Outside a project, `hitl pending` lists what waits in every project the user's
/// history knows of, each under its folder, and what listeners hold besides; each
/// request once.
#[test]
fn pending_outside_a_project_lists_every_projects() {
    let p = Project::new();
    let other = p.tmp.path().join("other");
    assert!(p.run(&["init", other.to_str().unwrap()]).status.success());
    let _l = p.listen(&[
        "--ui",
        "none",
        "--http",
        "127.0.0.1:0",
        p.dir.to_str().unwrap(),
        other.to_str().unwrap(),
    ]);
    let here = spawn_ask(&p, &["--timeout", "60", "asked here?"]);
    let there = p
        .hitl()
        .current_dir(&other)
        .args(["ask", "--timeout", "60", "asked there?"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let url = p.http_url();
    let http = spawn_ask(
        &p,
        &["--server", &url, "--timeout", "60", "asked over http?"],
    );
    let outside = p.tmp.path().join("elsewhere");
    fs::create_dir_all(&outside).unwrap();
    let pending_outside = |json: bool| {
        let mut c = p.hitl();
        c.current_dir(&outside).arg("pending");
        if json {
            c.arg("--json");
        }
        c.output().unwrap()
    };
    eventually("all three listed", Duration::from_secs(20), || {
        let out = pending_outside(true);
        out.status.success()
            && serde_json::from_slice::<Value>(&out.stdout)
                .is_ok_and(|v| v.as_array().is_some_and(|a| a.len() == 3))
    });
    let out = pending_outside(false);
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    let at = |needle: &str| {
        text.find(needle)
            .unwrap_or_else(|| panic!("{needle:?} in:\n{text}"))
    };
    assert!(
        at(&format!("{}:", p.dir.display())) < at("asked here?"),
        "{text}"
    );
    assert!(
        at(&format!("{}:", other.display())) < at("asked there?"),
        "{text}"
    );
    assert_eq!(text.matches("asked over http?").count(), 1, "once: {text}");
    for child in [here, there, http] {
        let mut child = child;
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// `hitl cancel --all`: every pending request of the project, spool questions and
/// requests the listener holds alike; `--agent` only one agent's. Each asker hears
/// of its cancel the way it asked.
#[test]
fn cancel_all_ends_every_pending_request_or_one_agents() {
    let p = Project::new();
    let _l = p.listen(&["--ui", "none", "--http", "127.0.0.1:0"]);
    let ask_as = |agent: &str, extra: &[&str], q: &str| {
        let mut c = p.hitl();
        c.env("HITL_AGENT_ID", agent)
            .env("HITL_AGENT_NAME", agent)
            .arg("ask")
            .args(extra)
            .args(["--timeout", "60", q])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c.spawn().unwrap()
    };
    let a1 = ask_as("alpha", &[], "first?");
    let a2 = ask_as("alpha", &[], "second?");
    let url = p.http_url();
    let b = ask_as("beta", &["--server", &url], "over http?");
    p.wait_pending(3, Duration::from_secs(10));

    let out = p.run(&["cancel", "--all", "--agent", "alpha", "--reason", "tidy"]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).lines().count(),
        2,
        "{out:?}"
    );
    for child in [a1, a2] {
        let out = wait_output(child, Duration::from_secs(10));
        assert_eq!(out.status.code(), Some(1), "{out:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("tidy"),
            "{out:?}"
        );
    }
    let left = p.wait_pending(1, Duration::from_secs(10));
    assert_eq!(left[0]["agent_id"], "beta", "{left:?}");

    let out = p.run(&["cancel", "--all", "--agent", "nobody"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("no pending request of agent"));

    let out = p.run(&["cancel", "--all"]);
    assert!(out.status.success(), "{out:?}");
    let out = wait_output(b, Duration::from_secs(10));
    assert_eq!(out.status.code(), Some(1), "the HTTP asker too: {out:?}");
    p.wait_pending(0, Duration::from_secs(10));

    let out = p.run(&["cancel", "--all"]);
    assert_eq!(out.status.code(), Some(1), "nothing left: {out:?}");
    // An id and --all together are refused by the parser.
    let out = p.run(&["cancel", "--all", "abc"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
}

#[test]
fn answers_work_without_a_listener_and_the_first_one_wins() {
    let p = Project::new();
    for round in 0..5 {
        let child = spawn_ask(&p, &["--timeout", "30", &format!("race {round}")]);
        let id = p.wait_pending(1, Duration::from_secs(10))[0]["id"]
            .as_str()
            .unwrap()
            .to_string();
        // Two responders at the same instant.
        let racers: Vec<Child> = ["first", "second"]
            .iter()
            .map(|t| {
                p.hitl()
                    .args(["answer", &id, t])
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        let outs: Vec<_> = racers
            .into_iter()
            .map(|c| wait_output(c, Duration::from_secs(10)))
            .collect();
        let winners = outs.iter().filter(|o| o.status.success()).count();
        assert_eq!(winners, 1, "{outs:?}");
        let loser = outs.iter().find(|o| !o.status.success()).unwrap();
        assert!(
            String::from_utf8_lossy(&loser.stderr).contains("already answered by cli:"),
            "{loser:?}"
        );
        let out = wait_output(child, Duration::from_secs(10));
        assert!(out.status.success());
        let got = String::from_utf8_lossy(&out.stdout).to_string();
        assert!(got == "first\n" || got == "second\n", "{got}");
    }
    // Answering a finished question says what became of it (history trails the
    // answer by at most a broker tick).
    let mut hist = Vec::new();
    eventually("history has the answer", Duration::from_secs(5), || {
        hist = p.history();
        hist.first().is_some_and(|h| h["status"] == "answered")
    });
    let id = hist[0]["id"].as_str().unwrap();
    let out = p.run(&["answer", id, "late"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("already answered by cli:"),
        "{out:?}"
    );
    let out = p.run(&["answer", "no-such-id", "x"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("no pending question"));
}

/// An asker leaves an empty file for its answer before its question is out
/// (`.helpers/tmp/slot/`), and the listener writes the answer in that very file; an
/// asker that gives up takes its slot away, and an answered one leaves none behind.
#[test]
fn the_answer_is_written_in_the_file_its_asker_left() {
    use std::os::unix::fs::MetadataExt;
    let p = Project::new();
    let slots = p.helpers().join("tmp").join("slot");
    let slots_left = || fs::read_dir(&slots).unwrap().count();
    let out = p.run(&["ask", "--timeout", "1", "nobody answers"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert_eq!(slots_left(), 0, "the slot went with its asker");
    let child = spawn_ask(&p, &["--timeout", "30", "slot?"]);
    let id = p.wait_pending(1, Duration::from_secs(10))[0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    // Without the fast paths (HITL_FAST_PATHS=0) there is no slot: the answer is a
    // file made when it is written.
    let slot = fs::metadata(slots.join(format!("{id}.json")));
    assert_eq!(
        slot.is_ok(),
        hitl::runtime::tuning::fast_paths(),
        "{slot:?}"
    );
    assert!(slot.as_ref().is_ok_and(|s| s.len() == 0) || slot.is_err());
    let _listener = p.listen(&["--ui", "none", "--auto-answer", "yes"]);
    let out = wait_output(child, Duration::from_secs(30));
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "yes\n");
    let answer = fs::metadata(p.helpers().join("answers").join(format!("{id}.json"))).unwrap();
    if let Ok(slot) = slot {
        assert_eq!(answer.ino(), slot.ino(), "the answer is the slot's file");
    }
    assert_eq!(slots_left(), 0);
}

#[test]
fn queue_order_is_urgency_then_age() {
    let p = Project::new();
    let mut children = Vec::new();
    for (prio, text) in [
        ("normal", "n1"),
        ("high", "h1"),
        ("normal", "n2"),
        ("urgent", "u1"),
        ("high", "h2"),
    ] {
        children.push(spawn_ask(
            &p,
            &["--priority", prio, "--timeout", "30", text],
        ));
        p.wait_pending(children.len(), Duration::from_secs(10));
    }
    let order: Vec<String> = p
        .pending()
        .iter()
        .map(|q| q["content"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(order, ["u1", "h1", "h2", "n1", "n2"]);

    // The listener publishes the same order in queue/question_queue.json.
    let _l = p.listen(&["--ui", "none"]);
    let snapshot = p.helpers().join("queue/question_queue.json");
    eventually(
        "queue snapshot lists all five",
        Duration::from_secs(5),
        || {
            fs::read(&snapshot)
                .ok()
                .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
                .is_some_and(|v| v["total_questions"] == 5)
        },
    );
    let v: Value = serde_json::from_slice(&fs::read(&snapshot).unwrap()).unwrap();
    let order: Vec<&str> = v["queue"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| q["content"].as_str().unwrap())
        .collect();
    assert_eq!(order, ["u1", "h1", "h2", "n1", "n2"]);
    for c in children {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(c.id() as i32),
            nix::sys::signal::Signal::SIGINT,
        );
        let _ = wait_output(c, Duration::from_secs(5));
    }
    p.wait_pending(0, Duration::from_secs(5));
}

#[test]
fn a_requests_labels_are_shown_by_hitl_pending_and_the_terminal_prompt() {
    let p = Project::new();
    let child = spawn_ask(&p, &["--priority", "urgent", "--timeout", "30", "Ship?"]);
    p.wait_pending(1, Duration::from_secs(10));
    let table = String::from_utf8(p.run(&["pending"]).stdout).unwrap();
    let header = table.lines().next().unwrap();
    let row = table.lines().nth(1).unwrap();
    let at = header.find("LABELS").expect("a LABELS column");
    assert!(row[at..].starts_with("urgent "), "{table}");
    let mut l = p.listen_with_stdin(&["--ui", "terminal"]);
    l.wait_stdout("Ship?", Duration::from_secs(10));
    assert!(
        l.stdout().contains("(urgent) Question (text)"),
        "{}",
        l.stdout()
    );
    let mut stdin = l.child.stdin.take().unwrap();
    stdin.write_all(b"yes\n").unwrap();
    stdin.flush().unwrap();
    let out = wait_output(child, Duration::from_secs(10));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "yes\n");
}

#[test]
fn tags_from_the_flag_and_the_environment_are_shown_and_kept() {
    let p = Project::new();
    let child = p
        .hitl()
        .args([
            "ask",
            "--tag",
            "ci,deploy",
            "--tag",
            "ci",
            "--timeout",
            "30",
            "Ship?",
        ])
        .env("HITL_TAGS", "team, ")
        .current_dir(&p.dir)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let q = p.wait_pending(1, Duration::from_secs(10)).pop().unwrap();
    assert_eq!(
        q["tags"],
        serde_json::json!(["team", "ci", "deploy"]),
        "{q}"
    );
    assert_eq!(q["labels"], serde_json::json!(["#team", "#ci", "#deploy"]));
    let mut l = p.listen_with_stdin(&["--ui", "terminal"]);
    l.wait_stdout("Ship?", Duration::from_secs(10));
    assert!(
        l.stdout().contains("(#team, #ci, #deploy) Question (text)"),
        "{}",
        l.stdout()
    );
    let mut stdin = l.child.stdin.take().unwrap();
    stdin.write_all(b"go\n").unwrap();
    stdin.flush().unwrap();
    let out = wait_output(child, Duration::from_secs(10));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "go\n");
}

#[test]
fn terminal_prompt_answers_from_a_pipe() {
    let p = Project::new();
    let mut l = p.listen_with_stdin(&["--ui", "terminal"]);
    let child = spawn_ask(
        &p,
        &[
            "--type",
            "select",
            "-o",
            "Express",
            "-o",
            "Fastify",
            "Which framework?",
        ],
    );
    l.wait_stdout("2) Fastify", Duration::from_secs(10));
    let screen = l.stdout();
    assert!(screen.contains("Question (select)"), "{screen}");
    assert!(screen.contains("Which framework?"));
    assert!(screen.contains("1) Express"));
    let mut stdin = l.child.stdin.take().unwrap();
    stdin.write_all(b"7\n2\n").unwrap();
    stdin.flush().unwrap();
    let out = wait_output(child, Duration::from_secs(10));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "Fastify\n");
    // Said before the answer went, read from the pipe by a thread of the test's.
    l.wait_stdout("not one of the options", Duration::from_secs(5));

    // yes/no, then a question answered elsewhere while on screen.
    let child = spawn_ask(&p, &["--type", "yesno", "Proceed?"]);
    l.wait_stdout("[y/n]", Duration::from_secs(10));
    stdin.write_all(b"y\n").unwrap();
    stdin.flush().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&wait_output(child, Duration::from_secs(10)).stdout),
        "yes\n"
    );

    let child = spawn_ask(&p, &["Your name?"]);
    let id = p.wait_pending(1, Duration::from_secs(10))[0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    l.wait_stdout("Your name?", Duration::from_secs(10));
    assert!(p.run(&["answer", &id, "from elsewhere"]).status.success());
    l.wait_stdout("answered by cli:", Duration::from_secs(10));
    assert_eq!(
        String::from_utf8_lossy(&wait_output(child, Duration::from_secs(10)).stdout),
        "from elsewhere\n"
    );
    drop(stdin);
}

#[test]
fn agent_identity_is_stable_across_asks() {
    let p = Project::new();
    let _l = p.listen(&["--ui", "none", "--auto-answer", "ok"]);
    // An agent process named `claude` (bash under that name) asks twice: one agent,
    // found by walking up from each short-lived `hitl ask`. The `; true` keeps bash
    // from exec-ing the last command in its own place.
    let fake = p.tmp.path().join("bin");
    fs::create_dir_all(&fake).unwrap();
    std::os::unix::fs::symlink("/bin/bash", fake.join("claude")).unwrap();
    let out = std::process::Command::new(fake.join("claude"))
        .args(["-c", "\"$0\" ask one && \"$0\" ask two; true"])
        .arg(crate::support::hitl_bin())
        .current_dir(&p.dir)
        .env("HITL_HOME", &p.home)
        .env_remove("HITL_AGENT_ID")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    // The broker keeps the registry, off the askers' path: a moment after they exit.
    let mut agents: Vec<Value> = Vec::new();
    crate::support::eventually(
        "the broker counts both questions",
        Duration::from_secs(10),
        || {
            agents = serde_json::from_slice(&p.run(&["agents", "--json"]).stdout).unwrap();
            agents.len() == 1 && agents[0]["questions_asked"] == 2
        },
    );
    assert!(
        agents[0]["name"].as_str().unwrap().starts_with("Claude-"),
        "{agents:#?}"
    );
    assert!(
        agents[0]["agent_id"]
            .as_str()
            .unwrap()
            .starts_with("claude-")
    );
    // The bash process has exited by now.
    assert_eq!(agents[0]["status"], "gone");

    // Named agents keep their name.
    let out = p
        .hitl()
        .env("HITL_AGENT_ID", "ci-runner-7")
        .env("HITL_AGENT_NAME", "CI #7")
        .args(["ask", "three"])
        .output()
        .unwrap();
    assert!(out.status.success());
    crate::support::eventually(
        "the named agent is registered",
        Duration::from_secs(10),
        || {
            let agents: Vec<Value> =
                serde_json::from_slice(&p.run(&["agents", "--json"]).stdout).unwrap();
            agents
                .iter()
                .any(|a| a["agent_id"] == "ci-runner-7" && a["name"] == "CI #7")
        },
    );
    eventually(
        "history has the named agent's question",
        Duration::from_secs(5),
        || {
            p.history()
                .first()
                .is_some_and(|h| h["agent_name"] == "CI #7")
        },
    );
}

#[test]
fn one_listener_per_project() {
    let p = Project::new();
    let first = p.listen(&["--ui", "none"]);
    let out = p.run(&["listen", "--ui", "none"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("another listener (pid {})", first.pid())),
        "{err}"
    );
    let status: Value = serde_json::from_slice(&p.run(&["status", "--json"]).stdout).unwrap();
    assert_eq!(status["listener"]["pid"], first.pid());

    // A listener killed -9 leaves its pid file; the next one reclaims it.
    first.signal(nix::sys::signal::Signal::SIGKILL);
    assert!(p.helpers().join(".listener.pid").exists());
    let second = p.listen(&["--ui", "none"]);
    let pid = fs::read_to_string(p.helpers().join(".listener.pid")).unwrap();
    assert_eq!(pid.trim(), second.pid().to_string());
}

#[test]
fn one_listener_serves_many_projects() {
    let a = Project::new();
    let b = Project::new();
    let _l = a.listen(&[
        "--ui",
        "none",
        "--auto-answer",
        "both",
        b.dir.to_str().unwrap(),
        a.dir.to_str().unwrap(),
    ]);
    for p in [&a, &b] {
        let out = p.run(&["ask", "which project?"]);
        assert_eq!(String::from_utf8_lossy(&out.stdout), "both\n");
        assert!(p.helpers().join(".listener.pid").exists());
    }
}

#[test]
fn the_broker_times_out_questions_whose_asker_does_not() {
    let p = Project::new();
    let _l = p.listen(&["--ui", "none"]);
    // A writer with no timer of its own: the question file alone, with a timeout.
    let q = serde_json::json!({"version": 1, "id": "slow-1", "agent_id": "script", "content": "still there?",
        "timestamp": jiff::Timestamp::now().to_string(), "timeout": 1});
    fs::write(p.helpers().join("questions/slow-1.json"), q.to_string()).unwrap();
    p.wait_pending(1, Duration::from_secs(5));
    let answer = p.helpers().join("answers/slow-1.json");
    eventually("a timeout answer", Duration::from_secs(10), || {
        answer.exists()
    });
    let a: Value = serde_json::from_slice(&fs::read(&answer).unwrap()).unwrap();
    assert_eq!(a["status"], "timeout");
    assert_eq!(a["cancelled"], true);
    assert_eq!(a["responded_by"], "broker");
    eventually("history says timeout", Duration::from_secs(5), || {
        p.history()
            .iter()
            .any(|h| h["id"] == "slow-1" && h["status"] == "timeout")
    });
    // Answering it now is refused with what happened.
    let out = p.run(&["answer", "slow-1", "late"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("is already timed out"),
        "{out:?}"
    );
}

#[test]
fn the_listener_sweeps_dead_and_stale_agents() {
    let p = Project::new();
    let agents = p.helpers().join("agents");
    let hour_ago = (jiff::Timestamp::now() - jiff::SignedDuration::from_hours(1)).to_string();
    let days_ago = (jiff::Timestamp::now() - jiff::SignedDuration::from_hours(48)).to_string();
    let me = std::process::id();
    let records = [
        // Its process is gone, and it was last seen an hour ago: removed.
        (
            "dead",
            serde_json::json!({"agent_id": "dead", "pid": 4_000_000_000u32, "last_seen": hour_ago}),
        ),
        // No process known, silent for two days: removed.
        (
            "stale",
            serde_json::json!({"agent_id": "stale", "last_seen": days_ago}),
        ),
        // Alive (this test process), however old its last question: kept, idle.
        (
            "alive",
            serde_json::json!({"agent_id": "alive", "pid": me, "last_seen": days_ago}),
        ),
    ];
    for (name, v) in &records {
        fs::write(agents.join(format!("{name}.json")), v.to_string()).unwrap();
    }
    let _l = p.listen(&["--ui", "none"]);
    eventually(
        "dead and stale agents removed",
        Duration::from_secs(5),
        || !agents.join("dead.json").exists() && !agents.join("stale.json").exists(),
    );
    let list: Vec<Value> = serde_json::from_slice(&p.run(&["agents", "--json"]).stdout).unwrap();
    assert_eq!(list.len(), 1, "{list:#?}");
    assert_eq!(list[0]["agent_id"], "alive");
    assert_eq!(list[0]["status"], "idle");
    // The sweep writes the derived status back for other tools.
    eventually("status written back", Duration::from_secs(5), || {
        fs::read_to_string(agents.join("alive.json")).is_ok_and(|s| s.contains("\"idle\""))
    });
}

#[test]
fn gc_applies_the_retention_policy_and_says_what_it_did() {
    let p = Project::new();
    {
        let _l = p.listen(&["--ui", "none", "--auto-answer", "ok", "--http", "off"]);
        let out = p.run(&["ask", "--timeout", "10", "kept?"]);
        assert_eq!(String::from_utf8_lossy(&out.stdout), "ok\n", "{out:?}");
        // History trails the answer by a moment; the listener must live to write it.
        eventually(
            "history has the answer",
            std::time::Duration::from_secs(5),
            || p.history().iter().any(|h| h["status"] == "answered"),
        );
    }
    let out = p.run(&["gc", "--dry-run", "--json"]);
    assert!(out.status.success(), "{out:?}");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["dry_run"], true);
    assert_eq!(
        report["requests_deleted"], 0,
        "nothing is 90 days old: {report}"
    );
    // Zero days kept means "keep for ever", and no size limit: nothing goes.
    let out = p.run(&["gc", "--keep-days", "0", "--max-mb", "0"]);
    assert!(out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("deleted 0 ended requests"),
        "{out:?}"
    );
    assert_eq!(p.history().len(), 1);
    // Under its size limit, history keeps everything too.
    let out = p.run(&["gc", "--keep-days", "0", "--max-mb", "1", "--json"]);
    assert!(out.status.success(), "{out:?}");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["requests_deleted"], 0, "{report}");
    assert!(
        report["bytes_after"].as_u64().unwrap() <= 1 << 20,
        "{report}"
    );
}

#[test]
fn a_form_of_questions_is_asked_and_answered_from_the_command_line() {
    let p = Project::new();
    let form = r#"[
        {"question": "Which framework?", "header": "UI", "multiSelect": false,
         "options": [{"label": "React", "description": "JSX"}, {"label": "Vue"}]},
        {"question": "Which targets?", "multiSelect": true,
         "options": [{"label": "linux"}, {"label": "mac"}, {"label": "windows"}]}
    ]"#;
    // Without a listener: the answer goes through the spool.
    let child = spawn_ask(&p, &["--questions", form, "--json", "Set-up choices"]);
    let q = p.wait_pending(1, Duration::from_secs(10)).remove(0);
    assert_eq!(q["type"], "questions", "{q:#}");
    let id = q["id"].as_str().unwrap();
    let out = p.run(&["answer", id, "react", "3, linux"]);
    assert!(out.status.success(), "{out:?}");
    let out = wait_output(child, Duration::from_secs(10));
    assert!(out.status.success(), "{out:?}");
    let answer: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        answer["answers"],
        serde_json::json!({"Which framework?": "React", "Which targets?": "windows, linux"})
    );
    assert_eq!(
        answer["content"],
        "Which framework?: React\nWhich targets?: windows, linux"
    );

    // Bad forms are refused before anything is asked.
    for (args, says) in [
        (vec!["--type", "questions", "q"], "needs --questions"),
        (vec!["--questions", "[]", "q"], "one or more"),
        (vec!["--questions", "{", "q"], "not a JSON array"),
        (
            vec!["--type", "yesno", "--questions", form, "q"],
            "not a yesno",
        ),
    ] {
        let out = p.run(&[&["ask"][..], &args].concat());
        assert_eq!(out.status.code(), Some(3), "{args:?}: {out:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(says),
            "{args:?}: {out:?}"
        );
    }
}

#[test]
fn rules_are_listed_added_and_removed_with_clear_errors() {
    let p = Project::new();
    let out = p.run(&["rules"]);
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("No \"always allow\" rules"));
    let out = p.run(&["rules", "add", "Bash(npm publish:*)"]);
    assert!(out.status.success(), "{out:?}");
    let again = p.run(&["rules", "add", "Bash(npm publish:*)"]);
    assert!(
        String::from_utf8_lossy(&again.stdout).contains("already"),
        "{again:?}"
    );
    for (bad, says) in [("Read(x)", "not \"Read\""), ("npm", "TOOL(")] {
        let out = p.run(&["rules", "add", bad]);
        assert_eq!(out.status.code(), Some(1), "{out:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(says),
            "{out:?}"
        );
    }
    let out = p.run(&["rules", "remove", "Bash(nope)"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no rule"),
        "{out:?}"
    );
    // The template's comments survive.
    let config = std::fs::read_to_string(p.helpers().join("config.toml")).unwrap();
    assert!(
        config.contains("# `hitl hook`, Claude Code's hook handler"),
        "{config}"
    );
    let out = p.run(&["rules", "remove", "Bash(npm publish:*)", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["removed"], true);
}

#[test]
fn completions_load_in_bash_and_the_manual_has_a_page_per_command() {
    let p = Project::new();
    let out = p.run(&["completions", "bash"]);
    assert!(out.status.success(), "{out:?}");
    let script = p.tmp.path().join("hitl.bash");
    std::fs::write(&script, &out.stdout).unwrap();
    let bash = std::process::Command::new("bash")
        .args(["--norc", "--noprofile", "-c"])
        .arg(format!("source {} && complete -p hitl", script.display()))
        .output()
        .unwrap();
    assert!(bash.status.success(), "{bash:?}");
    assert!(
        String::from_utf8_lossy(&bash.stdout).contains("-F _hitl hitl"),
        "{bash:?}"
    );
    for shell in ["zsh", "fish"] {
        let out = p.run(&["completions", shell]);
        assert!(out.status.success() && !out.stdout.is_empty(), "{out:?}");
    }
    let out = p.run(&["man"]);
    assert!(out.status.success(), "{out:?}");
    let roff = String::from_utf8_lossy(&out.stdout);
    assert!(
        roff.starts_with(".ie") && roff.contains(".TH hitl-ask 1"),
        "{roff:.300}"
    );
    let dir = p.tmp.path().join("man1");
    assert!(
        p.run(&["man", "--dir", dir.to_str().unwrap()])
            .status
            .success()
    );
    assert!(dir.join("hitl.1").exists() && dir.join("hitl-listen.1").exists());
}

#[test]
fn http_takes_a_port_or_localhost_and_port() {
    let p = Project::new();
    for addr in ["0", "localhost:0"] {
        let listener = p.listen(&["--ui", "none", "--http", addr]);
        let url = p.http_url();
        assert!(url.starts_with("http://127.0.0.1:"), "{url}");
        drop(listener);
    }
    let out = p.run(&["listen", "--ui", "none", "--http", "example.com:4000"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("localhost:PORT"),
        "{out:?}"
    );
}

#[test]
fn answer_takes_the_start_of_an_id_that_names_one_question() {
    let p = Project::new();
    let first = spawn_ask(&p, &["--timeout", "60", "first?"]);
    let second = spawn_ask(&p, &["--timeout", "60", "second?"]);
    let pending = p.wait_pending(2, Duration::from_secs(10));
    let ids: Vec<String> = pending
        .iter()
        .map(|q| q["id"].as_str().unwrap().to_string())
        .collect();
    // Ids made a moment apart start alike (they begin with the time): a start both
    // share is refused, naming both.
    let shared = ids[0]
        .chars()
        .zip(ids[1].chars())
        .take_while(|(a, b)| a == b)
        .count();
    assert!(shared >= 4, "{ids:?}");
    let out = p.run(&["answer", &ids[0][..shared], "x"]);
    assert!(!out.status.success(), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&ids[0]) && err.contains(&ids[1]), "{err}");
    // One more character names one.
    let out = p.run(&["answer", &ids[0][..shared + 1], "yes"]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("answered {}: yes\n", ids[0])
    );
    let (answered, waiting) = if pending[0]["content"] == "first?" {
        (first, second)
    } else {
        (second, first)
    };
    let out = wait_output(answered, Duration::from_secs(10));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "yes\n");
    let out = p.run(&["cancel", &ids[1][..shared + 1]]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        wait_output(waiting, Duration::from_secs(10)).status.code(),
        Some(1)
    );
    // History takes the start of an id too, and refuses one that two share.
    let out = p.run(&["history", "--id", &ids[0][..shared + 1], "--json"]);
    let rows: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rows.len(), 1, "{rows:#?}");
    assert_eq!(rows[0]["id"], ids[0].as_str());
    let out = p.run(&["history", "--id", &ids[0][..shared]]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("give more of it"));
}

#[test]
fn history_is_searched_and_shows_each_requests_labels() {
    let p = Project::new();
    let _l = p.listen(&["--ui", "none", "--auto-answer", "ok"]);
    for args in [
        &[
            "--priority",
            "urgent",
            "--tag",
            "ci",
            "Deploy the needle build?",
        ][..],
        &["Rename the haystack?"][..],
    ] {
        let out = p.run(&[&["ask"][..], args].concat());
        assert!(out.status.success(), "{out:?}");
    }
    eventually("both in history", Duration::from_secs(10), || {
        p.history().len() == 2
    });
    let out = p.run(&["history", "--search", "NEEDLE", "--json"]);
    let rows: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rows.len(), 1, "{rows:#?}");
    assert_eq!(rows[0]["labels"], serde_json::json!(["urgent", "#ci"]));
    let out = p.run(&["history", "--search", "tag:CI", "--json"]);
    let rows: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rows.len(), 1, "{rows:#?}");
    assert_eq!(rows[0]["content"], "Deploy the needle build?");
    let table = String::from_utf8(p.run(&["history", "--search", "needle"]).stdout).unwrap();
    let header = table.lines().next().unwrap();
    let at = header.find("LABELS").expect("a LABELS column");
    assert_eq!(table.lines().count(), 2, "{table}");
    assert!(
        table.lines().nth(1).unwrap()[at..].starts_with("urgent,#ci "),
        "{table}"
    );
}

#[test]
fn service_units_verify_and_install_where_the_user_keeps_them() {
    let p = Project::new();
    let config = p.tmp.path().join("xdg-config");
    let home = p.tmp.path().join("user-home");
    fs::create_dir_all(&home).unwrap();
    let service = |args: &[&str]| {
        p.hitl()
            .arg("service")
            .args(args)
            .env("XDG_CONFIG_HOME", &config)
            .env("HOME", &home)
            .output()
            .unwrap()
    };
    // systemd: the unit as systemd itself reads it.
    let out = service(&["install", "--dry-run", "--manager", "systemd"]);
    assert!(out.status.success(), "{out:?}");
    let unit = p.tmp.path().join("hitl.service");
    fs::write(&unit, &out.stdout).unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(" listen --ui none ") && text.contains("Restart=on-failure"),
        "{text}"
    );
    let verify = std::process::Command::new("systemd-analyze")
        .arg("verify")
        .arg(&unit)
        .output()
        .expect("systemd-analyze is installed (tools/test-all installs it)");
    assert!(
        verify.status.success() && verify.stderr.is_empty(),
        "{verify:?}\n{text}"
    );
    assert!(!config.exists(), "--dry-run writes nothing");
    // launchd: a property list that parses, running the same command.
    let out = service(&["install", "--dry-run", "--manager", "launchd"]);
    assert!(out.status.success(), "{out:?}");
    let plist = std::process::Command::new("python3")
        .args([
            "-c",
            "import plistlib,sys,json; print(json.dumps(plistlib.loads(sys.stdin.buffer.read())))",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    plist
        .stdin
        .as_ref()
        .unwrap()
        .write_all(&out.stdout)
        .unwrap();
    let parsed = plist.wait_with_output().unwrap();
    assert!(parsed.status.success(), "{parsed:?}");
    let v: Value = serde_json::from_slice(&parsed.stdout).unwrap();
    assert_eq!(v["Label"], "dev.hitl.listener");
    assert_eq!(v["ProgramArguments"][1], "listen", "{v}");
    // Installed: the unit where systemd looks; here no user session starts it, and
    // that is said, not failed. Status says so; uninstall takes it away.
    let out = service(&["install", "--manager", "systemd"]);
    assert!(out.status.success(), "{out:?}");
    assert!(config.join("systemd/user/hitl.service").exists());
    let out = service(&["status", "--manager", "systemd", "--json"]);
    assert!(out.status.success(), "{out:?}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["installed"], true, "{v}");
    let out = service(&["uninstall", "--manager", "systemd"]);
    assert!(out.status.success(), "{out:?}");
    assert!(!config.join("systemd/user/hitl.service").exists());
    assert!(
        !service(&["status", "--manager", "systemd"])
            .status
            .success()
    );
    // A folder that is not a project is refused.
    let out = service(&["install", "--dry-run", "/"]);
    assert!(!out.status.success(), "{out:?}");
}

/// The default port (4000), held by another of the user's programs (here the test;
/// in use, another project's listener), gives way to this project's own port, the
/// same after a restart, so its dashboard tab and links keep working. A port the
/// user chose is kept or refused: tests/it/human.rs.
#[test]
fn the_default_port_gives_way_to_the_projects_own_port_the_same_each_run() {
    // A project whose own port is free now: under the whole suite's load another
    // test's connection may hold any port for a moment (the listener would then
    // serve on another, rightly).
    let p = (0..20)
        .map(|_| Project::new())
        .find(|p| {
            let own = hitl::server::project_port(&p.dir.canonicalize().unwrap());
            std::net::TcpListener::bind(("127.0.0.1", own)).is_ok()
        })
        .expect("a project whose own port is free");
    // Held by this test if it can be had (other tests' listeners take it in turn);
    // else by whichever of this user's listeners holds it, which gives way the same.
    let default = hitl::config::DEFAULT_LISTEN_ADDR;
    let hold = |held: &mut Option<std::net::TcpListener>| {
        let since = std::time::Instant::now();
        while held.is_none() && since.elapsed() < Duration::from_secs(10) {
            *held = std::net::TcpListener::bind(default).ok();
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    let mut held = None;
    hold(&mut held);
    let own = hitl::server::project_port(&p.dir.canonicalize().unwrap());
    let expected = format!("http://127.0.0.1:{own}");
    let listener = p.listen(&["--ui", "none"]);
    assert_eq!(p.http_url(), expected, "{}", listener.log());
    assert!(
        listener.log().contains("taken by your own"),
        "{}",
        listener.log()
    );
    // `hitl dashboard` finds it where it is.
    let out = p.run(&["dashboard", "--json"]);
    assert!(out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains(&expected),
        "{out:?}"
    );
    drop(listener);
    // Still held (a listener of another test that held it may have stopped since).
    hold(&mut held);
    let listener = p.listen(&["--ui", "none"]);
    assert_eq!(p.http_url(), expected, "{}", listener.log());
    drop(held);
}

#[test]
fn the_demo_runs_to_the_end_by_itself_and_leaves_nothing_behind() {
    let p = Project::new();
    let tmp = p.tmp.path().join("tmp");
    fs::create_dir_all(&tmp).unwrap();
    let child = p
        .hitl()
        .args(["demo", "--auto-answer"])
        .env("TMPDIR", &tmp)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let out = wait_output(child, Duration::from_secs(60));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    for (agent, kind, answer) in [
        ("release-writer", "text", "Made by hitl demo"),
        ("db-migrator", "yesno", "yes"),
        ("deployer", "select", "eu-west-1"),
        ("ci-fixer", "multiselect", "unit tests"),
        ("refactorer", "approval", "approved"),
        ("architect", "questions", "PostgreSQL"),
        ("planner", "plan", "approved"),
    ] {
        assert!(
            stdout
                .lines()
                .any(|l| l.contains(agent) && l.contains(kind) && l.contains(answer)),
            "{agent} ({kind}) heard {answer:?}:\n{stdout}"
        );
    }
    assert!(stdout.contains("7 of 7 agents heard back"), "{stdout}");
    // The throwaway project is gone, and the user's history has none of it.
    assert_eq!(fs::read_dir(&tmp).unwrap().count(), 0);
    assert!(!p.home.join("hitl.db").exists());
}

/// `hitl ask --type number --min --max`: `hitl answer` is refused outside the range or
/// with anything but a number, and a number inside is printed by the asker.
#[test]
fn a_number_question_is_answered_with_a_number_in_its_range() {
    let p = Project::new();
    let out = p.run(&[
        "ask",
        "--type",
        "number",
        "--min",
        "5",
        "--max",
        "1",
        "How many?",
    ]);
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    let out = p.run(&["ask", "--min", "1", "How many?"]);
    assert_eq!(
        out.status.code(),
        Some(3),
        "--min without --type number: {out:?}"
    );
    let child = spawn_ask(
        &p,
        &[
            "--type",
            "number",
            "--min",
            "-2",
            "--max",
            "10",
            "--timeout",
            "30",
            "How many?",
        ],
    );
    let id = p.wait_pending(1, Duration::from_secs(10))[0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    for (bad, why) in [
        ("11", "more than 10"),
        ("-3", "less than -2"),
        ("lots", "not a number"),
    ] {
        let out = p.run(&["answer", &id, bad]);
        assert!(!out.status.success(), "{bad}: {out:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(why),
            "{bad}: {out:?}"
        );
    }
    assert!(p.run(&["answer", &id, "-1.5"]).status.success());
    let out = wait_output(child, Duration::from_secs(10));
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "-1.5\n");
}

/// `hitl history | head -1`: every command that prints ends quietly when its reader
/// has gone, as `ls` does (killed by SIGPIPE, or exit 0), never with a panic. The
/// pipe's reading end is closed before the command starts, so its first write
/// meets the closed pipe whatever the timing.
#[test]
fn every_printing_command_ends_quietly_when_its_reader_stops() {
    use std::os::unix::process::ExitStatusExt;
    let p = Project::new();
    // Something to list: a question answered and one cancelled, and a rule.
    let listener = p.listen(&["--ui", "none", "--auto-answer", "yes"]);
    let asked = p.run(&["ask", "--type", "approval", "Go?"]);
    assert!(asked.status.success(), "{asked:?}");
    drop(listener);
    assert!(
        p.run(&["rules", "add", "Bash(cargo test:*)"])
            .status
            .success()
    );
    let commands: &[&[&str]] = &[
        &["pending"],
        &["pending", "--json"],
        &["agents"],
        &["agents", "--json"],
        &["history"],
        &["history", "--json"],
        &["rules"],
        &["rules", "list"],
        &["token"],
        &["completions", "bash"],
        &["man"],
        &["doctor"],
        &["status"],
        &["status", "--json"],
        &["help"],
        &["--help"],
        &["history", "--help"],
        &["gc"],
        &["task", "list"],
        &["task", "sessions"],
        &["mailbox", "list"],
        &["service", "status"],
        &["--version"],
    ];
    for args in commands {
        let (reader, writer) = nix::unistd::pipe().unwrap();
        drop(reader);
        let out = p
            .hitl()
            .args(*args)
            .stdout(Stdio::from(writer))
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !stderr.contains("panicked") && !stderr.contains("Broken pipe"),
            "hitl {args:?} with its reader gone: {stderr}"
        );
        // 101 is a panic's; a command may fail for its own reasons (no listener).
        let quiet = out.status.signal() == Some(nix::libc::SIGPIPE)
            || out.status.code().is_some_and(|c| c != 101);
        assert!(
            quiet,
            "hitl {args:?} with its reader gone: {:?}",
            out.status
        );
    }
}
