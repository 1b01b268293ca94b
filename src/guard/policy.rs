//! Which tool calls `hitl hook` asks the human about: decision tools, protected files
//! and dangerous commands (`[hook]` in the layered settings).
//!
//! Matching is built for the call at hand only: a Bash call compiles the command
//! patterns, a file write the path globs, anything else nothing. `hitl hook` runs on
//! every tool call of every session, and most calls get no opinion.

use std::path::{Component, Path, PathBuf};

use anyhow::{Context, Result};
use serde_json::Value;

use super::{
    danger, harmless,
    rules::{self, Rule, WRITING_TOOLS, glob_matcher},
    shell,
};
use crate::config::HookSettings;

/// Why a call needs the human.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Concern {
    /// A tool that is a question or a decision in itself (AskUserQuestion, ExitPlanMode).
    DecisionTool,
    /// Claude Code is about to show its permission dialog (`[hook] permission_requests`).
    Permission,
    /// A write to a protected file.
    ProtectedPath {
        /// The file, from the project's root when it is inside it.
        path: String,
        /// The glob it matched.
        glob: String,
    },
    /// A dangerous command.
    DangerousCommand {
        /// The command (of the line, as the shell reads it) that is dangerous.
        part: String,
        /// What it would do, in words (or the user's pattern it matched).
        why: String,
    },
    /// An MCP server asks the user for input (the Elicitation hook).
    Elicitation {
        /// The server.
        server: String,
    },
    /// A protected file or dangerous command that an "always allow" rule lets
    /// through (every part of the call the policy flags is covered).
    Allowed {
        /// The rule.
        rule: String,
        /// What would have been asked.
        concern: Box<Concern>,
    },
}

impl Concern {
    /// Whether it is a protected file or a dangerous command (their unanswered rule
    /// is `unanswered_dangerous`).
    pub fn is_dangerous(&self) -> bool {
        matches!(
            self,
            Concern::ProtectedPath { .. } | Concern::DangerousCommand { .. }
        )
    }

    /// One line for the human and for Claude.
    pub fn describe(&self) -> String {
        match self {
            Concern::DecisionTool => "a decision for the human".to_string(),
            Concern::Permission => "Claude Code asks for permission".to_string(),
            Concern::ProtectedPath { path, glob } => {
                format!("{path} is a protected file (matches {glob})")
            }
            Concern::DangerousCommand { part, why } => format!("`{part}` {why}"),
            Concern::Elicitation { server } => {
                format!("the MCP server {server} asks for input")
            }
            Concern::Allowed { rule, concern } => {
                format!("{}, allowed here by the rule {rule}", concern.describe())
            }
        }
    }
}

/// Where a call happens: the project's root and the folder the call runs in.
#[derive(Debug, Clone)]
pub struct Place {
    /// The project (Claude Code's `CLAUDE_PROJECT_DIR`, else the call's folder).
    pub project: PathBuf,
    /// The call's current folder (the hook input's `cwd`).
    pub cwd: PathBuf,
    /// The user's home, for `~/` globs.
    pub home: Option<PathBuf>,
    /// Claude Code runs this call without asking anyone (its permission mode says
    /// so): a Bash line then passes only when proven harmless ([`harmless`]).
    pub unasked: bool,
    /// The call runs inside `hitl run`'s boundary, which holds (tested, see
    /// [`crate::boundary::holds`]): the project's own code (builds, tests, its
    /// scripts) may then run unasked, the boundary containing it.
    pub contained: bool,
    /// The call's Bash line, already being read (the hook starts it before loading
    /// its settings); read here when absent or of another line.
    pub reading: Option<shell::Reading>,
}

/// Checks every pattern of the policy, as `hitl init --claude` and `hitl listen`
/// do (a call compiles only the ones it needs, so a broken one could go unseen).
pub fn validate(settings: &HookSettings) -> Result<()> {
    for p in &settings.dangerous_commands {
        regex_lite::Regex::new(p).with_context(|| format!("[hook] dangerous_commands: {p:?}"))?;
    }
    for g in &settings.protected_paths {
        glob_matcher(g.strip_prefix("~/").unwrap_or(g))
            .with_context(|| format!("[hook] protected_paths: {g:?}"))?;
    }
    for g in &settings.safe_deletes {
        glob_matcher(g.strip_prefix("~/").unwrap_or(g))
            .with_context(|| format!("[hook] safe_deletes: {g:?}"))?;
    }
    rules::parse_all(&settings.allow)?;
    if let Some((tool, kind)) = settings.types.iter().find(|(_, k)| !k.is_approval()) {
        anyhow::bail!(
            "[hook] types: {tool} = {kind:?}: a tool call is asked as \"approval\" or \"permission\""
        );
    }
    Ok(())
}

