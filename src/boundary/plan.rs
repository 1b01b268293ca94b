//! What the boundary makes of the file system, worked out before anything is
//! mounted: plain data, so that `hitl run --dry-run` can show it and tests can read it.
//!
//! Only folders are protected where a folder will do: a read-only bind of a folder
//! follows what happens inside it outside the boundary (the listener rewriting
//! `.listener.json`, a rule added to `.helpers/config.toml`), while a bind of a file
//! holds the file it found, and the kernel detaches it when that name is replaced
//! outside (since Linux 3.18). Files are bound only where their folder must stay
//! writable (`.mcp.json` in the project, Claude Code's settings in `~/.claude`).

use std::path::{Path, PathBuf};

use serde::Serialize;

/// Where the boundary's inputs come from.
#[derive(Debug, Clone)]
pub struct Inputs {
    /// The project (the folder holding `.helpers/`, or where `hitl run` started).
    pub project: PathBuf,
    /// The user's home.
    pub home: PathBuf,
    /// hitl's user settings folder (`config.toml`, `token`, `asker-token`, `sessions`).
    pub config_dir: PathBuf,
    /// hitl's data folder (`hitl.db`); may be `config_dir` (`HITL_HOME`).
    pub data_dir: PathBuf,
    /// The session's runtime folder (`XDG_RUNTIME_DIR`, `/run/user/UID`): its sockets
    /// (the session bus, which starts programs outside as the user) stay outside.
    pub runtime_dir: Option<PathBuf>,
    /// More folders the agent may write, from `[run] writable`.
    pub writable: Vec<PathBuf>,
    /// Folders that stay visible, read-only, even in a private temp folder: the
    /// PATH's, where the agent's own programs are.
    pub visible: Vec<PathBuf>,
    /// The coding agents' own folders (Claude Code's, Codex's, Gemini CLI's).
    pub agent_homes: Vec<AgentHome>,
}

/// A coding agent's folder of its own (`~/.claude`, `$CODEX_HOME`, `~/.gemini`): its
/// state (sessions, logs, caches, credentials it refreshes) stays writable, what
/// configures it or instructs every session (`config`) read-only.
#[derive(Debug, Clone)]
pub struct AgentHome {
    /// The folder.
    pub dir: PathBuf,
    /// What in it configures the agent: settings, hooks, memory, skills, rules.
    pub config: &'static [&'static str],
    /// The agent `hitl run` starts: its folder writable (made when missing), which
    /// it needs to start at all. The others' stay read-only with the home, unless a
    /// writable folder covers one: then its configuration is protected as this one's.
    pub make: bool,
}

/// One folder or file bound onto itself, read-only or writable. Binds are made in
/// order, shallowest first, so that a read-only folder inside a writable one (and a
/// writable one inside that) each take effect.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Bind {
    /// The path, bound onto itself.
    pub path: PathBuf,
    /// Whether the agent may write below it.
    pub writable: bool,
}

/// A folder replaced by an empty one of the boundary's own, with only `keep` (files
/// of the original) shown in it, read-only.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Mask {
    /// The folder.
    pub dir: PathBuf,
    /// The names of the files shown, read-only, when they exist.
    pub keep: Vec<String>,
}

/// The boundary's file system.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Plan {
    /// Folders replaced by a private, empty one (temp folders, the runtime folder).
    pub private: Vec<PathBuf>,
    /// Paths below a private folder that stay visible there (a project or home in
    /// `/tmp`), bound back in after the private folder is made.
    pub carried: Vec<PathBuf>,
    /// Binds over a file system that is otherwise read-only, in order.
    pub binds: Vec<Bind>,
    /// Folders whose secrets are hidden (hitl's settings and data folders).
    pub masks: Vec<Mask>,
    /// Folders and files made before the boundary starts, so that they can be
    /// protected (a bind needs something to bind onto).
    pub created: Vec<PathBuf>,
}

/// The project's own files that decide what the agent may do, protected where they
/// exist (`.claude/` is made if missing). `.git` is handled apart.
pub const PROJECT_GUARDS: &[&str] = &[
    ".helpers",
    ".claude",
    ".mcp.json",
    ".codex",
    ".gemini",
    ".envrc",
];

