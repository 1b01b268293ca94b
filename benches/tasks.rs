//! Task benchmarks against a real `hitl listen` and a real tmux: a stand-in agent (a
//! small Python program in the session's pane) reads each typed task, works a random
//! moment, and renames the task's summary into `summaries/`. Measured, on the wall
//! clock both sides share:
//!
//! - from the summary's rename to the task's `completed` (its `ended_at`), beside
//!   seed 002's own loop (`if complete_file.exists(): … sleep(5)`, started when the
//!   task is sent) watching the same renames;
//! - from the submit (`POST /api/v1/tasks`) to the task's first line being read in
//!   the pane.
//!
//! `cargo bench --bench tasks` runs 200 tasks, as does `-- --quick` (what CI runs:
//! about 40 s). Targets are printed as MET or MISSED, never asserted; a task that does
//! not complete fails the run.

use std::path::PathBuf;
use std::process::{Child, Command};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

mod common;

use common::{hitl, met, row, stats};

/// The stand-in agent: prints a line (the session is ready once its pane shows
/// something), then for each `Task <id>:` line read: notes when, works 0 to MAX
/// seconds, writes the summary beside `summaries/` and renames it into place, and
/// logs `<id> <read ns> <renamed ns>`.
const AGENT: &str = r###"
import os, random, re, sys, time
log = open(sys.argv[1], "a", buffering=1)
most = float(sys.argv[2])
print("stand-in agent ready", flush=True)
for line in sys.stdin:
    m = re.search(r"Task (task-[0-9a-f-]+):", line)
    if not m:
        continue
    task, read = m.group(1), time.time_ns()
    time.sleep(random.uniform(0, most))
    text = ("# Task Completion Summary\n\n## Objective\nTask %s\n\n## Key Deliverables\n\n"
            "## Test Results\n✅ All tests passed\n\n## Status\n✅ COMPLETED\n" % task)
    tmp = "summaries/.%s.tmp" % task
    with open(tmp, "w") as f:
        f.write(text)
    os.rename(tmp, "summaries/%s.md" % task)
    log.write("%s %d %d\n" % (task, read, time.time_ns()))
"###;

/// The longest the stand-in works on a task, in seconds.
const MOST_WORK: f64 = 0.3;

/// Seed 002's monitoring interval.
const SEED_INTERVAL: Duration = Duration::from_secs(5);

struct Listener {
    child: Child,
    tmux_dir: PathBuf,
}

impl Drop for Listener {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = Command::new("tmux")
            .env("TMUX_TMPDIR", &self.tmux_dir)
            .args(["-L", "hitl", "kill-server"])
            .output();
    }
}

fn now_ns() -> i128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as i128
}

