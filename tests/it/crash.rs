//! Nothing accepted is lost across `kill -9`, of the listener or of an asker.

use std::{
    collections::HashMap,
    process::{Child, Stdio},
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use nix::sys::signal::Signal;

use crate::support::{Project, eventually, wait_output};

/// A small deterministic generator, seeded from the clock and printed, so a failing
/// run can be repeated.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

#[test]
fn listener_killed_at_random_moments_loses_nothing_and_answers_once() {
    let p = Arc::new(Project::new());
    let seed = std::env::var("HITL_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
                | 1
        });
    eprintln!("kill -9 test seed: HITL_TEST_SEED={seed}");
    let mut rng = Rng(seed);

    let done = Arc::new(AtomicBool::new(false));
    let kills = {
        let (p, done) = (p.clone(), done.clone());
        let mut rng = Rng(seed.rotate_left(17) | 1);
        std::thread::spawn(move || {
            let mut kills = 0;
            let mut listener = p.listen(&["--ui", "none", "--auto-answer", "ok"]);
            while !done.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(20 + rng.below(200)));
                listener.signal(Signal::SIGKILL);
                kills += 1;
                listener = p.listen(&["--ui", "none", "--auto-answer", "ok"]);
            }
            (kills, listener)
        })
    };

    // 200 questions from 20 agents, started over about two seconds.
    let mut askers: Vec<(usize, Child)> = Vec::new();
    for i in 0..200 {
        let child = p
            .hitl()
            .env("HITL_AGENT_ID", format!("agent-{}", i % 20))
            .args(["ask", "--timeout", "120", &format!("question {i}")])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        askers.push((i, child));
        std::thread::sleep(Duration::from_millis(rng.below(20)));
    }
    std::thread::sleep(Duration::from_millis(500));
    done.store(true, Ordering::SeqCst);
    let (kills, listener) = kills.join().unwrap();
    eprintln!("listener killed {kills} times");
    assert!(
        kills >= 3,
        "the test should kill the listener several times"
    );

    for (i, child) in askers {
        let out = wait_output(child, Duration::from_secs(60));
        assert_eq!(
            out.status.code(),
            Some(0),
            "question {i}: {}\nlistener log:\n{}",
            String::from_utf8_lossy(&out.stderr),
            listener.log()
        );
        assert_eq!(String::from_utf8_lossy(&out.stdout), "ok\n", "question {i}");
    }

    // History: every question exactly once, answered.
    eventually("history records all 200", Duration::from_secs(10), || {
        p.history()
            .iter()
            .filter(|h| h["status"] == "answered")
            .count()
            >= 200
    });
    let mut seen: HashMap<String, usize> = HashMap::new();
    for h in p.history() {
        *seen
            .entry(h["content"].as_str().unwrap().to_string())
            .or_default() += 1;
        assert_eq!(h["status"], "answered", "{h}");
    }
    for i in 0..200 {
        assert_eq!(
            seen.get(&format!("question {i}")),
            Some(&1),
            "question {i} in history"
        );
    }
    // No question left waiting; one answer file (kept as the slot's tombstone) each.
    let left = |d: &str| std::fs::read_dir(p.helpers().join(d)).unwrap().count();
    assert_eq!(left("questions"), 0);
    assert_eq!(left("answers"), 200);
    drop(listener);
}

#[test]
fn killed_asker_leaves_the_queue_and_is_marked_abandoned() {
    let p = Project::new();
    let _l = p.listen(&["--ui", "none"]);
    let child = p
        .hitl()
        .args(["ask", "--timeout", "600", "will you answer?"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    p.wait_pending(1, Duration::from_secs(10));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        Signal::SIGKILL,
    )
    .unwrap();
    let killed = Instant::now();
    let _ = wait_output(child, Duration::from_secs(5));
    p.wait_pending(0, Duration::from_secs(5));
    assert!(killed.elapsed() < Duration::from_secs(5));
    eventually("history marks it abandoned", Duration::from_secs(5), || {
        p.history().iter().any(|h| h["status"] == "abandoned")
    });
    let h = &p.history()[0];
    assert!(h["reason"].as_str().unwrap().contains("exited"), "{h}");
}

#[test]
fn interrupted_asker_withdraws_its_question() {
    let p = Project::new();
    let _l = p.listen(&["--ui", "none"]);
    let child = p
        .hitl()
        .args(["ask", "--timeout", "600", "interrupt me"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    p.wait_pending(1, Duration::from_secs(10));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        Signal::SIGINT,
    )
    .unwrap();
    let out = wait_output(child, Duration::from_secs(5));
    assert_eq!(out.status.code(), Some(130));
    assert!(String::from_utf8_lossy(&out.stderr).contains("withdrawn"));
    p.wait_pending(0, Duration::from_secs(5));
    eventually("history marks it withdrawn", Duration::from_secs(5), || {
        p.history().iter().any(|h| h["status"] == "withdrawn")
    });
}

#[test]
fn sigterm_stops_the_listener_and_keeps_pending_questions() {
    let p = Project::new();
    let l = p.listen(&["--ui", "none"]);
    let asker = p
        .hitl()
        .args(["ask", "--timeout", "60", "survive a restart?"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    p.wait_pending(1, Duration::from_secs(10));
    let status = l.signal(Signal::SIGTERM);
    assert!(status.success(), "{status:?}");
    assert!(!p.helpers().join(".listener.pid").exists());
    assert_eq!(p.pending().len(), 1, "the question stays queued");
    let _l = p.listen(&["--ui", "none", "--auto-answer", "yes, survived"]);
    let out = wait_output(asker, Duration::from_secs(10));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "yes, survived\n");
}
