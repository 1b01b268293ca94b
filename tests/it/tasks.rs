//! Tasks (seed 002): summaries read as the seed reads them, and more.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;

use proptest::prelude::*;
use serde_json::{Value, json};

use crate::support::{Listener, Project, seeds};

/// Seed 002's `_extract_key_deliverables_from_summary`, cut out of the seed's text and
/// run by python3 as written, one summary per line of JSON in, its list out.
struct SeedParser {
    _child: Child,
    input: ChildStdin,
    output: BufReader<ChildStdout>,
}

impl SeedParser {
    fn start() -> SeedParser {
        let seed = std::fs::read_dir(seeds().expect("the seeds: the test looks first"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.file_name().unwrap().to_string_lossy().starts_with("002_"))
            .expect("seed 002");
        let text = std::fs::read_to_string(seed).unwrap();
        let start = text
            .find("def _extract_key_deliverables_from_summary")
            .expect("the seed's parser");
        let end = start + text[start..].find("\ndef ").expect("the function's end");
        // A method in the seed: dedented as it is, called with no `self`.
        let function = &text[start..end];
        let program = format!(
            "import json, sys\n{function}\n\
             for line in sys.stdin:\n\
             \x20   print(json.dumps(_extract_key_deliverables_from_summary(None, json.loads(line))), flush=True)\n"
        );
        let mut child = Command::new("python3")
            .args(["-c", &program])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3");
        SeedParser {
            input: child.stdin.take().unwrap(),
            output: BufReader::new(child.stdout.take().unwrap()),
            _child: child,
        }
    }

    fn deliverables(&mut self, summary: &str) -> Vec<String> {
        writeln!(self.input, "{}", serde_json::to_string(summary).unwrap()).unwrap();
        let mut line = String::new();
        self.output.read_line(&mut line).unwrap();
        serde_json::from_str(&line).expect("the seed's answer")
    }
}

/// Seed 002's section headings, in its order.
const SECTIONS: [&str; 6] = [
    "Objective",
    "Accomplishments",
    "Key Deliverables",
    "Test Results",
    "Important Notes",
    "Status",
];

/// A summary as an agent following seed 002's template writes it: its sections in
/// any order, some missing, list items of text and paths.
fn summary() -> impl Strategy<Value = (String, Vec<String>, bool)> {
    let word = "[A-Za-z0-9][A-Za-z0-9 .,/]{0,20}";
    let path = "[a-z][a-z0-9_/]{0,12}\\.[a-z]{1,3}";
    (
        Just(SECTIONS.to_vec()).prop_shuffle(),
        0usize..6,
        proptest::collection::vec((path, proptest::option::of(word)), 0..7),
        proptest::collection::vec(word, 0..4),
        any::<bool>(),
    )
        .prop_map(|(order, drop, files, words, heading_case)| {
            let mut text = String::from("# Task Completion Summary\n\n");
            let mut last = false;
            let shown: Vec<&str> = order
                .iter()
                .copied()
                .enumerate()
                .filter(|(i, s)| *i != drop || *s == "Key Deliverables")
                .map(|(_, s)| s)
                .collect();
            for (i, section) in shown.iter().enumerate() {
                let title = if heading_case && *section == "Key Deliverables" {
                    "key deliverables".to_string()
                } else {
                    section.to_string()
                };
                text.push_str(&format!("## {title}\n"));
                if *section == "Key Deliverables" {
                    last = i == shown.len() - 1;
                    for (f, about) in &files {
                        match about {
                            Some(a) => text.push_str(&format!("- `{f}` - {a}\n")),
                            None => text.push_str(&format!("- `{f}`\n")),
                        }
                    }
                } else {
                    for w in &words {
                        text.push_str(&format!("- {w}\n"));
                    }
                }
                text.push('\n');
            }
            let paths = files.into_iter().map(|(f, _)| f).collect();
            (text, paths, last)
        })
}

/// Ours and the seed's own parser agree on every summary the template makes, but
/// where the Key Deliverables section is the last one: the seed's regex needs a
/// `##` after it and finds nothing; ours reads to the end of the file.
#[test]
fn deliverables_are_read_as_the_seeds_own_parser_reads_them() {
    if seeds().is_none() {
        return;
    }
    let seed = Mutex::new(SeedParser::start());
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: 300,
        ..ProptestConfig::default()
    });
    let missed_by_the_seed = std::cell::Cell::new(0);
    runner
        .run(&summary(), |(text, paths, last)| {
            let ours: Vec<String> = hitl::tasks::summary::parse(&text)
                .deliverables
                .into_iter()
                .map(|d| d.path)
                .collect();
            let theirs = seed.lock().unwrap().deliverables(&text);
            prop_assert_eq!(&ours, &paths, "ours, on\n{}", text);
            if last && !paths.is_empty() {
                prop_assert_eq!(
                    theirs,
                    Vec::<String>::new(),
                    "the seed's, last, on\n{}",
                    text
                );
                missed_by_the_seed.set(missed_by_the_seed.get() + 1);
            } else {
                prop_assert_eq!(&theirs, &paths, "the seed's, on\n{}", text);
            }
            Ok(())
        })
        .unwrap();
    assert!(
        missed_by_the_seed.get() > 0,
        "the last-section case was never made"
    );
}

/// The Claude Code version the task tests run (tools/test-all installs it).
const CLAUDE_VERSION: &str = "2.1.332";

/// The real `claude` binary, from npm's `@anthropic-ai/claude-code-linux-x64` (set
/// `HITL_TEST_CLAUDE` to use another); `None` (skip) outside CI only.
fn claude_binary() -> Option<PathBuf> {
    let path = std::env::var_os("HITL_TEST_CLAUDE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
                .join(".cache/hitl/claude")
                .join(CLAUDE_VERSION)
                .join("package/claude")
        });
    let tmux = Command::new("tmux").arg("-V").output().is_ok();
    if path.is_file() && tmux {
        return Some(path);
    }
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "CI must have tmux and Claude Code {CLAUDE_VERSION} at {} (tools/test-all installs them)",
        path.display()
    );
    eprintln!("skipping the task tests: no tmux, or no {}", path.display());
    None
}

/// The real Claude Code, offline: a stand-in Messages API, a HOME that has seen
/// Claude Code's first run, and a tmux server of the test's own.
struct ClaudeRig {
    claude: PathBuf,
    /// A folder on the agents' PATH holding `claude`, as a user has it.
    bin: PathBuf,
    api: Child,
    base_url: String,
    home: PathBuf,
    tmux_dir: PathBuf,
    _tmp: tempfile::TempDir,
}

/// The API key Claude Code is given (its last 20 characters are marked approved).
const API_KEY: &str = "sk-ant-api03-hitl-test-key-0123456789abcdefghij";

