//! The kill -9 soak: spool and HTTP askers keep asking while the listener is killed
//! at random moments and started again, or frozen (SIGSTOP) for a while and thawed.
//! Every question must be answered exactly once — none lost, none answered twice —
//! and history must have each one once.
//!
//! Seeded (`HITL_SOAK_SEED`, default 1) so a failure can be replayed; 50 kills here,
//! `HITL_SOAK_KILLS=1000` (`tools/soak --long`) for the long run. The same askers
//! ride out PostgreSQL frozen (`HITL_SOAK_PG_FREEZES`) and a full disk
//! (`HITL_SOAK_FILLS`).

use std::{
    collections::HashMap,
    process::{Child, Stdio},
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use crate::support::{Listener, Project, wait_output};

/// xorshift64*: a small seeded generator, enough to place kills.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn between(&mut self, low: u64, high: u64) -> u64 {
        low + self.next() % (high - low + 1)
    }
}

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn listen(p: &Project, addr: &str) -> Listener {
    p.listen(&["--ui", "none", "--auto-answer", "ok", "--http", addr])
}

/// What each asker said, by its question.
type Outcomes = Arc<Mutex<HashMap<String, std::process::Output>>>;

/// Keeps `width` askers of one kind going until `stop`; each is recorded.
fn askers(
    p: Arc<Project>,
    kind: &'static str,
    width: usize,
    server: Option<String>,
    stop: Arc<AtomicBool>,
    outcomes: Outcomes,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut running: Vec<(String, Child)> = Vec::new();
        let mut n = 0;
        loop {
            // Reap the finished.
            let mut still = Vec::new();
            for (q, mut child) in running.drain(..) {
                match child.try_wait() {
                    Ok(Some(_)) => {
                        let out = wait_output(child, Duration::from_secs(1));
                        outcomes.lock().unwrap().insert(q, out);
                    }
                    _ => still.push((q, child)),
                }
            }
            running = still;
            if stop.load(Ordering::Relaxed) {
                if running.is_empty() {
                    return;
                }
            } else if running.len() < width {
                let q = format!("{kind} question {n}");
                n += 1;
                let mut cmd = p.hitl();
                cmd.arg("ask").args(["--timeout", "300"]);
                if let Some(s) = &server {
                    cmd.args(["--server", s]);
                }
                let child = cmd
                    .arg(&q)
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap();
                running.push((q, child));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    })
}

/// A free loopback address for a listener's HTTP, the same across its restarts.
fn free_addr() -> String {
    // Below the kernel's ephemeral range (32768-60999 by default): a port from there
    // can be taken, while the listener is down between a kill and its restart, by
    // any process's `bind(:0)` or by the source port of any outgoing connection
    // (the task tests beside this one make many), and the restarted listener would
    // then serve elsewhere.
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos() as u64
        ^ u64::from(std::process::id()) << 16;
    for i in 0..1000u64 {
        let port = 20_000 + (seed.wrapping_add(i.wrapping_mul(7919)) % 12_000) as u16;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return format!("127.0.0.1:{port}");
        }
    }
    panic!("no free port in 20000-31999");
}

/// The soaks' askers: enough that trouble lands mid-question, few enough that the
/// tests running beside them still get the CPU.
struct Load {
    stop: Arc<AtomicBool>,
    outcomes: Outcomes,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Load {
    /// Three spool askers of `p`, and one over HTTP to the listener at `addr`.
    fn start(p: &Arc<Project>, addr: &str) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let outcomes: Outcomes = Arc::default();
        let http = Some(format!("http://{addr}"));
        let threads = vec![
            askers(p.clone(), "spool", 3, None, stop.clone(), outcomes.clone()),
            askers(p.clone(), "http", 1, http, stop.clone(), outcomes.clone()),
        ];
        Load {
            stop,
            outcomes,
            threads,
        }
    }

    /// Stops asking, waits for every asker, and returns what each said.
    fn finish(self) -> HashMap<String, std::process::Output> {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads {
            t.join().unwrap();
        }
        std::mem::take(&mut *self.outcomes.lock().unwrap())
    }
}

