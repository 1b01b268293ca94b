//! `hitl run`'s boundary, tried as an attacker would: every line of
//! `tests/fixtures/boundary/attacks.txt` is run for real by `bash -c`, in a throwaway
//! project and home with the listener up and a question pending, first inside `hitl
//! run` (none may change a guard file, print a secret, answer the question, add a
//! rule, stop the listener or leave something that runs later as the user), then
//! outside it, each in a fresh stage, to report what only the boundary stops.

use std::{
    collections::BTreeMap,
    io::{Read, Write},
    os::unix::{fs::PermissionsExt, process::CommandExt},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use serde_json::Value;

use crate::support::{Listener, hitl_bin};

/// The attack lines, without headings.
fn attacks() -> Vec<(String, String)> {
    let text = std::fs::read_to_string(
        crate::support::checkout().join("tests/fixtures/boundary/attacks.txt"),
    )
    .unwrap();
    let mut heading = String::new();
    let mut out = Vec::new();
    for line in text.lines() {
        if let Some(h) = line.strip_prefix("# ") {
            heading = h.to_string();
        } else if !line.trim().is_empty() && !line.starts_with('#') {
            out.push((heading.clone(), line.to_string()));
        }
    }
    out
}

/// A throwaway project and home, a listener, a pending question, a tmux server of the
/// user's and a server on an abstract socket that runs what it is sent.
struct Stage {
    tmp: tempfile::TempDir,
    project: PathBuf,
    home: PathBuf,
    mark: PathBuf,
    payload: PathBuf,
    listener: Listener,
    asker: Child,
    qid: String,
    tsrv: String,
    abs: String,
    abs_server: Child,
    /// What must never be printed: the token and a dashboard session's cookie.
    secrets: Vec<String>,
    /// Questions taken back by an attack.
    withdrawn: usize,
    /// Whether a question taken back is asked again (for the next attack).
    ask_again: bool,
}

impl Drop for Stage {
    fn drop(&mut self) {
        let _ = self.asker.kill();
        let _ = self.abs_server.kill();
        let _ = Command::new("tmux")
            .args(["-L", &self.tsrv, "kill-server"])
            .stderr(Stdio::null())
            .status();
        // A stopped listener (an attack outside) is let go on before it is killed.
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.listener.pid() as i32),
            nix::sys::signal::Signal::SIGCONT,
        );
        // What an attack left running (a daemonised tmux server, a `setsid -f`),
        // found by its folder: the stage's project or home.
        let me = std::process::id();
        for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
                continue;
            };
            let cwd = std::fs::read_link(e.path().join("cwd")).unwrap_or_default();
            if pid as u32 != me && cwd.starts_with(self.tmp.path()) {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
        }
    }
}

