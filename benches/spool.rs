//! Spool benchmarks: latency, concurrency, memory and start-up of the real `hitl`
//! binary, each printed beside a raw baseline measured in the same run.
//!
//! `cargo bench --bench spool` runs the full set; `-- --quick` the short mode CI runs.
//! Targets are printed as MET or MISSED, never asserted: timing is a benchmark's job,
//! not a test's. Functional failures (an asker not answered) do fail the run.
//!
//! * baseline: two processes, a bare inotify round trip with the same writes as the
//!   real thing (temp file, rename, both ways; no fsync, as `[spool] fsync = false`)
//!   and the same nudge of the asker;
//! * listener: the same asker against `hitl listen --auto-answer`;
//! * `hitl ask`: whole processes, start to exit, on tmpfs and on disk, alternating with
//!   a bare start of the same binary (`hitl --version`), and with the floor of any
//!   spool ask: this binary asking once and doing nothing else, beside its own bare
//!   start. What `hitl ask` costs beyond its start is split into that round trip and
//!   its own work (reading its arguments, settings, who asks, a kept question);
//! * 1,000 concurrent `hitl ask` processes under the default inotify limits;
//! * 10,000 concurrent waiting askers (in-process clients: files written by this
//!   process, one inotify watch for all their answers);
//! * listener RSS idle and with 10,000 pending, and start-to-ready time.