/// What in `.helpers/` an asker writes: a question, its withdrawal, a kept marker, an
/// activity note, a task session's hook event. Everything else there (answers, the listener's files, settings,
/// `tmp/` with the answers' slots) is read-only.
pub const SPOOL_WRITABLE: &[&str] = &["questions", "activity", "kept", "tasks/events"];

/// In Claude Code's folder (`~/.claude`, its state stays writable), what is its
/// configuration: settings (hooks, permissions), memory loaded into every session,
/// and what runs code or instructs it (agents, commands, skills, plugins, hooks).
pub const CLAUDE_CONFIG: &[&str] = &[
    "settings.json",
    "settings.local.json",
    "CLAUDE.md",
    "agents",
    "commands",
    "skills",
    "plugins",
    "hooks",
    "output-styles",
];

/// What runs later as the user, or decides what an agent may do, in the home: kept
/// read-only where a writable folder (`[run] writable`, `--writable`) covers it.
pub const HOME_GUARDS: &[&str] = &[
    ".bashrc",
    ".bash_profile",
    ".bash_login",
    ".bash_logout",
    ".bash_aliases",
    ".profile",
    ".zshrc",
    ".zprofile",
    ".zshenv",
    ".zlogin",
    ".gitconfig",
    ".config/git",
    ".npmrc",
    ".config/systemd",
    ".config/autostart",
    ".local/bin",
    ".cargo/bin",
    ".cargo/config.toml",
    ".ssh",
    ".claude.json",
    ".config/hitl",
    ".local/share/hitl",
];

/// Caches and tools' state below the home that stay writable.
pub const HOME_WRITABLE: &[&str] = &[".cache", ".cargo/registry", ".cargo/git", ".npm"];

/// In Codex's folder (`$CODEX_HOME`, `~/.codex`), what configures it: settings (the
/// approval policy, the sandbox, model providers, MCP servers, `notify` commands,
/// which hooks are trusted), hooks, instructions read by every session, the
/// environment it loads, its command rules, skills and prompts.
pub const CODEX_CONFIG: &[&str] = &[
    "config.toml",
    "hooks.json",
    "AGENTS.md",
    "AGENTS.override.md",
    ".env",
    "rules",
    "skills",
    "prompts",
    "plugins",
];

/// In Gemini CLI's folder (`~/.gemini`, or `$GEMINI_CLI_HOME/.gemini`), what
/// configures it: settings (hooks among them), the trusted folders, memory, the
/// environment it loads, extensions, commands, skills, policies and agents.
pub const GEMINI_CONFIG: &[&str] = &[
    "settings.json",
    "trustedFolders.json",
    "GEMINI.md",
    ".env",
    "extensions",
    "commands",
    "skills",
    "policies",
    "agents",
];

/// Temp folders made private.
pub const PRIVATE: &[&str] = &["/tmp", "/var/tmp"];