#[test]
fn killing_the_listener_at_random_moments_loses_and_repeats_nothing() {
    let kills = env_or("HITL_SOAK_KILLS", 50);
    let mut rng = Rng(env_or("HITL_SOAK_SEED", 1).max(1));
    let p = Arc::new(Project::new());
    let addr = free_addr();
    let mut listener = listen(&p, &addr);
    let load = Load::start(&p, &addr);
    let started = Instant::now();
    let mut pauses = 0;
    for _ in 0..kills {
        std::thread::sleep(Duration::from_millis(rng.between(10, 250)));
        if rng.between(0, 3) == 0 {
            // Frozen mid-work: askers and the store wait; nothing may be lost or
            // answered twice when it thaws.
            let pid = nix::unistd::Pid::from_raw(listener.pid() as i32);
            nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGSTOP).unwrap();
            std::thread::sleep(Duration::from_millis(rng.between(50, 500)));
            nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGCONT).unwrap();
            pauses += 1;
        }
        listener.signal(nix::sys::signal::Signal::SIGKILL);
        // Sometimes straight back, sometimes after a pause askers notice.
        std::thread::sleep(Duration::from_millis(rng.between(0, 100)));
        listener = listen(&p, &addr);
    }
    let outcomes = load.finish();
    eprintln!(
        "soak: {kills} kills ({pauses} after a freeze) in {:.1} s, {} questions asked",
        started.elapsed().as_secs_f64(),
        outcomes.len()
    );
    assert!(
        outcomes.len() >= kills as usize,
        "too little load to mean anything"
    );
    each_answered_once(&outcomes, || p.history());
    drop(listener);
}

