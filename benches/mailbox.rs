//! Mailbox benchmarks (seed 003) against a real `hitl listen`: an agent's
//! `question` file renamed into place, then
//!
//! - question → request visible: until the dashboard's stream (`/api/v1/stream`)
//!   says it is queued;
//! - answer → file: from the answer's POST to the agent's `answer` file in place,
//!   seen by the agent's inotify wait (`hitl::mailbox::wait`, as `hitl mailbox ask`
//!   waits);
//!
//! beside seed 003's own loops, run here on a run of their own: the trampoline's
//! `while true; [ -f question ] …; sleep 1` and the agent's `while [ ! -f answer ];
//! do sleep 1; done`, answering at once, the agent working a random moment
//! before each question.
//!
//! `cargo bench --bench mailbox` runs 500 questions and 60 through the seed's loops;
//! `-- --quick` (what CI runs) 200 and 20. Targets are printed as MET or MISSED, never
//! asserted; a question not answered fails the run.

use std::{
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use futures_util::StreamExt;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::{client::IntoClientRequest, http::HeaderValue};

mod common;

use common::{hitl, met, row, stats};

/// The seed's polling interval.
const SEED_INTERVAL: Duration = Duration::from_secs(1);

struct Listener(Child);

impl Drop for Listener {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Writes `text` to `dest` as an agent that writes whole files does: a temp file,
/// renamed into place.
fn put(dest: &Path, text: &str) {
    let tmp = dest.with_file_name(".bench.tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, dest).unwrap();
}

fn question(i: usize) -> String {
    format!("CONTEXT='Bench question {i}'\nOPTION_1='Proceed with this plan'\nOPTION_2='Cancel'\n")
}

fn main() {
    // reqwest's clients here need rustls's provider, as hitl's do.
    hitl::runtime::tls::install_default_provider();
    let args: Vec<String> = std::env::args().collect();
    if !args.iter().any(|a| a == "--bench") {
        println!("mailbox benchmarks: run them with `cargo bench --bench mailbox [-- --quick]`");
        return;
    }
    // Built (or found built) before anything is timed.
    println!("the hitl under test: {}", hitl());
    let quick = args.iter().any(|a| a == "--quick");
    let (n, n_seed) = if quick { (200, 20) } else { (500, 60) };
    println!(
        "hitl mailbox benchmarks ({} mode): {n} questions through the relay, {n_seed} through seed 003's loops\n",
        if quick { "short" } else { "full" }
    );
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("project");
    let home = tmp.path().join("home");
    for d in [&project, &home] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::write(home.join("config.toml"), "[http]\ncreate_rate_limit = 0\n").unwrap();
    let run = |args: &[&str]| {
        let out = Command::new(hitl())
            .args(args)
            .env("HITL_HOME", &home)
            .env("HITL_LOG", "error")
            .current_dir(&project)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(out.status.success(), "hitl {args:?}: {out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    run(&["init"]);
    let (child, base) = common::start_listener(
        Command::new(hitl())
            .args(["listen", "--ui", "none", "--http", "127.0.0.1:0"])
            .env("HITL_HOME", &home)
            .env("HITL_LOG", "error")
            .current_dir(&project),
    );
    let _listener = Listener(child);
    let token = std::fs::read_to_string(home.join("token"))
        .unwrap()
        .trim()
        .to_string();
    let run =
        PathBuf::from(run(&["mailbox", "init", tmp.path().join("run").to_str().unwrap()]).trim());
    let narrator = run.join("narrator");

    let rt = tokio::runtime::Runtime::new().unwrap();
    let mut req = format!("{}/api/v1/stream", base.replace("http://", "ws://"))
        .into_client_request()
        .unwrap();
    req.headers_mut().insert(
        "authorization",
        HeaderValue::from_str(&format!("Bearer {token}")).unwrap(),
    );
    let (mut stream, _) = rt.block_on(tokio_tungstenite::connect_async(req)).unwrap();
    let http = reqwest::blocking::Client::new();

    // The registration reaches the relay before the first question is timed.
    std::thread::sleep(Duration::from_millis(300));
    let mut visible = Vec::new();
    let mut answered = Vec::new();
    for i in 0..n {
        let mut wait =
            hitl::mailbox::wait::FileWait::new(std::slice::from_ref(&narrator), false).unwrap();
        let asked = Instant::now();
        put(&narrator.join("question"), &question(i));
        let id = loop {
            let msg = rt
                .block_on(async {
                    tokio::time::timeout(Duration::from_secs(30), stream.next()).await
                })
                .expect("the request is queued within 30 s")
                .unwrap()
                .unwrap();
            let Ok(text) = msg.to_text() else { continue };
            let v: Value = serde_json::from_str(text).unwrap_or(Value::Null);
            if v["type"] == "queued"
                && v["request"]["request"]["content"] == format!("Bench question {i}").as_str()
            {
                break v["request"]["request"]["id"].as_str().unwrap().to_string();
            }
        };
        visible.push(asked.elapsed().as_secs_f64() * 1e3);
        let answer = narrator.join("answer");
        let posted = Instant::now();
        let r = http
            .post(format!("{base}/api/v1/requests/{id}/respond"))
            .bearer_auth(&token)
            .json(&json!({ "choice": "Cancel" }))
            .send()
            .unwrap();
        assert!(r.status().is_success(), "respond: {}", r.status());
        let got = wait
            .wait(
                Some(Instant::now() + Duration::from_secs(30)),
                || Ok(answer.exists().then_some(())),
                || false,
            )
            .unwrap();
        assert_eq!(got, hitl::mailbox::wait::Waited::Ready(()), "question {i}");
        answered.push(posted.elapsed().as_secs_f64() * 1e3);
        let text = std::fs::read_to_string(&answer).unwrap();
        assert!(text.contains("ANSWER='Option 2'"), "question {i}: {text}");
        std::fs::remove_file(&answer).unwrap();
    }

    // Seed 003's loops on a run the listener does not relay: the trampoline answers
    // what its 1 s loop finds; the agent's own 1 s loop finds the answer.
    let seed_run = tmp.path().join("seed-run/narrator");
    std::fs::create_dir_all(&seed_run).unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let trampoline = {
        let (dir, stop) = (seed_run.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut seen = Vec::new();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let q = dir.join("question");
                if q.exists() {
                    seen.push(Instant::now());
                    put(&dir.join("answer"), "ANSWER=Option 1\n");
                    std::fs::remove_file(&q).unwrap();
                }
                std::thread::sleep(SEED_INTERVAL);
            }
            seen
        })
    };
    let mut seed_visible_at = Vec::new();
    let mut seed_answered = Vec::new();
    for i in 0..n_seed {
        // The agent works a random moment first: its question lands anywhere in the
        // trampoline's second, as it would.
        let work = (uuid::Uuid::new_v4().as_u128() % 1000) as u64;
        std::thread::sleep(Duration::from_millis(work));
        let answer = seed_run.join("answer");
        let asked = Instant::now();
        put(&seed_run.join("question"), &question(i));
        // The agent's loop.
        while !answer.exists() {
            std::thread::sleep(SEED_INTERVAL);
        }
        let found = Instant::now();
        std::fs::remove_file(&answer).unwrap();
        seed_visible_at.push(asked);
        seed_answered.push(found);
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let seen = trampoline.join().unwrap();
    let seed_visible: Vec<f64> = seed_visible_at
        .iter()
        .zip(&seen)
        .map(|(a, s)| s.duration_since(*a).as_secs_f64() * 1e3)
        .collect();
    let seed_back: Vec<f64> = seen
        .iter()
        .zip(&seed_answered)
        .map(|(s, f)| f.duration_since(*s).as_secs_f64() * 1e3)
        .collect();

    let (v, a) = (stats(&visible), stats(&answered));
    let (sv, sa) = (stats(&seed_visible), stats(&seed_back));
    println!("question file → request visible (ms):");
    row(
        "  hitl (inotify, relay, queued on /stream)",
        &v,
        &format!(
            "p50 ≤ 10 ms {}, p99 ≤ 50 ms {}",
            met(v.p50 <= 10.0),
            met(v.p99 <= 50.0)
        ),
    );
    row(
        "  seed 003's trampoline (1 s loop)",
        &sv,
        &format!("hitl is {:.0}× sooner at p50", sv.p50 / v.p50.max(0.001)),
    );
    println!("\nanswer → answer file seen by the agent (ms):");
    row(
        "  hitl (POST respond → answer file)",
        &a,
        &format!(
            "p50 ≤ 10 ms {}, p99 ≤ 50 ms {}",
            met(a.p50 <= 10.0),
            met(a.p99 <= 50.0)
        ),
    );
    row(
        "  seed 003's agent (1 s loop)",
        &sa,
        &format!("hitl is {:.0}× sooner at p50", sa.p50 / a.p50.max(0.001)),
    );
    let _ = std::fs::remove_dir_all(&run);
}
