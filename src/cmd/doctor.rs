//! `hitl doctor [--json]`: everything hitl depends on, checked without changing
//! anything, each problem with its fix. Exit 0 when nothing fails (warnings are
//! advice), 1 when something does.
//!
//! The checks: the project's folder (owner, modes), the settings, the listener (is it
//! running, does its HTTP API answer), who is present to answer, inotify instances
//! against what waits, the token files' modes, the dashboard's port, the history
//! store (reachable, migrated), Claude Code's wiring (settings files, MCP server),
//! whether the `hitl` those hooks run is on the PATH, and whether `hitl run` can make
//! its boundary here.

use std::{
    os::unix::fs::{MetadataExt, PermissionsExt},
    path::{Path, PathBuf},
    time::Duration,
};

use anyhow::Result;
use serde::Serialize;

use crate::{
    config::{self, Paths, Settings},
    spool::{ListenerInfo, Spool},
};

/// How a check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Health {
    /// Fine.
    Ok,
    /// Works, but something a user would want to know or change.
    Warn,
    /// Broken: something hitl promises does not happen until it is fixed.
    Fail,
}

/// One check's finding.
#[derive(Debug, Clone, Serialize)]
pub struct Finding {
    /// What was checked (`listener`, `store`, …).
    pub check: &'static str,
    /// How it came out.
    pub status: Health,
    /// What was found, in a line.
    pub summary: String,
    /// What to do about it, for a problem.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

/// The findings, in order.
#[derive(Default)]
struct Report(Vec<Finding>);

impl Report {
    fn ok(&mut self, check: &'static str, summary: impl Into<String>) {
        self.add(check, Health::Ok, summary, None::<String>);
    }
    fn warn(&mut self, check: &'static str, summary: impl Into<String>, fix: impl Into<String>) {
        self.add(check, Health::Warn, summary, Some(fix));
    }
    fn fail(&mut self, check: &'static str, summary: impl Into<String>, fix: impl Into<String>) {
        self.add(check, Health::Fail, summary, Some(fix));
    }
    fn add(
        &mut self,
        check: &'static str,
        status: Health,
        summary: impl Into<String>,
        fix: Option<impl Into<String>>,
    ) {
        self.0.push(Finding {
            check,
            status,
            summary: summary.into(),
            fix: fix.map(Into::into),
        });
    }
}

/// Runs every check for the project at `dir` (default: the nearest one) and prints
/// them. Returns the exit status: 1 if any check failed.
pub fn run(dir: Option<PathBuf>, json: bool) -> Result<u8> {
    let paths = Paths::from_env();
    let mut report = Report::default();
    let spool = match Spool::locate(dir.as_deref()) {
        Ok(s) => {
            check_folder(&mut report, &s);
            Some(s)
        }
        Err(e) => {
            report.fail(
                "project",
                format!("{e:#}"),
                "run `hitl init` in the project's folder (or pass --dir)",
            );
            None
        }
    };
    let project_dir = spool
        .as_ref()
        .map(|s| s.project().to_path_buf())
        .or(dir)
        .or_else(|| std::env::current_dir().ok());
    let settings = check_settings(&mut report, &paths, spool.as_ref());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let listener = spool.as_ref().and_then(ListenerInfo::running);
    if let Some(spool) = &spool {
        runtime.block_on(check_listener(&mut report, spool, listener.as_ref()));
        check_inotify(&mut report, spool);
    }
    check_tokens(&mut report, &paths);
    check_port(
        &mut report,
        settings.as_ref(),
        spool.as_ref(),
        listener.as_ref(),
    );
    if let Some(settings) = &settings {
        check_tls(&mut report, settings, &paths);
    }
    runtime.block_on(check_store(&mut report, &paths));
    let hooks = project_dir
        .as_deref()
        .map(|d| check_claude(&mut report, d))
        .unwrap_or_default();
    if let Some(dir) = project_dir.as_deref() {
        check_codex(&mut report, dir);
        check_gemini(&mut report, dir);
    }
    check_path(&mut report, &hooks);
    check_boundary(&mut report);

    let failed = report.0.iter().any(|f| f.status == Health::Fail);
    if json {
        let v = serde_json::json!({
            "ok": !failed,
            "project": spool.as_ref().map(|s| s.project()),
            "checks": report.0,
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        for f in &report.0 {
            let mark = match f.status {
                Health::Ok => "ok  ",
                Health::Warn => "warn",
                Health::Fail => "FAIL",
            };
            println!("{mark}  {:<9} {}", f.check, f.summary);
            if let Some(fix) = &f.fix {
                println!("      {:<9} fix: {fix}", "");
            }
        }
        let (warns, fails) = report.0.iter().fold((0, 0), |(w, f), x| match x.status {
            Health::Warn => (w + 1, f),
            Health::Fail => (w, f + 1),
            Health::Ok => (w, f),
        });
        match (fails, warns) {
            (0, 0) => println!("\nEverything hitl needs is in order."),
            (0, w) => println!("\nNothing is broken; {w} thing(s) to look at."),
            (f, _) => println!("\n{f} problem(s) to fix."),
        }
    }
    Ok(u8::from(failed))
}

/// Whether `hitl run` can start agents inside a boundary here. Without one the
/// hook's checks are all there is, so it is a warning, not a failure.
fn check_boundary(report: &mut Report) {
    match super::run::unavailable() {
        None => report.ok(
            "boundary",
            format!(
                "`hitl run AGENT` can keep agents out of hitl's files (mount namespace, Landlock ABI {})",
                crate::boundary::enter::landlock_abi()
            ),
        ),
        Some(why) => report.warn(
            "boundary",
            format!("`hitl run` cannot make a boundary here: {why}"),
            "allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1, or \
             AppArmor's kernel.apparmor_restrict_unprivileged_userns=0) and use Linux 6.12 or \
             later with Landlock enabled",
        ),
    }
}

/// Permission bits others have.
fn others_bits(mode: u32) -> u32 {
    mode & 0o077
}

/// `.helpers/`: this user's, not a symlink, private.
fn check_folder(report: &mut Report, spool: &Spool) {
    let root = spool.root();
    match std::fs::symlink_metadata(root) {
        Err(e) => report.fail(
            "project",
            format!("{} cannot be read: {e}", root.display()),
            "run `hitl init`",
        ),
        Ok(m) if m.file_type().is_symlink() => report.fail(
            "project",
            format!("{} is a symbolic link", root.display()),
            "remove it and run `hitl init` (hitl never follows it: someone could point it at another user's files)",
        ),
        Ok(m) if m.uid() != crate::runtime::process::euid() => report.fail(
            "project",
            format!("{} belongs to uid {}, not to you", root.display(), m.uid()),
            "run hitl as that user, or remove the folder and run `hitl init`",
        ),
        Ok(m) if others_bits(m.permissions().mode()) != 0 => report.fail(
            "project",
            format!(
                "{} is open to other users (mode {:o}): they could read questions and answers",
                root.display(),
                m.permissions().mode() & 0o777
            ),
            format!("chmod 700 {}", root.display()),
        ),
        Ok(_) => report.ok("project", format!("{} (private)", spool.project().display())),
    }
}

/// The user's and the project's settings, as every hook and ask reads them.
fn check_settings(report: &mut Report, paths: &Paths, spool: Option<&Spool>) -> Option<Settings> {
    let file = spool.map(Spool::config_file);
    match config::load(paths, file.as_deref())
        .and_then(|s| crate::guard::policy::validate(&s.hook).map(|()| s))
    {
        Ok(s) => {
            report.ok("config", "the settings read");
            Some(s)
        }
        Err(e) => {
            report.fail(
                "config",
                format!("{e:#}"),
                "fix the file and line named above; until then hooks leave every call to Claude Code",
            );
            None
        }
    }
}

/// The listener: running, its HTTP API answering, and someone at it.
async fn check_listener(report: &mut Report, spool: &Spool, info: Option<&ListenerInfo>) {
    let Some(info) = info else {
        let stale = spool.listener_info_file().exists() || spool.listener_pid_file().exists();
        report.warn(
            "listener",
            if stale {
                "not running (it stopped without cleaning up: killed, or the machine restarted); \
                 questions wait and hooks leave calls to Claude Code"
            } else {
                "not running: questions wait and hooks leave calls to Claude Code"
            },
            "start one: `hitl listen` in a terminal, or `hitl service install` to keep one running",
        );
        return;
    };
    match &info.http {
        None => report.ok(
            "listener",
            format!(
                "running (pid {}), without HTTP (no dashboard or MCP)",
                info.pid
            ),
        ),
        Some(url) => {
            let health = format!("{url}/healthz");
            let answered = async {
                anyhow::Ok(
                    crate::runtime::tls::http_client_for(url)?
                        .timeout(Duration::from_secs(3))
                        .build()?
                        .get(&health)
                        .send()
                        .await?
                        .error_for_status()?,
                )
            }
            .await;
            match answered {
                Ok(_) => report.ok("listener", format!("running (pid {}), HTTP on {url}", info.pid)),
                Err(e) => report.fail(
                    "listener",
                    format!("running (pid {}) but {health} does not answer: {e:#}", info.pid),
                    "restart it (`hitl listen`); if it stays stuck, `kill -QUIT` it and report the log",
                ),
            }
        }
    }
    if info.present.is_empty() && !info.reachable.is_empty() {
        report.ok(
            "presence",
            format!(
                "nobody at the desk; questions reach you by {}",
                info.reachable.join(", ")
            ),
        );
    } else if info.present.is_empty() {
        report.warn(
            "presence",
            "nobody is present to answer: hooks leave their calls to Claude Code's own prompts",
            "open the dashboard (`hitl dashboard --open`), answer at the listener's terminal, \
             or start it with `--attended` if you answer with `hitl answer`",
        );
    } else {
        report.ok("presence", crate::broker::presence::describe(&info.present));
    }
}

/// A waiting `hitl ask` holds one inotify instance, a listener one: the user's limit
/// (128 by default) against what is in use.
fn check_inotify(report: &mut Report, spool: &Spool) {
    let read = |name: &str| -> Option<u64> {
        std::fs::read_to_string(format!("/proc/sys/fs/inotify/{name}"))
            .ok()?
            .trim()
            .parse()
            .ok()
    };
    let Some(max) = read("max_user_instances") else {
        report.ok("inotify", "no inotify here: askers poll");
        return;
    };
    let used = inotify_instances_in_use();
    let waiting = crate::spool::questions::question_paths(spool)
        .map(|q| q.len())
        .unwrap_or(0);
    let free = max.saturating_sub(used);
    let summary = format!(
        "{used} of {max} instances in use by you; {waiting} question(s) wait in this project"
    );
    if free < 16 {
        report.warn(
            "inotify",
            format!("{summary}: the next askers fall back to polling (slower answers)"),
            "raise the limit: `sudo sysctl fs.inotify.max_user_instances=1024` \
             (and in /etc/sysctl.d/ to keep it)",
        );
    } else {
        report.ok("inotify", summary);
    }
}

/// inotify instances held by this user's processes.
fn inotify_instances_in_use() -> u64 {
    let me = crate::runtime::process::euid();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return 0;
    };
    let mut n = 0;
    for p in procs.filter_map(Result::ok) {
        if !p
            .file_name()
            .to_string_lossy()
            .bytes()
            .all(|b| b.is_ascii_digit())
        {
            continue;
        }
        if !p.metadata().is_ok_and(|m| m.uid() == me) {
            continue;
        }
        let Ok(fds) = std::fs::read_dir(p.path().join("fd")) else {
            continue;
        };
        n += fds
            .filter_map(Result::ok)
            .filter(|fd| {
                std::fs::read_link(fd.path()).is_ok_and(|l| l.as_os_str() == "anon_inode:inotify")
            })
            .count() as u64;
    }
    n
}

/// The API tokens: readable by this user alone.
fn check_tokens(report: &mut Report, paths: &Paths) {
    let mut problems = Vec::new();
    let mut fixes = Vec::new();
    for name in ["token", "asker-token"] {
        let path = paths.config_dir.join(name);
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        let mode = meta.permissions().mode() & 0o777;
        if meta.file_type().is_symlink() || meta.uid() != crate::runtime::process::euid() {
            problems.push(format!("{} is not a file of yours", path.display()));
            fixes.push(format!("rm {} (a new one is made)", path.display()));
        } else if others_bits(mode) != 0 {
            problems.push(format!(
                "{} is readable by others (mode {mode:o}): they could answer for you",
                path.display()
            ));
            fixes.push(format!("chmod 600 {}", path.display()));
        }
    }
    if std::env::var_os("HITL_TOKEN").is_some() {
        report.ok("token", "HITL_TOKEN is set (it wins over the token file)");
    } else if problems.is_empty() {
        report.ok(
            "token",
            format!(
                "{} (private, or made at first use)",
                paths.config_dir.join("token").display()
            ),
        );
    } else {
        report.fail("token", problems.join("; "), fixes.join("; "));
    }
}

/// `[http] tls_cert` / `tls_key`, when set: read and checked as a listener would at
/// start, so a listener that would refuse to start is found now.
fn check_tls(report: &mut Report, settings: &Settings, paths: &Paths) {
    if settings.http.tls_cert.is_none() && settings.http.tls_key.is_none() {
        return;
    }
    match crate::server::tls::load(&settings.http, &paths.config_dir) {
        Ok(Some(tls)) => report.ok(
            "tls",
            format!(
                "HTTP is served over TLS, with the certificate whose SHA-256 is {}",
                *tls.sha256.borrow()
            ),
        ),
        Ok(None) => {}
        Err(e) => report.fail(
            "tls",
            format!("{e:#}"),
            "fix [http] tls_cert and tls_key in your user settings (a PEM certificate chain \
             and its key), or remove both to serve plain http on loopback",
        ),
    }
}

/// The dashboard's port: the listener's, or the one the next listener takes.
fn check_port(
    report: &mut Report,
    settings: Option<&Settings>,
    spool: Option<&Spool>,
    listener: Option<&ListenerInfo>,
) {
    if let Some(url) = listener.and_then(|l| l.http.as_ref()) {
        report.ok(
            "port",
            format!("the dashboard is at {url} (`hitl dashboard`)"),
        );
        return;
    }
    let configured = settings.map_or(crate::config::DEFAULT_LISTEN_ADDR, |s| {
        s.http.listen_addr.as_str()
    });
    if configured.eq_ignore_ascii_case("off") {
        report.ok(
            "port",
            "HTTP is off ([http] listen_addr = \"off\"): no dashboard or MCP",
        );
        return;
    }
    let Ok(socket) = crate::server::listen_address(configured) else {
        report.fail(
            "port",
            format!("[http] listen_addr {configured:?} is not an address"),
            "use PORT, HOST:PORT or localhost:PORT",
        );
        return;
    };
    match std::net::TcpListener::bind(socket) {
        Ok(_) => report.ok("port", format!("{socket} is free for the next listener")),
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => {
            match crate::server::holder::holder(socket) {
                Some(h) if h.is_this_user() && configured == crate::config::DEFAULT_LISTEN_ADDR => {
                    let own = spool.map_or(0, |s| crate::server::project_port(s.project()));
                    report.warn(
                        "port",
                        format!(
                            "{socket} is taken by your own {}; this project's listener serves \
                             on port {own} instead (the same each run)",
                            h.describe()
                        ),
                        "set [http] listen_addr to a free port, or stop what holds this one",
                    )
                }
                held => report.fail(
                    "port",
                    format!(
                        "{socket} is taken by {}: the listener refuses to start",
                        held.map_or_else(|| "a program hitl cannot see".into(), |h| h.describe())
                    ),
                    "set [http] listen_addr to a free port, or stop what holds this one",
                ),
            }
        }
        Err(e) => report.warn(
            "port",
            format!("{socket} cannot be bound: {e}"),
            "set [http] listen_addr to an address of this machine",
        ),
    }
}

/// History: reachable, and migrated as far as this build expects.
async fn check_store(report: &mut Report, paths: &Paths) {
    let url = paths.db_url();
    let shown = crate::store::redact_url(&url);
    match crate::store::probe::probe(&url).await {
        Ok(p) => match p.applied {
            None => report.ok("store", format!("{shown} (made at the first start)")),
            Some(n) if n >= p.expected => {
                report.ok("store", format!("{shown} ({}, migrated)", p.backend))
            }
            Some(n) => report.warn(
                "store",
                format!("{shown}: {n} of {} migrations applied", p.expected),
                "the next `hitl listen` or `hitl serve` applies the rest",
            ),
        },
        Err(e) => report.fail(
            "store",
            format!("{shown}: {e:#}"),
            if crate::store::is_postgres_url(&url) {
                "start PostgreSQL or fix the URL ([history] url, HITL_DB); the listener cannot start without it"
            } else {
                "move the file aside (history starts afresh) or fix its permissions"
            },
        ),
    }
}

/// Claude Code's wiring in each scope. Returns the programs the hooks run.
fn check_claude(report: &mut Report, dir: &Path) -> Vec<String> {
    use super::init::{Scope, Wiring};
    use crate::claude::settings;
    let mut wired = Vec::new();
    let mut programs = Vec::new();
    for (scope, name) in [
        (Scope::Local, "local"),
        (Scope::Shared, "shared"),
        (Scope::User, "user"),
    ] {
        let Ok(w) = Wiring::of(scope, dir) else {
            continue;
        };
        match settings::read(&w.hooks) {
            Err(e) => report.fail(
                "claude",
                format!("{e:#}"),
                "fix the JSON; Claude Code ignores a settings file it cannot read",
            ),
            Ok(v) => {
                let (events, progs) = settings::wired_hooks(&v);
                if !events.is_empty() {
                    wired.push(format!(
                        "hooks for {} events in {} ({name})",
                        events.len(),
                        w.hooks.display()
                    ));
                    programs.extend(progs);
                }
            }
        }
        match settings::read(&w.mcp) {
            Err(e) => report.fail("claude", format!("{e:#}"), "fix the JSON"),
            Ok(v) if settings::has_mcp(&v, &w.mcp_place) => {
                wired.push(format!("the MCP server in {} ({name})", w.mcp.display()))
            }
            Ok(_) => {}
        }
    }
    if wired.is_empty() {
        report.warn(
            "claude",
            "Claude Code is not wired to hitl here",
            "`hitl init --claude` (this project, you alone; --shared for the team, --user for every project)",
        );
    } else {
        report.ok("claude", wired.join("; "));
    }
    programs.sort();
    programs.dedup();
    programs
}

/// Codex CLI's wiring, where hitl's hooks are in a `hooks.json`: Codex skips a
/// handler whose trust is not recorded as it is now, and a project's hooks in a
/// project it does not trust. Nothing is said where Codex is not wired.
fn check_codex(report: &mut Report, dir: &Path) {
    let Ok(config) = crate::codex::home().map(|h| h.join("config.toml")) else {
        return;
    };
    for user in [false, true] {
        let Ok(path) = crate::codex::hooks_file(dir, user) else {
            continue;
        };
        let again = if user {
            "`hitl init --codex --user` again"
        } else {
            "`hitl init --codex` again"
        };
        match crate::codex::untrusted(&path, &config) {
            Err(e) => report.fail("codex", format!("{e:#}"), "fix the file named"),
            Ok((0, _)) => {}
            Ok((_, stale)) if !stale.is_empty() => report.warn(
                "codex",
                format!(
                    "Codex would skip {} of hitl's hooks in {}: their trust is not recorded \
                     as they are now",
                    stale.len(),
                    path.display()
                ),
                again,
            ),
            Ok(_) if !user && !crate::codex::trusts_project(&config, dir) => report.warn(
                "codex",
                format!(
                    "Codex does not load {}: it does not trust this project",
                    path.display()
                ),
                "start `codex` here and trust the project",
            ),
            Ok((n, _)) => report.ok(
                "codex",
                format!("{n} hooks of hitl's in {}, trusted", path.display()),
            ),
        }
    }
}

/// Gemini CLI's wiring, where hitl's hooks are in a `settings.json`: Gemini runs a
/// project's hooks only in a folder it trusts. Nothing is said where it is not wired.
fn check_gemini(report: &mut Report, dir: &Path) {
    for user in [false, true] {
        let Ok(path) = crate::gemini::settings_file(dir, user) else {
            continue;
        };
        let settings = match crate::claude::settings::read(&path) {
            Ok(s) => s,
            Err(e) => {
                report.fail("gemini", format!("{e:#}"), "fix the file named");
                continue;
            }
        };
        let (events, _) = crate::claude::settings::wired_hooks(&settings);
        if events.is_empty() {
            continue;
        }
        match crate::gemini::trusts_folder(dir) {
            Ok(false) if !user => report.warn(
                "gemini",
                format!(
                    "Gemini CLI runs no hook of {}: it does not trust this folder",
                    path.display()
                ),
                "start `gemini` here and trust the folder",
            ),
            Err(e) => report.warn(
                "gemini",
                format!("whether Gemini CLI trusts this folder is unknown: {e:#}"),
                "fix the file named",
            ),
            Ok(_) => report.ok(
                "gemini",
                format!(
                    "hitl's hooks for {} events in {}",
                    events.len(),
                    path.display()
                ),
            ),
        }
    }
}

/// The `hitl` the hooks run, found the way their shell finds it.
fn check_path(report: &mut Report, hook_programs: &[String]) {
    let on_path = crate::runtime::process::find_program("hitl", Path::new("/"));
    let hooks_need_path = hook_programs.iter().any(|p| p == "hitl");
    for p in hook_programs.iter().filter(|p| p.contains('/')) {
        if !crate::runtime::process::is_executable(Path::new(p)) {
            report.fail(
                "path",
                format!("the hooks run {p}, which is not there: they do nothing"),
                "run `hitl init --claude` again with the hitl you use",
            );
        }
    }
    let me = std::env::current_exe().ok();
    match (on_path, hooks_need_path) {
        (None, true) => report.fail(
            "path",
            "the hooks run `hitl`, which is not on the PATH: every hook does nothing \
             (Claude Code runs as if hitl were not installed)",
            format!(
                "put hitl in a folder on the PATH, e.g. `install -m 755 {} ~/.local/bin/hitl`",
                me.as_deref().unwrap_or(Path::new("hitl")).display()
            ),
        ),
        (None, false) => report.warn(
            "path",
            "`hitl` is not on the PATH: agents cannot run `hitl ask` (scripts/ask-human.sh falls back to files)",
            "put hitl in a folder on the PATH, e.g. ~/.local/bin",
        ),
        (Some(found), _) => {
            let same = me
                .as_deref()
                .and_then(|m| std::fs::canonicalize(m).ok())
                .zip(std::fs::canonicalize(&found).ok())
                .is_some_and(|(a, b)| a == b);
            let version = (!same)
                .then(|| {
                    std::process::Command::new(&found)
                        .arg("--version")
                        .output()
                        .ok()
                })
                .flatten()
                .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
            let mine = format!("hitl {}", env!("CARGO_PKG_VERSION"));
            match version {
                Some(v) if v != mine => report.warn(
                    "path",
                    format!("the PATH has {} ({v}), not this {mine}", found.display()),
                    "install one version: the hooks and agents run the one on the PATH",
                ),
                _ => report.ok("path", format!("{} (what hooks and agents run)", found.display())),
            }
        }
    }
}