/// What the policy says of a tool call: `None` when no rule names it.
pub fn concern(
    settings: &HookSettings,
    place: &Place,
    tool: &str,
    input: &Value,
) -> Result<Option<Concern>> {
    if settings.decision_tools.iter().any(|t| t == tool) {
        return Ok(Some(Concern::DecisionTool));
    }
    if tool == "Bash" {
        let Some(command) = input.get("command").and_then(Value::as_str) else {
            return Ok(None);
        };
        return shell_concern(settings, place, command);
    }
    // Reading the token is answering for the human, by any tool.
    if matches!(tool, "Read" | "Grep" | "Glob" | "NotebookRead")
        && let Some(path) = ["file_path", "path", "notebook_path"]
            .iter()
            .find_map(|k| input.get(*k).and_then(Value::as_str))
        // Most reads are of other files: their names say so without a system call
        // (a link made to the token under another name is asked when it is made).
        && Path::new(path)
            .file_name()
            .is_some_and(|n| n == "token" || n == "sessions")
    {
        let resolved = resolve_as_kernel(&place.cwd.join(path));
        if let Some(secret) = secret_files()
            .into_iter()
            .find(|s| resolve_as_kernel(s) == resolved)
        {
            return Ok(Some(Concern::ProtectedPath {
                path: secret.display().to_string(),
                glob: "hitl's API token or sessions: with them anyone answers for you".into(),
            }));
        }
    }
    if let Some((_, field)) = WRITING_TOOLS.iter().find(|(t, _)| *t == tool) {
        let Some(path) = input.get(*field).and_then(Value::as_str) else {
            return Ok(None);
        };
        return write_concern(settings, place, path);
    }
    if tool == PATCH_TOOL {
        return patch_concern(settings, place, input);
    }
    Ok(None)
}

/// Codex CLI's tool that edits files by a patch (`guard::patch`).
pub const PATCH_TOOL: &str = "apply_patch";

/// What the policy says of writing the file at `path`: a protected file, or one an
/// "always allow" rule lets through; `None` for any other.
fn write_concern(settings: &HookSettings, place: &Place, path: &str) -> Result<Option<Concern>> {
    let Some(paths) = Candidates::of(place, path) else {
        return Ok(None);
    };
    let Some(concern) = protected(settings, place, &paths)? else {
        return Ok(None);
    };
    let rules = rules::parse_all(&settings.allow)?;
    let globs: Vec<String> = rules
        .iter()
        .filter_map(|r| r.path_glob().map(str::to_string))
        .collect();
    Ok(Some(match paths.first_match(&globs, place, true)? {
        Some(Concern::ProtectedPath { glob, .. }) => Concern::Allowed {
            rule: rules
                .iter()
                .find(|r| r.path_glob() == Some(glob.as_str()))
                .map_or(glob, |r| r.to_string()),
            concern: Box::new(concern),
        },
        _ => concern,
    }))
}

/// What the policy says of a patch: each file it writes checked as a `Write` of it;
/// the first that no rule lets through is the concern, else the first a rule does.
/// A patch that cannot be read whole is asked.
fn patch_concern(settings: &HookSettings, place: &Place, input: &Value) -> Result<Option<Concern>> {
    let text = ["command", "input", "patch"]
        .iter()
        .find_map(|k| input.get(*k).and_then(Value::as_str))
        .unwrap_or("");
    let Some(files) = super::patch::written_files(text) else {
        return Ok(Some(Concern::DangerousCommand {
            part: PATCH_TOOL.into(),
            why: "a patch hitl cannot read whole: the files it writes are unknown".into(),
        }));
    };
    let mut allowed = None;
    for file in files {
        match write_concern(settings, place, file)? {
            Some(c @ Concern::Allowed { .. }) => {
                allowed.get_or_insert(c);
            }
            Some(c) => return Ok(Some(c)),
            None => {}
        }
    }
    Ok(allowed)
}

/// Files that hold the guard itself: hitl's settings, answers and rules, Claude
/// Code's settings (which wire the hooks) and MCP servers. Protected for every
/// tool and every shell write whatever `[hook] protected_paths` says, so that what
/// the guard guards cannot switch it off.
pub const GUARD_PATHS: &[&str] = &[
    ".helpers/**",
    ".claude/**",
    ".mcp.json",
    "~/.claude/settings*.json",
    "~/.claude.json",
    "~/.config/hitl/**",
    // Other agents' hook wiring, which `hitl init` writes.
    ".codex/**",
    ".gemini/**",
    "~/.codex/**",
    "~/.gemini/**",
    // What runs later as the user, outside any agent: git's hooks and
    // configuration, shell start-up files, user services.
    ".git/hooks/**",
    ".git/config",
    ".git/commondir",
    "**/.envrc",
    "~/.bashrc",
    "~/.bash_profile",
    "~/.bash_login",
    "~/.profile",
    "~/.zshrc",
    "~/.zprofile",
    "~/.zshenv",
    "~/.config/systemd/user/**",
    "~/.config/autostart/**",
];

