//! Test helpers: a temp project with its own HITL_HOME, the real `hitl` binary run as
//! separate processes, and a listener that is waited for and killed on drop.

use std::{
    io::{BufRead, BufReader},
    path::{Path, PathBuf},
    process::{Child, Command, Output, Stdio},
    sync::{Arc, Mutex, mpsc},
    time::{Duration, Instant},
};

use serde_json::Value;
use tempfile::TempDir;

/// The `hitl` binary under test.
pub fn hitl_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_hitl"))
}

/// The checkout under test. Read when the tests run (cargo sets it then too), not
/// when they were compiled: a build reused from another clone of the same commit
/// must not read that clone's files.
pub fn checkout() -> PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")))
}

/// `../shared/seeds` beside the checkout, where the tests read the seeds' own
/// scripts from. They are not part of the repository: in a clone on its own, the
/// calling test says on stderr that it was skipped (not passed) and returns; under
/// `CI=true` they are required.
pub fn seeds() -> Option<PathBuf> {
    use std::io::Write;
    let dir = checkout().join("../shared/seeds");
    if dir.is_dir() {
        return Some(dir);
    }
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "the seeds are missing: expected {} (CI runs every test)",
        dir.display()
    );
    // Straight to stderr: the harness keeps what `eprintln!` says to itself.
    let test = std::thread::current()
        .name()
        .unwrap_or("a test")
        .to_string();
    let _ = writeln!(
        std::io::stderr(),
        "SKIPPED {test}: it runs the seeds' own scripts, and {} is missing",
        dir.display()
    );
    None
}

/// A project in a temp folder, initialised with `hitl init`.
pub struct Project {
    pub tmp: TempDir,
    pub dir: PathBuf,
    pub home: PathBuf,
}

impl Project {
    pub fn new() -> Project {
        let tmp = tempfile::Builder::new()
            .prefix("hitl-it-")
            .tempdir()
            .unwrap();
        Project::in_dir(tmp)
    }

    /// A project (and its HITL_HOME, so its history too) under `parent`.
    pub fn new_in(parent: &std::path::Path) -> Project {
        let tmp = tempfile::Builder::new()
            .prefix("hitl-it-")
            .tempdir_in(parent)
            .unwrap();
        Project::in_dir(tmp)
    }

    fn in_dir(tmp: TempDir) -> Project {
        let dir = tmp.path().join("project");
        let home = tmp.path().join("home");
        let p = Project { tmp, dir, home };
        let out = p.hitl().arg("init").arg(&p.dir).output().unwrap();
        assert!(out.status.success(), "hitl init failed: {out:?}");
        p
    }

    pub fn helpers(&self) -> PathBuf {
        self.dir.join(".helpers")
    }

    /// `hitl` with this project's HITL_HOME, run in the project folder.
    pub fn hitl(&self) -> Command {
        let mut c = Command::new(hitl_bin());
        c.current_dir(if self.dir.exists() {
            self.dir.clone()
        } else {
            self.tmp.path().to_path_buf()
        })
        .env("HITL_HOME", &self.home)
        .env_remove("HITL_DB")
        .env_remove("HITL_AGENT_ID")
        .env_remove("HITL_AGENT_NAME")
        .env_remove("HITL_TIMEOUT")
        .stdin(Stdio::null());
        c
    }

    /// Runs `hitl ARGS` to completion.
    pub fn run(&self, args: &[&str]) -> Output {
        self.hitl().args(args).output().unwrap()
    }

    /// `hitl pending --json`.
    pub fn pending(&self) -> Vec<Value> {
        let out = self.run(&["pending", "--json"]);
        assert!(out.status.success(), "{out:?}");
        serde_json::from_slice::<Vec<Value>>(&out.stdout).unwrap()
    }