use std::{
    collections::HashSet,
    fs,
    io::{BufRead, BufReader},
    os::fd::AsFd,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

#[path = "common/installed.rs"]
mod installed;

use hitl::{
    protocol::{Asker, Kind, Request},
    spool::{Spool, wait::AnswerWait, write_atomic},
};
use installed::hitl;
use nix::{
    poll::{PollFd, PollFlags, PollTimeout, poll},
    sys::inotify::{AddWatchFlags, InitFlags, Inotify},
};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--responder") {
        baseline_responder(Path::new(&args[i + 1]), args[i + 2] == "durable");
        return;
    }
    if let Some(i) = args.iter().position(|a| a == "--asker") {
        floor_asker(Path::new(&args[i + 1]));
        return;
    }
    if args.iter().any(|a| a == "--exit") {
        // The floor's own bare start: this binary, started and ended.
        return;
    }
    if !args.iter().any(|a| a == "--bench") {
        // `cargo test --benches` runs this without `--bench`: nothing to measure there.
        println!("spool benchmarks: run them with `cargo bench --bench spool [-- --quick]`");
        return;
    }
    // Built (or found built) before anything is timed.
    println!("the hitl under test: {}", hitl());
    let quick = args.iter().any(|a| a == "--quick");
    // `--only NAME` runs one section: roundtrip, ask, hook, concurrent, scale.
    let only = args
        .iter()
        .position(|a| a == "--only")
        .and_then(|i| args.get(i + 1))
        .cloned();
    let run = |name: &str| only.as_deref().is_none_or(|o| o == name);
    // 2,000 even in the short mode (about a second): a p99 of 300 rounds is their
    // third-worst, which one hiccup of the machine decides.
    let rounds = if quick { 2000 } else { 3000 };
    println!(
        "hitl spool benchmarks ({} mode)\n",
        if quick { "short" } else { "full" }
    );
    let mut failed = false;

    for (fs_name, parent) in [
        ("tmpfs", PathBuf::from("/dev/shm")),
        ("disk", std::env::temp_dir()),
    ] {
        if !run("roundtrip") {
            break;
        }
        let (base, real, plain) = round_trips(&parent, rounds);
        let (base, real, plain) = (stats(&base), stats(&real), stats(&plain));
        println!(
            "round trip on {fs_name} ({}), {rounds} rounds, [spool] fsync off (the default):",
            fs_type(&parent)
        );
        row("  baseline: bare inotify, two processes", &base, "");
        let verdict = format!(
            "p50 ≤ 2× ({:.3}) {}, p99 ≤ 3× ({:.3}) {}",
            base.p50 * 2.0,
            met(real.p50 <= base.p50 * 2.0),
            base.p99 * 3.0,
            met(real.p99 <= base.p99 * 3.0)
        );
        row("  hitl listen --auto-answer", &real, &verdict);
        let worth = format!(
            "plain ÷ fast: p50 {:.2}×, p99 {:.2}×",
            plain.p50 / real.p50,
            plain.p99 / real.p99
        );
        row("  the same, HITL_FAST_PATHS=0", &plain, &worth);
        println!();
    }

    if run("start") {
        let n = if quick { 300 } else { 1000 };
        for _ in 0..20 {
            bare_start();
            hello_start();
        }
        let (mut bare, mut hello) = (Vec::with_capacity(n), Vec::with_capacity(n));
        for _ in 0..n {
            bare.push(bare_start());
            hello.push(hello_start());
        }
        let (bare, hello) = (stats(&bare), stats(&hello));
        let ratio = bare.p50 / hello.p50;
        let size = fs::metadata(hitl()).unwrap().len() as f64 / (1 << 20) as f64;
        println!("start-up, {n} of each alternating:");
        row("  baseline: a hello-world binary (rustc -O)", &hello, "");
        row(
            "  hitl --version (a bare start)",
            &bare,
            &format!(
                "p50 {ratio:.2}× hello world, target ≤ 1.3× {}",
                met(ratio <= 1.3)
            ),
        );
        // Stripped by the linker (build.rs): a symbol table is a fifth of the size.
        let sections = Command::new("readelf")
            .args(["-S", hitl()])
            .output()
            .expect("readelf (binutils) lists the binary's sections");
        let stripped = !String::from_utf8_lossy(&sections.stdout).contains(".symtab");
        println!(
            "  the hitl binary: {size:.1} MiB ({}, {}), target < 30 MiB {}",
            hitl(),
            if stripped {
                "stripped"
            } else {
                "with its symbols"
            },
            met(size < 30.0)
        );
        assert!(stripped, "the release binary keeps its symbol table");
        println!();
    }
    if run("ask") {
        let n = if quick { 150 } else { 500 };
        for (fs_name, parent) in [
            ("tmpfs", PathBuf::from("/dev/shm")),
            ("disk", std::env::temp_dir()),
        ] {
            // Alternating with the same binary doing nothing: what starting a process
            // costs on the machine at this moment, which moves from day to day more
            // than `hitl ask` does. The project and the history store are on `parent`.
            let run = ask_processes(&parent, n);
            let (asks, bare, creates, hello) = (
                stats(&run.asks),
                stats(&run.bare),
                stats(&run.creates),
                stats(&run.hello),
            );
            let (floor, floor_bare) = (stats(&run.floor), stats(&run.floor_bare));
            println!(
                "whole `hitl ask` process on {fs_name} ({}), spawn to exit, {n} of each alternating:",
                fs_type(&parent)
            );
            row("  baseline: a hello-world binary", &hello, "");
            row(
                "  baseline: hitl --version",
                &bare,
                &format!("p50 {:.2}× hello world", bare.p50 / hello.p50),
            );
            let ratio = asks.p50 / bare.p50;
            row(
                "  hitl ask",
                &asks,
                &format!(
                    "p50 {ratio:.2}× bare ({:.2}× hello world), target ≤ 1.3× bare {}",
                    asks.p50 / hello.p50,
                    met(ratio <= 1.3)
                ),
            );
            // What the ask costs beyond its start, split: the round trip every spool
            // ask pays (a process doing nothing else), and hitl ask's own work.
            let round_trip = floor.p50 - floor_bare.p50;
            let own = asks.p50 - bare.p50 - round_trip;
            row(
                "  floor: a process that only asks",
                &floor,
                &format!(
                    "p50 {:.2}× its own bare start: the round trip {round_trip:.3} ms = {:.2}× hitl's bare start",
                    floor.p50 / floor_bare.p50,
                    round_trip / bare.p50
                ),
            );
            println!(
                "  hitl ask beyond its start: {:.3} ms = round trip {round_trip:.3} + own work {own:.3} ({:.2}× bare)",
                asks.p50 - bare.p50,
                own / bare.p50
            );
            row("  file system: create a question file now", &creates, "");
            println!();
        }
    }
    if run("hook") {
        let n = if quick { 150 } else { 500 };
        let (tmp, spool) = temp_project(&std::env::temp_dir());
        let home = tmp.path().join("home");
        println!(
            "`hitl hook pre-tool-use`, a call no rule names (no opinion), on disk ({}), {n} of each alternating:",
            fs_type(&std::env::temp_dir())
        );
        let mut bare_all = Vec::new();
        for (name, tool, input) in [
            (
                "Read (no rule for the tool)",
                "Read",
                serde_json::json!({ "file_path": spool.project().join("src/lib.rs") }),
            ),
            (
                "Bash `cargo test` (command patterns)",
                "Bash",
                serde_json::json!({ "command": "cargo test --quiet && git status" }),
            ),
            (
                "Write src/lib.rs (path globs)",
                "Write",
                serde_json::json!({ "file_path": spool.project().join("src/lib.rs"), "content": "x" }),
            ),
            (
                "Bash `git status && ls` in bypassPermissions (proven harmless)",
                "Bash",
                serde_json::json!({ "command": "git status --short && ls -la src | head" }),
            ),
        ] {
            // Where Claude Code asks nobody, the line must be proven harmless.
            let mode = if name.contains("bypassPermissions") {
                "bypassPermissions"
            } else {
                "default"
            };
            let body = serde_json::json!({
                "session_id": "bench", "cwd": spool.project(), "hook_event_name": "PreToolUse",
                "permission_mode": mode,
                "tool_name": tool, "tool_input": input, "tool_use_id": "toolu_bench",
            })
            .to_string();
            let (mut hooks, mut bare, mut hello) = (Vec::new(), Vec::new(), Vec::new());
            for _ in 0..n {
                hooks.push(hook_call(spool.project(), &home, &body));
                bare.push(bare_start());
                hello.push(hello_start());
            }
            let (hooks, bare, hello) = (stats(&hooks), stats(&bare), stats(&hello));
            let ratio = hooks.p50 / bare.p50;
            row(
                &format!("  {name}"),
                &hooks,
                &format!(
                    "p50 {ratio:.2}× bare ({:.2}× hello world), target ≤ 1.2× bare {}",
                    hooks.p50 / hello.p50,
                    met(ratio <= 1.2)
                ),
            );
            bare_all.push((bare, hello));
        }
        // With a listener running every call also drops its event for the activity
        // feed (a small file, no fsync); the listener takes it on its own time.
        {
            let (listener, _) = start_listener(&home, spool.project(), &["--ui", "none"]);
            let body = serde_json::json!({
                "session_id": "bench", "cwd": spool.project(), "hook_event_name": "PreToolUse",
                "tool_name": "Read", "tool_input": { "file_path": spool.project().join("src/lib.rs") },
                "tool_use_id": "toolu_bench",
            })
            .to_string();
            let (mut hooks, mut bare, mut hello) = (Vec::new(), Vec::new(), Vec::new());
            for _ in 0..n {
                hooks.push(hook_call(spool.project(), &home, &body));
                bare.push(bare_start());
                hello.push(hello_start());
            }
            // A call that would be asked, with nobody at the listener: straight back to
            // Claude Code's own prompt.
            let dangerous = serde_json::json!({
                "session_id": "bench", "cwd": spool.project(), "hook_event_name": "PreToolUse",
                "tool_name": "Bash", "tool_input": { "command": "git push --force origin main" },
                "tool_use_id": "toolu_bench",
            })
            .to_string();
            let stepped_aside: Vec<f64> = (0..n)
                .map(|_| hook_call_expecting(spool.project(), &home, &dangerous, "\"ask\""))
                .collect();
            stop(listener);
            let (hooks, bare, hello) = (stats(&hooks), stats(&bare), stats(&hello));
            let ratio = hooks.p50 / bare.p50;
            row(
                "  Read, a listener running (event noted)",
                &hooks,
                &format!(
                    "p50 {ratio:.2}× bare ({:.2}× hello world), target ≤ 1.2× bare {}",
                    hooks.p50 / hello.p50,
                    met(ratio <= 1.2)
                ),
            );
            let stepped_aside = stats(&stepped_aside);
            row(
                "  dangerous Bash, nobody at the listener",
                &stepped_aside,
                &format!(
                    "Claude Code's prompt; p99 target ≤ 50 ms {}",
                    met(stepped_aside.p99 <= 50.0)
                ),
            );
            let left = std::fs::read_dir(spool.activity())
                .map(|d| d.count())
                .unwrap_or(0);
            assert_eq!(left, 0, "the listener took every event");
            bare_all.push((bare, hello));
        }
        // A call that asks: answered at once by `--auto-answer`, beside a `hitl ask`
        // answered the same way, in the same run. Both ask through the spool.
        {
            let (listener, _) = start_listener(
                &home,
                spool.project(),
                &["--ui", "none", "--auto-answer", "ok"],
            );
            let body = serde_json::json!({
                "session_id": "bench", "cwd": spool.project(), "hook_event_name": "PreToolUse",
                "tool_name": "Bash", "tool_input": { "command": "git push --force origin main" },
                "tool_use_id": "toolu_bench",
            })
            .to_string();
            let ask = || {
                let start = Instant::now();
                let out = Command::new(hitl())
                    .args(["ask", "--type", "approval", "--dir"])
                    .arg(spool.project())
                    .arg("push?")
                    .env("HITL_HOME", &home)
                    .stdin(Stdio::null())
                    .output()
                    .unwrap();
                assert!(out.status.success(), "{out:?}");
                start.elapsed().as_secs_f64() * 1000.0
            };
            let (mut hooks, mut asks) = (Vec::with_capacity(n), Vec::with_capacity(n));
            for i in 0..n + 10 {
                let h = hook_call_expecting(spool.project(), &home, &body, "\"allow\"");
                let a = ask();
                if i >= 10 {
                    hooks.push(h);
                    asks.push(a);
                }
            }
            stop(listener);
            let (hooks, asks) = (stats(&hooks), stats(&asks));
            let ratio = hooks.p50 / asks.p50;
            row("  `hitl ask --type approval` (spool)", &asks, "");
            row(
                "  a dangerous Bash call, asked and approved",
                &hooks,
                &format!(
                    "p50 {ratio:.2}× hitl ask, target ≤ 1.0× {}",
                    met(ratio <= 1.0)
                ),
            );
        }
        let (bare, hello) = &bare_all[bare_all.len() - 1];
        row("  baseline: a hello-world binary (last set)", hello, "");
        row(
            "  baseline: hitl --version (last set)",
            bare,
            &format!("p50 {:.2}× hello world", bare.p50 / hello.p50),
        );
        println!();
    }
    if run("concurrent") {
        let run = concurrent_ask_processes(&std::env::temp_dir(), 1000);
        let (secs, failures) = (run.secs, run.failures);
        println!(
            "1,000 concurrent `hitl ask` processes (max_user_instances {}):",
            read_sys("fs/inotify/max_user_instances")
        );
        println!(
            "  all waiting → last answer printed: {:.3} s, failures: {failures}   target ≤ 1 s, 0 failures {}",
            secs,
            met(secs <= 1.0 && failures == 0)
        );
        // What the span was made of on this machine at this moment: the listener's
        // own time, and what making one file costs there now (the listener makes
        // one per answer; see `file_creates`).
        println!(
            "  the listener's CPU time over it: {:.3} s; file system: create a file there now p50 {:.3} ms",
            run.listener_cpu_secs,
            stats(&run.creates).p50
        );
        failed |= failures > 0;
        println!();
    }
    if run("scale") {
        let m = memory_and_many(&std::env::temp_dir(), 10_000);
        println!(
            "listener memory and scale (in-process clients: this process writes the questions and waits on one inotify watch):"
        );
        println!(
            "  start → ready: p50 {:.1} ms   target ≤ 50 ms {}",
            m.ready_ms,
            met(m.ready_ms <= 50.0)
        );
        println!(
            "  RSS idle: {:.1} MB   target ≤ 20 MB {}",
            m.idle_mb,
            met(m.idle_mb <= 20.0)
        );
        println!(
            "  RSS with 10,000 pending: {:.1} MB   target ≤ 100 MB {}",
            m.pending_mb,
            met(m.pending_mb <= 100.0)
        );
        println!(
            "  10,000 waiting askers all answered: {} of 10000 in {:.2} s {}",
            m.answered,
            m.answer_secs,
            met(m.answered == 10_000)
        );
        failed |= m.answered != 10_000;
    }

    if failed {
        eprintln!("benchmark run had functional failures");
        std::process::exit(1);
    }
}