/// Files whose content answers for the human: the API token and the dashboard's
/// sessions (`hitl token --asker`'s file may be read: it cannot answer).
fn secret_files() -> Vec<PathBuf> {
    let dir = shell::lexical(&crate::config::Paths::from_env().config_dir);
    vec![dir.join("token"), dir.join("sessions")]
}

/// The protected glob a file matches: the configured ones, the guard's own
/// files, and (a second name for one of them) any file sharing its inode.
fn protected(
    settings: &HookSettings,
    place: &Place,
    paths: &Candidates,
) -> Result<Option<Concern>> {
    if let Some(c) = paths.first_match(&settings.protected_paths, place, false)? {
        return Ok(Some(c));
    }
    let mut guard: Vec<String> = GUARD_PATHS.iter().map(|g| g.to_string()).collect();
    // The user's settings folder, wherever HITL_HOME or XDG put it.
    let user = crate::config::Paths::from_env().config_dir;
    guard.push(format!("{}/**", user.display()));
    if let Some(c) = paths.first_match(&guard, place, false)? {
        return Ok(Some(c));
    }
    guard.extend(settings.protected_paths.iter().cloned());
    hard_link_twin(place, paths, &guard)
}

/// A file with more than one name may be a protected file under another name
/// (`ln .env notes.txt`): its other names are looked for in the project (and the
/// home's protected files), and the first protected one is the concern. A search
/// that cannot finish in bounds is a concern too.
fn hard_link_twin(place: &Place, paths: &Candidates, globs: &[String]) -> Result<Option<Concern>> {
    use std::os::unix::fs::MetadataExt;
    let Some(resolved) = paths.resolved.as_ref() else {
        return Ok(None);
    };
    let Ok(meta) = std::fs::metadata(resolved) else {
        return Ok(None);
    };
    if !meta.is_file() || meta.nlink() < 2 {
        return Ok(None);
    }
    let (dev, ino) = (meta.dev(), meta.ino());
    let shown = paths
        .relative
        .first()
        .cloned()
        .unwrap_or_else(|| resolved.display().to_string());
    let mut budget = 50_000usize;
    let mut folders = vec![resolve(&normalise(&place.project))];
    if let Some(home) = &place.home {
        for g in globs {
            if let Some(rest) = g.strip_prefix("~/") {
                let literal: PathBuf = rest
                    .split('/')
                    .take_while(|p| !p.contains(['*', '?', '[', '{']))
                    .collect();
                let p = home.join(literal);
                if p.is_dir() {
                    folders.push(p)
                } else if let Some(parent) = p.parent() {
                    folders.push(parent.to_path_buf())
                }
            }
        }
    }
    while let Some(folder) = folders.pop() {
        let Ok(entries) = std::fs::read_dir(&folder) else {
            continue;
        };
        for entry in entries.flatten() {
            let Some(left) = budget.checked_sub(1) else {
                return Ok(Some(Concern::ProtectedPath {
                    path: shown,
                    glob: "(a file with several names, too many places to look for them)".into(),
                }));
            };
            budget = left;
            let Ok(m) = entry.metadata() else { continue };
            let path = entry.path();
            if m.is_dir() {
                let name = entry.file_name();
                if !matches!(name.to_str(), Some("node_modules" | "target" | ".venv")) {
                    folders.push(path);
                }
                continue;
            }
            if m.dev() == dev
                && m.ino() == ino
                && path != *resolved
                && let Some(twin) = Candidates::of(place, &path.to_string_lossy())
                && let Some(Concern::ProtectedPath { path: other, glob }) =
                    twin.first_match(globs, place, false)?
            {
                return Ok(Some(Concern::ProtectedPath {
                    path: shown,
                    glob: format!("{glob}, as a second name of {other}"),
                }));
            }
        }
    }
    Ok(None)
}