impl Plan {
    /// The plan for `inputs`, as the file system is now.
    pub fn new(inputs: &Inputs) -> Plan {
        let mut plan = Plan {
            private: Vec::new(),
            carried: Vec::new(),
            binds: Vec::new(),
            masks: Vec::new(),
            created: Vec::new(),
        };
        for p in PRIVATE {
            let p = Path::new(p);
            if p.is_dir() {
                plan.private.push(p.to_path_buf());
            }
        }
        if let Some(run) = &inputs.runtime_dir
            && run.is_dir()
            && !plan.private.iter().any(|p| run.starts_with(p))
        {
            plan.private.push(run.clone());
        }

        let project = &inputs.project;
        plan.binds.push(Bind {
            path: project.clone(),
            writable: true,
        });
        for name in PROJECT_GUARDS {
            plan.read_only(project.join(name), *name == ".claude");
        }
        for name in SPOOL_WRITABLE {
            let path = project.join(".helpers").join(name);
            if path.is_dir() {
                plan.binds.push(Bind {
                    path,
                    writable: true,
                });
            }
        }
        git_binds(&project.join(".git"), &mut plan);

        let home = &inputs.home;
        for name in HOME_WRITABLE {
            let path = home.join(name);
            if path.is_dir() {
                plan.binds.push(Bind {
                    path,
                    writable: true,
                });
            }
        }
        for path in &inputs.writable {
            if path.is_dir() || path.is_file() {
                plan.binds.push(Bind {
                    path: path.clone(),
                    writable: true,
                });
            }
        }
        for name in HOME_GUARDS {
            plan.read_only(home.join(name), false);
        }
        // The started agent's folder writable, its configuration in it made if
        // missing (an empty folder, `{}` settings, empty instructions, which each
        // agent reads as none), so nothing can be planted there for a later session;
        // the same for one a writable folder covers. The others stay read-only with
        // the home, and nothing is made in them.
        for agent in &inputs.agent_homes {
            let covered = plan
                .binds
                .iter()
                .any(|b| b.writable && agent.dir.starts_with(&b.path));
            if !agent.make && !covered {
                continue;
            }
            if !exists(&agent.dir) {
                plan.created.push(agent.dir.clone());
            } else if !agent.dir.is_dir() {
                continue;
            }
            if agent.make {
                plan.binds.push(Bind {
                    path: agent.dir.clone(),
                    writable: true,
                });
            }
            for name in agent.config {
                plan.read_only(agent.dir.join(name), true);
            }
        }

        plan.masks.push(Mask {
            dir: inputs.config_dir.clone(),
            keep: vec!["config.toml".into(), "asker-token".into()],
        });
        if inputs.data_dir != inputs.config_dir {
            plan.masks.push(Mask {
                dir: inputs.data_dir.clone(),
                keep: Vec::new(),
            });
        }
        for mask in &plan.masks {
            if !mask.dir.is_dir() {
                plan.created.push(mask.dir.clone());
            }
        }

        // Inside a writable bind only what is below it matters; a read-only bind
        // outside every writable one adds nothing (the rest is read-only already)
        // and is dropped. Shallowest first; among equals, the order above.
        let writable: Vec<PathBuf> = plan
            .binds
            .iter()
            .filter(|b| b.writable)
            .map(|b| b.path.clone())
            .collect();
        plan.binds
            .retain(|b| b.writable || writable.iter().any(|w| b.path.starts_with(w)));
        plan.binds.sort_by_key(|b| b.path.components().count());
        plan.binds.dedup_by(|a, b| a.path == b.path);

        let roots = plan
            .binds
            .iter()
            .map(|b| &b.path)
            .chain(std::iter::once(home))
            .chain(plan.masks.iter().map(|m| &m.dir))
            .chain(inputs.visible.iter().filter(|v| exists(v)));
        for path in roots {
            if plan
                .private
                .iter()
                .any(|p| path.starts_with(p) && path != p)
                && !plan.carried.iter().any(|c| path.starts_with(c))
            {
                plan.carried.retain(|c| !c.starts_with(path));
                plan.carried.push(path.clone());
            }
        }
        plan
    }
}

impl Plan {
    /// Binds `path` read-only where it exists; where it does not, makes it first
    /// when `make` (so nothing can be planted there), else leaves it.
    fn read_only(&mut self, path: PathBuf, make: bool) {
        if !exists(&path) {
            if !make {
                return;
            }
            self.created.push(path.clone());
        }
        self.binds.push(Bind {
            path,
            writable: false,
        });
    }
}

/// Git runs what its configuration and hooks say, later, as the user, outside any
/// boundary: `.git/hooks` and `.git/config` are read-only, and `.git/commondir` (which
/// would point git at a configuration and hooks folder of the agent's) is made
/// holding `.` (this same folder) when missing. `.git` itself is bound onto itself, a
/// mount point, so it cannot be renamed away and a new one planted.
fn git_binds(git: &Path, plan: &mut Plan) {
    let Ok(meta) = std::fs::symlink_metadata(git) else {
        return;
    };
    if !meta.is_dir() {
        // A worktree's `.git` file names the repository's folder: read-only.
        plan.binds.push(Bind {
            path: git.to_path_buf(),
            writable: false,
        });
        return;
    }
    plan.binds.push(Bind {
        path: git.to_path_buf(),
        writable: true,
    });
    for name in ["hooks", "config", "commondir"] {
        plan.read_only(git.join(name), name == "commondir");
    }
    // Submodules' repositories: their hooks and configuration too.
    if let Ok(modules) = std::fs::read_dir(git.join("modules")) {
        for m in modules.flatten() {
            for name in ["hooks", "config"] {
                plan.read_only(m.path().join(name), false);
            }
        }
    }
}

fn exists(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok()
}