fn main() {
    // reqwest's clients here need rustls's provider, as hitl's do.
    hitl::runtime::tls::install_default_provider();
    let args: Vec<String> = std::env::args().collect();
    if !args.iter().any(|a| a == "--bench") {
        println!("task benchmarks: run them with `cargo bench --bench tasks [-- --quick]`");
        return;
    }
    if Command::new("tmux").arg("-V").output().is_err() {
        eprintln!("the task benchmarks need tmux");
        std::process::exit(1);
    }
    // Built (or found built) before anything is timed.
    println!("the hitl under test: {}", hitl());
    let quick = args.iter().any(|a| a == "--quick");
    let n = 200;
    println!(
        "hitl task benchmarks ({} mode), {n} tasks one after another\n",
        if quick { "short" } else { "full" }
    );

    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("project");
    let workspace = tmp.path().join("workspace");
    let home = tmp.path().join("home");
    let tmux_dir = tmp.path().join("tmux");
    for d in [&project, &workspace, &home, &tmux_dir] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::write(
        home.join("config.toml"),
        "[tasks]\nagents = [\"python3\"]\n[http]\ncreate_rate_limit = 0\n",
    )
    .unwrap();
    // The agent starts inside `hitl run`'s boundary (the default), where the temp
    // folder is private: its program and log live in the workspace it works in.
    let agent = workspace.join("agent.py");
    std::fs::write(&agent, AGENT).unwrap();
    let log = workspace.join("agent.log");
    let env = |c: &mut Command| {
        c.env("HITL_HOME", &home)
            .env("TMUX_TMPDIR", &tmux_dir)
            .env("HITL_LOG", "error")
            .current_dir(&project);
    };
    let mut init = Command::new(hitl());
    env(&mut init);
    assert!(init.arg("init").output().unwrap().status.success());
    let mut listen = Command::new(hitl());
    env(&mut listen);
    let (child, base) =
        common::start_listener(listen.args(["listen", "--ui", "none", "--http", "127.0.0.1:0"]));
    let _listener = Listener {
        child,
        tmux_dir: tmux_dir.clone(),
    };
    let token = std::fs::read_to_string(home.join("token"))
        .unwrap()
        .trim()
        .to_string();
    let http = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(120))
        .build()
        .unwrap();
    let post = |path: &str, body: Value| -> Value {
        let r = http
            .post(format!("{base}{path}"))
            .bearer_auth(&token)
            .json(&body)
            .send()
            .unwrap();
        let status = r.status();
        let v: Value = r.json().unwrap_or(Value::Null);
        assert!(status.is_success(), "POST {path}: {status} {v}");
        v
    };
    post(
        "/api/v1/task-sessions",
        json!({
            "name": "bench",
            "workspace": workspace,
            "command": ["python3", agent, log, MOST_WORK.to_string()],
        }),
    );

    // The seed's loop for each task, on a thread of its own from the moment the
    // task is sent: what it saw, when.
    let seed_seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::<(String, i128)>::new()));
    let mut pollers = Vec::new();
    let mut submitted = Vec::new();
    for i in 0..n {
        let at = now_ns();
        let v = post(
            "/api/v1/tasks",
            json!({ "session": "bench", "instruction": format!("Bench task {i}") }),
        );
        let id = v["task"]["id"].as_str().unwrap().to_string();
        let complete_file = workspace.join("summaries").join(format!("{id}.md"));
        let seen = seed_seen.clone();
        let poll_id = id.clone();
        pollers.push(std::thread::spawn(move || {
            let start = Instant::now();
            while start.elapsed() < Duration::from_secs(300) {
                if complete_file.exists() {
                    seen.lock().unwrap().push((poll_id, now_ns()));
                    return;
                }
                std::thread::sleep(SEED_INTERVAL);
            }
        }));
        let r = http
            .get(format!("{base}/api/v1/tasks/{id}/wait?timeout=60"))
            .bearer_auth(&token)
            .send()
            .unwrap();
        let task: Value = r.json().unwrap();
        assert_eq!(task["state"], "completed", "task {i}: {task}");
        submitted.push((id, at, task));
    }
    for p in pollers {
        p.join().unwrap();
    }

    let agent_log = std::fs::read_to_string(&log).unwrap();
    let by_task: std::collections::HashMap<&str, (i128, i128)> = agent_log
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            Some((
                w.next()?,
                (w.next()?.parse().ok()?, w.next()?.parse().ok()?),
            ))
        })
        .collect();
    let seed_seen = seed_seen.lock().unwrap();
    let mut to_completed = Vec::new();
    let mut to_seed = Vec::new();
    let mut to_pane = Vec::new();
    for (id, at, task) in &submitted {
        let (read, renamed) = by_task[id.as_str()];
        let ended: jiff::Timestamp = task["ended_at"].as_str().unwrap().parse().unwrap();
        to_completed.push(ms(ended.as_nanosecond() - renamed));
        to_pane.push(ms(read - at));
        if let Some((_, seen)) = seed_seen.iter().find(|(s, _)| s == id) {
            to_seed.push(ms(seen - renamed));
        }
    }
    let (done, seed, pane) = (stats(&to_completed), stats(&to_seed), stats(&to_pane));
    println!("from the summary's rename to the task's completed state (ms):");
    row(
        "  hitl (inotify on summaries/)",
        &done,
        &format!(
            "p50 ≤ 10 ms {}, p99 ≤ 50 ms {}",
            met(done.p50 <= 10.0),
            met(done.p99 <= 50.0)
        ),
    );
    row(
        "  seed 002's loop (exists() every 5 s)",
        &seed,
        &format!(
            "hitl is {:.0}× sooner at p50",
            seed.p50 / done.p50.max(0.001)
        ),
    );
    println!("\nfrom the submit to the task read in the pane (ms):");
    row(
        "  POST /api/v1/tasks → first line read",
        &pane,
        &format!("p50 ≤ 100 ms {}", met(pane.p50 <= 100.0)),
    );
}

fn ms(ns: i128) -> f64 {
    ns as f64 / 1e6
}
