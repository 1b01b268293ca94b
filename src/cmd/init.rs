//! `hitl init [DIR] [--force]`: lay out `.helpers/`, write commented settings and the
//! agent-side `scripts/ask-human.sh`. Idempotent: running it again changes nothing,
//! and a file the user edited is kept unless `--force` is given.

use std::{
    fs,
    os::unix::fs::PermissionsExt,
    path::{Path, PathBuf},
};

use anyhow::{Context, Result};

use crate::{config::PROJECT_CONFIG_TEMPLATE, spool::Spool};

/// The generated agent-side script.
pub const ASK_HUMAN_SCRIPT: &str = include_str!("ask-human.sh");

/// What happened to one file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Created,
    Unchanged,
    Replaced,
    KeptEdited,
}

fn place(path: &Path, content: &str, mode: u32, force: bool) -> Result<Outcome> {
    let outcome = match fs::read_to_string(path) {
        Ok(existing) if existing == content => Outcome::Unchanged,
        Ok(_) if !force => return Ok(Outcome::KeptEdited),
        Ok(_) => Outcome::Replaced,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Outcome::Created,
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    if outcome != Outcome::Unchanged {
        let dir = path.parent().unwrap_or(Path::new("."));
        fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        crate::spool::write_atomic(dir, path, content.as_bytes(), true)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    fs::set_permissions(path, fs::Permissions::from_mode(mode))
        .with_context(|| format!("setting the mode of {}", path.display()))?;
    Ok(outcome)
}

/// What `hitl init` does besides laying out the project.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claude {
    /// Nothing for Claude Code.
    No,
    /// Merge hitl's hooks into `.claude/settings.json`.
    Install,
    /// Take them out again (and nothing else).
    Remove,
}

/// Initialises the project at `dir` (default: the current folder).
pub fn run(dir: Option<PathBuf>, force: bool, claude: Claude) -> Result<()> {
    let dir = match dir {
        Some(d) => d,
        None => std::env::current_dir().context("reading the current folder")?,
    };
    if claude == Claude::Remove {
        return claude_hooks(&dir, false);
    }
    fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let dir = fs::canonicalize(&dir).with_context(|| format!("resolving {}", dir.display()))?;
    let spool = Spool::new(&dir);
    spool.ensure_layout()?;
    let files = [
        (spool.config_file(), PROJECT_CONFIG_TEMPLATE, 0o600),
        (dir.join("scripts/ask-human.sh"), ASK_HUMAN_SCRIPT, 0o755),
    ];
    for (path, content, mode) in files {
        let shown = path
            .strip_prefix(&dir)
            .unwrap_or(&path)
            .display()
            .to_string();
        match place(&path, content, mode, force)? {
            Outcome::Created => eprintln!("created  {shown}"),
            Outcome::Replaced => eprintln!("replaced {shown} (--force)"),
            Outcome::Unchanged => eprintln!("ok       {shown}"),
            Outcome::KeptEdited => {
                eprintln!("kept     {shown} (edited; `hitl init --force` replaces it)")
            }
        }
    }
    if claude == Claude::Install {
        claude_hooks(&dir, true)?;
    }
    eprintln!(
        "hitl: {} is ready. Start the broker with `hitl listen`; agents ask with \
         `hitl ask \"…\"` or scripts/ask-human.sh.",
        dir.display()
    );
    Ok(())
}

/// Merges hitl's hooks into `dir/.claude/settings.json` and its MCP server into
/// `dir/.mcp.json` (or takes them out), keeping everything else there. Claude Code
/// waits for the hooks longer than hitl waits for the human: a hook it times out
/// lets the call through.
fn claude_hooks(dir: &Path, install: bool) -> Result<()> {
    use crate::claude::settings;
    let kept = Spool::new(dir).root().join("claude");
    let path = dir.join(".claude/settings.json");
    let timeout = if install {
        let hook = crate::config::load(
            &crate::config::Paths::from_env(),
            Some(&Spool::new(dir).config_file()),
        )?
        .hook;
        crate::claude::policy::validate(&hook)?;
        let longest = hook.timeouts.values().copied().chain([hook.timeout]);
        // 0 waits for ever: a day stands for it.
        let longest = longest.map(|t| if t == 0 { 86_400 } else { t }).max();
        longest.unwrap_or(hook.timeout) + settings::TIMEOUT_MARGIN
    } else {
        0
    };
    let program = hitl_program();
    let changed = settings::change_file(&path, &kept.join("settings.json"), install, |s| {
        if install {
            settings::install(s, &program, timeout)
                .with_context(|| format!("merging hitl's hooks into {}", path.display()))
        } else {
            Ok(settings::remove(s))
        }
    })?;
    let events: Vec<&str> = settings::HOOKED_EVENTS.iter().map(|(e, _)| *e).collect();
    match (install, changed) {
        (true, true) => eprintln!("hooked   .claude/settings.json ({})", events.join(", ")),
        (true, false) => eprintln!("ok       .claude/settings.json (hooks in place)"),
        (false, true) => eprintln!("removed  hitl's hooks from .claude/settings.json"),
        (false, false) => eprintln!("ok       .claude/settings.json (no hooks of hitl's)"),
    }
    let mcp = dir.join(".mcp.json");
    let changed = settings::change_file(&mcp, &kept.join("mcp.json"), install, |c| {
        if install {
            settings::install_mcp(c, &program)
                .with_context(|| format!("adding hitl's MCP server to {}", mcp.display()))
        } else {
            Ok(settings::remove_mcp(c))
        }
    })?;
    let name = settings::MCP_SERVER_NAME;
    match (install, changed) {
        (true, true) => eprintln!("added    .mcp.json (MCP server \"{name}\": `hitl mcp`)"),
        (true, false) => eprintln!("ok       .mcp.json (MCP server \"{name}\" in place)"),
        (false, true) => eprintln!("removed  hitl's MCP server from .mcp.json"),
        (false, false) => eprintln!("ok       .mcp.json (no MCP server of hitl's)"),
    }
    Ok(())
}

/// How the hooks name hitl: `hitl` when that is this binary on the PATH (a settings
/// file shared in a repository then works on every machine), else its full path.
fn hitl_program() -> String {
    let me = std::env::current_exe().and_then(fs::canonicalize).ok();
    let on_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join("hitl"))
            .find(|p| p.is_file())
            .and_then(|p| fs::canonicalize(p).ok())
    });
    match (me, on_path) {
        (Some(me), Some(found)) if me == found => "hitl".to_string(),
        (Some(me), _) => me.display().to_string(),
        (None, _) => "hitl".to_string(),
    }
}
