//! `hitl run [--] AGENT [ARGS…]`: starts an agent (Claude Code, Codex, Gemini CLI, a
//! shell) inside the boundary (`crate::boundary`), so that nothing it or anything it
//! starts does can change what decides for the human: the guard's files, hitl's
//! secrets, the hooks' wiring, what runs later as the user.
//!
//! The process enters the boundary itself and then becomes the agent (`exec`): the
//! agent's exit status is `hitl run`'s. Exit codes of its own, chosen as `env` and
//! `docker run` choose them: 125 the boundary could not be made (nothing ran), 126
//! the agent could not be started, 127 it was not found.

use std::{
    ffi::OsString,
    path::{Path, PathBuf},
};

use anyhow::{Context, Result};
use serde::Serialize;

use crate::{
    boundary::{self, AgentHome, Inputs, Plan},
    config::{self, Paths},
    spool::Spool,
};

/// The boundary could not be made; the agent did not start.
pub const EXIT_NO_BOUNDARY: u8 = 125;
/// The agent was found but could not be started.
pub const EXIT_CANNOT_START: u8 = 126;
/// The agent was not found.
pub const EXIT_NOT_FOUND: u8 = 127;

/// `hitl run`'s flags.
#[derive(clap::Args, Debug)]
pub struct RunOptions {
    /// The project folder (default: the nearest one with .helpers/, else the
    /// nearest git repository, else this folder).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Another folder (or file) the agent may write, besides the project, temp
    /// folders, the usual caches and `[run] writable`; what decides for the human
    /// stays read-only inside it. Repeatable.
    #[arg(long, value_name = "PATH")]
    pub writable: Vec<PathBuf>,
    /// A folder or file the agent may read, kept read-only, even where it lies in a
    /// temp folder the boundary makes private (paths named in the agent's command
    /// are kept so already). Repeatable.
    #[arg(long, value_name = "PATH")]
    pub visible: Vec<PathBuf>,
    /// Run the agent without a boundary (said on stderr): only the hook's checks
    /// stand between it and hitl's files.
    #[arg(long)]
    pub no_boundary: bool,
    /// Print what the boundary would make read-only, writable and hidden, and
    /// whether this machine can make it; run nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// With --dry-run: print JSON.
    #[arg(long, requires = "dry_run")]
    pub json: bool,
    /// Print the macOS sandbox-exec profile of the same boundary (written, untested
    /// here) and run nothing.
    #[arg(long, conflicts_with = "dry_run")]
    pub macos_profile: bool,
    /// The agent and its arguments, like `claude` or `codex --full-auto`.
    #[arg(required_unless_present_any = ["dry_run", "macos_profile"], trailing_var_arg = true, allow_hyphen_values = true, value_name = "AGENT")]
    pub command: Vec<OsString>,
}

/// What `--dry-run --json` prints.
#[derive(Serialize)]
struct DryRun<'a> {
    project: &'a Path,
    /// `null` when this machine can make the boundary, else why not.
    unavailable: Option<String>,
    landlock_abi: i64,
    plan: &'a Plan,
}

/// Runs `hitl run`; returns only when the agent could not be started (or for
/// `--dry-run`), with the exit status.
pub fn run(opts: RunOptions) -> u8 {
    match start(opts) {
        Ok(code) => code,
        Err(failure) => {
            eprintln!("hitl run: {:#}", failure.error);
            failure.code
        }
    }
}

struct Failure {
    error: anyhow::Error,
    code: u8,
}

fn fail(code: u8) -> impl FnOnce(anyhow::Error) -> Failure {
    move |error| Failure { error, code }
}