/// Every asker got its answer, once (it printed it once and exited 0), and history
/// (read by `history`) has each question once, answered, once the listener wrote it.
fn each_answered_once(
    outcomes: &HashMap<String, std::process::Output>,
    history: impl Fn() -> Vec<serde_json::Value>,
) {
    for (q, out) in outcomes.iter() {
        let got = (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        );
        if got != (Some(0), "ok\n".to_string()) {
            // What history knows of it, and of every question not answered: where
            // it was lost.
            let known: Vec<_> = history()
                .into_iter()
                .filter(|h| h["content"] == q.as_str() || h["status"] != "answered")
                .collect();
            panic!("{q}: {out:?}\nhistory of it and of every unanswered one: {known:#?}");
        }
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let mut seen: HashMap<String, Vec<String>> = HashMap::new();
        for h in &history() {
            seen.entry(h["content"].as_str().unwrap_or_default().to_string())
                .or_default()
                .push(h["status"].as_str().unwrap_or_default().to_string());
        }
        let complete = outcomes
            .keys()
            .all(|q| seen.get(q).is_some_and(|s| s == &["answered"]));
        if complete {
            return;
        }
        if Instant::now() > deadline {
            let wrong: Vec<_> = outcomes
                .keys()
                .filter(|q| seen.get(*q).is_none_or(|s| s != &["answered"]))
                .map(|q| (q, seen.get(q)))
                .collect();
            panic!("history is not one answered row per question: {wrong:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A PostgreSQL server of this test's own (`initdb` in a temp folder, a free port), so
/// that freezing it disturbs no other test. Run as `postgres` when we are root, since
/// `initdb` refuses root. Stopped when dropped.
struct PrivatePostgres {
    server: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl PrivatePostgres {
    fn start() -> PrivatePostgres {
        let bin = std::fs::read_dir("/usr/lib/postgresql")
            .ok()
            .and_then(|versions| {
                versions
                    .filter_map(Result::ok)
                    .map(|e| e.path().join("bin"))
                    .filter(|b| b.join("initdb").exists())
                    .max()
            })
            .expect("PostgreSQL's server programs (apt-get install postgresql) are needed");
        let dir = tempfile::tempdir().unwrap();
        let owner = nix::unistd::geteuid()
            .is_root()
            .then(|| nix::unistd::User::from_name("postgres").unwrap())
            .flatten();
        if let Some(u) = &owner {
            nix::unistd::chown(dir.path(), Some(u.uid), Some(u.gid)).unwrap();
        }
        let as_owner = |program: &str| {
            let mut cmd = match &owner {
                Some(_) => {
                    let mut c = std::process::Command::new("setpriv");
                    c.args(["--reuid=postgres", "--regid=postgres", "--init-groups"]);
                    c.arg(bin.join(program));
                    c
                }
                None => std::process::Command::new(bin.join(program)),
            };
            cmd.stdin(Stdio::null());
            cmd
        };
        let data = dir.path().join("data");
        let out = as_owner("initdb")
            .arg("-D")
            .arg(&data)
            .args(["-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-sync"])
            .output()
            .unwrap();
        assert!(out.status.success(), "initdb: {out:?}");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let server = as_owner("postgres")
            .arg("-D")
            .arg(&data)
            .args(["-p", &port.to_string(), "-k"])
            .arg(dir.path())
            .args(["-c", "listen_addresses=127.0.0.1", "-c", "fsync=off"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let pg = PrivatePostgres {
            server,
            port,
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while !as_owner("pg_isready")
            .args(["-q", "-h", "127.0.0.1", "-p", &port.to_string()])
            .status()
            .unwrap()
            .success()
        {
            assert!(
                Instant::now() < deadline,
                "the private PostgreSQL never started"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        pg
    }

    fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// The server's processes: the postmaster and its children (one per connection,
    /// the writers, the checkpointer…).
    fn processes(&self) -> Vec<nix::unistd::Pid> {
        let master = self.server.id() as i32;
        let mut pids = vec![nix::unistd::Pid::from_raw(master)];
        for e in std::fs::read_dir("/proc").unwrap().filter_map(Result::ok) {
            let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                continue;
            };
            // `pid (comm) state ppid …`: the name may hold anything but ends at the last ')'.
            let ppid = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().nth(1))
                .and_then(|p| p.parse::<i32>().ok());
            if ppid == Some(master) {
                pids.push(nix::unistd::Pid::from_raw(pid));
            }
        }
        pids
    }

    fn signal(&self, sig: nix::sys::signal::Signal) {
        for pid in self.processes() {
            let _ = nix::sys::signal::kill(pid, sig);
        }
    }
}

impl Drop for PrivatePostgres {
    fn drop(&mut self) {
        self.signal(nix::sys::signal::Signal::SIGCONT);
        // SIGQUIT: immediate shutdown, the children too.
        let pid = nix::unistd::Pid::from_raw(self.server.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGQUIT);
        let _ = self.server.wait();
    }
}

#[test]
fn freezing_postgresql_loses_and_repeats_nothing() {
    let freezes = env_or("HITL_SOAK_PG_FREEZES", 12);
    let mut rng = Rng(env_or("HITL_SOAK_SEED", 1).max(1));
    let pg = PrivatePostgres::start();
    let db = pg.url();
    let p = Arc::new(Project::new());
    let addr = free_addr();
    let listen = |p: &Project| {
        p.listen(&[
            "--ui",
            "none",
            "--auto-answer",
            "ok",
            "--http",
            &addr,
            "--db",
            &db,
        ])
    };
    let mut listener = listen(&p);
    let load = Load::start(&p, &addr);
    let started = Instant::now();
    let mut kills = 0;
    for _ in 0..freezes {
        std::thread::sleep(Duration::from_millis(rng.between(50, 400)));
        // Every statement in flight, and every new one, waits; the askers wait too.
        pg.signal(nix::sys::signal::Signal::SIGSTOP);
        std::thread::sleep(Duration::from_millis(rng.between(100, 1500)));
        // Sometimes the listener dies while its store is frozen.
        if rng.between(0, 2) == 0 {
            listener.signal(nix::sys::signal::Signal::SIGKILL);
            kills += 1;
            pg.signal(nix::sys::signal::Signal::SIGCONT);
            listener = listen(&p);
        } else {
            pg.signal(nix::sys::signal::Signal::SIGCONT);
        }
    }
    let outcomes = load.finish();
    eprintln!(
        "soak: {freezes} PostgreSQL freezes ({kills} with the listener killed meanwhile) \
         in {:.1} s, {} questions asked",
        started.elapsed().as_secs_f64(),
        outcomes.len()
    );
    assert!(
        outcomes.len() >= freezes as usize,
        "too little load to mean anything"
    );
    each_answered_once(&outcomes, || {
        let out = p.run(&["history", "--json", "--limit", "0", "--db", &db]);
        assert!(out.status.success(), "{out:?}");
        serde_json::from_slice(&out.stdout).unwrap()
    });
    drop(listener);
}

/// A small file system of the test's own (a size-limited tmpfs; mounting needs root),
/// to fill up. Unmounted when dropped.
struct SmallDisk {
    dir: tempfile::TempDir,
}

impl SmallDisk {
    fn mount(mib: u32) -> Option<SmallDisk> {
        if !nix::unistd::geteuid().is_root() {
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let out = std::process::Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={mib}m,mode=0755"),
                "tmpfs",
            ])
            .arg(dir.path())
            .output()
            .unwrap();
        assert!(out.status.success(), "mount: {out:?}");
        Some(SmallDisk { dir })
    }

    fn path(&self) -> &std::path::Path {
        self.dir.path()
    }

    /// Takes every free byte with one file; returns it, to remove later.
    fn fill(&self) -> std::path::PathBuf {
        use std::io::Write;
        let path = self.path().join("filler");
        let mut f = std::fs::File::create(&path).unwrap();
        let chunk = vec![0u8; 64 << 10];
        loop {
            match f.write(&chunk) {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(nix::libc::ENOSPC) => break,
                Err(e) => panic!("filling the disk: {e}"),
            }
        }
        // The last pages of a nearly full disk too.
        for _ in 0..64 {
            if f.write(&chunk[..1024]).is_err() {
                break;
            }
        }
        path
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}

/// A listener that gave up on a full disk would leave askers unanswered: it must
/// still be running, and what it said is shown if not.
fn assert_serving(listener: &mut Listener) {
    if let Some(status) = listener.child.try_wait().unwrap() {
        panic!("the listener ended ({status}):\n{}", listener.log());
    }
}

#[test]
fn a_full_disk_loses_and_repeats_nothing() {
    let fills = env_or("HITL_SOAK_FILLS", 10);
    let mut rng = Rng(env_or("HITL_SOAK_SEED", 1).max(1));
    let Some(disk) = SmallDisk::mount(64) else {
        assert!(
            std::env::var("CI").is_err(),
            "the full-disk soak needs root (to mount a small file system)"
        );
        eprintln!("skipped: the full-disk soak needs root (to mount a small file system)");
        return;
    };
    // The project and its history both live on the small disk.
    let p = Arc::new(Project::new_in(disk.path()));
    let addr = free_addr();
    let mut listener = listen(&p, &addr);
    let load = Load::start(&p, &addr);
    let started = Instant::now();
    let mut kills = 0;
    for _ in 0..fills {
        std::thread::sleep(Duration::from_millis(rng.between(100, 400)));
        let filler = disk.fill();
        std::thread::sleep(Duration::from_millis(rng.between(200, 1500)));
        // Sometimes the listener dies while the disk is full.
        if rng.between(0, 3) == 0 {
            assert_serving(&mut listener);
            listener.signal(nix::sys::signal::Signal::SIGKILL);
            kills += 1;
            std::fs::remove_file(filler).unwrap();
            listener = listen(&p, &addr);
        } else {
            std::fs::remove_file(filler).unwrap();
        }
    }
    let outcomes = load.finish();
    assert_serving(&mut listener);
    // An asker that could not write its question was told so (exit 3) and asked
    // nothing; every other one was answered once.
    let (refused, asked): (HashMap<_, _>, HashMap<_, _>) =
        outcomes.into_iter().partition(|(_, out)| {
            out.status.code() == Some(3)
                && String::from_utf8_lossy(&out.stderr).contains("No space left on device")
        });
    eprintln!(
        "soak: the disk filled {fills} times ({kills} with the listener killed meanwhile) \
         in {:.1} s: {} questions answered, {} refused at once for want of space",
        started.elapsed().as_secs_f64(),
        asked.len(),
        refused.len()
    );
    assert!(
        asked.len() >= fills as usize,
        "too little load to mean anything"
    );
    each_answered_once(&asked, || p.history());
    let history = p.history();
    for q in refused.keys() {
        assert!(
            !history.iter().any(|h| h["content"] == q.as_str()),
            "{q} was refused, yet history has it"
        );
    }
    drop(listener);
}