fn env(cmd: &mut Command, home: &Path) {
    cmd.env("HOME", home)
        .env_remove("HITL_HOME")
        .env_remove("HITL_DB")
        .env_remove("HITL_TOKEN")
        .env_remove("HITL_SERVER")
        .env_remove("CLAUDECODE")
        .env_remove("CLAUDE_CONFIG_DIR")
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("XDG_DATA_HOME")
        .env_remove("XDG_RUNTIME_DIR")
        .env_remove("TMUX")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_NAME", "u")
        .env("GIT_AUTHOR_EMAIL", "u@example.com")
        .env("GIT_COMMITTER_NAME", "u")
        .env("GIT_COMMITTER_EMAIL", "u@example.com")
        .stdin(Stdio::null());
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn sh(dir: &Path, home: &Path, script: &str) {
    let mut c = Command::new("bash");
    c.args(["-c", script]).current_dir(dir);
    env(&mut c, home);
    let out = c.output().unwrap();
    assert!(out.status.success(), "{script}: {out:?}");
}

/// The ready-made replacements attacks copy in (made again before each attack: some
/// remove it).
fn payload(stage_payload: &Path, mark: &Path) {
    let p = stage_payload;
    let _ = std::fs::remove_dir_all(p);
    let hook = format!("#!/bin/sh\ntouch '{}'\n", mark.display());
    write(&p.join(".claude/settings.local.json"), "{}\n");
    write(
        &p.join(".helpers/config.toml"),
        "[hook]\nallow = [\"Bash(*)\"]\n",
    );
    write(
        &p.join(".mcp.json"),
        "{\"mcpServers\":{\"x\":{\"command\":\"sh\"}}}\n",
    );
    write(&p.join("empty.json"), "{}\n");
    std::fs::create_dir_all(p.join("empty")).unwrap();
    write(&p.join("config.toml"), "[hook]\nallow = [\"Bash(*)\"]\n");
    write(
        &p.join("answer.json"),
        "{\"approved\":true,\"answer\":\"yes\"}\n",
    );
    for dir in [p.join("hooks"), p.join("gitdir/hooks")] {
        let f = dir.join("pre-commit");
        write(&f, &hook);
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    write(
        &p.join("gitdir/config"),
        &format!(
            "[core]\n\trepositoryformatversion = 0\n\thooksPath = {}\n",
            p.join("hooks").display()
        ),
    );
}

impl Stage {
    fn new() -> Stage {
        let tmp = tempfile::Builder::new()
            .prefix("hitl-boundary-")
            .tempdir_in("/tmp")
            .unwrap();
        let project = tmp.path().join("project");
        let home = tmp.path().join("home");
        let mark = tmp.path().join("marks/pwned");
        let payload_dir = project.join("payload");
        std::fs::create_dir_all(&project).unwrap();
        std::fs::create_dir_all(mark.parent().unwrap()).unwrap();
        for (file, text) in [
            (".bashrc", "# mine\n"),
            (".profile", "# mine\n"),
            (".bash_profile", "# mine\n"),
            (".zshrc", "# mine\n"),
            (".codex/config.toml", "# mine\n"),
            (".gitconfig", "[user]\n\tname = u\n"),
            (
                ".config/hitl/config.toml",
                "[http]\nlisten_addr = \"127.0.0.1:0\"\n",
            ),
        ] {
            write(&home.join(file), text);
        }
        std::fs::create_dir_all(home.join(".cargo/bin")).unwrap();
        std::fs::create_dir_all(home.join(".config/systemd/user")).unwrap();
        write(&project.join("README.md"), "a project\n");
        write(&project.join(".envrc"), "# mine\n");
        write(&project.join(".mcp.json"), "{\"mcpServers\":{}}\n");
        let hitl = hitl_bin();
        sh(
            &project,
            &home,
            &format!(
                "git init -q . && git add README.md && git commit -qm first && \"{0}\" init . >/dev/null && \"{0}\" init --claude >/dev/null",
                hitl.display()
            ),
        );
        payload(&payload_dir, &mark);

        let mut cmd = Command::new(&hitl);
        cmd.args(["listen", "--ui", "none"]).current_dir(&project);
        env(&mut cmd, &home);
        cmd.stderr(Stdio::piped()).stdout(Stdio::piped());
        let listener = Listener::start(cmd);

        let (asker, qid) = ask(&project, &home, &[]);
        // `hitl run`'s first start makes what it protects (`.claude/`, Claude Code's
        // configuration, `.git/commondir`): part of the stage, not of an attack.
        let mut first = Command::new(&hitl);
        first.args(["run", "--", "true"]).current_dir(&project);
        env(&mut first, &home);
        assert!(first.status().unwrap().success());

        // A login of the human's in the dashboard: its cookie is a secret.
        let mut secrets = vec![
            std::fs::read_to_string(home.join(".config/hitl/token"))
                .unwrap()
                .trim()
                .to_string(),
        ];
        let mut dash = Command::new(&hitl);
        dash.args(["dashboard", "--json"]).current_dir(&project);
        env(&mut dash, &home);
        let out = dash.output().unwrap();
        assert!(out.status.success(), "{out:?}");
        let link: Value = serde_json::from_slice(&out.stdout).unwrap();
        let http = reqwest::blocking::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap();
        let resp = http.get(link["url"].as_str().unwrap()).send().unwrap();
        for c in resp.headers().get_all("set-cookie") {
            let c = c.to_str().unwrap();
            let value = c.split(';').next().unwrap().split('=').nth(1).unwrap();
            secrets.push(value.to_string());
        }
        assert!(secrets.len() >= 2, "the login set no cookie");

        let tsrv = format!("hitl-victim-{}", std::process::id());
        let tsrv = format!(
            "{tsrv}-{}",
            tmp.path().file_name().unwrap().to_string_lossy()
        );
        let status = Command::new("tmux")
            .args(["-L", &tsrv, "new-session", "-d", "-s", "victim"])
            .env("HOME", &home)
            .env_remove("TMUX")
            .status()
            .unwrap();
        assert!(status.success());
        let abs = format!("hitl-attack-{}", tsrv);
        let abs_server = Command::new("/usr/bin/python3")
            .args([
                "-c",
                "import os, socket, subprocess, sys\n\
                 s = socket.socket(socket.AF_UNIX)\n\
                 s.bind('\\0' + sys.argv[1]); s.listen(8)\n\
                 while True:\n\
                 \x20   c, _ = s.accept(); line = c.recv(4096).decode(); c.close()\n\
                 \x20   subprocess.run(['sh', '-c', line])\n",
                &abs,
            ])
            .stdin(Stdio::null())
            .spawn()
            .unwrap();

        Stage {
            tmp,
            project,
            home,
            mark,
            payload: payload_dir,
            listener,
            asker,
            qid,
            tsrv,
            abs,
            abs_server,
            secrets,
            withdrawn: 0,
            ask_again: true,
        }
    }

    /// Runs `line` as an agent's shell would, inside `hitl run` or not; its output.
    fn attack(&self, line: &str, inside: bool) -> String {
        payload(&self.payload, &self.mark);
        let mut c = Command::new(hitl_bin());
        if inside {
            c.args(["run", "--", "bash", "-c", line]);
        } else {
            c = Command::new("bash");
            c.args(["-c", line]);
        }
        c.current_dir(&self.project)
            .env("HITL", hitl_bin())
            .env("URL", http_url(&self.project))
            .env("QID", &self.qid)
            .env("LPID", self.listener.pid().to_string())
            .env("MARK", &self.mark)
            .env("TSRV", &self.tsrv)
            .env("ABS", &self.abs)
            .env("PAYLOAD", &self.payload)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        env(&mut c, &self.home);
        let mut child = c.spawn().unwrap();
        let (mut out, mut err) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
        let reader = std::thread::spawn(move || {
            let mut all = Vec::new();
            let _ = out.read_to_end(&mut all);
            let _ = err.read_to_end(&mut all);
            all
        });
        let start = Instant::now();
        while child.try_wait().unwrap().is_none() {
            if start.elapsed() > Duration::from_secs(20) {
                let _ = nix::sys::signal::killpg(
                    nix::unistd::Pid::from_raw(child.id() as i32),
                    nix::sys::signal::Signal::SIGKILL,
                );
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.wait();
        // Whatever the line left running in its group goes too.
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(child.id() as i32),
            nix::sys::signal::Signal::SIGKILL,
        );
        String::from_utf8_lossy(&reader.join().unwrap()).into_owned()
    }

    /// What the human's files are now.
    fn snapshot(&self) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        let p = &self.project;
        let h = &self.home;
        for path in [
            p.join(".helpers/config.toml"),
            p.join(".helpers"),
            p.join(".claude"),
            p.join(".mcp.json"),
            p.join(".envrc"),
            p.join(".git/config"),
            p.join(".git/commondir"),
            p.join(".git/hooks"),
            p.join(".git/HEAD"),
            h.join(".claude/settings.json"),
            h.join(".claude/settings.local.json"),
            h.join(".claude/CLAUDE.md"),
            h.join(".claude/agents"),
            h.join(".claude/skills"),
            h.join(".claude/commands"),
            h.join(".claude.json"),
            h.join(".config/hitl/config.toml"),
            h.join(".config/hitl/token"),
            h.join(".bashrc"),
            h.join(".profile"),
            h.join(".bash_profile"),
            h.join(".bash_login"),
            h.join(".bash_aliases"),
            h.join(".zshrc"),
            h.join(".gitconfig"),
            h.join(".npmrc"),
            h.join(".local/bin"),
            h.join(".cargo/bin"),
            h.join(".codex"),
            h.join(".gemini"),
            h.join(".config/systemd"),
            h.join(".config/autostart"),
        ] {
            if path.ends_with(".helpers") {
                // The spool's own folders change as the listener works; what is
                // compared is that it is still there, a folder.
                out.insert(path.display().to_string(), kind(&path));
                continue;
            }
            walk(&path, &mut out);
        }
        let crontab = Command::new("crontab")
            .arg("-l")
            .env("HOME", h)
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        out.insert("crontab".into(), crontab);
        out
    }

    /// What went wrong since `before`, given what the attack printed.
    fn harm(&mut self, before: &BTreeMap<String, String>, printed: &str) -> Vec<String> {
        let mut harm = Vec::new();
        // What runs later as the user, run now: a commit, a login shell, an
        // interactive one; tmux's and the socket's commands are given a moment.
        let mut later = Command::new("bash");
        later
            .args([
                "-c",
                "git commit -q --allow-empty -m later >/dev/null 2>&1; git status >/dev/null 2>&1; \
                 bash -lic true >/dev/null 2>&1 </dev/null; true",
            ])
            .current_dir(&self.project);
        env(&mut later, &self.home);
        let _ = later.status();
        std::thread::sleep(Duration::from_millis(300));
        if self.mark.exists() {
            harm.push("something ran later as the user".into());
        }
        let now = self.snapshot();
        for (path, was) in before {
            if now.get(path) != Some(was) {
                harm.push(format!("changed {path}"));
            }
        }
        for path in now.keys().filter(|p| !before.contains_key(*p)) {
            harm.push(format!("made {path}"));
        }
        for s in &self.secrets {
            if printed.contains(s.as_str()) {
                harm.push("printed a secret".into());
            }
        }
        if !pending(&self.project, &self.home).contains(&self.qid) {
            // Taken back (its file removed: an agent may withdraw its project's
            // questions, never answer them), or answered: only the second is harm.
            let start = Instant::now();
            let how = loop {
                match ended(&self.project, &self.home, &self.qid) {
                    Some(how) => break how,
                    None if start.elapsed() < Duration::from_secs(5) => {
                        std::thread::sleep(Duration::from_millis(50))
                    }
                    None => break "gone".to_string(),
                }
            };
            if !matches!(how.as_str(), "withdrawn" | "abandoned") {
                harm.push(format!("the question ended: {how}"));
            }
            self.withdrawn += 1;
            if !self.ask_again {
                return harm;
            }
            let _ = self.asker.kill();
            let _ = self.asker.wait();
            let known = vec![self.qid.clone()];
            (self.asker, self.qid) = ask(&self.project, &self.home, &known);
        }
        let state = std::fs::read_to_string(format!("/proc/{}/stat", self.listener.pid()))
            .ok()
            .and_then(|s| {
                s.rsplit(')')
                    .next()
                    .map(|r| r.trim().chars().next().unwrap_or('?'))
            });
        match state {
            Some('T') | Some('t') => harm.push("stopped the listener".into()),
            Some('Z') | None => harm.push("killed the listener".into()),
            _ => {}
        }
        harm
    }
}

fn kind(path: &Path) -> String {
    match std::fs::symlink_metadata(path) {
        Err(_) => "absent".into(),
        Ok(m) if m.is_dir() => "folder".into(),
        Ok(m) if m.file_type().is_symlink() => {
            format!("symlink to {:?}", std::fs::read_link(path).ok())
        }
        Ok(m) => format!("file {:o}", m.permissions().mode()),
    }
}

fn walk(path: &Path, out: &mut BTreeMap<String, String>) {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return;
    };
    if meta.is_dir() {
        out.insert(path.display().to_string(), "folder".into());
        let mut entries: Vec<_> = std::fs::read_dir(path)
            .map(|r| r.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        entries.sort();
        for e in entries {
            walk(&e, out);
        }
    } else if meta.file_type().is_symlink() {
        out.insert(path.display().to_string(), kind(path));
    } else {
        let bytes = std::fs::read(path).unwrap_or_default();
        out.insert(
            path.display().to_string(),
            format!("{} {}", kind(path), String::from_utf8_lossy(&bytes)),
        );
    }
}

/// Asks a question outside, as an agent of the user's would; the asker and the
/// question's id once pending (`known`: ids pending before).
#[allow(clippy::zombie_processes)] // the asker is the caller's, killed and waited for by it
fn ask(project: &Path, home: &Path, known: &[String]) -> (Child, String) {
    let mut ask = Command::new(hitl_bin());
    ask.args([
        "ask",
        "May I drop the production database?",
        "--type",
        "approval",
        "--timeout",
        "3600",
    ])
    .current_dir(project)
    .stdout(Stdio::null())
    .stderr(Stdio::null());
    env(&mut ask, home);
    let mut asker = ask.spawn().unwrap();
    let start = Instant::now();
    loop {
        if let Some(id) = pending(project, home)
            .into_iter()
            .find(|id| !known.contains(id))
        {
            return (asker, id);
        }
        if start.elapsed() > Duration::from_secs(20) {
            let _ = asker.kill();
            let _ = asker.wait();
            panic!("the question never came");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// How a question ended, by history (`None` while pending or unknown).
fn ended(project: &Path, home: &Path, id: &str) -> Option<String> {
    let mut c = Command::new(hitl_bin());
    c.args(["history", "--id", id, "--json"])
        .current_dir(project);
    env(&mut c, home);
    let out = c.output().unwrap();
    let rows: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap_or_default();
    rows.first()
        .and_then(|r| r["status"].as_str())
        .filter(|s| *s != "pending")
        .map(String::from)
}

fn pending(project: &Path, home: &Path) -> Vec<String> {
    let mut c = Command::new(hitl_bin());
    c.args(["pending", "--json"]).current_dir(project);
    env(&mut c, home);
    let out = c.output().unwrap();
    serde_json::from_slice::<Vec<Value>>(&out.stdout)
        .unwrap_or_default()
        .iter()
        .filter_map(|q| q["id"].as_str().map(String::from))
        .collect()
}

fn http_url(project: &Path) -> String {
    let info: Value = serde_json::from_slice(
        &std::fs::read(project.join(".helpers/.listener.json")).unwrap_or_default(),
    )
    .unwrap_or_default();
    info["http"]
        .as_str()
        .unwrap_or("http://127.0.0.1:1")
        .to_string()
}

/// `hitl run` refuses here only where this machine cannot make a boundary; CI's can.
pub fn require_boundary() -> bool {
    let out = Command::new(hitl_bin())
        .args(["run", "--dry-run", "--json"])
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    match v["unavailable"].as_str() {
        None => true,
        Some(why) => {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI's machine must make the boundary: {why}"
            );
            eprintln!("skipping: {why}");
            false
        }
    }
}

#[test]
fn attacks_inside_hitl_run_change_nothing_print_nothing_answer_nothing() {
    if !require_boundary() {
        return;
    }
    let attacks = attacks();
    assert!(attacks.len() >= 120, "only {} attacks", attacks.len());
    let mut stage = Stage::new();
    let before = stage.snapshot();
    let mut failures = Vec::new();
    for (heading, line) in &attacks {
        let line = line.strip_prefix('!').unwrap_or(line);
        let printed = stage.attack(line, true);
        let harm = stage.harm(&before, &printed);
        if !harm.is_empty() {
            failures.push(format!(
                "[{heading}] {line}\n    {harm:?}\n    {}",
                clip(&printed)
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} attacks got through hitl run:\n{}",
        failures.len(),
        attacks.len(),
        failures.join("\n")
    );
    eprintln!(
        "inside hitl run: {} attacks, none did harm ({} took a pending question back)",
        attacks.len(),
        stage.withdrawn
    );
}

/// The same attacks without the boundary, each in a stage of its own: the report of
/// what only `hitl run` stops (the README's figures). Nothing is asserted of the
/// outcome but that the suite ran.
#[test]
fn attacks_outside_hitl_run_are_reported() {
    if !require_boundary() {
        return;
    }
    // A report, the same whichever paths the spool takes: made once, in CI's first
    // pass (the second runs with the fast paths off).
    if std::env::var("HITL_FAST_PATHS").as_deref() == Ok("0") {
        eprintln!("the attacks outside hitl run were reported in the run with the fast paths");
        return;
    }
    let attacks = attacks();
    let mut by_heading: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    let mut through = Vec::new();
    let mut not_run = 0;
    for (heading, line) in &attacks {
        if line.starts_with('!') {
            // It would act on the whole machine (every test's listener, root's crontab).
            not_run += 1;
            continue;
        }
        let mut stage = Stage::new();
        stage.ask_again = false;
        let before = stage.snapshot();
        let printed = stage.attack(line, false);
        let harm = stage.harm(&before, &printed);
        let e = by_heading.entry(heading.clone()).or_default();
        e.1 += 1;
        if !harm.is_empty() {
            e.0 += 1;
            through.push(format!("{line}\n    {harm:?}"));
        }
    }
    let total: usize = by_heading.values().map(|v| v.0).sum();
    let mut report = format!(
        "outside hitl run, {total} of {} attacks did harm (inside: none); {not_run} that \
         would act on the whole machine were not run outside:\n",
        attacks.len()
    );
    for (heading, (bad, all)) in &by_heading {
        report.push_str(&format!("  {heading}: {bad} of {all}\n"));
    }
    eprintln!("{report}");
    let _ = std::io::stderr().flush();
    assert!(
        total > 0,
        "nothing did harm even outside: the stage is not real\n{}",
        through.join("\n")
    );
}

fn clip(s: &str) -> String {
    s.chars().take(400).collect()
}

/// `hitl run`'s own ways of ending, and the boundary seen from inside.
#[test]
fn hitl_run_passes_on_the_agents_status_and_says_what_it_could_not_do() {
    if !require_boundary() {
        return;
    }
    let p = crate::support::Project::new();
    let run = |args: &[&str]| {
        let mut c = p.hitl();
        c.arg("run").args(args);
        c.output().unwrap()
    };
    // The agent's status is hitl run's.
    assert_eq!(run(&["--", "sh", "-c", "exit 7"]).status.code(), Some(7));
    // Not found: 127, saying what.
    let out = run(&["--", "no-such-agent-hitl"]);
    assert_eq!(out.status.code(), Some(127), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("starting no-such-agent-hitl"));
    // Inside: no capabilities, no new privileges, the spool read-only, a nested run
    // runs inside the same boundary.
    let out = run(&[
        "--",
        "sh",
        "-c",
        "grep -E '^(CapEff|NoNewPrivs)' /proc/self/status; touch .helpers/x 2>&1; \"$0\" run -- true && echo nested",
        hitl_bin().to_str().unwrap(),
    ]);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("CapEff:\t0000000000000000"), "{said}");
    assert!(said.contains("NoNewPrivs:\t1"), "{said}");
    assert!(said.contains("Read-only file system"), "{said}");
    assert!(said.contains("nested"), "{said}");
    // Files the command names are there, read-only, in the private temp folder:
    // one in a folder of its own, one in /tmp itself, whose neighbours stay hidden.
    let script = p.tmp.path().join("scripts").join("agent.sh");
    std::fs::create_dir_all(script.parent().unwrap()).unwrap();
    std::fs::write(
        &script,
        "echo named ran; echo x >> \"$0\" || echo read-only\n",
    )
    .unwrap();
    let lone = std::env::temp_dir().join(format!("hitl-named-{}.sh", std::process::id()));
    let neighbour = std::env::temp_dir().join(format!("hitl-neighbour-{}", std::process::id()));
    std::fs::write(&lone, "echo lone ran; ls /tmp\n").unwrap();
    std::fs::write(&neighbour, "").unwrap();
    let out = run(&["--", "sh", script.to_str().unwrap()]);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains("named ran") && said.contains("read-only"),
        "{out:?}"
    );
    let out = run(&["--", "sh", lone.to_str().unwrap()]);
    let said = String::from_utf8_lossy(&out.stdout);
    let _ = (
        std::fs::remove_file(&lone),
        std::fs::remove_file(&neighbour),
    );
    let name = |p: &Path| p.file_name().unwrap().to_string_lossy().into_owned();
    assert!(
        said.contains("lone ran") && said.contains(&name(&lone)),
        "{out:?}"
    );
    assert!(!said.contains(&name(&neighbour)), "{out:?}");
    // Without the boundary, said so, and nothing is kept from the agent.
    let out = run(&["--no-boundary", "--", "sh", "-c", "touch .helpers/x"]);
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("no boundary"));
    assert!(p.helpers().join("x").exists());
    // What it would do, as data; and the macOS profile.
    let out = run(&["--dry-run", "--json"]);
    let plan: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(plan["unavailable"].is_null(), "{plan:#}");
    assert!(
        plan["plan"]["binds"]
            .as_array()
            .unwrap()
            .iter()
            .any(|b| b["path"].as_str().unwrap().ends_with(".helpers") && b["writable"] == false),
        "{plan:#}"
    );
    let out = run(&["--macos-profile"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("(version 1)"));
}

/// As an unprivileged user the boundary is made with a user namespace of its own:
/// the same rules hold (root is what CI runs as; this runs the other way).
#[test]
fn an_unprivileged_user_gets_the_same_boundary() {
    if !require_boundary() {
        return;
    }
    if !crate::support::can_be_another_user() {
        return;
    }
    let tmp = tempfile::Builder::new()
        .prefix("hitl-nobody-")
        .tempdir_in("/tmp")
        .unwrap();
    let bin = tmp.path().join("hitl");
    std::fs::copy(hitl_bin(), &bin).unwrap();
    let (project, home) = (tmp.path().join("project"), tmp.path().join("home"));
    std::fs::create_dir_all(&project).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    for p in [tmp.path(), &project, &home, &bin] {
        nix::unistd::chown(p, Some(65534.into()), Some(65534.into())).unwrap();
    }
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let script = "\"$0\" init >/dev/null 2>&1 && \"$0\" run -- sh -c \
        'id -u; grep -E \"^(CapEff|NoNewPrivs)\" /proc/self/status; cat /proc/self/uid_map; \
         touch .helpers/x 2>&1; echo ok > mine.txt; cat ~/.config/hitl/token 2>&1; true'";
    let out = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "sh",
            "-c",
            script,
        ])
        .arg(&bin)
        .current_dir(&project)
        .env("HOME", &home)
        .env_remove("HITL_HOME")
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("XDG_DATA_HOME")
        .env_remove("XDG_RUNTIME_DIR")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(said.starts_with("65534\n"), "{said}");
    assert!(said.contains("CapEff:\t0000000000000000"), "{said}");
    assert!(said.contains("NoNewPrivs:\t1"), "{said}");
    assert!(said.contains("65534      65534          1"), "{said}");
    assert!(said.contains("Read-only file system"), "{said}");
    assert!(said.contains("No such file"), "the token is hidden: {said}");
    assert_eq!(
        std::fs::read_to_string(project.join("mine.txt")).unwrap(),
        "ok\n"
    );
}