fn start(opts: RunOptions) -> Result<u8, Failure> {
    let paths = Paths::from_env();
    let project = project_dir(opts.dir.as_deref()).map_err(fail(EXIT_NO_BOUNDARY))?;
    let mut inputs = inputs(&paths, &project, &opts.command).map_err(fail(EXIT_NO_BOUNDARY))?;
    let canonical = |w: &PathBuf| std::fs::canonicalize(w).unwrap_or_else(|_| w.clone());
    inputs.writable.extend(opts.writable.iter().map(canonical));
    inputs.visible.extend(opts.visible.iter().map(canonical));
    inputs.visible.extend(named_paths(&opts.command));
    let plan = Plan::new(&inputs);

    if opts.macos_profile {
        print!("{}", boundary::macos::profile(&plan));
        return Ok(0);
    }
    if opts.dry_run {
        let support = boundary::enter::check_support();
        let unavailable = support.as_ref().err().map(|e| format!("{e:#}"));
        if opts.json {
            let shown = DryRun {
                project: &project,
                unavailable,
                landlock_abi: boundary::enter::landlock_abi(),
                plan: &plan,
            };
            println!(
                "{}",
                serde_json::to_string_pretty(&shown).unwrap_or_default()
            );
        } else {
            print!("{}", describe(&project, &plan, unavailable.as_deref()));
        }
        return Ok(0);
    }

    let mut command = std::process::Command::new(&opts.command[0]);
    command.args(&opts.command[1..]);
    if opts.no_boundary {
        eprintln!(
            "hitl run: no boundary (--no-boundary): {} can change hitl's files and read its \
             secrets; only the hook's checks stand in its way",
            opts.command[0].to_string_lossy()
        );
        return Err(exec(command));
    }
    if boundary::holds(&project, &paths.config_dir) {
        // Already inside one (an agent's `hitl run`): it holds for this one too.
        return Err(exec(command));
    }
    boundary::enter::check_support()
        .context(
            "no boundary can be made on this machine (--no-boundary runs without one, said so)",
        )
        .map_err(fail(EXIT_NO_BOUNDARY))?;
    prepare(&paths, &plan).map_err(fail(EXIT_NO_BOUNDARY))?;
    if let Some(note) = nested_sandbox_note(&opts.command, nix::unistd::Uid::current().is_root()) {
        eprintln!("hitl run: {note}");
    }
    claude_state(&inputs.home, &mut command).map_err(fail(EXIT_NO_BOUNDARY))?;
    boundary::enter::enter(&plan)
        .context("making the boundary")
        .map_err(fail(EXIT_NO_BOUNDARY))?;
    Err(exec(command))
}

/// The existing files and folders the agent's command names (`python3
/// /tmp/x/agent.py`): what the user named stays visible, read-only, where it lies in
/// a folder the boundary makes private.
fn named_paths(command: &[OsString]) -> Vec<PathBuf> {
    command
        .iter()
        .map(Path::new)
        .filter(|p| p.is_absolute() || p.components().count() > 1)
        .filter_map(|p| std::fs::canonicalize(p).ok())
        .collect()
}

/// Becomes the agent; returns only when that failed.
fn exec(mut command: std::process::Command) -> Failure {
    use std::os::unix::process::CommandExt;
    let program = command.get_program().to_string_lossy().into_owned();
    let e = command.exec();
    let code = if e.kind() == std::io::ErrorKind::NotFound {
        EXIT_NOT_FOUND
    } else {
        EXIT_CANNOT_START
    };
    Failure {
        error: anyhow::Error::new(e).context(format!("starting {program}")),
        code,
    }
}

/// The project: the nearest folder with `.helpers/`, else the nearest git
/// repository, else `dir` (or this folder).
fn project_dir(dir: Option<&Path>) -> Result<PathBuf> {
    let start = match dir {
        Some(d) => d.to_path_buf(),
        None => std::env::current_dir().context("reading the current folder")?,
    };
    let start =
        std::fs::canonicalize(&start).with_context(|| format!("reading {}", start.display()))?;
    if let Some(spool) = Spool::find(&start) {
        return Ok(spool.project().to_path_buf());
    }
    Ok(start
        .ancestors()
        .find(|d| d.join(".git").exists())
        .unwrap_or(&start)
        .to_path_buf())
}