/// Makes what `plan.created` names: folders, and the files among them (`commondir`
/// holding `.`, Claude Code's settings as `{}`, an empty `CLAUDE.md`).
pub fn create(plan: &Plan) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    for path in &plan.created {
        if exists(path) {
            continue;
        }
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let contents: Option<&[u8]> = match name {
            "commondir" => Some(b".\n"),
            "settings.json" | "settings.local.json" | "trustedFolders.json" | "hooks.json" => {
                Some(b"{}\n")
            }
            "CLAUDE.md" | "AGENTS.md" | "AGENTS.override.md" | "GEMINI.md" | "config.toml"
            | ".env" => Some(b""),
            _ => None,
        };
        match contents {
            Some(bytes) => {
                if let Some(parent) = path.parent() {
                    std::fs::DirBuilder::new()
                        .recursive(true)
                        .mode(0o700)
                        .create(parent)?;
                }
                std::fs::write(path, bytes)?;
            }
            None => std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(path)?,
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inputs(root: &Path) -> Inputs {
        let project = root.join("proj");
        let home = root.join("home");
        std::fs::create_dir_all(project.join(".helpers/questions")).unwrap();
        std::fs::create_dir_all(project.join(".helpers/answers")).unwrap();
        std::fs::create_dir_all(project.join(".git/hooks")).unwrap();
        std::fs::write(project.join(".git/config"), "").unwrap();
        std::fs::create_dir_all(home.join(".cache")).unwrap();
        Inputs {
            project,
            home: home.clone(),
            config_dir: home.join(".config/hitl"),
            data_dir: home.join(".local/share/hitl"),
            runtime_dir: None,
            writable: Vec::new(),
            visible: Vec::new(),
            agent_homes: vec![
                AgentHome {
                    dir: home.join(".claude"),
                    config: CLAUDE_CONFIG,
                    make: true,
                },
                AgentHome {
                    dir: home.join(".codex"),
                    config: CODEX_CONFIG,
                    make: false,
                },
                AgentHome {
                    dir: home.join(".gemini"),
                    config: GEMINI_CONFIG,
                    make: false,
                },
            ],
        }
    }

    fn bind(plan: &Plan, path: &Path) -> Option<bool> {
        plan.binds
            .iter()
            .find(|b| b.path == path)
            .map(|b| b.writable)
    }

    #[test]
    fn the_spool_is_read_only_but_where_an_asker_writes() {
        let dir = tempfile::tempdir().unwrap();
        let i = inputs(dir.path());
        let plan = Plan::new(&i);
        assert_eq!(bind(&plan, &i.project), Some(true));
        assert_eq!(bind(&plan, &i.project.join(".helpers")), Some(false));
        assert_eq!(
            bind(&plan, &i.project.join(".helpers/questions")),
            Some(true)
        );
        assert_eq!(bind(&plan, &i.project.join(".helpers/answers")), None);
        // Shallowest first: the read-only spool before the writable folder in it.
        let at = |p: &Path| plan.binds.iter().position(|b| b.path == p).unwrap();
        assert!(at(&i.project.join(".helpers")) < at(&i.project.join(".helpers/questions")));
        assert!(at(&i.project) < at(&i.project.join(".helpers")));
    }

    #[test]
    fn git_cannot_be_pointed_at_the_agents_hooks() {
        let dir = tempfile::tempdir().unwrap();
        let i = inputs(dir.path());
        let plan = Plan::new(&i);
        assert_eq!(bind(&plan, &i.project.join(".git")), Some(true));
        assert_eq!(bind(&plan, &i.project.join(".git/hooks")), Some(false));
        assert_eq!(bind(&plan, &i.project.join(".git/config")), Some(false));
        assert_eq!(bind(&plan, &i.project.join(".git/commondir")), Some(false));
        assert!(plan.created.contains(&i.project.join(".git/commondir")));
        assert!(plan.created.contains(&i.project.join(".claude")));
    }

    #[test]
    fn claude_codes_configuration_is_read_only_in_its_writable_folder() {
        let dir = tempfile::tempdir().unwrap();
        let i = inputs(dir.path());
        let plan = Plan::new(&i);
        assert_eq!(bind(&plan, &i.home.join(".claude")), Some(true));
        assert_eq!(
            bind(&plan, &i.home.join(".claude/settings.json")),
            Some(false)
        );
        assert_eq!(bind(&plan, &i.home.join(".claude/skills")), Some(false));
        assert_eq!(bind(&plan, &i.home.join(".cache")), Some(true));
        // Not there: nothing to bind, the home is read-only anyway.
        assert_eq!(bind(&plan, &i.home.join(".npm")), None);
        assert_eq!(bind(&plan, &i.home), None);
    }

    #[test]
    fn codex_and_gemini_keep_their_state_but_not_their_configuration() {
        let dir = tempfile::tempdir().unwrap();
        let mut i = inputs(dir.path());
        // Not started: not made, not bound, nothing made in them (the home is
        // read-only anyway).
        std::fs::create_dir_all(i.home.join(".gemini/tmp")).unwrap();
        let plan = Plan::new(&i);
        assert_eq!(bind(&plan, &i.home.join(".codex")), None);
        assert_eq!(bind(&plan, &i.home.join(".gemini")), None);
        assert!(
            !plan
                .created
                .iter()
                .any(|c| c.starts_with(i.home.join(".gemini")))
        );
        // Codex started: its folder made, writable, its configuration read-only
        // (made first: an empty config.toml, `{}` hooks, empty instructions).
        i.agent_homes[1].make = true;
        i.agent_homes[2].make = true;
        let plan = Plan::new(&i);
        let codex = i.home.join(".codex");
        assert_eq!(bind(&plan, &codex), Some(true));
        for name in [
            "config.toml",
            "hooks.json",
            "AGENTS.override.md",
            ".env",
            "rules",
        ] {
            assert_eq!(bind(&plan, &codex.join(name)), Some(false), "{name}");
            assert!(plan.created.contains(&codex.join(name)), "{name}");
        }
        // Gemini CLI's, started, exists: the same.
        let gemini = i.home.join(".gemini");
        assert_eq!(bind(&plan, &gemini), Some(true));
        assert_eq!(bind(&plan, &gemini.join("settings.json")), Some(false));
        assert_eq!(
            bind(&plan, &gemini.join("trustedFolders.json")),
            Some(false)
        );
        assert_eq!(bind(&plan, &gemini.join("tmp")), None);
        create(&plan).unwrap();
        assert_eq!(
            std::fs::read_to_string(codex.join("hooks.json")).unwrap(),
            "{}\n"
        );
        assert_eq!(
            std::fs::read_to_string(codex.join("config.toml")).unwrap(),
            ""
        );
        assert!(codex.join("skills").is_dir());
    }

    #[test]
    fn an_agents_folder_in_a_writable_one_is_made_to_be_protected() {
        let dir = tempfile::tempdir().unwrap();
        let mut i = inputs(dir.path());
        // `CODEX_HOME` in the cache, which stays writable: made, so that nothing
        // can plant a config.toml there.
        i.agent_homes[1].dir = i.home.join(".cache/codex-home");
        let plan = Plan::new(&i);
        let codex = &i.agent_homes[1].dir;
        assert!(plan.created.contains(codex));
        assert_eq!(bind(&plan, &codex.join("config.toml")), Some(false));
        let at = |p: &Path| plan.binds.iter().position(|b| b.path == p).unwrap();
        assert!(at(&i.home.join(".cache")) < at(&codex.join("config.toml")));
    }

    #[test]
    fn hitls_secrets_are_masked_and_its_settings_shown() {
        let dir = tempfile::tempdir().unwrap();
        let i = inputs(dir.path());
        let plan = Plan::new(&i);
        assert_eq!(plan.masks[0].dir, i.config_dir);
        assert_eq!(plan.masks[0].keep, ["config.toml", "asker-token"]);
        assert_eq!(plan.masks[1].dir, i.data_dir);
        assert!(plan.masks[1].keep.is_empty());
    }

    #[test]
    fn a_project_and_home_in_a_temp_folder_are_carried_into_the_private_one() {
        let dir = tempfile::tempdir_in("/tmp").unwrap();
        let i = inputs(dir.path());
        let plan = Plan::new(&i);
        assert!(plan.private.contains(&PathBuf::from("/tmp")));
        // The topmost paths only: the project and the home, not what is below them.
        let mut carried = plan.carried.clone();
        carried.sort();
        assert_eq!(carried, [i.home.clone(), i.project.clone()]);
    }
}