fn met(ok: bool) -> &'static str {
    if ok { "MET" } else { "MISSED" }
}

fn read_sys(name: &str) -> String {
    fs::read_to_string(Path::new("/proc/sys").join(name))
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "?".into())
}

fn fs_type(path: &Path) -> String {
    let out = Command::new("stat")
        .args(["-f", "-c", "%T"])
        .arg(path)
        .output();
    out.map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

struct Stats {
    p50: f64,
    p99: f64,
    mean: f64,
}

fn stats(ms: &[f64]) -> Stats {
    let mut v = ms.to_vec();
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let at = |q: f64| v[((v.len() as f64 - 1.0) * q).round() as usize];
    Stats {
        p50: at(0.50),
        p99: at(0.99),
        mean: v.iter().sum::<f64>() / v.len() as f64,
    }
}

fn row(name: &str, s: &Stats, verdict: &str) {
    println!(
        "{name:<44} p50 {:>7.3} ms  p99 {:>7.3} ms  mean {:>7.3} ms  {verdict}",
        s.p50, s.p99, s.mean
    );
}

fn question(id: &str) -> Vec<u8> {
    let me = hitl::agents::this_process();
    let r = Request {
        id: id.to_string(),
        timeout: Some(600),
        asker: Some(Asker {
            pid: me.pid,
            start_time: Some(me.start_time),
        }),
        ..Request::new("bench", "Bench", Kind::Text, "How fast is this?")
    };
    serde_json::to_vec_pretty(&r).unwrap()
}

/// One asker round trip, exactly as `hitl ask` does it: watch, write (atomically, not
/// fsynced, as `[spool] fsync = false`), wait, read, remove the question.
fn ask_once(spool: &Spool, id: &str) -> f64 {
    let name = format!("{id}.json");
    let start = Instant::now();
    let mut wait = AnswerWait::new(&spool.answers(), &name).unwrap();
    let q = spool.questions().join(&name);
    write_atomic(&spool.tmp(), &q, &question(id), false).unwrap();
    wait.wait(
        Some(Instant::now() + Duration::from_secs(30)),
        Duration::from_secs(60),
        || std::ops::ControlFlow::Continue(()),
    )
    .unwrap();
    let answer = fs::read(spool.answers().join(&name)).unwrap();
    assert!(!answer.is_empty());
    fs::remove_file(&q).unwrap();
    start.elapsed().as_secs_f64() * 1000.0
}

fn temp_project(parent: &Path) -> (tempfile::TempDir, Spool) {
    let tmp = tempfile::Builder::new()
        .prefix("hitl-bench-")
        .tempdir_in(parent)
        .unwrap();
    let spool = Spool::new(tmp.path().join("project"));
    spool.ensure_layout().unwrap();
    (tmp, spool)
}

/// The raw baseline, then the real thing, in the same run: this process asks, and
/// first a second process (bare inotify, the same writes and fsyncs) answers, then
/// `hitl listen --auto-answer`, then that again without the fast paths (both sides).
/// Each block runs back to back after a warm-up.
///
/// (Alternating single rounds instead measures a listener that has gone idle between
/// questions: its threads park, and waking them costs more than waking the baseline's
/// one thread. See the closing note of the first session for those figures.)
fn round_trips(parent: &Path, rounds: usize) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let (_base_tmp, base) = temp_project(parent);
    let mut responder = Command::new(std::env::current_exe().unwrap())
        .args([
            "--bench",
            "--responder",
            base.project().to_str().unwrap(),
            "plain",
        ])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut ready = String::new();
    BufReader::new(responder.stdout.take().unwrap())
        .read_line(&mut ready)
        .unwrap();
    for i in 0..10 {
        ask_once(&base, &format!("w{i}"));
    }
    let b = (0..rounds)
        .map(|i| ask_once(&base, &format!("b{i}")))
        .collect();
    let _ = responder.kill();
    let _ = responder.wait();

    let r = listener_rounds(parent, rounds);
    // The plain way, both sides: no nudge, slots or spares; the store writer's
    // thread and SQLite's own VFS.
    hitl::runtime::tuning::configure(false);
    let p = listener_rounds(parent, rounds);
    hitl::runtime::tuning::configure(true);
    (b, r, p)
}

