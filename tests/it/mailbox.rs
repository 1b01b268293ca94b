//! Mailboxes (seed 003): the KEY=VALUE files hitl writes are read back exactly by
//! our reader, by bash's `source` and by dash's `.`; the seed's own narrator and
//! scribe loops run against the listener's relay in place of the trampoline, and
//! the same pair written with `hitl mailbox` runs without a sleep; agents killed,
//! listeners killed and asks killed lose and repeat nothing.

use std::{
    fs,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::Duration,
};

use crate::support::{Project, eventually, hitl_bin, seeds, wait_output};

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

/// The first ```bash block after `heading` in seed 003.
fn seed_block(heading: &str) -> String {
    let seeds = seeds().expect("the seeds: each test using them looks first");
    let file = fs::read_dir(&seeds)
        .unwrap()
        .filter_map(Result::ok)
        .find(|e| e.file_name().to_string_lossy().starts_with("003_"))
        .expect("seed 003")
        .path();
    let text = fs::read_to_string(file).unwrap();
    let after = &text[text
        .find(heading)
        .unwrap_or_else(|| panic!("{heading:?} not in seed 003"))..];
    let start = after.find("```bash\n").expect("a bash block") + "```bash\n".len();
    let body = &after[start..];
    body[..body.find("\n```").expect("the end of the block") + 1].to_string()
}

/// `text` with `placeholder` filled in by `with` (the placeholder must be there:
/// a changed seed fails here, not later).
fn fill(text: &str, placeholder: &str, with: &str) -> String {
    assert!(
        text.contains(placeholder),
        "seed 003 no longer has {placeholder:?}:\n{text}"
    );
    text.replacen(placeholder, with, 1)
}

/// The transcript line a filled-in placeholder appends (the seed's own format).
fn log_line(agent: &str, event: &str, message: &str) -> String {
    format!(
        "echo \"[$(date '+%Y-%m-%d %H:%M:%S')] [AGENT:{agent}] [{event}] {message}\" >> \"$RUN/transcript.log\""
    )
}

/// Seed 003's narrator: its planning, approval, executing and completion blocks in
/// the folders they are written for, with only its placeholders filled in (three
/// commits, a transcript line per commit).
fn seed_narrator() -> String {
    let executing = fill(
        &seed_block("**Step 3: Executing**"),
        "for i in 1 2 3 ... N; do",
        "for i in 1 2 3; do",
    );
    let executing = fill(
        &executing,
        "# Log success, continue to next commit",
        &log_line("narrator", "COMMIT", "$i $COMMIT_HASH $MESSAGE"),
    );
    format!(
        "cd \"$RUN\"\n{}cd narrator\n{}{}cd ..\n{}",
        seed_block("**Step 1: Planning**"),
        seed_block("**Step 2: Ask User for Plan Approval**"),
        executing,
        seed_block("**Step 3: Completion**"),
    )
}

/// Seed 003's scribe: its initialisation and main loop in its folder, commit 2
/// being the one too large, which it asks the user how to split.
///
/// The seed's two loops race: the scribe looks at its inbox a second after it
/// wrote a result, and the narrator, polling each second too, removes the
/// request only after it has read that result. Under load the scribe can find
/// the same request again and do it twice (asking the user twice: CI saw it).
/// Its filled-in analysis skips a request it has done, as an agent writing
/// that step would.
fn seed_scribe() -> String {
    let main = fill(
        &seed_block("**Main Loop:**"),
        "# Analyze the commit size",
        "[ \"$COMMIT_NUMBER\" = \"${DONE:-}\" ] && { echo idle > status; sleep 1; continue; }\n    \
         FILES_TOO_MANY=0; [ \"$COMMIT_NUMBER\" = 2 ] && FILES_TOO_MANY=1",
    );
    let main = fill(
        &main,
        "# Create multiple commits based on answer\n      # ...",
        &format!(
            "hash=split$COMMIT_NUMBER; message=\"$DESCRIPTION\"; count=18; DONE=$COMMIT_NUMBER\n      {}",
            log_line("scribe", "SPLIT", "$ANSWER")
        ),
    );
    let main = fill(
        &main,
        "# Create single commit\n      # ...",
        "hash=c$COMMIT_NUMBER; message=\"$DESCRIPTION\"; count=1; DONE=$COMMIT_NUMBER",
    );
    format!(
        "cd \"$RUN/scribe\"\n{}{}",
        seed_block("**Initialization:**"),
        main
    )
}