fn inputs(paths: &Paths, project: &Path, command: &[OsString]) -> Result<Inputs> {
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .context("HOME is not set")?;
    let canonical = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let project_config = Spool::new(project).config_file();
    let settings = config::load(
        paths,
        project_config.is_file().then_some(project_config.as_path()),
    )?;
    let runtime_dir = std::env::var_os("XDG_RUNTIME_DIR")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            Some(PathBuf::from(format!(
                "/run/user/{}",
                nix::unistd::Uid::current()
            )))
        });
    Ok(Inputs {
        project: project.to_path_buf(),
        home: canonical(&home),
        config_dir: canonical(&paths.config_dir),
        data_dir: canonical(&paths.data_dir),
        runtime_dir: runtime_dir.map(|d| canonical(&d)),
        writable: settings
            .run
            .writable
            .iter()
            .map(|w| canonical(&config::expand_home(w, &home)))
            .collect(),
        // The PATH's folders, so that an agent installed in one under /tmp is found.
        visible: std::env::var_os("PATH")
            .map(|p| std::env::split_paths(&p).map(|d| canonical(&d)).collect())
            .unwrap_or_default(),
        agent_homes: agent_homes(&home, command)?,
    })
}

/// The coding agents' own folders, as each agent finds its own; the one `command`
/// starts is made when missing (Claude Code's always, as before Codex and Gemini CLI
/// were known here).
fn agent_homes(home: &Path, command: &[OsString]) -> Result<Vec<AgentHome>> {
    let started = started_agent(command);
    // Canonical as the plan's other paths are, though it may not exist yet.
    let canonical = |p: PathBuf| match (p.parent(), p.file_name()) {
        (Some(parent), Some(name)) => std::fs::canonicalize(parent)
            .map(|d| d.join(name))
            .unwrap_or(p),
        _ => p,
    };
    Ok(vec![
        AgentHome {
            dir: canonical(home.join(".claude")),
            config: boundary::plan::CLAUDE_CONFIG,
            make: true,
        },
        AgentHome {
            dir: canonical(crate::codex::home()?),
            config: boundary::plan::CODEX_CONFIG,
            make: started == Some("codex"),
        },
        AgentHome {
            dir: canonical(crate::gemini::home()?),
            config: boundary::plan::GEMINI_CONFIG,
            make: started == Some("gemini"),
        },
    ])
}

/// Codex's own sandbox is bubblewrap, which maps a user namespace of its own through
/// `/proc/PID/uid_map`. Inside the boundary root's `/proc` stays read-only (its
/// `/proc/sys` would be root's to write), so as root every command Codex sandboxes
/// fails ("bwrap: setting up uid map"): said before it starts, with the way out. Any
/// other user's `/proc` stays writable, and Codex's sandbox runs inside the boundary.
fn nested_sandbox_note(command: &[OsString], root: bool) -> Option<&'static str> {
    let unsandboxed = command.iter().any(|a| {
        let a = a.to_string_lossy();
        a.contains("danger-full-access")
            || a == "--dangerously-bypass-approvals-and-sandbox"
            || a == "--yolo"
    });
    (root && started_agent(command) == Some("codex") && !unsandboxed).then_some(
        "as root, Codex's own sandbox (bubblewrap) cannot start inside the boundary, and \
         the commands it sandboxes will fail; run it with `--sandbox danger-full-access` \
         (the boundary stays around it) or as another user",
    )
}

/// Which agent `command` starts, by its program's name (`claude`, `codex`, `gemini`),
/// or its script's when a runtime runs it (`node …/gemini.js`).
fn started_agent(command: &[OsString]) -> Option<&'static str> {
    let stem = |a: &OsString| {
        Path::new(a)
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
    };
    let mut names = command.iter();
    let mut name = stem(names.next()?)?;
    if matches!(name.as_str(), "node" | "npx" | "bun" | "deno") {
        name = names
            .find(|a| !a.to_string_lossy().starts_with('-'))
            .and_then(stem)?;
    }
    ["claude", "codex", "gemini"]
        .into_iter()
        .find(|agent| name == *agent)
}

/// What must exist before the boundary: what the plan binds onto, and the ask-only
/// token (an agent inside asks over HTTP with it; the user's token is hidden).
fn prepare(paths: &Paths, plan: &Plan) -> Result<()> {
    boundary::plan::create(plan).context("making what the boundary protects")?;
    crate::server::load_or_create_asker_token(&paths.config_dir)
        .context("making the ask-only token")?;
    Ok(())
}