/// `rounds` questions answered by `hitl listen --auto-answer` in a new project,
/// after a warm-up; each one's milliseconds.
fn listener_rounds(parent: &Path, rounds: usize) -> Vec<f64> {
    let (tmp, spool) = temp_project(parent);
    let (listener, _) = start_listener(
        &tmp.path().join("home"),
        spool.project(),
        &["--ui", "none", "--auto-answer", "ok"],
    );
    for i in 0..10 {
        ask_once(&spool, &format!("w{i}"));
    }
    let times = (0..rounds)
        .map(|i| ask_once(&spool, &format!("l{i}")))
        .collect();
    stop(listener);
    times
}

/// The baseline's responder: wait for a question with inotify, read it, write the
/// answer and nudge its asker the same way the broker does.
fn baseline_responder(project: &Path, durable: bool) {
    let spool = Spool::new(project);
    let ino = Inotify::init(InitFlags::IN_CLOEXEC).unwrap();
    ino.add_watch(
        &spool.questions(),
        AddWatchFlags::IN_MOVED_TO | AddWatchFlags::IN_CLOSE_WRITE,
    )
    .unwrap();
    println!("ready");
    use std::io::Write;
    std::io::stdout().flush().unwrap();
    loop {
        let mut fds = [PollFd::new(ino.as_fd(), PollFlags::POLLIN)];
        poll(&mut fds, PollTimeout::NONE).unwrap();
        for ev in ino.read_events().unwrap() {
            let Some(name) = ev.name else { continue };
            let name = name.to_string_lossy().into_owned();
            let Ok(q) = fs::read(spool.questions().join(&name)) else {
                continue;
            };
            let v: serde_json::Value = serde_json::from_slice(&q).unwrap();
            let answer = serde_json::to_vec_pretty(&serde_json::json!({
                "version": 1, "id": v["id"], "content": "ok", "answer": "ok", "cancelled": false
            }))
            .unwrap();
            write_atomic(&spool.tmp(), &spool.answers().join(&name), &answer, durable).unwrap();
            // As the broker does: wake the asker, which sleeps until nudged.
            if let Some(pid) = v["asker"]["pid"].as_u64() {
                hitl::spool::wait::nudge(pid as u32, v["asker"]["start_time"].as_u64());
            }
        }
    }
}