/// What the policy says of a shell line: read as bash reads it, judged by meaning
/// ([`super::danger`]), the files it writes checked against the protected ones, the
/// user's own patterns matched against each command; a line whose every flagged
/// command an "always allow" rule covers is [`Concern::Allowed`]. A line that
/// cannot be read is asked.
fn shell_concern(settings: &HookSettings, place: &Place, command: &str) -> Result<Option<Concern>> {
    let (cwd, home) = (&place.cwd, place.home.as_deref());
    let read = place
        .reading
        .as_ref()
        .and_then(|r| r.take(command, cwd, home))
        .unwrap_or_else(|| shell::read(command, cwd, home));
    let line = match read {
        Ok(line) => line,
        Err(why) => {
            let shown: String = command.chars().take(200).collect();
            return Ok(Some(Concern::DangerousCommand {
                part: shown,
                why: format!(
                    "cannot be read as a shell would read it, so hitl cannot judge it ({why})"
                ),
            }));
        }
    };
    let project = resolve(&normalise(&place.project));
    // Compiled only when a recursive delete is met: most lines have none, and a
    // glob's regex costs more than reading the line. A glob that does not compile
    // (`validate` reports it) makes nothing safe.
    let safe: std::cell::OnceCell<Vec<(bool, regex_lite::Regex)>> = std::cell::OnceCell::new();
    let safe_delete = |p: &Path| {
        let globs = safe.get_or_init(|| {
            settings
                .safe_deletes
                .iter()
                .filter_map(|g| {
                    let absolute = g.starts_with('/') || g.starts_with("~/");
                    let g = match (g.strip_prefix("~/"), &place.home) {
                        (Some(rest), Some(home)) => format!("{}/{rest}", home.display()),
                        _ => g.clone(),
                    };
                    Some((absolute, glob_matcher(&g).ok()?))
                })
                .collect()
        });
        // Absolute globs match a path outside the project; the others a path from
        // the project's root (a project may itself live in /tmp).
        let relative = p
            .strip_prefix(&project)
            .ok()
            .map(|r| r.to_string_lossy().into_owned());
        globs
            .iter()
            .any(|(absolute, m)| match (&relative, absolute) {
                (Some(r), false) => m.is_match(r),
                (None, true) => m.is_match(&p.to_string_lossy()),
                _ => false,
            })
    };
    let secrets = secret_files();
    let scope = danger::Scope {
        project: &project,
        home: place.home.as_deref(),
        safe_delete: &safe_delete,
        secrets: &secrets,
    };
    let mut flagged: Vec<(String, Concern)> = Vec::new();
    for finding in danger::judge(&line, &scope) {
        match finding {
            danger::Finding::Dangerous { part, why } => {
                flagged.push((part.clone(), Concern::DangerousCommand { part, why }));
            }
            danger::Finding::Writes { part, cwd, path } => {
                let at = Place {
                    cwd,
                    ..place.clone()
                };
                if let Some(paths) = Candidates::of(&at, &path)
                    && let Some(c) = protected(settings, &at, &paths)?
                {
                    flagged.push((part, c));
                }
            }
        }
    }
    // Where Claude Code asks nobody, what is not proven harmless is asked.
    if place.unasked && flagged.is_empty() {
        let scratch = scratch_folders();
        let trusted = harmless::trusted_tools(&settings.trusted_tools);
        let scope = harmless::Scope {
            project: &project,
            scratch: &scratch,
            home: place.home.as_deref(),
            trusted: &trusted,
            contained: place.contained,
        };
        if let Err(u) = harmless::judge(&line, &scope) {
            let why = format!("is not proven harmless: {}", u.why);
            flagged.push((
                u.part.clone(),
                Concern::DangerousCommand { part: u.part, why },
            ));
        }
    }
    // The user's own patterns, against each command as it runs.
    if !settings.dangerous_commands.is_empty() {
        let patterns: Vec<regex_lite::Regex> = settings
            .dangerous_commands
            .iter()
            .map(|p| {
                regex_lite::Regex::new(p)
                    .with_context(|| format!("[hook] dangerous_commands: {p:?}"))
            })
            .collect::<Result<_>>()?;
        for program in line.commands.iter().flat_map(shell::Command::programs) {
            let shown = program.shown();
            if let Some((i, _)) = patterns
                .iter()
                .enumerate()
                .find(|(_, r)| r.is_match(&shown))
            {
                let why = format!("matches your pattern {}", settings.dangerous_commands[i]);
                flagged.push((
                    shown.clone(),
                    Concern::DangerousCommand { part: shown, why },
                ));
            }
        }
    }
    if flagged.is_empty() {
        return Ok(None);
    }
    // Rules are read only for a line that would be asked about.
    let rules: Vec<Rule> = if settings.allow.is_empty() {
        Vec::new()
    } else {
        rules::parse_all(&settings.allow)?
    };
    let mut first_rule = None;
    for (part, concern) in flagged {
        match rules.iter().find(|r| r.covers_command(&part)) {
            Some(rule) => {
                first_rule.get_or_insert((rule.to_string(), concern));
            }
            None => return Ok(Some(concern)),
        }
    }
    Ok(first_rule.map(|(rule, c)| Concern::Allowed {
        rule,
        concern: Box::new(c),
    }))
}

/// Folders any command may write in: the system's temp folder and `$TMPDIR`.
fn scratch_folders() -> Vec<PathBuf> {
    let mut out = vec![PathBuf::from("/tmp"), PathBuf::from("/var/tmp")];
    if let Some(t) = std::env::var_os("TMPDIR").filter(|t| !t.is_empty()) {
        out.push(normalise(Path::new(&t)));
    }
    out
}