/// Claude Code keeps its state and its configuration in one file, `~/.claude.json`
/// (projects' trust, MCP servers, which run programs), saved by renaming a temp file
/// over it in the home. Inside the boundary the home is read-only, so Claude Code is
/// pointed at `~/.claude` (`CLAUDE_CONFIG_DIR`), its writable folder, where it keeps
/// `.claude.json` (copied from the home's, again whenever that one changed since);
/// the home's file stays read-only and what an agent writes into its own copy
/// reaches only agents run inside a boundary.
/// Its settings, `~/.claude/settings*.json`, are the same files either way (read-only).
fn claude_state(home: &Path, command: &mut std::process::Command) -> Result<()> {
    if std::env::var_os("CLAUDE_CONFIG_DIR").is_some() {
        return Ok(());
    }
    let dir = home.join(".claude");
    let own = dir.join(".claude.json");
    let theirs = home.join(".claude.json");
    // Taken again when the user's own changed since (a project trusted, a server
    // added, outside): their settings win over what was kept inside.
    let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    let stale = match (modified(&own), modified(&theirs)) {
        (None, _) => true,
        (Some(o), Some(t)) => t > o,
        (Some(_), None) => false,
    };
    if stale && theirs.is_file() {
        std::fs::copy(&theirs, &own)
            .with_context(|| format!("copying {} to {}", theirs.display(), own.display()))?;
    }
    command.env("CLAUDE_CONFIG_DIR", &dir);
    Ok(())
}

/// The plan in words, for `--dry-run`.
fn describe(project: &Path, plan: &Plan, unavailable: Option<&str>) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let _ = writeln!(out, "project: {}", project.display());
    match unavailable {
        None => {
            let _ = writeln!(out, "this machine can make the boundary");
        }
        Some(why) => {
            let _ = writeln!(out, "this machine cannot make the boundary: {why}");
        }
    }
    let _ = writeln!(out, "read-only: everything but what follows");
    for b in &plan.binds {
        let _ = writeln!(
            out,
            "{}: {}",
            if b.writable { "writable" } else { "read-only" },
            b.path.display()
        );
    }
    for p in &plan.private {
        let _ = writeln!(out, "private, empty: {}", p.display());
    }
    for m in &plan.masks {
        let _ = writeln!(
            out,
            "hidden: {} (shown: {})",
            m.dir.display(),
            if m.keep.is_empty() {
                "nothing".to_string()
            } else {
                m.keep.join(", ")
            }
        );
    }
    let _ = writeln!(
        out,
        "outside processes: no signals, no tracing, no abstract sockets (Landlock); no typing into the terminal (seccomp); no capabilities"
    );
    if !plan.created.is_empty() {
        let _ = writeln!(out, "made first (to be protected):");
        for c in &plan.created {
            let _ = writeln!(out, "  {}", c.display());
        }
    }
    out
}

/// Whether `hitl run` would refuse here; `None` when it can. For `hitl doctor`.
pub fn unavailable() -> Option<String> {
    boundary::enter::check_support()
        .err()
        .map(|e| format!("{e:#}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &str) -> Vec<OsString> {
        line.split(' ').map(OsString::from).collect()
    }

    #[test]
    fn the_agent_started_is_known_by_its_program_or_script() {
        assert_eq!(started_agent(&words("claude -p hi")), Some("claude"));
        assert_eq!(
            started_agent(&words("/opt/codex/bin/codex exec go")),
            Some("codex")
        );
        assert_eq!(
            started_agent(&words("node --no-warnings /x/bundle/gemini.js -p hi")),
            Some("gemini")
        );
        assert_eq!(started_agent(&words("bash -c codex")), None);
    }

    #[test]
    fn root_is_told_codexs_sandbox_cannot_start_unless_it_is_off() {
        assert!(nested_sandbox_note(&words("codex exec go"), true).is_some());
        assert!(nested_sandbox_note(&words("codex exec go"), false).is_none());
        assert!(
            nested_sandbox_note(&words("codex exec --sandbox danger-full-access go"), true)
                .is_none()
        );
        assert!(nested_sandbox_note(&words("claude"), true).is_none());
    }
}