/// A listener with `args`, waited for until ready; returns it and how long that took.
fn start_listener(home: &Path, project: &Path, args: &[&str]) -> (Child, f64) {
    let start = Instant::now();
    let mut child = Command::new(hitl())
        .arg("listen")
        .args(args)
        .arg(project)
        .env("HITL_HOME", home)
        // The listener takes the fast paths when this process does (`round_trips`
        // measures both ways).
        .env(
            hitl::runtime::tuning::ENV,
            if hitl::runtime::tuning::fast_paths() {
                "1"
            } else {
                "0"
            },
        )
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    loop {
        match lines.next() {
            Some(Ok(l)) if l == "hitl: ready" => break,
            Some(Ok(_)) => {}
            _ => panic!("the listener exited before it was ready"),
        }
    }
    let ms = start.elapsed().as_secs_f64() * 1000.0;
    // Keep draining stderr so the listener never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    (child, ms)
}

fn stop(mut child: Child) {
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the listener did not stop within 10 s of SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// What [`ask_processes`] measured, each in milliseconds.
struct AskProcesses {
    /// `hitl ask`, spawn to exit.
    asks: Vec<f64>,
    /// `hitl --version`.
    bare: Vec<f64>,
    /// A hello-world binary.
    hello: Vec<f64>,
    /// This benchmark's binary asking once through the spool and nothing else
    /// ([`floor_asker`]).
    floor: Vec<f64>,
    /// This benchmark's binary started and ended.
    floor_bare: Vec<f64>,
    /// Question-sized file creates in the spool, right after.
    creates: Vec<f64>,
}

/// A process that asks once through `project`'s spool and does nothing else: no
/// arguments to read, no settings, no identity, no kept question to look for. What
/// it costs beyond its own start is the floor of any spool ask on this machine (a
/// question file, the listener's turn, the nudge, the answer file), which `hitl
/// ask`'s own work adds to.
fn floor_asker(project: &Path) {
    let spool = Spool::new(project.to_path_buf());
    let me = hitl::agents::this_process();
    let request = Request {
        id: uuid::Uuid::now_v7().simple().to_string(),
        timeout: Some(600),
        asker: Some(Asker {
            pid: me.pid,
            start_time: Some(me.start_time),
        }),
        ..Request::new("bench", "Bench", Kind::Text, "fast?")
    };
    let asked = hitl::spool::ask::ask(
        &spool,
        &request,
        false,
        false,
        Duration::from_secs(1),
        |_| std::ops::ControlFlow::Continue(()),
    )
    .unwrap();
    let hitl::spool::ask::Asked::Answered(answer) = asked else {
        panic!("not answered: {asked:?}");
    };
    println!("{}", answer.content);
}

fn ask_processes(parent: &Path, n: usize) -> AskProcesses {
    let (tmp, spool) = temp_project(parent);
    let home = tmp.path().join("home");
    let (listener, _) = start_listener(
        &home,
        spool.project(),
        &["--ui", "none", "--auto-answer", "ok"],
    );
    let ask = || {
        let start = Instant::now();
        let out = Command::new(hitl())
            .args(["ask", "--dir"])
            .arg(spool.project())
            .arg("fast?")
            .env("HITL_HOME", &home)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert_eq!(out.stdout, b"ok\n", "{out:?}");
        start.elapsed().as_secs_f64() * 1000.0
    };
    let this = std::env::current_exe().unwrap();
    let floor_ask = || {
        let start = Instant::now();
        let out = Command::new(&this)
            .arg("--asker")
            .arg(spool.project())
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert_eq!(out.stdout, b"ok\n", "{out:?}");
        start.elapsed().as_secs_f64() * 1000.0
    };
    let floor_bare = || {
        let start = Instant::now();
        let out = Command::new(&this)
            .arg("--exit")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        start.elapsed().as_secs_f64() * 1000.0
    };
    // Each asker takes two of the listener's spare files, which it makes again a
    // moment after (1 ms of quiet, then a file creation each, up to a millisecond on
    // a busy disk): the asks are spaced so that each finds them made, as a person's
    // questions do.
    let settle = || std::thread::sleep(Duration::from_millis(4));
    let mut run = AskProcesses {
        asks: Vec::new(),
        bare: Vec::new(),
        hello: Vec::new(),
        floor: Vec::new(),
        floor_bare: Vec::new(),
        creates: Vec::new(),
    };
    for i in 0..n + 10 {
        let ask = ask();
        settle();
        let (bare, hello) = (bare_start(), hello_start());
        let floor = floor_ask();
        settle();
        let floor_bare = floor_bare();
        if i >= 10 {
            run.asks.push(ask);
            run.bare.push(bare);
            run.hello.push(hello);
            run.floor.push(floor);
            run.floor_bare.push(floor_bare);
        }
    }
    stop(listener);
    run.creates = file_creates(&spool.tmp(), 50);
    run
}

/// Creating, writing and closing a question-sized file in `dir`, `n` times, each
/// removed again: what the file system charges an asker for its question file at
/// that moment. On ext4 without a journal it grows with the inodes freed there in
/// the last minutes, so it explains a disk figure that moves from run to run.
fn file_creates(dir: &Path, n: usize) -> Vec<f64> {
    use std::io::Write;
    let body = [b'x'; 440];
    (0..n)
        .map(|i| {
            let path = dir.join(format!("bench-create-{i}.tmp"));
            let start = Instant::now();
            let mut f = fs::File::create_new(&path).unwrap();
            f.write_all(&body).unwrap();
            drop(f);
            let took = start.elapsed().as_secs_f64() * 1000.0;
            fs::remove_file(&path).unwrap();
            std::thread::sleep(Duration::from_millis(2));
            took
        })
        .collect()
}

/// One `hitl hook pre-tool-use` with `body` on stdin, spawn to exit; it must have
/// no opinion (empty stdout).
fn hook_call(project: &Path, home: &Path, body: &str) -> f64 {
    hook_call_expecting(project, home, body, "")
}

/// One `hitl hook pre-tool-use`, whose stdout must contain `expected` (be empty, for
/// an empty `expected`).
fn hook_call_expecting(project: &Path, home: &Path, body: &str, expected: &str) -> f64 {
    use std::io::Write;
    let start = Instant::now();
    let mut child = Command::new(hitl())
        .args(["hook", "pre-tool-use"])
        .current_dir(project)
        .env("HITL_HOME", home)
        .env("CLAUDE_PROJECT_DIR", project)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(body.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let elapsed = start.elapsed().as_secs_f64() * 1000.0;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let fits = match expected {
        "" => stdout.is_empty(),
        e => stdout.contains(e),
    };
    assert!(out.status.success() && fits, "{out:?}");
    elapsed
}

/// A hello-world binary built by the same toolchain (the `rustc` cargo runs), the
/// floor under every start: a `hitl` process is measured against it as well as
/// against `hitl --version`, so no figure is read against a moving baseline.
fn hello_world() -> &'static Path {
    static HELLO: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    HELLO.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("hitl-bench-hello-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let source = dir.join("hello.rs");
        fs::write(&source, "fn main() {\n    println!(\"hello\");\n}\n").unwrap();
        let binary = dir.join("hello");
        let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
        // As `[profile.release]` builds hitl: optimised, stripped.
        let out = Command::new(rustc)
            .args(["-C", "opt-level=3", "-C", "strip=symbols", "-o"])
            .arg(&binary)
            .arg(&source)
            .output()
            .expect("rustc builds the hello-world baseline");
        assert!(out.status.success(), "building hello world: {out:?}");
        binary
    })
}