/// The texts a file's globs are matched against: its names, its paths from the
/// project's root and its absolute paths, each as written and as it resolves
/// (symlinks followed).
struct Candidates {
    names: Vec<String>,
    relative: Vec<String>,
    absolute: Vec<String>,
    /// The file the kernel would open.
    resolved: Option<PathBuf>,
}

impl Candidates {
    /// The candidates of the file at `raw` (absolute, or relative to the call's
    /// folder).
    fn of(place: &Place, raw: &str) -> Option<Candidates> {
        if raw.is_empty() {
            return None;
        }
        let literal = normalise(&place.cwd.join(raw));
        // As the kernel walks it: each link followed before a `..` after it applies
        // (`link/../x` is beside the link's target, not beside the link).
        let resolved = resolve_as_kernel(&place.cwd.join(raw));
        let project = normalise(&place.project);
        let roots = [resolve(&project), project];
        let (mut names, mut relative, mut absolute) = (Vec::new(), Vec::new(), Vec::new());
        for path in [&literal, &resolved] {
            if let Some(name) = path.file_name() {
                names.push(name.to_string_lossy().into_owned());
            }
            for root in &roots {
                if let Ok(rel) = path.strip_prefix(root) {
                    relative.push(rel.to_string_lossy().into_owned());
                }
            }
            absolute.push(path.to_string_lossy().into_owned());
        }
        Some(Candidates {
            names,
            relative,
            absolute,
            resolved: Some(resolved),
        })
    }

    /// The first of `globs` matching the file. Globs without `/` match its name, the
    /// rest its path from the project's root, absolute and `~/` ones its absolute
    /// path; `as_paths` (rules, which name one place): globs without `/` match the
    /// path from the root too, never a name at any depth.
    fn first_match(
        &self,
        globs: &[String],
        place: &Place,
        as_paths: bool,
    ) -> Result<Option<Concern>> {
        // globset reads the globs; regex-lite runs them: its compile costs microseconds
        // where the full engine's automata cost a millisecond, on every file write of
        // every session.
        for glob in globs {
            let (pattern, against) = if let Some(rest) = glob.strip_prefix("~/") {
                let Some(home) = &place.home else { continue };
                (format!("{}/{rest}", home.display()), &self.absolute)
            } else if glob.starts_with('/') {
                (glob.clone(), &self.absolute)
            } else if glob.contains('/') || as_paths {
                (glob.clone(), &self.relative)
            } else {
                (glob.clone(), &self.names)
            };
            // Most writes are to ordinary files: a path lacking the glob's one piece of
            // literal text cannot match, and needs no matcher compiled.
            if let Some(literal) = required_text(&pattern)
                && !against.iter().any(|t| t.contains(literal))
            {
                continue;
            }
            let matcher = glob_matcher(&pattern)
                .with_context(|| format!("[hook] protected_paths: {glob:?}"))?;
            if let Some(hit) = against.iter().find(|p| matcher.is_match(p)) {
                let shown = self
                    .relative
                    .first()
                    .filter(|r| !r.is_empty())
                    .unwrap_or(hit);
                return Ok(Some(Concern::ProtectedPath {
                    path: shown.clone(),
                    glob: glob.clone(),
                }));
            }
        }
        Ok(None)
    }
}

/// The longest run of plain text that every match of `glob` contains (`None` when
/// the glob has braces or escapes, whose text is not plain). `**` with its slashes
/// can match nothing at all, so they are not part of any run.
fn required_text(glob: &str) -> Option<&str> {
    if glob.contains(['{', '\\']) {
        return None;
    }
    // Runs between wildcards, without allocating: this runs for every protected
    // glob on every file write.
    let mut best = "";
    let mut rest = glob;
    let mut after_globstar = false;
    while !rest.is_empty() {
        let end = rest.find(['*', '?', '[']).unwrap_or(rest.len());
        let mut run = &rest[..end];
        if after_globstar {
            run = run.strip_prefix('/').unwrap_or(run);
        }
        rest = &rest[end..];
        let stars = rest.len() - rest.trim_start_matches('*').len();
        if stars >= 2 {
            run = run.strip_suffix('/').unwrap_or(run);
        }
        if run.len() > best.len() {
            best = run;
        }
        after_globstar = stars >= 2;
        rest = match rest.chars().next() {
            // A class: up to its closing bracket (one right after `[` or `[!` is
            // part of the class).
            Some('[') => {
                let skip = if rest[1..].starts_with(['!', '^']) {
                    2
                } else {
                    1
                };
                match rest.get(skip + 1..).and_then(|r| r.find(']')) {
                    Some(i) => &rest[skip + 1 + i + 1..],
                    None => return None,
                }
            }
            Some('*') => &rest[stars..],
            Some(c) => &rest[c.len_utf8()..],
            None => rest,
        };
    }
    (!best.is_empty()).then_some(best)
}

