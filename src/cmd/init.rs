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
    /// Merge hitl's hooks and MCP server into Claude Code's settings of this scope.
    Install(Scope),
    /// Take them out again (and nothing else).
    Remove(Scope),
}

/// What `hitl init` does for Codex CLI or Gemini CLI.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Other {
    /// Nothing.
    No,
    /// Merge hitl's hooks into its settings (the project's, or every project's with
    /// `user`), trusted where it asks for that.
    Install {
        /// The user's settings rather than the project's.
        user: bool,
    },
    /// Take them and their trust out again (and nothing else).
    Remove {
        /// As when they were put in.
        user: bool,
    },
}

/// Whose Claude Code settings hitl is wired into.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// This user in this project (the default): hooks in
    /// `.claude/settings.local.json`, which is not committed, and the MCP server in
    /// this project's entry of `~/.claude.json`.
    Local,
    /// Everyone working in this project: `.claude/settings.json` and `.mcp.json`,
    /// the files a team commits.
    Shared,
    /// This user in every project: `~/.claude/settings.json` and `~/.claude.json`.
    User,
}

/// The files of one [`Scope`], and where their bytes from before hitl are kept.
pub(crate) struct Wiring {
    pub(crate) hooks: PathBuf,
    hooks_kept: PathBuf,
    pub(crate) mcp: PathBuf,
    mcp_kept: PathBuf,
    pub(crate) mcp_place: crate::claude::settings::McpPlace,
}

impl Wiring {
    pub(crate) fn of(scope: Scope, dir: &Path) -> Result<Wiring> {
        use crate::claude::settings::McpPlace;
        let kept = Spool::new(dir).root().join("claude");
        let home = || {
            std::env::var_os("HOME")
                .filter(|h| !h.is_empty())
                .map(PathBuf::from)
                .context("HOME is not set: cannot find Claude Code's user settings")
        };
        Ok(match scope {
            Scope::Local => Wiring {
                hooks: dir.join(".claude/settings.local.json"),
                hooks_kept: kept.join("settings.local.json"),
                mcp: home()?.join(".claude.json"),
                mcp_kept: kept.join("claude.json"),
                mcp_place: McpPlace::Project(dir.display().to_string()),
            },
            Scope::Shared => Wiring {
                hooks: dir.join(".claude/settings.json"),
                hooks_kept: kept.join("settings.json"),
                mcp: dir.join(".mcp.json"),
                mcp_kept: kept.join("mcp.json"),
                mcp_place: McpPlace::Root,
            },
            Scope::User => {
                let kept = crate::config::Paths::from_env().config_dir.join("claude");
                Wiring {
                    hooks: home()?.join(".claude/settings.json"),
                    hooks_kept: kept.join("settings.json"),
                    mcp: home()?.join(".claude.json"),
                    mcp_kept: kept.join("claude.json"),
                    mcp_place: McpPlace::Root,
                }
            }
        })
    }
}

/// `.helpers/.gitignore`: everything in `.helpers/` is this machine's (pid files,
/// questions, answers, agents) except the settings, which a team may share.
const HELPERS_GITIGNORE: &str = "# Written by `hitl init`: what hitl keeps here is this machine's (questions,\n\
# answers, agents, pid files); only the settings are meant to be shared.\n\
*\n\
!.gitignore\n\
!config.toml\n";