/// One run of the hello-world binary, spawn to exit.
fn hello_start() -> f64 {
    let start = Instant::now();
    let out = Command::new(hello_world())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    start.elapsed().as_secs_f64() * 1000.0
}

/// One run of `hitl --version`, spawn to exit.
fn bare_start() -> f64 {
    let start = Instant::now();
    let out = Command::new(hitl())
        .arg("--version")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    start.elapsed().as_secs_f64() * 1000.0
}

/// What [`concurrent_ask_processes`] measured.
struct Concurrent {
    /// From the listener's start to the last asker's exit.
    secs: f64,
    /// Askers that did not print the answer.
    failures: usize,
    /// The listener's CPU time (user + system) until then.
    listener_cpu_secs: f64,
    /// [`file_creates`] in the project's spool right after.
    creates: Vec<f64>,
}

/// `n` `hitl ask` processes wait together (most without inotify: the user's 128
/// instances run out); then a listener answers them all.
fn concurrent_ask_processes(parent: &Path, n: usize) -> Concurrent {
    let (tmp, spool) = temp_project(parent);
    let home = tmp.path().join("home");
    let children: Vec<Child> = (0..n)
        .map(|i| {
            Command::new(hitl())
                .args(["ask", "--timeout", "120", "--dir"])
                .arg(spool.project())
                .arg(format!("question {i}"))
                .env("HITL_HOME", &home)
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(120);
    while fs::read_dir(spool.questions()).unwrap().count() < n {
        assert!(Instant::now() < deadline, "the askers did not all start");
        std::thread::sleep(Duration::from_millis(5));
    }
    // Their questions are written; give the last ones a moment to reach their wait.
    std::thread::sleep(Duration::from_millis(200));
    let start = Instant::now();
    let (listener, _) = start_listener(
        &home,
        spool.project(),
        &["--ui", "none", "--auto-answer", "ok"],
    );
    let mut failures = 0;
    let mut last = start;
    for c in children {
        let out = c.wait_with_output().unwrap();
        last = last.max(Instant::now());
        if !out.status.success() || out.stdout != b"ok\n" {
            failures += 1;
        }
    }
    let listener_cpu_secs = cpu_secs(listener.id());
    let creates = file_creates(&spool.tmp(), 20);
    stop(listener);
    Concurrent {
        secs: last.duration_since(start).as_secs_f64(),
        failures,
        listener_cpu_secs,
        creates,
    }
}

/// The CPU time (user + system) process `pid` has used, from `/proc/PID/stat`.
fn cpu_secs(pid: u32) -> f64 {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let Some((_, after_name)) = stat.rsplit_once(')') else {
        return f64::NAN;
    };
    // utime and stime are the 14th and 15th fields; the 3rd is the first after the name.
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let ticks: u64 = [11, 12]
        .iter()
        .filter_map(|&i| fields.get(i)?.parse::<u64>().ok())
        .sum();
    let per_sec = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .unwrap_or(100) as f64;
    ticks as f64 / per_sec
}

struct Scale {
    ready_ms: f64,
    idle_mb: f64,
    pending_mb: f64,
    answered: usize,
    answer_secs: f64,
}

fn rss_mb(pid: u32) -> f64 {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map(|kb| kb / 1024.0)
        .unwrap_or(f64::NAN)
}

fn memory_and_many(parent: &Path, n: usize) -> Scale {
    let (tmp, spool) = temp_project(parent);
    let home = tmp.path().join("home");

    let mut ready = Vec::new();
    for _ in 0..10 {
        let (l, ms) = start_listener(&home, spool.project(), &["--ui", "none"]);
        ready.push(ms);
        stop(l);
    }
    let (listener, _) = start_listener(&home, spool.project(), &["--ui", "none"]);
    std::thread::sleep(Duration::from_millis(300));
    let idle_mb = rss_mb(listener.id());

    for i in 0..n {
        let name = format!("m{i}.json");
        write_atomic(
            &spool.tmp(),
            &spool.questions().join(name),
            &question(&format!("m{i}")),
            false,
        )
        .unwrap();
    }
    let snapshot = spool.queue_snapshot();
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let total = fs::read(&snapshot)
            .ok()
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
            .and_then(|v| v["total_questions"].as_u64())
            .unwrap_or(0);
        if total as usize == n {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the listener queued only {total} of {n}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let pending_mb = rss_mb(listener.id());
    stop(listener);

    // All n wait on one inotify watch; a listener with --auto-answer answers them.
    let ino = Inotify::init(InitFlags::IN_CLOEXEC | InitFlags::IN_NONBLOCK).unwrap();
    ino.add_watch(
        &spool.answers(),
        AddWatchFlags::IN_MOVED_TO | AddWatchFlags::IN_CREATE,
    )
    .unwrap();
    let start = Instant::now();
    let (listener, _) = start_listener(
        &home,
        spool.project(),
        &["--ui", "none", "--auto-answer", "ok"],
    );
    let mut seen = HashSet::new();
    let deadline = Instant::now() + Duration::from_secs(120);
    while seen.len() < n && Instant::now() < deadline {
        let mut fds = [PollFd::new(ino.as_fd(), PollFlags::POLLIN)];
        let _ = poll(&mut fds, PollTimeout::from(100u16));
        match ino.read_events() {
            Ok(evs) => seen.extend(
                evs.into_iter()
                    .filter_map(|e| e.name)
                    .map(|n| n.to_string_lossy().into_owned()),
            ),
            Err(nix::errno::Errno::EAGAIN) => {}
            Err(e) => panic!("{e}"),
        }
    }
    let answer_secs = start.elapsed().as_secs_f64();
    // Events can be merged or dropped under load: count the files themselves.
    let answered = fs::read_dir(spool.answers()).unwrap().count();
    stop(listener);
    Scale {
        ready_ms: stats(&ready).p50,
        idle_mb,
        pending_mb,
        answered,
        answer_secs,
    }
}