impl ClaudeRig {
    fn start() -> Option<ClaudeRig> {
        let claude = claude_binary()?;
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().join("home");
        let tmux_dir = tmp.path().join("tmux");
        std::fs::create_dir_all(&home).unwrap();
        std::fs::create_dir_all(&tmux_dir).unwrap();
        let bin = tmp.path().join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        std::os::unix::fs::symlink(&claude, bin.join("claude")).unwrap();
        let script = crate::support::checkout().join("tests/it/claude_api.py");
        let mut api = Command::new("python3")
            .arg(&script)
            .arg("0")
            .arg(tmp.path().join("api.log"))
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3");
        let mut line = String::new();
        BufReader::new(api.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port: u16 = line
            .trim()
            .strip_prefix("listening ")
            .expect("the stand-in's port")
            .parse()
            .unwrap();
        Some(ClaudeRig {
            claude,
            bin,
            api,
            base_url: format!("http://127.0.0.1:{port}"),
            home,
            tmux_dir,
            _tmp: tmp,
        })
    }

    /// Marks `workspace` as trusted, as Claude Code's first run would.
    fn trust(&self, workspace: &Path) {
        let path = self.home.join(".claude.json");
        let mut config: Value = std::fs::read(&path)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_else(|| json!({}));
        // What Claude Code's first run leaves (kept beside what `hitl init --claude`
        // wrote there).
        config["hasCompletedOnboarding"] = json!(true);
        config["customApiKeyResponses"] = json!({
            "approved": [API_KEY[API_KEY.len() - 20..]],
            "rejected": [],
        });
        if !config["projects"].is_object() {
            config["projects"] = json!({});
        }
        let mut project = config["projects"][workspace.to_string_lossy().as_ref()].take();
        if !project.is_object() {
            project = json!({});
        }
        project["hasTrustDialogAccepted"] = json!(true);
        if project["enabledMcpjsonServers"].is_null() {
            project["enabledMcpjsonServers"] = json!([]);
        }
        config["projects"][workspace.to_string_lossy().as_ref()] = project;
        std::fs::write(&path, serde_json::to_vec_pretty(&config).unwrap()).unwrap();
    }

    /// Sets what Claude Code (started by the listener's tmux server) needs.
    fn env(&self, c: &mut Command) {
        c.env("HOME", &self.home)
            .env("ANTHROPIC_API_KEY", API_KEY)
            .env("ANTHROPIC_BASE_URL", &self.base_url)
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
            .env("DISABLE_AUTOUPDATER", "1")
            // A refused key fails at once, not after ten retries over minutes.
            .env("CLAUDE_CODE_MAX_RETRIES", "0")
            .env("TMUX_TMPDIR", &self.tmux_dir)
            .env(
                "PATH",
                format!("{}:{}", self.bin.display(), crate::readme::path()),
            );
    }

    /// `hitl listen` in `project`, its tasks' agents able to reach the stand-in.
    fn listen(&self, project: &Project) -> Listener {
        self.listen_with(project, &[])
    }

    /// The same with more flags.
    fn listen_with(&self, project: &Project, more: &[&str]) -> Listener {
        let mut cmd = project.hitl();
        self.env(&mut cmd);
        cmd.args(["listen", "--ui", "none", "--http", "127.0.0.1:0"])
            .args(more)
            .stderr(Stdio::piped())
            .stdout(Stdio::piped());
        Listener::start(cmd)
    }

    /// `hitl task ARGS` in `project`.
    fn task(&self, project: &Project, args: &[&str]) -> std::process::Output {
        let mut cmd = project.hitl();
        self.env(&mut cmd);
        cmd.arg("task").args(args).output().unwrap()
    }

    /// `hitl task ARGS --json`, which must succeed.
    fn task_json(&self, project: &Project, args: &[&str]) -> Value {
        let mut all = args.to_vec();
        all.push("--json");
        let out = self.task(project, &all);
        assert!(
            out.status.success(),
            "hitl task {args:?}: {}\n{}",
            String::from_utf8_lossy(&out.stderr),
            self.peek(project)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }

    /// Every session's screen, for failure messages.
    fn peek(&self, project: &Project) -> String {
        let mut cmd = project.hitl();
        self.env(&mut cmd);
        let out = cmd.args(["task", "sessions", "--json"]).output().unwrap();
        let sessions: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        let mut shown = String::new();
        for s in sessions.as_array().into_iter().flatten() {
            let name = s["name"].as_str().unwrap_or("");
            let out = self.task(project, &["peek", name, "--lines", "60"]);
            shown += &format!("--- {name}\n{}\n", String::from_utf8_lossy(&out.stdout));
        }
        let log = std::fs::read_to_string(self._tmp.path().join("api.log")).unwrap_or_default();
        shown + "--- the stand-in's log\n" + &log
    }

    /// Submits a task (`hitl task submit ARGS`); its id.
    fn submit(&self, project: &Project, args: &[&str]) -> String {
        let mut all = vec!["submit"];
        all.extend_from_slice(args);
        let s = self.task_json(project, &all);
        s["task"]["id"].as_str().unwrap().to_string()
    }

    /// `hitl task wait ID --timeout SECS --json`: how it exited, and the task.
    fn wait(&self, project: &Project, id: &str, secs: u32) -> (std::process::Output, Value) {
        let secs = secs.to_string();
        let out = self.task(project, &["wait", id, "--timeout", &secs, "--json"]);
        let task = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        (out, task)
    }

    /// Waits for task `id` to end completed (`hitl task wait` exits 0); its JSON.
    fn completed(&self, project: &Project, id: &str, secs: u32) -> Value {
        let (out, task) = self.wait(project, id, secs);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{id}: {task:#}\n{}",
            self.peek(project)
        );
        task
    }

    /// Waits for the pending question `pick` takes (`what` in the failure message,
    /// with task `task`'s status and every screen).
    fn question(
        &self,
        project: &Project,
        task: &str,
        what: &str,
        pick: impl Fn(&Value) -> bool,
    ) -> Value {
        let start = std::time::Instant::now();
        loop {
            if let Some(q) = project.pending().into_iter().find(&pick) {
                return q;
            }
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "no {what}: {:?}\n{:#}\n{}",
                project.pending(),
                self.task_json(project, &["status", task]),
                self.peek(project)
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// A project that is its own workspace, with hitl's hooks in Claude Code (`hitl
    /// init --claude`), trusted, a `build/` folder in it, and a listener someone
    /// attends.
    fn hooked_project(&self) -> (Project, Listener, PathBuf) {
        let project = Project::new();
        let listener = self.listen_with(&project, &["--attended"]);
        let mut init = project.hitl();
        self.env(&mut init);
        let out = init.args(["init", "--claude"]).output().unwrap();
        assert!(out.status.success(), "{out:?}");
        let ws = project.dir.canonicalize().unwrap();
        std::fs::create_dir_all(ws.join("build")).unwrap();
        self.trust(&ws);
        (project, listener, ws)
    }

    /// A session named `name` running the real Claude Code in a new workspace.
    fn session(&self, project: &Project, name: &str) -> PathBuf {
        let workspace = project.tmp.path().join(format!("ws-{name}"));
        std::fs::create_dir_all(&workspace).unwrap();
        let workspace = workspace.canonicalize().unwrap();
        self.trust(&workspace);
        let claude = self.claude.to_string_lossy().into_owned();
        let ws = workspace.to_string_lossy().into_owned();
        let s = self.task_json(
            project,
            &["session", name, "--workspace", &ws, "--command", &claude],
        );
        assert_eq!(s["name"], name);
        workspace
    }
}

impl Drop for ClaudeRig {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .env("TMUX_TMPDIR", &self.tmux_dir)
            .args(["-L", "hitl", "kill-server"])
            .output();
        let _ = self.api.kill();
        let _ = self.api.wait();
    }
}

/// Whether pending question `q` names task `id` (its `#task-…` label).
fn labelled(q: &Value, id: &str) -> bool {
    q["labels"]
        .as_array()
        .is_some_and(|l| l.iter().any(|t| t == &json!(format!("#{id}"))))
}

/// `[script: …]`: what the stand-in model does for a task.
fn scripted(what: &str, script: Value) -> String {
    format!("{what} [script: {script}]")
}

/// A task reaches the real Claude Code in tmux with no Enter pressed by anyone, runs
/// to its summary, and comes back read: the summary's sections, and the deliverables
/// it names that are inside the workspace (`../x`, `/etc/passwd` and a symlink out
/// are refused, each with its reason).
#[test]
fn a_task_reaches_claude_code_and_returns_its_summary_and_deliverables() {
    let Some(rig) = ClaudeRig::start() else {
        return;
    };
    let project = Project::new();
    let _listener = rig.listen(&project);
    let ws = rig.session(&project, "coder");
    std::fs::write(project.tmp.path().join("secret.txt"), "outside").unwrap();
    std::os::unix::fs::symlink(project.tmp.path().join("secret.txt"), ws.join("link")).unwrap();
    let instruction = scripted(
        "Write the greeting",
        json!({
            "write": { "out.txt": "hello\n", "src/lib.rs": "pub fn x() {}\n" },
            "deliverables": ["out.txt", "src/lib.rs", "../secret.txt", "/etc/passwd", "link"],
        }),
    );
    let submitted = rig.task_json(&project, &["submit", "coder", &instruction]);
    let id = submitted["task"]["id"].as_str().unwrap().to_string();
    assert!(id.starts_with("task-"), "{submitted}");
    let ended = rig.completed(&project, &id, 90);
    assert_eq!(
        (&ended["state"], &ended["outcome"], &ended["delivered"]),
        (&json!("completed"), &json!("completed"), &json!(true)),
        "{ended:#}"
    );
    // Turns and tokens from Claude Code's transcript (its hooks name it), read at the
    // summary and again once that turn has ended: at least the files written and the
    // summary (Claude Code writes a reply to it a moment later, sometimes after its
    // Stop hook). No cost: it does not write one.
    let start = std::time::Instant::now();
    while rig.task_json(&project, &["result", &id])["usage"]["turns"]
        .as_u64()
        .is_none_or(|t| t < 2)
    {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the whole turn's usage: {:#}",
            rig.task_json(&project, &["result", &id])["usage"]
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let result = rig.task_json(&project, &["result", &id]);
    assert_eq!(result["summary"]["objective"], format!("Task {id}"));
    assert_eq!(result["summary"]["tests"]["verdict"], "passed");
    assert_eq!(result["summary"]["tests"]["passed"], 3);
    let usage = &result["usage"];
    assert!(usage["turns"].as_u64().unwrap() >= 2, "{result:#}");
    assert!(usage["output_tokens"].as_u64().unwrap() > 0, "{result:#}");
    assert!(usage.get("cost_usd").is_none(), "{result:#}");
    let paths: Vec<&str> = result["artifacts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["path"].as_str().unwrap())
        .collect();
    let summary = format!("summaries/{id}.md");
    assert_eq!(
        paths,
        [summary.as_str(), "out.txt", "src/lib.rs"],
        "{result:#}"
    );
    assert_eq!(result["artifacts"][1]["text"], "hello\n");
    let left: Vec<&str> = result["left_out"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["path"].as_str().unwrap())
        .collect();
    assert_eq!(left, ["../secret.txt", "/etc/passwd", "link"], "{result:#}");
    // The context files are in the workspace, and RESULTS.json beside the task.
    assert!(
        std::fs::read_to_string(ws.join("INSTRUCTIONS.md"))
            .unwrap()
            .contains(&summary)
    );
    assert!(
        project
            .helpers()
            .join("tasks")
            .join(&id)
            .join("RESULTS.json")
            .is_file()
    );
}

/// Tasks submitted while the agent works on another run one at a time after it:
/// urgent first, then the normal ones oldest first, each typed in only once the last
/// ended; a waiting task moved in the queue runs where it was put (moved ahead of an
/// urgent one, it is urgent too).
#[test]
fn queued_tasks_run_one_at_a_time_in_priority_order() {
    let Some(rig) = ClaudeRig::start() else {
        return;
    };
    let project = Project::new();
    let _listener = rig.listen(&project);
    rig.session(&project, "q");
    let busy = scripted("Busy", json!({ "write": { "busy.txt": "b" }, "sleep": 6 }));
    let busy = rig.submit(&project, &["q", &busy]);
    crate::support::eventually("the agent at work", Duration::from_secs(60), || {
        rig.task_json(&project, &["status", &busy])["delivered"] == true
    });
    let mut ids = Vec::new();
    for (name, priority) in [
        ("first", "normal"),
        ("second", "normal"),
        ("third", "urgent"),
        ("fourth", "normal"),
    ] {
        let instruction = scripted(name, json!({ "write": { format!("{name}.txt"): name } }));
        let s = rig.task_json(
            &project,
            &["submit", "q", &instruction, "--priority", priority],
        );
        ids.push(s["task"]["id"].as_str().unwrap().to_string());
    }
    // Reordered while they wait: the fourth goes first (ahead of the urgent one, so
    // it is urgent too), the first goes last.
    let moved = rig.task_json(&project, &["move", &ids[3], "1"]);
    assert_eq!(
        (&moved["position"], &moved["priority"]),
        (&json!(1), &json!("urgent")),
        "{moved:#}"
    );
    let moved = rig.task_json(&project, &["move", &ids[0], "99"]);
    assert_eq!(
        (&moved["position"], &moved["priority"]),
        (&json!(4), &json!("normal")),
        "{moved:#}"
    );
    let out = rig.task(&project, &["move", &busy, "1"]);
    assert_eq!(
        out.status.code(),
        Some(3),
        "a running task is not moved: {out:?}"
    );
    for id in &ids {
        let out = rig.task(&project, &["wait", id, "--timeout", "120"]);
        assert_eq!(out.status.code(), Some(0), "{id}\n{}", rig.peek(&project));
    }
    let list = rig.task_json(&project, &["list"]);
    let task = |id: &str| {
        list.as_array()
            .unwrap()
            .iter()
            .find(|t| t["id"] == id)
            .unwrap()
            .clone()
    };
    let time = |t: &Value, field: &str| {
        t[field]
            .as_str()
            .unwrap()
            .parse::<jiff::Timestamp>()
            .unwrap()
    };
    let order = [&busy, &ids[3], &ids[2], &ids[1], &ids[0]];
    for pair in order.windows(2) {
        let (a, b) = (task(pair[0]), task(pair[1]));
        assert!(
            time(&a, "ended_at") <= time(&b, "started_at"),
            "{} must end before {} starts: {list:#}",
            pair[0],
            pair[1]
        );
    }
}

/// What a session may not be: a program not named in `[tasks] agents` (with `env`
/// in front, whose `PATH=` would change what a name runs), the file system's root, a
/// second session in a workspace; a task for no session is rejected with its reason.
#[test]
fn sessions_run_only_named_agents_one_per_workspace() {
    if Command::new("tmux").arg("-V").output().is_err() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI must have tmux"
        );
        return;
    }
    let project = Project::new();
    project.user_config("[tasks]\nagents = [\"claude\", \"sleep\", \"hitl-no-such-agent\"]\n");
    let tmux_dir = tempfile::tempdir().unwrap();
    let mut cmd = project.hitl();
    cmd.env("TMUX_TMPDIR", tmux_dir.path())
        .args(["listen", "--ui", "none", "--http", "127.0.0.1:0"])
        .stderr(Stdio::piped())
        .stdout(Stdio::piped());
    let _listener = Listener::start(cmd);
    let task = |args: &[&str]| {
        let out = project
            .hitl()
            .env("TMUX_TMPDIR", tmux_dir.path())
            .arg("task")
            .args(args)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let ws = project.tmp.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let ws = ws.to_string_lossy().into_owned();
    let (code, err) = task(&["session", "a", "--workspace", &ws, "--command", "bash"]);
    assert_eq!(code, Some(3), "{err}");
    assert!(err.contains("[tasks] agents"), "{err}");
    assert!(err.contains("restart"), "a change needs a restart: {err}");
    // An agent that is not installed is said to be missing, before any tmux.
    let (code, err) = task(&[
        "session",
        "a",
        "--workspace",
        &ws,
        "--command",
        "hitl-no-such-agent",
    ]);
    assert_eq!(code, Some(3), "{err}");
    assert!(err.contains("not on the listener's PATH"), "{err}");
    let (code, err) = task(&[
        "session",
        "a",
        "--workspace",
        &ws,
        "--command",
        "env PATH=/tmp sleep 9",
    ]);
    assert_eq!(code, Some(3), "{err}");
    let (code, err) = task(&["session", "a", "--workspace", "/", "--command", "sleep 600"]);
    assert_eq!(code, Some(3), "{err}");
    assert!(err.contains("not a project folder"), "{err}");
    let (code, err) = task(&["session", "a", "--workspace", &ws, "--command", "sleep 600"]);
    assert_eq!(code, Some(0), "{err}");
    // The session is an agent of the project, of origin task.
    let agents = project.hitl().args(["agents", "--json"]).output().unwrap();
    let agents: Value = serde_json::from_slice(&agents.stdout).unwrap();
    assert!(
        agents
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["agent_id"] == "a" && a["origin"] == "task"),
        "{agents:#}"
    );
    let (code, err) = task(&["session", "b", "--workspace", &ws, "--command", "sleep 600"]);
    assert_eq!(code, Some(3), "{err}");
    assert!(err.contains("already works in"), "{err}");
    let (code, err) = task(&["submit", "nobody", "do it"]);
    assert_eq!(code, Some(3), "{err}");
    assert!(err.contains("no session nobody"), "{err}");
    let list = project
        .hitl()
        .args(["task", "list", "--json"])
        .output()
        .unwrap();
    let list: Value = serde_json::from_slice(&list.stdout).unwrap();
    assert_eq!(list[0]["state"], "rejected", "{list}");

    // Ending a session: refused while it has work, then its agent is stopped, the
    // workspace free for another, and the task kept on record.
    let submitted = project
        .hitl()
        .env("TMUX_TMPDIR", tmux_dir.path())
        .args(["task", "submit", "a", "do it"])
        .output()
        .unwrap();
    assert!(submitted.status.success(), "{submitted:?}");
    let id = String::from_utf8(submitted.stdout)
        .unwrap()
        .trim()
        .to_string();
    let (code, err) = task(&["end", "a"]);
    assert_eq!(code, Some(3), "{err}");
    assert!(err.contains(&id) && err.contains("cancel"), "{err}");
    let (code, err) = task(&["cancel", &id]);
    assert_eq!(code, Some(0), "{err}");
    let started = std::time::Instant::now();
    loop {
        let (code, err) = task(&["end", "a"]);
        if code == Some(0) {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the session never ended: {err}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let tmux_has = |name: &str| {
        Command::new("tmux")
            .env("TMUX_TMPDIR", tmux_dir.path())
            .args(["-L", "hitl", "has-session", "-t", &format!("={name}")])
            .output()
            .unwrap()
            .status
            .success()
    };
    assert!(!tmux_has("a"), "the agent's tmux session is gone");
    let sessions = project
        .hitl()
        .args(["task", "sessions", "--json"])
        .output()
        .unwrap();
    assert_eq!(
        serde_json::from_slice::<Value>(&sessions.stdout).unwrap(),
        serde_json::json!([])
    );
    let (code, err) = task(&["end", "a"]);
    assert_eq!(code, Some(3), "{err}");
    assert!(err.contains("no task session a"), "{err}");
    let (code, err) = task(&["session", "b", "--workspace", &ws, "--command", "sleep 600"]);
    assert_eq!(code, Some(0), "the workspace is free again: {err}");
    let status = project
        .hitl()
        .args(["task", "status", &id, "--json"])
        .output()
        .unwrap();
    let status: Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(status["state"], "canceled", "{status}");
    let _ = Command::new("tmux")
        .env("TMUX_TMPDIR", tmux_dir.path())
        .args(["-L", "hitl", "kill-server"])
        .output();
}

/// The task example of docs/tasks.md, run as written but for the workspace and the
/// instruction (which carries the stand-in's script).
#[test]
fn the_readmes_task_example_runs_against_claude_code() {
    let Some(rig) = ClaudeRig::start() else {
        return;
    };
    let project = Project::new();
    let _listener = rig.listen(&project);
    let ws = project.tmp.path().join("app");
    std::fs::create_dir_all(&ws).unwrap();
    let ws = ws.canonicalize().unwrap();
    rig.trust(&ws);
    let block = crate::readme::shell_block("hitl task session coder");
    let script = block
        .replace("~/src/app", &ws.to_string_lossy())
        .replace(
            "\"Add a --verbose flag\"",
            r#"'Add a --verbose flag [script: {"write": {"flag.txt": "on"}, "deliverables": ["flag.txt"]}]'"#,
        );
    let mut cmd = Command::new("bash");
    rig.env(&mut cmd);
    let out = cmd
        .args(["-e", "-c", &script])
        .current_dir(&project.dir)
        .env("HITL_HOME", &project.home)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}\n{}",
        String::from_utf8_lossy(&out.stderr),
        rig.peek(&project)
    );
    assert!(stdout.contains(r#""path": "flag.txt""#), "{stdout}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("queued"),
        "{out:?}"
    );
}

/// A task whose agent never writes its summary (still at work when its time is up)
/// is interrupted (Escape) and ends with seed 002's fallback summary, partial; only
/// then is the next task typed in, and it completes.
#[test]
fn a_task_past_its_timeout_is_interrupted_into_the_partial_fallback() {
    let Some(rig) = ClaudeRig::start() else {
        return;
    };
    let project = Project::new();
    let _listener = rig.listen(&project);
    let ws = rig.session(&project, "slow");
    let slow = scripted(
        "Think for a long time",
        json!({ "bash": "echo thinking > notes.txt", "sleep": 60, "summary": false }),
    );
    // Long enough for Claude Code to run the first command under the whole suite's
    // load (4 s was not, once, with the fast paths off).
    let first = rig.submit(&project, &["slow", &slow, "--timeout", "10"]);
    let next = scripted("Then this", json!({ "write": { "after.txt": "after" } }));
    let next = rig.submit(&project, &["slow", &next]);

    let (_, ended) = rig.wait(&project, &first, 60);
    assert_eq!(
        (
            &ended["state"],
            &ended["outcome"],
            &ended["fallback_summary"]
        ),
        (&json!("completed"), &json!("partial"), &json!(true)),
        "{ended:#}\n{}",
        rig.peek(&project)
    );
    let result = rig.task_json(&project, &["result", &first]);
    let sections: Vec<&str> = result["summary"]["sections"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["title"].as_str().unwrap())
        .collect();
    assert!(sections.contains(&"Terminal Output"), "{result:#}");
    assert_eq!(result["summary"]["tests"]["verdict"], "skipped");
    assert!(
        result["summary"]["sections"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["body"]
                .as_str()
                .unwrap()
                .contains("PARTIAL - Summary not created by Claude Code")),
        "{result:#}"
    );
    // The file the agent changed before the timeout is named in the fallback.
    assert!(
        result["summary"]["deliverables"]
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d["path"] == "notes.txt"),
        "{result:#}"
    );
    let (_, after) = rig.wait(&project, &next, 60);
    assert_eq!(
        after["state"],
        "completed",
        "{after:#}\n{}",
        rig.peek(&project)
    );
    let time = |v: &Value, f: &str| v[f].as_str().unwrap().parse::<jiff::Timestamp>().unwrap();
    assert!(time(&ended, "ended_at") <= time(&after, "started_at"));
    assert!(ws.join("after.txt").is_file());
    // The agent's own summary, late: kept beside the fallback, the task unchanged.
    let late = ws.join(format!("summaries/.{first}.tmp"));
    std::fs::write(
        &late,
        "# Task Completion Summary\n\n## Objective\nThought it through\n\n## Status\n✅ COMPLETED\n",
    )
    .unwrap();
    std::fs::rename(&late, ws.join(format!("summaries/{first}.md"))).unwrap();
    crate::support::eventually("the late summary kept", Duration::from_secs(30), || {
        rig.task_json(&project, &["result", &first])["late_summary"]["objective"]
            == "Thought it through"
    });
    let still = rig.task_json(&project, &["status", &first]);
    assert_eq!(
        (
            &still["state"],
            &still["outcome"],
            &still["fallback_summary"]
        ),
        (&json!("completed"), &json!("partial"), &json!(true)),
        "{still:#}"
    );
}

/// Cancelling the running task interrupts it and the next one starts; cancelling a
/// waiting one takes it out of the queue.
#[test]
fn cancel_stops_the_running_task_and_the_next_one_starts() {
    let Some(rig) = ClaudeRig::start() else {
        return;
    };
    let project = Project::new();
    let _listener = rig.listen(&project);
    rig.session(&project, "c");
    let slow = scripted("Work for ever", json!({ "sleep": 120, "summary": false }));
    let running = rig.submit(&project, &["c", &slow]);
    let waiting = rig.task_json(&project, &["submit", "c", "never [script: {}]"]);
    let waiting = waiting["task"]["id"].as_str().unwrap().to_string();
    let last = scripted("Last", json!({ "write": { "last.txt": "x" } }));
    let last = rig.submit(&project, &["c", &last]);
    crate::support::eventually(
        "the task to reach the agent",
        Duration::from_secs(60),
        || rig.task_json(&project, &["status", &running])["delivered"] == true,
    );
    let c = rig.task_json(&project, &["cancel", &waiting]);
    assert_eq!(c["state"], "canceled", "{c:#}");
    rig.task_json(&project, &["cancel", &running]);
    let (out, ended) = rig.wait(&project, &running, 30);
    assert_eq!(out.status.code(), Some(1), "{ended:#}");
    assert_eq!(ended["state"], "canceled", "{ended:#}");
    // The real Claude Code takes its time under the whole suite's load (seen: still
    // "thinking" at 60 s): the wait is generous, the assertion is what it ends as.
    let out = rig.task(&project, &["wait", &last, "--timeout", "180"]);
    assert_eq!(out.status.code(), Some(0), "{}", rig.peek(&project));
    // A canceled task is retried as a new one.
    let again = rig.task_json(&project, &["retry", &waiting]);
    assert_ne!(again["task"]["id"], waiting.as_str());
    assert_eq!(again["task"]["attempt"], 1);
}

/// `kill -9` of the listener in the middle of a queue loses no task: the running one
/// is found again (its summary, written meanwhile or after, ends it) and the queued
/// ones run after it; a headless agent at work goes on, and the next listener
/// follows it by its pid.
#[test]
fn a_listener_killed_mid_queue_loses_no_task() {
    let Some(rig) = ClaudeRig::start() else {
        return;
    };
    let project = Project::new();
    let listener = rig.listen(&project);
    rig.session(&project, "r");
    let slow = scripted(
        "Slowly",
        json!({ "sleep": 4, "write": { "slow.txt": "s" } }),
    );
    let mut ids = vec![rig.task_json(&project, &["submit", "r", &slow])];
    for name in ["two", "three"] {
        let t = scripted(name, json!({ "write": { format!("{name}.txt"): name } }));
        ids.push(rig.task_json(&project, &["submit", "r", &t]));
    }
    // And a headless session (its writes allowed without asking), at work too.
    let ws = project.tmp.path().join("ws-h");
    std::fs::create_dir_all(&ws).unwrap();
    let ws = ws.canonicalize().unwrap();
    rig.trust(&ws);
    let command = format!("{} -p --permission-mode acceptEdits", rig.claude.display());
    rig.task_json(
        &project,
        &[
            "session",
            "h",
            "--workspace",
            ws.to_str().unwrap(),
            "--command",
            &command,
        ],
    );
    let headless = scripted("Slowly", json!({ "sleep": 4, "write": { "h.txt": "h" } }));
    ids.push(rig.task_json(&project, &["submit", "h", &headless]));
    let ids: Vec<String> = ids
        .iter()
        .map(|s| s["task"]["id"].as_str().unwrap().to_string())
        .collect();
    for first in [&ids[0], &ids[3]] {
        crate::support::eventually(
            "the first tasks to reach their agents",
            Duration::from_secs(60),
            || rig.task_json(&project, &["status", first])["delivered"] == true,
        );
    }
    listener.signal(nix::sys::signal::Signal::SIGKILL);
    let _listener = rig.listen(&project);
    for id in &ids {
        rig.completed(&project, id, 90);
    }
    // The headless agent worked on through the kill, followed by the next listener:
    // started once, its output whole.
    assert_eq!(std::fs::read_to_string(ws.join("h.txt")).unwrap(), "h");
    // Its summary ends the task while the agent finishes its turn: the stream's last
    // lines (the summary's write, the result) may come a moment later.
    let stream_file = project
        .dir
        .join(format!(".helpers/tasks/{}/stream.jsonl", ids[3]));
    let stream = || std::fs::read_to_string(&stream_file).unwrap_or_default();
    crate::support::eventually(
        "the headless agent's result in its stream",
        Duration::from_secs(30),
        || stream().contains(r#""type":"result""#),
    );
    let stream = stream();
    assert_eq!(stream.matches(r#""subtype":"init""#).count(), 1, "{stream}");
    assert_eq!(stream.matches(r#""type":"result""#).count(), 1, "{stream}");
}

/// The tmux server killed under a running task: the session is started again (on its
/// own conversation, `claude --resume`, when Claude Code saved it), the task is typed
/// in once more, and it runs to its summary.
#[test]
fn a_killed_tmux_server_resumes_the_session_and_the_task_goes_on() {
    let Some(rig) = ClaudeRig::start() else {
        return;
    };
    let project = Project::new();
    let listener = rig.listen(&project);
    let ws = rig.session(&project, "k");
    let slow = scripted("Slowly", json!({ "sleep": 5, "write": { "k.txt": "k" } }));
    let id = rig.submit(&project, &["k", &slow]);
    crate::support::eventually(
        "the task to reach the agent",
        Duration::from_secs(60),
        || rig.task_json(&project, &["status", &id])["delivered"] == true,
    );
    let killed = Command::new("tmux")
        .env("TMUX_TMPDIR", &rig.tmux_dir)
        .args(["-L", "hitl", "kill-server"])
        .output()
        .unwrap();
    assert!(killed.status.success(), "{killed:?}");
    let (out, v) = rig.wait(&project, &id, 90);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{v:#}\n{}\n{}",
        rig.peek(&project),
        listener.log()
    );
    // Resumed on its conversation and told to carry on (its file written already),
    // or, when Claude Code had not saved it yet (within seconds of its start), started
    // afresh with the whole task (its file written again).
    let log = std::fs::read_to_string(rig._tmp.path().join("api.log")).unwrap();
    let resumed = log.contains("was restarted in the middle of the task");
    assert!(resumed || ws.join("k.txt").is_file(), "{log}");
    let sessions = rig.task_json(&project, &["sessions"]);
    assert_eq!(sessions[0]["alive"], true, "{sessions:#}");
}

/// An agent at work on a task asks a human (here its `rm -rf` goes through hitl's own
/// PreToolUse hook, which asks): the question carries the task's id, the task shows
/// `input-required` with its clock stopped until the answer, then runs to its end.
#[test]
fn a_task_whose_agent_asks_a_human_waits_in_input_required() {
    let Some(rig) = ClaudeRig::start() else {
        return;
    };
    let (project, _listener, ws) = rig.hooked_project();
    let claude = rig.claude.to_string_lossy().into_owned();
    let wss = ws.to_string_lossy().into_owned();
    rig.task_json(
        &project,
        &[
            "session",
            "asker",
            "--workspace",
            &wss,
            "--command",
            &claude,
        ],
    );
    let asks = scripted(
        "Clean the build",
        json!({ "bash": "rm -rf build", "write": { "done.txt": "ok" } }),
    );
    let id = rig.submit(&project, &["asker", &asks, "--timeout", "20"]);
    let question = rig.question(&project, &id, "question", |q| labelled(q, &id));
    crate::support::eventually("input-required", Duration::from_secs(10), || {
        rig.task_json(&project, &["status", &id])["state"] == "input-required"
    });
    // Waiting longer than the task's whole timeout does not time it out.
    std::thread::sleep(Duration::from_secs(21));
    let waiting = rig.task_json(&project, &["status", &id]);
    assert_eq!(waiting["state"], "input-required", "{waiting:#}");
    let out = project.run(&["answer", question["id"].as_str().unwrap(), "--approve"]);
    assert!(out.status.success(), "{out:?}");
    let ended = rig.completed(&project, &id, 60);
    assert_eq!(ended["outcome"], "completed", "{ended:#}");
    assert!(ended["waited_ms"].as_u64().unwrap() >= 20_000, "{ended:#}");
    assert!(!ws.join("build").exists());
}

/// Under `hitl run` (how the runner starts every agent), the real Claude Code works
/// as it does without: it edits a project file, runs the project's tests, writes its
/// task summary, its hooks still ask through hitl, and its own state is saved — while
/// the home's `.claude.json` and the project's hook wiring stay as they were.
#[test]
fn claude_code_works_inside_hitl_run_and_its_hooks_still_ask() {
    let Some(rig) = ClaudeRig::start() else {
        return;
    };
    let (project, _listener, ws) = rig.hooked_project();
    std::fs::create_dir_all(ws.join("tests")).unwrap();
    std::fs::write(
        ws.join("tests/run.sh"),
        "#!/bin/sh\necho 'tests passed' > test-output.txt\n",
    )
    .unwrap();
    let home_config = std::fs::read(rig.home.join(".claude.json")).unwrap();
    let wiring = std::fs::read(ws.join(".claude/settings.local.json")).unwrap();
    let claude = rig.claude.to_string_lossy().into_owned();
    let wss = ws.to_string_lossy().into_owned();
    rig.task_json(
        &project,
        &[
            "session",
            "inside",
            "--workspace",
            &wss,
            "--command",
            &claude,
        ],
    );
    let task = scripted(
        "Add the function, run the tests, clean the build",
        json!({
            "write": { "src/lib.rs": "pub fn x() {}\n" },
            "bash": "sh tests/run.sh && grep NoNewPrivs /proc/self/status >> test-output.txt && rm -rf build",
        }),
    );
    let id = rig.submit(&project, &["inside", &task]);
    // The hook asks about the recursive delete, through hitl, from inside.
    let question = rig.question(&project, &id, "the hook's question", |q| {
        q["origin"] == "hook" && q["content"].to_string().contains("rm -rf build")
    });
    let out = project.run(&["answer", question["id"].as_str().unwrap(), "--approve"]);
    assert!(out.status.success(), "{out:?}");
    let ended = rig.completed(&project, &id, 90);
    assert_eq!(
        (&ended["outcome"], &ended["delivered"]),
        (&json!("completed"), &json!(true)),
        "{ended:#}"
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("src/lib.rs")).unwrap(),
        "pub fn x() {}\n"
    );
    let tests = std::fs::read_to_string(ws.join("test-output.txt")).unwrap();
    assert!(tests.contains("tests passed"), "{tests}");
    // It ran inside the boundary: nothing it started could gain a privilege.
    assert!(tests.contains("NoNewPrivs:\t1"), "{tests}");
    assert!(!ws.join("build").exists());
    // Its state: the conversation's transcript and its own .claude.json.
    let transcripts = std::fs::read_dir(rig.home.join(".claude/projects"))
        .unwrap()
        .flatten()
        .flat_map(|d| std::fs::read_dir(d.path()).into_iter().flatten().flatten())
        .filter(|f| f.path().extension().is_some_and(|e| e == "jsonl"))
        .count();
    assert!(transcripts > 0, "no transcript saved");
    let own: Value =
        serde_json::from_slice(&std::fs::read(rig.home.join(".claude/.claude.json")).unwrap())
            .unwrap();
    assert_eq!(
        own["projects"][wss.as_str()]["hasTrustDialogAccepted"],
        true
    );
    assert_eq!(
        std::fs::read(rig.home.join(".claude.json")).unwrap(),
        home_config
    );
    assert_eq!(
        std::fs::read(ws.join(".claude/settings.local.json")).unwrap(),
        wiring
    );
}

/// The headless mode: `--command "claude -p"` runs the same task through Claude Code's
/// print mode, once per task. Its writes need permission, which it asks through
/// hitl's MCP tool (`--permission-prompt-tool mcp__hitl__permission_prompt`, added by
/// hitl): each becomes a question naming the task, which waits in input-required
/// until a person answers. The result has the summary, the deliverables, and the
/// turns, tokens and cost `claude -p` reported; `peek` shows its output.
#[test]
fn the_headless_mode_runs_the_same_task_through_claude_print_mode() {
    let Some(rig) = ClaudeRig::start() else {
        return;
    };
    let project = Project::new();
    // Claude Code's own retries, as users have them: a refused key is seen in its
    // output as it retries, not after.
    let mut listen = project.hitl();
    rig.env(&mut listen);
    listen
        .env_remove("CLAUDE_CODE_MAX_RETRIES")
        .args([
            "listen",
            "--ui",
            "none",
            "--http",
            "127.0.0.1:0",
            "--attended",
        ])
        .stderr(Stdio::piped())
        .stdout(Stdio::piped());
    let _listener = Listener::start(listen);
    let workspace = project.tmp.path().join("ws-headless");
    std::fs::create_dir_all(&workspace).unwrap();
    let ws = workspace.canonicalize().unwrap();
    rig.trust(&ws);
    let command = format!("{} -p", rig.claude.display());
    let wss = ws.to_string_lossy().into_owned();
    let s = rig.task_json(
        &project,
        &[
            "session",
            "printer",
            "--workspace",
            &wss,
            "--command",
            &command,
        ],
    );
    assert_eq!(
        (&s["alive"], &s["ready"]),
        (&json!(true), &json!(true)),
        "{s:#}"
    );
    let instruction = scripted(
        "Write the report",
        json!({ "write": { "report.txt": "all good\n" }, "deliverables": ["report.txt"] }),
    );
    let id = rig.submit(&project, &["printer", &instruction]);
    // Two writes (the report, then the summary), each asked of a person.
    for file in ["report.txt", &format!("summaries/{id}.md")] {
        let question = rig.question(&project, &id, file, |q| labelled(q, &id));
        assert_eq!(question["type"], "permission", "{question:#}");
        assert!(
            question["content"].as_str().unwrap().contains(file),
            "{question:#}"
        );
        crate::support::eventually("input-required", Duration::from_secs(10), || {
            rig.task_json(&project, &["status", &id])["state"] == "input-required"
        });
        let out = project.run(&["answer", question["id"].as_str().unwrap(), "--approve"]);
        assert!(out.status.success(), "{out:?}");
    }
    let ended = rig.completed(&project, &id, 60);
    assert_eq!(
        (
            &ended["state"],
            &ended["outcome"],
            &ended["fallback_summary"]
        ),
        (&json!("completed"), &json!("completed"), &json!(false)),
        "{ended:#}"
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("report.txt")).unwrap(),
        "all good\n"
    );
    // What the run cost is known once Claude Code has exited, just after its summary.
    crate::support::eventually("the usage", Duration::from_secs(20), || {
        rig.task_json(&project, &["status", &id])["usage"].is_object()
    });
    let ended = rig.task_json(&project, &["status", &id]);
    let result = rig.task_json(&project, &["result", &id]);
    let paths: Vec<&str> = result["artifacts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["path"].as_str().unwrap())
        .collect();
    assert_eq!(paths, [format!("summaries/{id}.md").as_str(), "report.txt"]);
    let usage = &result["usage"];
    assert!(usage["turns"].as_u64().unwrap() >= 3, "{result:#}");
    assert!(usage["output_tokens"].as_u64().unwrap() > 0, "{result:#}");
    assert!(usage["cost_usd"].as_f64().unwrap() > 0.0, "{result:#}");
    assert_eq!(ended["usage"], *usage);
    // Its output, read, where a tmux session would show its screen.
    let out = rig.task(&project, &["peek", "printer"]);
    let screen = String::from_utf8_lossy(&out.stdout);
    assert!(
        screen.contains("● Write(") && screen.contains(&format!("Finished {id}")),
        "{screen}"
    );
    let out = rig.task(&project, &["attach", "printer"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("headless"),
        "{out:?}"
    );
    // A run that ends without its summary is resumed once with the reminder, then
    // given seed 002's fallback summary.
    let lazy = scripted("Think only", json!({ "summary": false }));
    let lazy = rig.submit(&project, &["printer", &lazy]);
    let (_, ended) = rig.wait(&project, &lazy, 60);
    assert_eq!(
        (
            &ended["state"],
            &ended["outcome"],
            &ended["fallback_summary"]
        ),
        (&json!("completed"), &json!("partial"), &json!(true)),
        "{ended:#}\n{}",
        rig.peek(&project)
    );
    assert!(
        ended["reason"]
            .as_str()
            .unwrap()
            .contains("without a summary"),
        "{ended:#}"
    );
    let log = std::fs::read_to_string(rig._tmp.path().join("api.log")).unwrap();
    assert!(
        log.contains(&format!(
            "Task {lazy}: you stopped, but summaries/{lazy}.md does not exist yet"
        )),
        "the reminder was not sent:\n{log}"
    );
    let result = rig.task_json(&project, &["result", &lazy]);
    assert!(
        result["summary"]["sections"]
            .to_string()
            .contains("Summary not created by Claude Code"),
        "{result:#}"
    );
    // A key the API refuses: Claude Code would retry for minutes; the task is
    // auth-required at once, and the agent stopped.
    let refused = scripted("Anything", json!({ "refuse_key": true }));
    let refused = rig.submit(&project, &["printer", &refused]);
    let (out, ended) = rig.wait(&project, &refused, 30);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{ended:#}\n{}",
        rig.peek(&project)
    );
    assert_eq!(ended["state"], "auth-required", "{ended:#}");
    assert!(
        ended["reason"].as_str().unwrap().contains("401"),
        "{ended:#}"
    );
    let pid = std::fs::read_to_string(
        project
            .dir
            .join(format!(".helpers/tasks/{refused}/agent.pid")),
    )
    .unwrap();
    let pid = pid.split_whitespace().next().unwrap().to_string();
    crate::support::eventually("the agent stopped", Duration::from_secs(10), || {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).is_err()
            || std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .is_ok_and(|s| s.contains(") Z "))
    });
}

/// Claude Code's first-run screens in a new folder (trust it? use its .mcp.json's new
/// server?) show a `❯` cursor like its prompt, on "No, exit": typed into, a task
/// would end the session. Each is asked of a person instead (an approval of origin
/// `task`), their choice made on the screen, and only then is the task typed in.
#[test]
fn first_run_screens_are_asked_of_a_person_and_their_choice_made() {
    let Some(rig) = ClaudeRig::start() else {
        return;
    };
    let project = Project::new();
    let _listener = rig.listen_with(&project, &["--attended"]);
    // Claude Code has run before (onboarding, the key), but never in this folder.
    rig.trust(&project.dir.canonicalize().unwrap());
    let ws = project.tmp.path().join("ws-new");
    std::fs::create_dir_all(&ws).unwrap();
    let ws = ws.canonicalize().unwrap();
    std::fs::write(
        ws.join(".mcp.json"),
        r#"{"mcpServers":{"extra":{"command":"true"}}}"#,
    )
    .unwrap();
    let claude = rig.claude.to_string_lossy().into_owned();
    let wss = ws.to_string_lossy().into_owned();
    rig.task_json(
        &project,
        &[
            "session",
            "fresh",
            "--workspace",
            &wss,
            "--command",
            &claude,
        ],
    );
    let instruction = scripted("Say hello", json!({ "write": { "hello.txt": "hi\n" } }));
    let id = rig.submit(&project, &["fresh", &instruction]);
    for screen in ["trust", "mcp-server"] {
        let question = rig.question(&project, &id, screen, |q| {
            q["context"]["first_run"] == screen
        });
        assert_eq!(
            (&question["origin"], &question["type"]),
            (&json!("task"), &json!("approval")),
            "{question:#}"
        );
        // Nothing was typed meanwhile.
        assert_eq!(
            rig.task_json(&project, &["status", &id])["state"],
            "submitted"
        );
        let out = project.run(&["answer", question["id"].as_str().unwrap(), "--approve"]);
        assert!(out.status.success(), "{out:?}");
    }
    rig.completed(&project, &id, 90);
    assert_eq!(
        std::fs::read_to_string(ws.join("hello.txt")).unwrap(),
        "hi\n"
    );
    // Inside `hitl run`'s boundary Claude Code keeps its state in its own folder
    // (`CLAUDE_CONFIG_DIR=~/.claude`), the home's `.claude.json` read-only to it.
    let config: Value =
        serde_json::from_slice(&std::fs::read(rig.home.join(".claude/.claude.json")).unwrap())
            .unwrap();
    let here = &config["projects"][wss.as_str()];
    assert_eq!(here["hasTrustDialogAccepted"], true, "{here:#}");
    // "Use this MCP server" was chosen on the screen (the task ran); Claude Code
    // keeps that choice in the workspace's `.claude/settings.local.json`, which the
    // boundary keeps read-only: nothing inside writes there.
    assert!(
        !ws.join(".claude/settings.local.json").exists(),
        "{:?}",
        std::fs::read_to_string(ws.join(".claude/settings.local.json"))
    );
}

/// `--worktree BRANCH`: the session works in a git worktree of its own on BRANCH
/// (`<repository>/.worktrees/NAME`); what the task changes is there, the main
/// checkout untouched, and hitl's own files stay out of both one's status.
#[test]
fn a_worktree_session_works_on_its_own_branch() {
    let Some(rig) = ClaudeRig::start() else {
        return;
    };
    let project = Project::new();
    let _listener = rig.listen(&project);
    let repo = project.tmp.path().join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    let repo = repo.canonicalize().unwrap();
    let git = |dir: &Path, args: &[&str]| -> String {
        let out = Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(["-c", "user.name=t", "-c", "user.email=t@t"])
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    git(&repo, &["init", "-q", "-b", "main"]);
    std::fs::write(repo.join("README"), "hello\n").unwrap();
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-q", "-m", "first"]);
    let tree = repo.join(".worktrees/feat");
    rig.trust(&tree);
    let claude = rig.claude.to_string_lossy().into_owned();
    let s = rig.task_json(
        &project,
        &[
            "session",
            "feat",
            "--workspace",
            repo.to_str().unwrap(),
            "--worktree",
            "feature/tasks",
            "--command",
            &claude,
        ],
    );
    assert_eq!(
        (&s["workspace"], &s["worktree"]),
        (&json!(tree), &json!("feature/tasks")),
        "{s:#}"
    );
    let instruction = scripted(
        "Add the feature",
        json!({ "write": { "feature.txt": "new\n" } }),
    );
    let id = rig.submit(&project, &["feat", &instruction]);
    let out = rig.task(&project, &["wait", &id, "--timeout", "90"]);
    assert_eq!(out.status.code(), Some(0), "{}", rig.peek(&project));
    assert_eq!(
        std::fs::read_to_string(tree.join("feature.txt")).unwrap(),
        "new\n"
    );
    assert!(!repo.join("feature.txt").exists());
    assert_eq!(
        git(&tree, &["branch", "--show-current"]).trim(),
        "feature/tasks"
    );
    assert_eq!(git(&repo, &["status", "--porcelain"]), "");
    assert_eq!(git(&tree, &["status", "--porcelain"]), "?? feature.txt\n");
    // A second session may not take the same worktree's folder.
    let out = rig.task(
        &project,
        &[
            "session",
            "other",
            "--workspace",
            tree.to_str().unwrap(),
            "--command",
            &claude,
        ],
    );
    assert_eq!(out.status.code(), Some(3), "{out:?}");
}

/// An agent whose model refuses its key: Claude Code gives up (its StopFailure hook,
/// `authentication_failed`) and the task is `auth-required`, saying so; the session
/// takes the next task, and the refused one can be retried once someone has logged
/// the agent in.
#[test]
fn a_refused_login_makes_the_task_auth_required() {
    let Some(rig) = ClaudeRig::start() else {
        return;
    };
    let project = Project::new();
    let _listener = rig.listen(&project);
    let ws = rig.session(&project, "keyless");
    let refused = scripted("Anything", json!({ "refuse_key": true }));
    let refused = rig.submit(&project, &["keyless", &refused]);
    let after = scripted("Then this", json!({ "write": { "after.txt": "ok" } }));
    let after = rig.submit(&project, &["keyless", &after]);
    let (out, ended) = rig.wait(&project, &refused, 60);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{ended:#}\n{}",
        rig.peek(&project)
    );
    assert_eq!(ended["state"], "auth-required", "{ended:#}");
    let reason = ended["reason"].as_str().unwrap();
    assert!(reason.contains("authentication_failed"), "{reason}");
    let out = rig.task(&project, &["wait", &after, "--timeout", "60"]);
    assert_eq!(out.status.code(), Some(0), "{}", rig.peek(&project));
    assert!(ws.join("after.txt").is_file());
    let again = rig.task_json(&project, &["retry", &refused]);
    assert_eq!(again["task"]["attempt"], 1, "{again:#}");
}