/// `path` with `.`, `..` and doubled slashes worked out, without touching the disk.
pub fn normalise(path: &Path) -> PathBuf {
    shell::lexical(path)
}

/// `path` resolved as the kernel resolves it when a file there is opened for
/// writing: component by component from the root, each symlink followed where it
/// is met (so a `..` after it climbs from the link's target), names that do not
/// exist yet appended as they are.
pub fn resolve_as_kernel(path: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    let mut pending: std::collections::VecDeque<std::ffi::OsString> = path
        .components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n.to_os_string()),
            Component::ParentDir => Some("..".into()),
            _ => None,
        })
        .collect();
    let mut links = 0;
    while let Some(name) = pending.pop_front() {
        if name == ".." {
            out.pop();
            continue;
        }
        let next = out.join(&name);
        match std::fs::read_link(&next) {
            Ok(target) if links < 40 => {
                links += 1;
                if target.is_absolute() {
                    out = PathBuf::from("/");
                }
                for c in target.components().rev() {
                    match c {
                        Component::Normal(n) => pending.push_front(n.to_os_string()),
                        Component::ParentDir => pending.push_front("..".into()),
                        _ => {}
                    }
                }
            }
            _ => out = next,
        }
    }
    out
}

/// `path` with symlinks followed as far as it exists (a file about to be written
/// does not yet): its nearest existing ancestor resolved, the rest appended. A link
/// to something missing is followed too: writing through it creates its target.
fn resolve(path: &Path) -> PathBuf {
    resolve_within(path, 0)
}

fn resolve_within(path: &Path, links: usize) -> PathBuf {
    let mut existing = path;
    let mut rest = Vec::new();
    loop {
        if let Ok(real) = std::fs::canonicalize(existing) {
            let mut out = real;
            out.extend(rest.iter().rev());
            return out;
        }
        if links < 16
            && let Ok(target) = std::fs::read_link(existing)
        {
            let mut next = normalise(&existing.parent().unwrap_or(Path::new("/")).join(target));
            next.extend(rest.iter().rev());
            return resolve_within(&next, links + 1);
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_owned());
                existing = parent;
            }
            _ => return path.to_path_buf(),
        }
    }
}