/// Initialises the project at `dir` (default: the current folder).
pub fn run(
    dir: Option<PathBuf>,
    force: bool,
    claude: Claude,
    codex: Other,
    gemini: Other,
) -> Result<()> {
    let dir = match dir {
        Some(d) => d,
        None => std::env::current_dir().context("reading the current folder")?,
    };
    let removing = |o: Other| matches!(o, Other::Remove { .. });
    if matches!(claude, Claude::Remove(_)) || removing(codex) || removing(gemini) {
        let dir = fs::canonicalize(&dir).unwrap_or(dir);
        if let Claude::Remove(scope) = claude {
            claude_hooks(&dir, scope, false)?;
        }
        if let Other::Remove { user } = codex {
            codex_hooks(&dir, user, false)?;
        }
        if let Other::Remove { user } = gemini {
            gemini_hooks(&dir, user, false)?;
        }
        return Ok(());
    }
    fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let dir = fs::canonicalize(&dir).with_context(|| format!("resolving {}", dir.display()))?;
    let spool = Spool::new(&dir);
    spool.ensure_layout()?;
    let files = [
        (spool.config_file(), PROJECT_CONFIG_TEMPLATE, 0o600),
        (spool.root().join(".gitignore"), HELPERS_GITIGNORE, 0o600),
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
    if let Claude::Install(scope) = claude {
        claude_hooks(&dir, scope, true)?;
    }
    if let Other::Install { user } = codex {
        codex_hooks(&dir, user, true)?;
    }
    if let Other::Install { user } = gemini {
        gemini_hooks(&dir, user, true)?;
    }
    eprintln!(
        "hitl: {} is ready. Start the broker with `hitl listen`; agents ask with \
         `hitl ask \"…\"` or scripts/ask-human.sh.",
        dir.display()
    );
    Ok(())
}

/// Merges hitl's hooks and MCP server into the Claude Code settings of `scope` (or
/// takes them out), keeping everything else there. Claude Code waits for the hooks
/// longer than hitl waits for the human: a hook it times out lets the call through.
fn claude_hooks(dir: &Path, scope: Scope, install: bool) -> Result<()> {
    use crate::claude::settings;
    let wiring = Wiring::of(scope, dir)?;
    let path = &wiring.hooks;
    let shown = |p: &Path| -> String {
        let home = std::env::var_os("HOME").map(PathBuf::from);
        if let Ok(rest) = p.strip_prefix(dir) {
            rest.display().to_string()
        } else if let Some(rest) = home.as_deref().and_then(|h| p.strip_prefix(h).ok()) {
            format!("~/{}", rest.display())
        } else {
            p.display().to_string()
        }
    };
    let timeout = if install { hook_timeout(dir)? } else { 0 };
    let program = hitl_program();
    let changed = settings::change_file(path, &wiring.hooks_kept, install, |s| {
        if install {
            settings::install(s, &program, timeout)
                .with_context(|| format!("merging hitl's hooks into {}", path.display()))
        } else {
            Ok(settings::remove(s))
        }
    })?;
    let file = shown(path);
    let events = settings::HOOKED_EVENTS.len() + settings::OBSERVED_EVENTS.len();
    match (install, changed) {
        (true, true) => eprintln!("hooked   {file} ({events} events)"),
        (true, false) => eprintln!("ok       {file} (hooks in place)"),
        (false, true) => eprintln!("removed  hitl's hooks from {file}"),
        (false, false) => eprintln!("ok       {file} (no hooks of hitl's)"),
    }
    if !install {
        // A `.claude/` hitl's hooks alone made is not left behind empty.
        if let Some(parent) = path.parent()
            && parent.starts_with(dir)
        {
            let _ = fs::remove_dir(parent);
        }
    } else if scope == Scope::Local {
        keep_out_of_git(dir, ".claude/settings.local.json");
    }
    let mcp = &wiring.mcp;
    let changed = settings::change_file(mcp, &wiring.mcp_kept, install, |c| {
        settings::change_mcp(c, &wiring.mcp_place, install.then_some(program.as_str()))
            .with_context(|| format!("changing hitl's MCP server in {}", mcp.display()))
    })?;
    let name = settings::MCP_SERVER_NAME;
    let file = match &wiring.mcp_place {
        settings::McpPlace::Root => shown(mcp),
        settings::McpPlace::Project(_) => format!("{} (this project's entry)", shown(mcp)),
    };
    match (install, changed) {
        (true, true) => eprintln!("added    {file}: MCP server \"{name}\" (`hitl mcp`)"),
        (true, false) => eprintln!("ok       {file}: MCP server \"{name}\" in place"),
        (false, true) => eprintln!("removed  hitl's MCP server from {file}"),
        (false, false) => eprintln!("ok       {file}: no MCP server of hitl's"),
    }
    if install && scope != Scope::Shared {
        eprintln!(
            "hitl: wired for you only; `hitl init --claude --shared` writes the files a \
             team commits (.claude/settings.json, .mcp.json)"
        );
    }
    if install {
        eprintln!(
            "hitl: start Claude Code as `hitl run claude`: the kernel then keeps it out of \
             hitl's files, secrets and these hooks"
        );
    }
    Ok(())
}

/// How long an agent waits for hitl's hook: beyond hitl's own longest wait for the
/// human, since a hook the agent times out lets the call through.
fn hook_timeout(dir: &Path) -> Result<u64> {
    let hook = crate::config::load(
        &crate::config::Paths::from_env(),
        Some(&Spool::new(dir).config_file()),
    )?
    .hook;
    crate::guard::policy::validate(&hook)?;
    let longest = hook.timeouts.values().copied().chain([hook.timeout]);
    // 0 waits for ever: a day stands for it.
    let longest = longest.map(|t| if t == 0 { 86_400 } else { t }).max();
    Ok(longest.unwrap_or(hook.timeout) + crate::claude::settings::TIMEOUT_MARGIN)
}

/// Where an agent's hooks file is kept from before hitl changed it: the project's
/// `.helpers/NAME`, or the user's hitl folder for `user`.
fn kept_file(dir: &Path, user: bool, name: &str) -> PathBuf {
    if user {
        crate::config::Paths::from_env().config_dir.join(name)
    } else {
        Spool::new(dir).root().join(name)
    }
}

/// Says what wiring `path` did (`events` hooked; `more`: what else was done with
/// them), and takes an emptied project folder of the agent's away.
fn wired(dir: &Path, path: &Path, install: bool, changed: bool, events: usize, more: &str) {
    let file = path.strip_prefix(dir).unwrap_or(path).display().to_string();
    match (install, changed) {
        (true, true) => eprintln!("hooked   {file} ({events} events{more})"),
        (true, false) => eprintln!("ok       {file} (hooks in place)"),
        (false, true) => eprintln!("removed  hitl's hooks from {file}"),
        (false, false) => eprintln!("ok       {file} (no hooks of hitl's)"),
    }
    if !install
        && let Some(parent) = path.parent()
        && parent.starts_with(dir)
    {
        let _ = fs::remove_dir(parent);
    }
}

/// Merges hitl's hooks into Codex's `hooks.json` (the project's, or `$CODEX_HOME`'s
/// with `user`) and trusts them in Codex's `config.toml`; or takes both out.
fn codex_hooks(dir: &Path, user: bool, install: bool) -> Result<()> {
    let path = crate::codex::hooks_file(dir, user)?;
    let config = crate::codex::home()?.join("config.toml");
    let kept = kept_file(dir, user, "codex/hooks.json");
    let timeout = if install { hook_timeout(dir)? } else { 0 };
    let changed = crate::codex::wire(&path, &kept, &config, &hitl_program(), timeout, install)?;
    let events = crate::codex::HOOKED_EVENTS.len() + crate::codex::OBSERVED_EVENTS.len();
    let more = format!(", trusted in {}", config.display());
    wired(dir, &path, install, changed, events, &more);
    if install && !user && !crate::codex::trusts_project(&config, dir) {
        eprintln!(
            "hitl: Codex runs a project's hooks only once you trust the project: start \
             `codex` here and trust it (or wire every project with `hitl init --codex --user`)"
        );
    }
    Ok(())
}

/// Merges hitl's hooks into Gemini CLI's settings (the project's, or the user's with
/// `user`), or takes them out.
fn gemini_hooks(dir: &Path, user: bool, install: bool) -> Result<()> {
    let path = crate::gemini::settings_file(dir, user)?;
    let kept = kept_file(dir, user, "gemini/settings.json");
    let timeout = if install { hook_timeout(dir)? } else { 0 };
    let changed = crate::gemini::wire(&path, &kept, &hitl_program(), timeout, install)?;
    wired(
        dir,
        &path,
        install,
        changed,
        crate::gemini::EVENTS.len(),
        "",
    );
    if install && !user {
        eprintln!(
            "hitl: Gemini CLI runs a project's hooks in a folder you trust (it asks on its \
             first run here)"
        );
    }
    Ok(())
}

/// Adds `entry` to the repository's own ignore list (`.git/info/exclude`, never
/// the committed `.gitignore`) when `dir` is a repository's root and git does not
/// ignore it already there. Best effort: a folder that is not a repository is left
/// alone.
fn keep_out_of_git(dir: &Path, entry: &str) {
    let git = dir.join(".git");
    if !git.is_dir() {
        return;
    }
    let exclude = git.join("info/exclude");
    let listed = |p: &Path| {
        fs::read_to_string(p).is_ok_and(|t| {
            t.lines()
                .any(|l| l.trim() == entry || l.trim() == format!("/{entry}"))
        })
    };
    if listed(&exclude) || listed(&dir.join(".gitignore")) {
        return;
    }
    let mut text = fs::read_to_string(&exclude).unwrap_or_default();
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str(&format!(
        "# hitl: this user's Claude Code wiring\n/{entry}\n"
    ));
    let _ = fs::create_dir_all(git.join("info")).and_then(|()| fs::write(&exclude, text));
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