/// Runs `script` with bash in the background, `hitl` on its PATH, `RUN` set.
fn agent(p: &Project, run: &Path, script: &str) -> Child {
    let bin = hitl_bin();
    let path = format!(
        "{}:{}",
        bin.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    Command::new("bash")
        .arg("-c")
        .arg(script)
        .env("RUN", run)
        .env("PATH", path)
        .env("HITL_HOME", &p.home)
        .current_dir(&p.dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// The seed's run folder, as its trampoline makes it, plus a commit plan in its
/// state (the narrator's `jq -r '.commit_plan'` reads it from its own folder, so
/// the folder gets a link to it: the seed's cwd is ambiguous there).
fn seed_run(parent: &Path) -> PathBuf {
    let run = parent.join(format!("historian-{}", std::process::id()));
    for d in ["narrator", "scribe/inbox", "scribe/outbox"] {
        fs::create_dir_all(run.join(d)).unwrap();
    }
    fs::write(
        run.join("state.json"),
        serde_json::json!({
            "timestamp": "20261127-050000",
            "original_branch": "class-attribute",
            "commit_plan": "1. parser\n2. models, controllers, routes\n3. docs",
        })
        .to_string(),
    )
    .unwrap();
    std::os::unix::fs::symlink("../state.json", run.join("narrator/state.json")).unwrap();
    fs::write(run.join("transcript.log"), "").unwrap();
    run
}

fn report(run: &Path) -> Option<serde_json::Value> {
    serde_json::from_slice(&fs::read(run.join(".hitl/report.json")).ok()?).ok()
}

fn wait_report(run: &Path, within: Duration) -> serde_json::Value {
    eventually("the run's report", within, || report(run).is_some());
    report(run).unwrap()
}

fn mailbox_history(p: &Project) -> Vec<serde_json::Value> {
    p.history()
        .into_iter()
        .filter(|h| h["origin"] == "mailbox")
        .collect()
}

#[test]
fn the_seeds_own_loops_run_against_the_relay_answered_automatically() {
    if seeds().is_none() {
        return;
    }
    let p = Project::new();
    let runs = p.tmp.path().join("runs");
    fs::create_dir_all(&runs).unwrap();
    let pattern = format!("{}/historian-*", runs.display());
    let _l = p.listen(&["--ui", "none", "--auto-answer", "x", "--mailbox", &pattern]);
    let run = seed_run(&runs);
    let narrator = agent(&p, &run, &seed_narrator());
    let scribe = agent(&p, &run, &seed_scribe());
    let n = wait_output(narrator, Duration::from_secs(120));
    let s = wait_output(scribe, Duration::from_secs(120));
    assert!(n.status.success(), "narrator: {n:?}");
    assert!(s.status.success(), "scribe: {s:?}");
    let report = wait_report(&run, Duration::from_secs(10));
    assert_eq!(report["state"], "done", "{report:#}");
    let transcript = fs::read_to_string(run.join("transcript.log")).unwrap();
    for i in 1..=3 {
        assert!(
            transcript.contains(&format!("[AGENT:narrator] [COMMIT] {i} ")),
            "{transcript}"
        );
    }
    // The first option, as `source answer` gave it to the scribe.
    assert!(
        transcript.contains("[AGENT:scribe] [SPLIT] Option 1\n"),
        "{transcript}"
    );
    let asked = mailbox_history(&p);
    assert_eq!(asked.len(), 2, "{asked:#?}");
    assert!(
        asked.iter().all(|h| h["status"] == "answered"),
        "{asked:#?}"
    );
    // The plan, many lines long, was shown with the question.
    assert!(
        asked.iter().any(|h| h["content"]
            .as_str()
            .is_some_and(|c| c.contains("PLAN:\n1. parser\n2. models"))),
        "{asked:#?}"
    );
    assert!(!run.join("narrator/question").exists() && !run.join("narrator/answer").exists());
    // The transcript's lines and the run's end are its activity feed.
    let events: Vec<serde_json::Value> = reqwest::blocking::Client::new()
        .get(format!("{}/api/v1/events?limit=500", p.http_url()))
        .bearer_auth(p.token())
        .send()
        .unwrap()
        .json()
        .unwrap();
    let of = |kind: &str| -> Vec<&serde_json::Value> {
        events
            .iter()
            .filter(|e| e["hook_event_type"] == kind)
            .collect()
    };
    let lines = of("MailboxTranscript");
    assert!(
        lines.iter().any(|e| e["payload"]["event"] == "COMMIT"
            && e["payload"]["agent"] == "narrator"
            && e["payload"]["message"].as_str().unwrap().starts_with("3 ")),
        "{events:#?}"
    );
    assert!(
        of("MailboxRunEnded")
            .iter()
            .any(|e| e["payload"]["state"] == "done"),
        "{events:#?}"
    );
    assert!(
        of("MailboxStatus")
            .iter()
            .any(|e| e["payload"]["status"] == "executing"),
        "{events:#?}"
    );
}

#[test]
fn the_seeds_loops_get_the_option_answered_with_hitl_answer() {
    if seeds().is_none() {
        return;
    }
    let p = Project::new();
    let _l = p.listen(&["--ui", "none"]);
    let run = p.tmp.path().join("run");
    let out = p.run(&[
        "mailbox",
        "init",
        run.to_str().unwrap(),
        "--state",
        "commit_plan=1. parser\n2. routes",
    ]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        run.to_str().unwrap()
    );
    std::os::unix::fs::symlink("../state.json", run.join("narrator/state.json")).unwrap();
    let narrator = agent(&p, &run, &seed_narrator());
    let scribe = agent(&p, &run, &seed_scribe());
    for (who, option, text) in [
        ("narrator", "1", "Proceed with this plan"),
        ("scribe", "2", "Split into 2 commits: backend, frontend"),
    ] {
        let pending = p.wait_pending(1, Duration::from_secs(30));
        let q = &pending[0];
        assert_eq!(q["origin"], "mailbox", "{q:#}");
        assert_eq!(q["agent_name"], who, "{q:#}");
        assert_eq!(q["type"], "select", "{q:#}");
        assert!(
            q["options"].as_array().unwrap().iter().any(|o| o == text),
            "{q:#}"
        );
        if who == "narrator" {
            // `hitl agents` lists the run's agents with the statuses they reported.
            let out = p.run(&["agents", "--json"]);
            let agents: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
            let narrator = agents
                .iter()
                .find(|a| a["agent_id"] == q["agent_id"])
                .unwrap_or_else(|| panic!("{agents:#?}"));
            assert_eq!(narrator["mailbox_status"], "planning", "{agents:#?}");
            assert_eq!(narrator["status"], "waiting", "{agents:#?}");
            assert_eq!(narrator["run"], run.to_str().unwrap(), "{agents:#?}");
            let text = String::from_utf8(p.run(&["agents"]).stdout).unwrap();
            assert!(text.contains("planning"), "{text}");
        }
        let id = q["id"].as_str().unwrap();
        let out = p.run(&["answer", id, option]);
        assert!(out.status.success(), "{out:?}");
        p.wait_pending(0, Duration::from_secs(10));
    }
    let n = wait_output(narrator, Duration::from_secs(120));
    let s = wait_output(scribe, Duration::from_secs(120));
    assert!(n.status.success() && s.status.success(), "{n:?}\n{s:?}");
    assert_eq!(wait_report(&run, Duration::from_secs(10))["state"], "done");
    let transcript = fs::read_to_string(run.join("transcript.log")).unwrap();
    assert!(
        transcript.contains("[AGENT:scribe] [SPLIT] Option 2\n"),
        "{transcript}"
    );
    let listed = p.run(&["mailbox", "list", "--json"]);
    let listed: serde_json::Value = serde_json::from_slice(&listed.stdout).unwrap();
    assert_eq!(listed[0]["state"], "done", "{listed:#}");
    assert_eq!(listed[0]["agents"]["scribe"], "done", "{listed:#}");
}

/// The seed's pair written with `hitl mailbox`: no sleep, no polling loop.
const NARRATOR: &str = r#"set -eu
M="hitl mailbox"
$M status "$RUN/narrator" planning --pid $$
printf '1. parser\n2. routes\n3. docs\n' > "$RUN/plan.txt"
$M log "$RUN" narrator PLAN "3 commits"
choice=$($M ask "$RUN/narrator" --context "Created commit plan with 3 commits" \
  --option "Proceed with this plan" --option "Cancel and return to original branch" \
  --plan "$RUN/plan.txt")
if [ "$choice" != "Proceed with this plan" ]; then $M status "$RUN/narrator" error; exit 1; fi
$M status "$RUN/narrator" executing
for i in 1 2 3; do
  $M send "$RUN/scribe" COMMIT_NUMBER=$i "DESCRIPTION=Commit $i: it's \"quoted\", \$HOME and \`id\`"
  eval "$($M result "$RUN/scribe")"
  if [ "$STATUS" != SUCCESS ]; then $M status "$RUN/narrator" error; exit 1; fi
  $M log "$RUN" narrator COMMIT "$i $COMMIT_HASH $MESSAGE"
  $M state "$RUN" commits_completed $i
done
$M status "$RUN/narrator" done
"#;

const SCRIBE: &str = r#"set -eu
M="hitl mailbox"
$M status "$RUN/scribe" idle --pid $$
while true; do
  rc=0; req=$($M recv "$RUN/scribe") || rc=$?
  if [ $rc = 4 ]; then break; fi
  if [ $rc != 0 ]; then exit $rc; fi
  eval "$req"
  $M status "$RUN/scribe" working
  hash=c$COMMIT_NUMBER
  if [ "$COMMIT_NUMBER" = 2 ]; then
    split=$($M ask "$RUN/scribe" --context "Commit 2 is too large (18 files)" \
      --option "Split into 3 commits: models, controllers, routes" \
      --option "Split into 2 commits: backend, frontend")
    $M log "$RUN" scribe SPLIT "$split"
    hash=split2
  fi
  $M reply "$RUN/scribe" STATUS=SUCCESS "COMMIT_HASH=$hash" "MESSAGE=$DESCRIPTION" FILES_CHANGED=1
  $M status "$RUN/scribe" idle
done
$M status "$RUN/scribe" done
"#;

#[test]
fn the_pair_written_with_hitl_mailbox_needs_no_sleep() {
    for script in [NARRATOR, SCRIBE] {
        assert!(!script.contains("sleep"), "{script}");
    }
    let p = Project::new();
    let _l = p.listen(&["--ui", "none", "--auto-answer", "x"]);
    let out = p.run(&["mailbox", "init", "--json"]);
    assert!(out.status.success(), "{out:?}");
    let init: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(init["registered"], true);
    let run = PathBuf::from(init["dir"].as_str().unwrap());
    // The project is a repository whose clean branch has two commits since the base:
    // the report lists them.
    let git = |args: &[&str]| {
        let out = Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
            .args(args)
            .current_dir(&p.dir)
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {out:?}");
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    };
    git(&["init", "-q"]);
    git(&["commit", "-q", "--allow-empty", "-m", "base"]);
    let base = git(&["rev-parse", "HEAD"]);
    git(&["checkout", "-q", "-b", "feature-clean"]);
    git(&["commit", "-q", "--allow-empty", "-m", "Add the parser"]);
    git(&["commit", "-q", "--allow-empty", "-m", "Add the docs"]);
    for (k, v) in [
        ("base_commit", base.as_str()),
        ("clean_branch", "feature-clean"),
    ] {
        assert!(
            p.run(&["mailbox", "state", run.to_str().unwrap(), k, v])
                .status
                .success()
        );
    }
    let narrator = agent(&p, &run, NARRATOR);
    let scribe = agent(&p, &run, SCRIBE);
    let n = wait_output(narrator, Duration::from_secs(60));
    let s = wait_output(scribe, Duration::from_secs(60));
    assert!(n.status.success(), "narrator: {n:?}");
    assert!(s.status.success(), "scribe: {s:?}");
    let report = wait_report(&run, Duration::from_secs(10));
    assert_eq!(report["state"], "done", "{report:#}");
    assert_eq!(report["state_json"]["commits_completed"], 3, "{report:#}");
    assert_eq!(report["clean_branch"], "feature-clean", "{report:#}");
    let commits: Vec<&str> = report["commits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap().split_once(' ').unwrap().1)
        .collect();
    assert_eq!(commits, ["Add the docs", "Add the parser"], "{report:#}");
    assert!(
        report["transcript_tail"]
            .as_array()
            .unwrap()
            .iter()
            .any(|l| l.as_str().unwrap().contains("[AGENT:narrator] [COMMIT] 3 "))
    );
    let transcript = fs::read_to_string(run.join("transcript.log")).unwrap();
    assert!(
        transcript.contains(
            "[AGENT:narrator] [COMMIT] 2 split2 Commit 2: it's \"quoted\", $HOME and `id`\n"
        ),
        "{transcript}"
    );
    assert!(
        transcript
            .contains("[AGENT:scribe] [SPLIT] Split into 3 commits: models, controllers, routes\n"),
        "{transcript}"
    );
    assert_eq!(mailbox_history(&p).len(), 2);
    let _ = fs::remove_dir_all(&run);
}

#[test]
fn an_agent_killed_mid_run_fails_the_run_and_withdraws_its_questions() {
    let p = Project::new();
    let _l = p.listen(&["--ui", "none"]);
    let out = p.run(&["mailbox", "init", "--json"]);
    let init: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let run = PathBuf::from(init["dir"].as_str().unwrap());
    let narrator = agent(&p, &run, NARRATOR);
    let mut scribe = agent(&p, &run, SCRIBE);
    // The narrator waits for the user; the scribe for a request.
    p.wait_pending(1, Duration::from_secs(30));
    eventually("the scribe's status", Duration::from_secs(10), || {
        fs::read_to_string(run.join("scribe/status")).is_ok_and(|s| s.trim() == "idle")
    });
    scribe.kill().unwrap();
    let _ = scribe.wait();
    let report = wait_report(&run, Duration::from_secs(5));
    assert_eq!(report["state"], "failed", "{report:#}");
    assert!(
        report["reason"].as_str().unwrap().contains("scribe"),
        "{report:#}"
    );
    // The killed agent is reported as in error, where its peers and hitl read it.
    assert_eq!(
        fs::read_to_string(run.join("scribe/status")).unwrap(),
        "error\n"
    );
    assert_eq!(report["agents"]["scribe"], "error", "{report:#}");
    // Its open question is withdrawn, and the narrator hears of it.
    p.wait_pending(0, Duration::from_secs(5));
    // The narrator, still running, is stopped as the seed's trampoline stops it.
    let n = wait_output(narrator, Duration::from_secs(10));
    assert!(!n.status.success(), "{n:?}");
    let asked = mailbox_history(&p);
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0]["status"], "cancelled", "{asked:#?}");
    let _ = fs::remove_dir_all(&run);
}

#[test]
fn a_listener_restart_and_a_killed_ask_lose_and_repeat_nothing() {
    let p = Project::new();
    let first = p.listen(&["--ui", "none"]);
    let run = p.tmp.path().join("run");
    assert!(
        p.run(&["mailbox", "init", run.to_str().unwrap()])
            .status
            .success()
    );
    let ask = |p: &Project| {
        spawn_mailbox_ask(
            p,
            &run.join("narrator"),
            &["--context", "Proceed?", "--option", "yes", "--option", "no"],
        )
    };
    let asker = ask(&p);
    let id = p.wait_pending(1, Duration::from_secs(30))[0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    // The listener dies; the next one has the same question, once.
    first.signal(nix::sys::signal::Signal::SIGKILL);
    let _second = p.listen(&["--ui", "none"]);
    let pending = p.wait_pending(1, Duration::from_secs(30));
    assert_eq!(pending[0]["id"], id.as_str());
    // The asker is stopped from outside (as Claude Code's Bash tool stops a
    // command); the question stays, the answer comes meanwhile.
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(asker.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let stopped = wait_output(asker, Duration::from_secs(10));
    assert_eq!(stopped.status.code(), Some(1), "{stopped:?}");
    assert!(run.join("narrator/question").exists());
    assert!(p.run(&["answer", &id, "2"]).status.success());
    eventually("the answer file", Duration::from_secs(10), || {
        run.join("narrator/answer").exists()
    });
    // The same ask, run again, gets that answer and asks nothing new.
    let again = wait_output(ask(&p), Duration::from_secs(10));
    assert!(again.status.success(), "{again:?}");
    assert_eq!(String::from_utf8_lossy(&again.stdout), "no\n");
    let asked = mailbox_history(&p);
    assert_eq!(asked.len(), 1, "{asked:#?}");
    assert_eq!(asked[0]["status"], "answered");
    assert!(p.pending().is_empty());
}

/// A listener without HTTP: what it relays from a mailbox is still listed by `hitl
/// pending` and counted by `hitl status` (from the list it keeps in the spool), and
/// leaves the list when it ends.
#[test]
fn without_http_a_relayed_question_is_listed_and_counted() {
    let p = Project::new();
    let listener = p.listen(&["--ui", "none", "--no-http"]);
    let run = init_run(&p, "run", &[]);
    let asker = spawn_mailbox_ask(
        &p,
        &run.join("narrator"),
        &["--context", "Proceed?", "--option", "yes", "--option", "no"],
    );
    let listed = p.wait_pending(1, Duration::from_secs(30));
    assert_eq!(listed[0]["origin"], "mailbox", "{listed:#?}");
    assert_eq!(listed[0]["content"], "Proceed?", "{listed:#?}");
    let status = p.run(&["status", "--json"]);
    let status: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(status["pending"], 1, "{status:#}");
    // The asker gives up: the question is withdrawn and leaves the list.
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(asker.id() as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let _ = wait_output(asker, Duration::from_secs(10));
    fs::remove_file(run.join("narrator/question")).unwrap();
    p.wait_pending(0, Duration::from_secs(30));
    listener.signal(nix::sys::signal::Signal::SIGTERM);
    assert!(
        !p.helpers().join("queue/held.json").exists(),
        "removed at the stop"
    );
}

/// `hitl mailbox ask MAILBOX ARGS` in the background.
fn spawn_mailbox_ask(p: &Project, mailbox: &Path, args: &[&str]) -> Child {
    p.hitl()
        .args(["mailbox", "ask", mailbox.to_str().unwrap()])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// `hitl mailbox init RUN` in `p`, with `extra` flags; the run's folder.
fn init_run(p: &Project, name: &str, extra: &[&str]) -> PathBuf {
    let run = p.tmp.path().join(name);
    let mut args = vec!["mailbox", "init", run.to_str().unwrap()];
    args.extend_from_slice(extra);
    let out = p.run(&args);
    assert!(out.status.success(), "{out:?}");
    run
}

fn set_status(p: &Project, mailbox: &Path, status: &str) {
    let out = p.run(&["mailbox", "status", mailbox.to_str().unwrap(), status]);
    assert!(out.status.success(), "{out:?}");
}

#[test]
fn a_run_fails_on_its_timeout_without_the_users_wait_and_on_a_missed_heartbeat() {
    let p = Project::new();
    let _l = p.listen(&["--ui", "none"]);
    let slow = init_run(&p, "slow", &["--timeout", "2"]);
    set_status(&p, &slow.join("narrator"), "working");
    set_status(&p, &slow.join("scribe"), "idle");
    let asker = spawn_mailbox_ask(&p, &slow.join("narrator"), &["--context", "Go on?"]);
    let q = p.wait_pending(1, Duration::from_secs(10)).pop().unwrap();
    assert_eq!(q["type"], "text", "no options: the user types the answer");
    // Longer than the run's timeout, all of it waiting for the user: not counted.
    std::thread::sleep(Duration::from_millis(3500));
    assert!(report(&slow).is_none(), "{:?}", report(&slow));
    assert!(
        p.run(&["answer", q["id"].as_str().unwrap(), "yes, go on"])
            .status
            .success()
    );
    let out = wait_output(asker, Duration::from_secs(10));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "yes, go on\n",
        "{out:?}"
    );
    // Now the agents' own time runs out.
    let r = wait_report(&slow, Duration::from_secs(10));
    assert_eq!(r["state"], "failed", "{r:#}");
    let reason = r["reason"].as_str().unwrap();
    assert!(reason.contains("longer than 2s"), "{reason}");
    assert!(r["waited_s"].as_f64().unwrap() >= 3.0, "{r:#}");

    let quiet = init_run(&p, "quiet", &["--heartbeat", "1", "--timeout", "0"]);
    set_status(&p, &quiet.join("narrator"), "working");
    let r = wait_report(&quiet, Duration::from_secs(10));
    assert!(
        r["reason"]
            .as_str()
            .unwrap()
            .contains("has not reported its status for 1s"),
        "{r:#}"
    );
}

#[test]
fn a_claude_code_sub_agent_that_stops_before_it_is_done_fails_its_run() {
    let p = Project::new();
    let _l = p.listen(&["--ui", "none"]);
    let run = init_run(&p, "run", &[]);
    let other = init_run(&p, "other", &[]);
    for r in [&run, &other] {
        set_status(&p, &r.join("scribe"), "working");
    }
    // The sub-agent's transcript holds its prompt, naming the run's folder.
    let transcript = p.tmp.path().join("agent-a1.jsonl");
    fs::write(
        &transcript,
        serde_json::json!({
            "type": "user",
            "message": { "role": "user", "content": format!("Work directory: {}", run.display()) }
        })
        .to_string()
            + "\n",
    )
    .unwrap();
    let input = serde_json::json!({
        "session_id": "3f1c2a9e-0000-4000-8000-000000000001",
        "transcript_path": p.tmp.path().join("session.jsonl"),
        "cwd": p.dir,
        "hook_event_name": "SubagentStop",
        "stop_hook_active": false,
        "agent_id": "a1",
        "agent_type": "historian:scribe",
        "agent_transcript_path": transcript,
        "last_assistant_message": "I could not finish.",
    });
    let mut hook = p
        .hitl()
        .args(["hook", "subagent-stop"])
        .env("CLAUDE_PROJECT_DIR", &p.dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(
        &mut hook.stdin.take().unwrap(),
        input.to_string().as_bytes(),
    )
    .unwrap();
    assert!(wait_output(hook, Duration::from_secs(30)).status.success());
    let r = wait_report(&run, Duration::from_secs(5));
    assert_eq!(r["state"], "failed", "{r:#}");
    assert!(
        r["reason"]
            .as_str()
            .unwrap()
            .contains("scribe's Claude Code sub-agent"),
        "{r:#}"
    );
    // The other run's scribe is another sub-agent: its run goes on.
    std::thread::sleep(Duration::from_millis(600));
    assert!(report(&other).is_none());
}

#[test]
fn mailbox_files_are_never_followed_through_symlinks() {
    let p = Project::new();
    let _l = p.listen(&["--ui", "none"]);
    let run = init_run(&p, "run", &[]);
    let secret = p.tmp.path().join("secret");
    fs::write(&secret, "CONTEXT=the user's secret\nOPTION_1=a\n").unwrap();
    let victim = p.tmp.path().join("victim");
    fs::write(&victim, "untouched\n").unwrap();
    // A question that is a link is not read, so never shown.
    std::os::unix::fs::symlink(&secret, run.join("scribe/question")).unwrap();
    // An answer that is a link is replaced, its target left alone.
    std::os::unix::fs::symlink(&victim, run.join("narrator/answer")).unwrap();
    let asker = spawn_mailbox_ask(
        &p,
        &run.join("narrator"),
        &["--context", "Which?", "--option", "a", "--option", "b"],
    );
    let pending = p.wait_pending(1, Duration::from_secs(10));
    assert_eq!(pending[0]["agent_name"], "narrator", "{pending:#?}");
    assert!(
        p.run(&["answer", pending[0]["id"].as_str().unwrap(), "b"])
            .status
            .success()
    );
    let out = wait_output(asker, Duration::from_secs(10));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "b\n", "{out:?}");
    assert_eq!(fs::read_to_string(&victim).unwrap(), "untouched\n");
    assert!(p.pending().is_empty());
    assert!(
        !p.history()
            .iter()
            .any(|h| h["content"].as_str().is_some_and(|c| c.contains("secret")))
    );
}

#[test]
fn commands_refuse_what_cannot_be_and_old_runs_are_listed_and_collected() {
    let p = Project::new();
    let _l = p.listen(&["--ui", "none"]);
    let run = init_run(&p, "run", &["--agents", "writer,reviewer"]);
    let out = p.run(&[
        "mailbox",
        "send",
        run.join("scribe").to_str().unwrap(),
        "A=1",
    ]);
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no agent \"scribe\"") && err.contains("reviewer, writer"),
        "{err}"
    );
    let reviewer = run.join("reviewer");
    let out = p.run(&["mailbox", "send", reviewer.to_str().unwrap(), "not a pair"]);
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    assert!(
        p.run(&["mailbox", "send", reviewer.to_str().unwrap(), "A=1"])
            .status
            .success()
    );
    let out = p.run(&["mailbox", "send", reviewer.to_str().unwrap(), "A=2"]);
    assert_eq!(out.status.code(), Some(3), "one request at a time: {out:?}");
    let out = p.run(&["mailbox", "recv", reviewer.to_str().unwrap(), "--json"]);
    let got: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(got["A"], "1");
    let out = p.run(&[
        "mailbox",
        "result",
        reviewer.to_str().unwrap(),
        "--timeout",
        "0.2",
    ]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        p.run(&[
            "mailbox",
            "reply",
            reviewer.to_str().unwrap(),
            "STATUS=SUCCESS"
        ])
        .status
        .success()
    );
    // Every other agent done: recv says so with its own exit code.
    set_status(&p, &run.join("writer"), "done");
    let out = p.run(&["mailbox", "recv", reviewer.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(4), "the writer is done: {out:?}");
    set_status(&p, &reviewer, "done");
    // State.
    assert!(
        p.run(&[
            "mailbox",
            "state",
            run.to_str().unwrap(),
            "commits_completed",
            "2"
        ])
        .status
        .success()
    );
    let out = p.run(&[
        "mailbox",
        "state",
        run.to_str().unwrap(),
        "commits_completed",
    ]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "2\n");
    // Listed, then collected once old.
    assert_eq!(wait_report(&run, Duration::from_secs(10))["state"], "done");
    let out = p.run(&["mailbox", "list"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("done") && text.contains("writer: done"),
        "{text}"
    );
    let out = p.run(&["mailbox", "gc", "--older-than", "1h", "--json"]);
    let gc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(gc["runs"].as_array().unwrap().len(), 0, "{gc:#}");
    let out = p.run(&["mailbox", "gc", "--older-than", "0", "--dry-run"]);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("would delete 1 run"),
        "{out:?}"
    );
    assert!(run.exists());
    assert!(
        p.run(&["mailbox", "gc", "--older-than", "0"])
            .status
            .success()
    );
    assert!(!run.exists());
    let out = p.run(&["mailbox", "list", "--json"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "[]");
}

#[test]
fn without_inotify_the_relay_reads_the_runs_on_its_tick() {
    let p = Project::new();
    let mut listen = p.hitl();
    listen
        .env("HITL_FORCE_POLL", "1")
        .args(["listen", "--ui", "none"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let _l = crate::support::Listener::start(listen);
    let run = init_run(&p, "run", &[]);
    let asker = spawn_mailbox_ask(
        &p,
        &run.join("narrator"),
        &["--context", "Polled?", "--option", "yes", "--option", "no"],
    );
    let q = p.wait_pending(1, Duration::from_secs(10)).pop().unwrap();
    assert!(
        p.run(&["answer", q["id"].as_str().unwrap(), "1"])
            .status
            .success()
    );
    let out = wait_output(asker, Duration::from_secs(10));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "yes\n", "{out:?}");
    set_status(&p, &run.join("narrator"), "done");
    set_status(&p, &run.join("scribe"), "done");
    assert_eq!(wait_report(&run, Duration::from_secs(10))["state"], "done");
}

#[test]
fn runs_another_user_could_write_are_not_relayed() {
    use std::os::unix::fs::PermissionsExt;
    let p = Project::new();
    let runs = p.tmp.path().join("runs");
    fs::create_dir_all(&runs).unwrap();
    let pattern = format!("{}/historian-*", runs.display());
    let _l = p.listen(&["--ui", "none", "--mailbox", &pattern]);
    let question = |run: &Path, text: &str| {
        fs::create_dir_all(run.join("narrator")).unwrap();
        fs::write(
            run.join("narrator/question"),
            format!("CONTEXT={text}\nOPTION_1=a\nOPTION_2=b\n"),
        )
        .unwrap();
    };
    // Writable by anyone (as /tmp is): another user could have put it there.
    let open = runs.join("historian-open");
    question(&open, "from an open folder");
    fs::set_permissions(&open, fs::Permissions::from_mode(0o777)).unwrap();
    // Another user's (made so as root, which CI is).
    let theirs = runs.join("historian-theirs");
    question(&theirs, "from another user");
    let chowned = nix::unistd::chown(&theirs, Some(nix::unistd::Uid::from_raw(65534)), None);
    // Ours.
    let ours = runs.join("historian-ours");
    question(&ours, "from our own run");
    let pending = p.wait_pending(1, Duration::from_secs(10));
    assert_eq!(pending[0]["content"], "from our own run", "{pending:#?}");
    std::thread::sleep(Duration::from_millis(600));
    let pending = p.pending();
    assert_eq!(pending.len(), 1, "{pending:#?}");
    if chowned.is_err() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI runs as root, which can give a folder away"
        );
    }
}