/// The rule that allows calls like the one `concern` is about from now on: the
/// same command exactly, or the same file. `None` where no rule can say it.
pub fn offered_rule(concern: &Concern) -> Option<String> {
    match concern {
        Concern::DangerousCommand { part, .. } => rules::for_command(part),
        Concern::ProtectedPath { path, .. } => rules::for_path(path),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn place(dir: &Path) -> Place {
        Place {
            project: dir.to_path_buf(),
            cwd: dir.to_path_buf(),
            home: Some(PathBuf::from("/home/u")),
            unasked: false,
            contained: false,
            reading: None,
        }
    }

    fn write(dir: &Path, cwd: &Path, path: &str) -> Option<Concern> {
        let mut p = place(dir);
        p.cwd = cwd.to_path_buf();
        concern(
            &HookSettings::default(),
            &p,
            "Write",
            &json!({ "file_path": path, "content": "x" }),
        )
        .unwrap()
    }

    #[test]
    fn protected_paths_are_normalised_before_matching() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("sub/deeper")).unwrap();
        let p = |s: &str| root.join(s).display().to_string();
        for path in [
            p(".env"),
            p("sub/../.env"),
            p("sub//deeper/../../.env.local"),
            p("./sub/prod.env"),
            p("package.json"),
            p("sub/package.json"),
            p(".claude/settings.local.json"),
            p(".github/workflows/ci.yml"),
            p(".helpers/answers/x.json"),
            p("vite.config.ts"),
            "/etc/passwd".to_string(),
            "/home/u/.ssh/authorized_keys".to_string(),
        ] {
            assert!(write(root, root, &path).is_some(), "{path} should ask");
        }
        // Relative to the call's folder.
        assert!(write(root, &root.join("sub"), "../.env").is_some());
        for path in [p("src/main.rs"), p("README.md"), p("sub/environment.ts")] {
            assert_eq!(
                write(root, root, &path),
                None,
                "{path} should get no opinion"
            );
        }
    }

    #[test]
    fn a_symlink_to_a_protected_file_is_protected() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::write(root.join(".env"), "SECRET=1").unwrap();
        std::os::unix::fs::symlink(root.join(".env"), root.join("notes.txt")).unwrap();
        std::fs::create_dir(root.join("real")).unwrap();
        std::os::unix::fs::symlink(root.join(".github"), root.join("ci")).unwrap();
        let got = write(root, root, &root.join("notes.txt").display().to_string());
        assert!(
            matches!(&got, Some(Concern::ProtectedPath { glob, .. }) if glob == ".env"),
            "{got:?}"
        );
        // Through a linked folder, to a file not yet written.
        let got = write(root, root, &root.join("ci/new.yml").display().to_string());
        assert!(got.is_some(), "{got:?}");
    }

    #[test]
    fn other_tools_get_no_opinion_and_decision_tools_always_ask() {
        let dir = tempfile::tempdir().unwrap();
        let s = HookSettings::default();
        let p = place(dir.path());
        let read = json!({ "file_path": dir.path().join(".env") });
        assert_eq!(concern(&s, &p, "Read", &read).unwrap(), None);
        assert_eq!(concern(&s, &p, "Grep", &json!({})).unwrap(), None);
        assert_eq!(
            concern(&s, &p, "AskUserQuestion", &json!({})).unwrap(),
            Some(Concern::DecisionTool)
        );
    }

    #[test]
    fn globs_match_as_globset_matches_them() {
        let paths = [
            ".env",
            ".env.local",
            "prod.env",
            "environment.ts",
            "package.json",
            "sub/package.json",
            "a/b/settings.json",
            "vite.config.ts",
            "config.ts",
            "CLAUDE.md",
            "docs/CLAUDE.md",
            ".claude/settings.json",
            "x/.claude/y",
            "docker-compose.dev.yml",
            "a/Dockerfile.prod",
            ".gitlab-ci.yml",
            ".github/workflows/ci.yml",
            "a/.github/x",
            ".git/config",
            ".helpers/answers/a.json",
            "key.pem",
            "id_rsa.pub",
            "/etc/passwd",
            "/etc",
            "src/main.rs",
            "a[b].txt",
        ];
        let mut globs: Vec<String> = crate::config::DEFAULT_PROTECTED_PATHS
            .iter()
            .filter(|g| !g.starts_with('~'))
            .map(|g| g.to_string())
            .collect();
        globs.extend(
            [
                "[ab]*.rs",
                "src/[!x]ain.rs",
                "a?b*",
                "**/x/**",
                "*.{yml,json}",
            ]
            .map(String::from),
        );
        for glob in &globs {
            let ours = glob_matcher(glob).unwrap();
            let theirs = globset::GlobBuilder::new(glob)
                .literal_separator(true)
                .build()
                .unwrap()
                .compile_matcher();
            for path in paths {
                let want = theirs.is_match(path);
                assert_eq!(ours.is_match(path), want, "{glob} on {path}");
                if want && let Some(text) = required_text(glob) {
                    assert!(
                        path.contains(text),
                        "{glob} needs {text:?} but matched {path}"
                    );
                }
            }
        }
        assert_eq!(required_text("**/package.json").unwrap(), "package.json");
        assert_eq!(required_text("**/*.config.*").unwrap(), ".config.");
        assert_eq!(required_text("[ab]*.rs").unwrap(), ".rs");
        assert_eq!(required_text("a/**/b").unwrap(), "a");
        assert_eq!(required_text("src/**/gen/x.rs").unwrap(), "gen/x.rs");
        assert_eq!(required_text(".git/hooks/**").unwrap(), ".git/hooks");
        assert_eq!(required_text("a***/bcd").unwrap(), "bcd");
        assert_eq!(required_text("**"), None);
        assert_eq!(required_text("*.{yml,json}"), None);
    }

    #[test]
    fn a_bad_pattern_is_an_error_naming_the_setting() {
        let dir = tempfile::tempdir().unwrap();
        let s = HookSettings {
            dangerous_commands: vec!["(".into()],
            ..HookSettings::default()
        };
        let e = concern(&s, &place(dir.path()), "Bash", &json!({"command": "ls"})).unwrap_err();
        assert!(format!("{e:#}").contains("dangerous_commands"), "{e:#}");
    }

    #[test]
    fn rules_allow_only_what_they_cover_of_a_line() {
        let dir = tempfile::tempdir().unwrap();
        let settings = HookSettings {
            allow: vec![
                "Bash(git push --force origin main)".into(),
                "Bash(rm -rf /srv/build:*)".into(),
                "Edit(.env)".into(),
                "Edit(config/*.json)".into(),
            ],
            protected_paths: vec![".env".into(), "**/*.json".into()],
            ..HookSettings::default()
        };
        let run = |tool: &str, input: Value| {
            concern(&settings, &place(dir.path()), tool, &input).unwrap()
        };
        let bash = |c: &str| run("Bash", json!({ "command": c }));
        let allowed = |c: Option<Concern>| matches!(c, Some(Concern::Allowed { .. }));
        assert!(allowed(bash("git push --force origin main")));
        assert!(allowed(bash("cd repo && git  push --force origin main")));
        assert!(allowed(bash("rm -rf /srv/build --verbose")));
        assert!(!allowed(bash("rm -rf /srv/build/../../etc")));
        assert!(allowed(bash("sudo rm -rf /srv/build")));
        // A part no rule covers is asked about, whatever else the line holds.
        for asked in [
            "git push --force origin main; rm -rf /",
            "git push --force origin main && git push --force origin dev",
            "git push --force origin main $(rm -rf ~)",
            "git push --force origin main2",
            "rm -rf /srv/buildx",
        ] {
            assert!(
                matches!(bash(asked), Some(Concern::DangerousCommand { .. })),
                "{asked}: {:?}",
                bash(asked)
            );
        }
        // Nothing dangerous: no opinion, rules or not.
        assert_eq!(bash("ls"), None);
        // Rules and hooks are not changed behind the human's back.
        for sneaky in [
            "echo 'allow = [\"Bash(rm -rf /:*)\"]' >> .helpers/config.toml",
            "sed -i 's/hitl hook//' .claude/settings.json",
            "cp /tmp/x ./.helpers/config.toml",
            "tee -a .helpers/config.toml < /tmp/rules",
        ] {
            assert!(
                bash(sneaky).is_some_and(|c| c.is_dangerous()),
                "{sneaky}: {:?}",
                bash(sneaky)
            );
        }
        assert_eq!(bash("cat .helpers/config.toml"), None);

        let write = |path: &str| run("Write", json!({ "file_path": path, "content": "x" }));
        assert!(allowed(write(".env")));
        assert!(allowed(write("config/app.json")));
        // A rule names one place: `.env` at the root, not `.env` anywhere.
        assert!(matches!(
            write("sub/.env"),
            Some(Concern::ProtectedPath { .. })
        ));
        assert!(matches!(
            write("other/app.json"),
            Some(Concern::ProtectedPath { .. })
        ));
        assert!(matches!(
            write("config/../.x/app.json"),
            Some(Concern::ProtectedPath { .. })
        ));

        let broken = HookSettings {
            allow: vec!["Bash".into()],
            ..HookSettings::default()
        };
        let e = concern(
            &broken,
            &place(dir.path()),
            "Bash",
            &json!({ "command": "rm -rf /" }),
        )
        .unwrap_err();
        assert!(format!("{e:#}").contains("[hook] allow"), "{e:#}");
        assert!(validate(&broken).is_err());
    }

    #[test]
    fn a_patch_is_checked_file_by_file_as_writes_are() {
        let dir = tempfile::tempdir().unwrap();
        let settings = HookSettings {
            allow: vec!["Edit(.env)".into()],
            protected_paths: vec![".env".into()],
            ..HookSettings::default()
        };
        let patch = |body: &str| {
            let input = json!({ "command": format!("*** Begin Patch\n{body}*** End Patch\n") });
            concern(&settings, &place(dir.path()), PATCH_TOOL, &input).unwrap()
        };
        assert_eq!(patch("*** Add File: notes.md\n+hi\n"), None);
        // The guard's own files, by any header, also after a file it lets be.
        for body in [
            "*** Add File: .helpers/config.toml\n+[hook]\n",
            "*** Update File: notes.md\n*** Move to: .codex/hooks.json\n",
            "*** Add File: notes.md\n+x\n*** Delete File: .git/hooks/pre-commit\n",
        ] {
            assert!(
                matches!(patch(body), Some(Concern::ProtectedPath { .. })),
                "{body}: {:?}",
                patch(body)
            );
        }
        // A rule lets its file through; not the other protected file beside it.
        assert!(matches!(
            patch("*** Update File: .env\n@@\n-a\n+b\n"),
            Some(Concern::Allowed { .. })
        ));
        assert!(matches!(
            patch("*** Update File: .env\n*** Update File: .mcp.json\n"),
            Some(Concern::ProtectedPath { .. })
        ));
        // What cannot be read whole is asked.
        let unread = concern(
            &settings,
            &place(dir.path()),
            PATCH_TOOL,
            &json!({ "command": "rm -rf ." }),
        )
        .unwrap();
        assert!(unread.is_some_and(|c| c.is_dangerous()));
    }

    #[test]
    fn offered_rules_name_the_same_command_or_file_only() {
        let c = Concern::DangerousCommand {
            part: "rm  -rf build/".into(),
            why: "x".into(),
        };
        assert_eq!(offered_rule(&c).unwrap(), "Bash(rm -rf build/)");
        let p = Concern::ProtectedPath {
            path: "conf/a*b.json".into(),
            glob: "x".into(),
        };
        assert_eq!(offered_rule(&p).unwrap(), "Edit(conf/a[*]b.json)");
        assert_eq!(offered_rule(&Concern::DecisionTool), None);
    }
}