    /// Waits until `hitl pending` lists `n` questions.
    pub fn wait_pending(&self, n: usize, within: Duration) -> Vec<Value> {
        let start = Instant::now();
        loop {
            let p = self.pending();
            if p.len() == n {
                return p;
            }
            assert!(
                start.elapsed() < within,
                "expected {n} pending, have {}: {p:#?}",
                p.len()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// `hitl history --json --limit 0`.
    pub fn history(&self) -> Vec<Value> {
        let out = self.run(&["history", "--json", "--limit", "0"]);
        assert!(out.status.success(), "{out:?}");
        serde_json::from_slice(&out.stdout).unwrap()
    }

    /// Starts `hitl listen` with `args` and waits until it is ready.
    pub fn listen(&self, args: &[&str]) -> Listener {
        let mut cmd = self.hitl();
        cmd.arg("listen")
            .args(args)
            .stderr(Stdio::piped())
            .stdout(Stdio::piped());
        Listener::start(cmd)
    }

    /// Starts `hitl listen` reading answers from a pipe (the terminal responder).
    pub fn listen_with_stdin(&self, args: &[&str]) -> Listener {
        let mut cmd = self.hitl();
        cmd.arg("listen")
            .args(args)
            .stdin(Stdio::piped())
            .stderr(Stdio::piped())
            .stdout(Stdio::piped());
        Listener::start(cmd)
    }
}

/// A running `hitl listen`; killed (SIGKILL) when dropped.
pub struct Listener {
    pub child: Child,
    pub log: Arc<Mutex<String>>,
    pub stdout: Arc<Mutex<String>>,
}

impl Listener {
    /// Starts any `hitl` command that prints "hitl: ready" (`serve`) and waits for it.
    pub fn start_command(mut cmd: Command) -> Listener {
        cmd.stderr(Stdio::piped()).stdout(Stdio::piped());
        Listener::start(cmd)
    }

    /// The base URL a `hitl serve` printed ("HTTP API on http://…"), for loopback use.
    pub fn http_base(&self) -> String {
        let log = self.log();
        let url = log
            .lines()
            .find_map(|l| l.strip_prefix("hitl: HTTP API on "))
            .expect("the server printed its address")
            .split_whitespace()
            .next()
            .unwrap()
            .to_string();
        url.replace("0.0.0.0", "127.0.0.1")
    }

    pub fn start(mut cmd: Command) -> Listener {
        let mut child = cmd.spawn().unwrap();
        let log = Arc::new(Mutex::new(String::new()));
        let stdout = Arc::new(Mutex::new(String::new()));
        let (ready_tx, ready_rx) = mpsc::channel();
        let err = child.stderr.take().unwrap();
        let log2 = log.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                if line == "hitl: ready" {
                    let _ = ready_tx.send(());
                }
                let mut l = log2.lock().unwrap();
                l.push_str(&line);
                l.push('\n');
            }
        });
        let out = child.stdout.take().unwrap();
        let stdout2 = stdout.clone();
        std::thread::spawn(move || {
            // Whatever arrives, as it arrives (a prompt ends without a newline); the
            // text decoded whole each time, so a character split between reads is not
            // garbled.
            let mut out = out;
            let (mut all, mut chunk) = (Vec::new(), [0u8; 8192]);
            loop {
                match std::io::Read::read(&mut out, &mut chunk) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        all.extend_from_slice(&chunk[..n]);
                        *stdout2.lock().unwrap() = String::from_utf8_lossy(&all).into_owned();
                    }
                }
            }
        });
        if ready_rx.recv_timeout(Duration::from_secs(20)).is_err() {
            let _ = child.kill();
            panic!(
                "the listener did not become ready:\n{}",
                log.lock().unwrap()
            );
        }
        Listener { child, log, stdout }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends a signal and waits for the exit.
    pub fn signal(mut self, sig: nix::sys::signal::Signal) -> std::process::ExitStatus {
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.pid() as i32), sig).unwrap();
        let status = self.child.wait().unwrap();
        std::mem::forget(self);
        status
    }

    pub fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    pub fn stdout(&self) -> String {
        self.stdout.lock().unwrap().clone()
    }

    /// Waits until the listener's stdout contains `needle`.
    pub fn wait_stdout(&self, needle: &str, within: Duration) {
        let start = Instant::now();
        while !self.stdout().contains(needle) {
            assert!(
                start.elapsed() < within,
                "listener stdout never showed {needle:?}:\n{}\n--- stderr:\n{}",
                self.stdout(),
                self.log()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits for a child with a time limit (reading its output meanwhile, so a full
/// pipe cannot stall it), killing it past the limit.
pub fn wait_output(child: Child, within: Duration) -> Output {
    let pid = child.id();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(within) {
        Ok(out) => out.unwrap(),
        Err(_) => {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
            let out = rx.recv().unwrap().unwrap();
            panic!(
                "process did not finish within {within:?}: {:?}\nstdout: {}\nstderr: {}",
                out.status,
                clip(&out.stdout),
                clip(&out.stderr)
            );
        }
    }
}

/// Polls `cond` until it holds.
pub fn eventually(what: &str, within: Duration, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < within, "timed out waiting for: {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The first 2,000 characters of some output, for failure messages.
pub fn clip(bytes: &[u8]) -> String {
    let s = String::from_utf8_lossy(bytes);
    if s.chars().count() > 2000 {
        format!(
            "{}… ({} bytes)",
            s.chars().take(2000).collect::<String>(),
            bytes.len()
        )
    } else {
        s.into_owned()
    }
}

impl Project {
    /// The API token the listener made (in this project's HITL_HOME).
    pub fn token(&self) -> String {
        std::fs::read_to_string(self.home.join("token"))
            .expect("the listener makes the token file")
            .trim()
            .to_string()
    }

    /// The listener's HTTP base URL, from `.helpers/.listener.json`.
    pub fn http_url(&self) -> String {
        let info: Value =
            serde_json::from_slice(&std::fs::read(self.helpers().join(".listener.json")).unwrap())
                .unwrap();
        info["http"]
            .as_str()
            .expect("the listener serves HTTP")
            .to_string()
    }

    /// Writes the project's `.helpers/config.toml`.
    pub fn project_config(&self, text: &str) {
        std::fs::write(self.helpers().join("config.toml"), text).unwrap();
    }

    /// Writes the user's config.toml (in HITL_HOME).
    pub fn user_config(&self, text: &str) {
        std::fs::create_dir_all(&self.home).unwrap();
        std::fs::write(self.home.join("config.toml"), text).unwrap();
    }
}

/// Starts `hitl ask ARGS` in the project, its output piped.
pub fn spawn_ask(p: &Project, args: &[&str]) -> Child {
    p.hitl()
        .arg("ask")
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Whether `program` is on the PATH.
pub fn have(program: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Whether this test can run something as another user (root, with `setpriv`); CI
/// must.
pub fn can_be_another_user() -> bool {
    let can = nix::unistd::Uid::current().is_root() && have("setpriv");
    assert!(
        can || std::env::var_os("CI").is_none(),
        "CI runs as root, with setpriv, to try another user"
    );
    can
}

/// An X server of the test's own (Xvfb, its display number chosen by itself);
/// stopped when dropped.
pub struct Xvfb {
    child: Child,
    /// `:N`, for `DISPLAY`.
    pub display: String,
}

impl Xvfb {
    pub fn start() -> Xvfb {
        let mut child = Command::new("Xvfb")
            .args([
                "-displayfd",
                "1",
                "-screen",
                "0",
                "1024x768x24",
                "-nolisten",
                "tcp",
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("Xvfb (tools/test-all installs it)");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        Xvfb {
            child,
            display: format!(":{}", line.trim()),
        }
    }
}

impl Drop for Xvfb {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `openssl` (the command) with `args` in `dir`; it must succeed.
pub fn openssl(dir: &std::path::Path, args: &[&str]) {
    let out = std::process::Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("openssl (the command) makes the test's certificates");
    assert!(out.status.success(), "openssl {args:?}: {out:?}");
}

/// In `dir`: a CA (`ca.pem`) and a certificate it signed for localhost and
/// 127.0.0.1 (`trusted.pem`, `trusted.key`); another CA, which nobody is told to
/// trust, and its certificate for the same names (`untrusted.pem`, `untrusted.key`).
/// P-256 keys, two days.
pub fn make_certificates(dir: &std::path::Path) {
    std::fs::write(
        dir.join("ext.cnf"),
        "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\n\
         keyUsage=digitalSignature\nextendedKeyUsage=serverAuth\n",
    )
    .unwrap();
    let key = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
    ];
    for (ca, leaf) in [("ca", "trusted"), ("other-ca", "untrusted")] {
        let (ca_key, ca_pem) = (format!("{ca}.key"), format!("{ca}.pem"));
        let (leaf_key, leaf_csr) = (format!("{leaf}.key"), format!("{leaf}.csr"));
        let subject = format!("/CN=hitl test {ca}");
        let ca_args = ["req", "-x509", "-days", "2", "-subj", &subject];
        openssl(
            dir,
            &[&ca_args[..], &key, &["-keyout", &ca_key, "-out", &ca_pem]].concat(),
        );
        let csr = ["req", "-new", "-subj", "/CN=localhost"];
        openssl(
            dir,
            &[&csr[..], &key, &["-keyout", &leaf_key, "-out", &leaf_csr]].concat(),
        );
        openssl(
            dir,
            &[
                "x509",
                "-req",
                "-in",
                &leaf_csr,
                "-CA",
                &ca_pem,
                "-CAkey",
                &ca_key,
                "-CAcreateserial",
                "-days",
                "2",
                "-extfile",
                "ext.cnf",
                "-out",
                &format!("{leaf}.pem"),
            ],
        );
    }
}

/// An agent CLI that tools/test-all installs (`path`, below `~/.cache/hitl`; the
/// variable `env` names another), with the programs it `needs` to run; `None` (a
/// skip, said) outside CI only: CI must have it.
pub fn installed_agent(env: &str, path: &str, needs: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os(env).map(PathBuf::from).unwrap_or_else(|| {
        PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
            .join(".cache/hitl")
            .join(path)
    });
    if path.is_file() && needs.iter().all(|n| have(n)) {
        return Some(path);
    }
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "CI must have {} and {needs:?} (tools/test-all installs them)",
        path.display()
    );
    eprintln!("SKIPPED: no {} or no {needs:?}", path.display());
    None
}

/// A stand-in of an agent's model API (`tests/it/NAME`) that keeps every request it
/// was sent (`GET /test/requests`); stopped when dropped.
pub struct ModelApi {
    child: Child,
    /// The address it serves on.
    pub base: String,
}

impl ModelApi {
    pub fn start(name: &str, args: &[&str]) -> ModelApi {
        let (child, base, _) = stand_in(name, args);
        ModelApi { child, base }
    }

    /// Every request's body, in order.
    pub fn requests(&self) -> Vec<Value> {
        reqwest::blocking::get(format!("{}/test/requests", self.base))
            .unwrap()
            .json()
            .unwrap()
    }
}

impl Drop for ModelApi {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts one of the tests' Python stand-ins of a service (`tests/it/NAME`, given
/// `args`), which prints `{"port": P, …}` once it listens: the child (stdin piped,
/// kept open), the address it serves on, and that first line.
pub fn stand_in(name: &str, args: &[&str]) -> (Child, String, Value) {
    let mut child = Command::new("python3")
        .arg(checkout().join("tests/it").join(name))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("python3 runs tests/it/{name}: {e}"));
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let first: Value = serde_json::from_str(&first)
        .unwrap_or_else(|e| panic!("tests/it/{name}'s first line {first:?}: {e}"));
    let port = first["port"].as_u64().unwrap();
    (child, format!("http://127.0.0.1:{port}"), first)
}

/// A tmux server of the test's own (its socket under the test's folder), and the
/// one session the test types into and reads.
pub struct Tmux {
    dir: PathBuf,
    session: String,
}

impl Tmux {
    pub fn new(dir: &Path, session: &str) -> Tmux {
        std::fs::create_dir_all(dir).unwrap();
        Tmux {
            dir: dir.to_path_buf(),
            session: session.to_string(),
        }
    }

    /// Runs `tmux ARGS` against this server; its output.
    pub fn run(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .env("TMUX_TMPDIR", &self.dir)
            .env_remove("TMUX")
            .args(["-L", "hitl-test"])
            .args(args)
            .output()
            .expect("tmux (tools/test-all installs it)");
        assert!(out.status.success(), "tmux {args:?}: {out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Types `keys` (tmux key names or text) into the pane.
    pub fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", self.session.as_str()];
        args.extend_from_slice(keys);
        self.run(&args);
    }

    /// Types `text` literally.
    pub fn type_text(&self, text: &str) {
        self.run(&["send-keys", "-t", &self.session, "-l", text]);
    }

    /// What the session's pane shows now.
    pub fn screen(&self) -> String {
        self.run(&["capture-pane", "-p", "-t", &self.session])
    }

    /// Waits until the screen shows `what` (and returns it).
    pub fn wait_for(&self, what: &str, within: Duration) -> String {
        let start = Instant::now();
        loop {
            let screen = self.screen();
            if screen.contains(what) {
                return screen;
            }
            assert!(
                start.elapsed() < within,
                "the screen never showed {what:?}:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    /// Waits until the screen no longer shows `what`.
    pub fn wait_gone(&self, what: &str, within: Duration) -> String {
        let start = Instant::now();
        loop {
            let screen = self.screen();
            if !screen.contains(what) {
                return screen;
            }
            assert!(
                start.elapsed() < within,
                "the screen still shows {what:?}:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(25));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .env("TMUX_TMPDIR", &self.dir)
            .args(["-L", "hitl-test", "kill-server"])
            .output();
    }
}

/// A model stand-in's step that writes the summary file a task's text names
/// (`{summary}`, which the stand-ins fill in), as an agent finishing a task does.
pub const WRITE_SUMMARY: &str = "mkdir -p summaries && printf '# Task Completion Summary\\n\\n## Objective\\nList the files\\n\\n## Status\\n✅ COMPLETED\\n' > {summary}";

/// One task through the task runner, as a caller of `hitl task` runs it: a listener
/// (`env` set for the agent), a session `name` running `command` in `workspace`, the
/// task "List the files and report" submitted and waited for. It must end completed
/// by the summary the agent wrote (not hitl's fallback), with the tokens the agent
/// reported. Returns what `peek` shows then.
pub fn headless_task(
    p: &Project,
    env: &[(&str, &std::ffi::OsStr)],
    name: &str,
    workspace: &Path,
    command: &str,
) -> String {
    let mut listen = p.hitl();
    for (k, v) in env {
        listen.env(k, v);
    }
    listen
        .args([
            "listen",
            "--ui",
            "none",
            "--http",
            "127.0.0.1:0",
            "--attended",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let _listener = Listener::start(listen);
    let task = |args: &[&str]| -> Value {
        let out = p
            .hitl()
            .arg("task")
            .args(args)
            .arg("--json")
            .output()
            .unwrap();
        assert!(out.status.success(), "hitl task {args:?}: {out:?}");
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let peek = || {
        let out = p.hitl().args(["task", "peek", name]).output().unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let workspace = workspace.display().to_string();
    let s = task(&[
        "session",
        name,
        "--workspace",
        &workspace,
        "--command",
        command,
    ]);
    assert_eq!(s["ready"], true, "{s:#}");
    let submitted = task(&["submit", name, "List the files and report"]);
    let id = submitted["task"]["id"].as_str().unwrap().to_string();
    let out = p
        .hitl()
        .args(["task", "wait", &id, "--timeout", "90", "--json"])
        .output()
        .unwrap();
    let ended: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    assert_eq!(out.status.code(), Some(0), "{ended:#} {out:?}\n{}", peek());
    assert_eq!(
        (&ended["state"], &ended["fallback_summary"]),
        (&serde_json::json!("completed"), &serde_json::json!(false)),
        "{ended:#}\n{}",
        peek()
    );
    let result = task(&["result", &id]);
    // The summary the model wrote, read.
    assert!(result.to_string().contains("List the files"), "{result:#}");
    // The agent's figures come with its last line, after the summary ended the task.
    eventually("the usage", Duration::from_secs(20), || {
        task(&["status", &id])["usage"]["output_tokens"].as_u64() > Some(0)
    });
    peek()
}

/// The check `name` of `hitl doctor --json`, run as `doctor` (a `hitl` command with
/// its environment set); `Null` when it is not reported.
pub fn doctor_check(mut doctor: Command, name: &str) -> Value {
    let out = doctor.args(["doctor", "--json"]).output().unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["check"] == name)
        .cloned()
        .unwrap_or(Value::Null)
}
