//! `hitl init --claude`: hitl's hooks merged into a project's `.claude/settings.json`
//! and its MCP server into `.mcp.json`, everything already there kept, and taken out
//! again with `--remove`.
//!
//! A handler is hitl's when it is a command whose program is named `hitl` and whose
//! first argument is `hook`; an MCP server is when it is named `hitl` and runs
//! `hitl mcp`: nothing is added to Claude Code's formats to mark them. The bytes of
//! each file from before hitl first changed it are kept in `.helpers/claude/`, so
//! that `--remove` puts back the very file (its spacing and all) when nothing else
//! in it changed meanwhile.

use std::path::Path;

use anyhow::{Context, Result, bail};
use serde_json::{Map, Value, json};

/// The events hitl's hook decides on, as Claude Code names them, and as `hitl hook`
/// takes them: each waits as long as a human may take.
pub const HOOKED_EVENTS: &[(&str, &str)] = &[
    ("PreToolUse", "pre-tool-use"),
    ("PermissionRequest", "permission-request"),
    ("Elicitation", "elicitation"),
];

/// The events hitl's hook only notes, for the activity feed and the agents' status:
/// each takes a couple of milliseconds, and gets [`OBSERVE_TIMEOUT`].
pub const OBSERVED_EVENTS: &[(&str, &str)] = &[
    ("PostToolUse", "post-tool-use"),
    ("Notification", "notification"),
    ("UserPromptSubmit", "user-prompt-submit"),
    ("Stop", "stop"),
    ("SubagentStop", "subagent-stop"),
    ("SessionStart", "session-start"),
    ("SessionEnd", "session-end"),
];

/// Seconds Claude Code gives a hook that only notes its event.
pub const OBSERVE_TIMEOUT: u64 = 10;

/// Seconds Claude Code waits for the hook beyond hitl's own longest wait: a hook it
/// times out lets the call through, so it must never time out first.
pub const TIMEOUT_MARGIN: u64 = 60;

/// The name hitl's MCP server has in `.mcp.json` (its tools are then
/// `mcp__hitl__ask_human`, `mcp__hitl__permission_prompt`…).
pub const MCP_SERVER_NAME: &str = "hitl";

/// Whether `program` (a path or a name, perhaps quoted) is hitl.
fn is_hitl(program: &str) -> bool {
    let program = program.trim_matches(['"', '\'']);
    program.rsplit('/').next().unwrap_or(program) == "hitl"
}

/// Whether `handler` is one of hitl's: its command runs `hitl hook …` (alone, or
/// behind the check [`hook_command`] puts first).
fn is_ours(handler: &Value) -> bool {
    let Some(command) = handler.get("command").and_then(Value::as_str) else {
        return false;
    };
    let words: Vec<&str> = command.split_whitespace().collect();
    words.windows(2).any(|w| is_hitl(w[0]) && w[1] == "hook")
}

/// The command Claude Code runs for `hitl hook ARG`: only when hitl is there, so a
/// teammate without it (the settings shared in a repository, hitl uninstalled)
/// gets no hook error on every event, just Claude Code as it is without hitl.
/// `hitl hook` itself always exits 0.
pub fn hook_command(program: &str, arg: &str) -> String {
    if program == "hitl" {
        format!("command -v hitl >/dev/null 2>&1 && hitl hook {arg} || true")
    } else {
        let quoted = format!("'{}'", program.replace('\'', r"'\''"));
        format!("test -x {quoted} && {quoted} hook {arg} || true")
    }
}

/// Whether `server` (an `mcpServers` entry) is hitl's.
fn is_our_mcp_server(server: &Value) -> bool {
    let program = server.get("command").and_then(Value::as_str).unwrap_or("");
    let first_arg = server
        .get("args")
        .and_then(Value::as_array)
        .and_then(|a| a.first())
        .and_then(Value::as_str);
    is_hitl(program) && first_arg == Some("mcp")
}

/// Where hitl's MCP server is kept in `file`: its root's `mcpServers` (`.mcp.json`,
/// a user's `~/.claude.json`), or a project's entry in `~/.claude.json` (Claude
/// Code's "local" scope: this user, this project).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum McpPlace {
    /// The file's own `mcpServers`.
    Root,
    /// `projects.<folder>.mcpServers`.
    Project(String),
}

/// [`install_mcp`] or [`remove_mcp`] at `place` in `config`. True if anything
/// changed.
pub fn change_mcp(config: &mut Value, place: &McpPlace, program: Option<&str>) -> Result<bool> {
    let McpPlace::Project(folder) = place else {
        return match program {
            Some(p) => install_mcp(config, p),
            None => Ok(remove_mcp(config)),
        };
    };
    let Some(root) = config.as_object_mut() else {
        bail!("the file is not a JSON object");
    };
    let projects = root.entry("projects").or_insert_with(|| json!({}));
    let Some(projects) = projects.as_object_mut() else {
        bail!("\"projects\" is not a JSON object");
    };
    let entry = projects.entry(folder.clone()).or_insert_with(|| json!({}));
    let changed = match program {
        Some(p) => install_mcp(entry, p)?,
        None => remove_mcp(entry),
    };
    // Nothing of ours left behind: an entry, or `projects`, only hitl made.
    if entry.as_object().is_some_and(Map::is_empty) {
        projects.remove(folder);
    }
    if projects.is_empty() {
        root.remove("projects");
    }
    Ok(changed)
}

/// Adds (or brings up to date) hitl's MCP server in `.mcp.json`'s `mcpServers`:
/// `program mcp` on stdio. True if anything changed. A server of another program
/// under hitl's name is left alone, with an error.
pub fn install_mcp(config: &mut Value, program: &str) -> Result<bool> {
    let before = config.clone();
    let Some(root) = config.as_object_mut() else {
        bail!("the file is not a JSON object");
    };
    let servers = root.entry("mcpServers").or_insert_with(|| json!({}));
    let Some(servers) = servers.as_object_mut() else {
        bail!("\"mcpServers\" is not a JSON object");
    };
    let ours = json!({ "type": "stdio", "command": program, "args": ["mcp"] });
    match servers.get(MCP_SERVER_NAME) {
        Some(existing) if !is_our_mcp_server(existing) => bail!(
            "\"mcpServers\".\"{MCP_SERVER_NAME}\" is another program's ({existing}); \
             rename it, then run this again"
        ),
        Some(existing) => {
            // Brought up to date, keeping what the user added (env, …).
            let mut merged = existing.clone();
            for (k, v) in ours.as_object().expect("an object") {
                merged[k] = v.clone();
            }
            servers.insert(MCP_SERVER_NAME.into(), merged);
        }
        None => {
            servers.insert(MCP_SERVER_NAME.into(), ours);
        }
    }
    Ok(*config != before)
}

/// Takes hitl's MCP server out of `.mcp.json`, and `mcpServers` if that leaves it
/// empty. True if anything changed.
pub fn remove_mcp(config: &mut Value) -> bool {
    let Some(root) = config.as_object_mut() else {
        return false;
    };
    let Some(servers) = root.get_mut("mcpServers").and_then(Value::as_object_mut) else {
        return false;
    };
    if !servers.get(MCP_SERVER_NAME).is_some_and(is_our_mcp_server) {
        return false;
    }
    servers.remove(MCP_SERVER_NAME);
    if servers.is_empty() {
        root.remove("mcpServers");
    }
    true
}

/// Adds (or brings up to date) hitl's hook for every event of [`HOOKED_EVENTS`]
/// (`program hook EVENT` with `timeout` seconds) and of [`OBSERVED_EVENTS`]. True if
/// anything changed.
pub fn install(settings: &mut Value, program: &str, timeout: u64) -> Result<bool> {
    let every: Vec<_> = HOOKED_EVENTS
        .iter()
        .map(|&(event, arg)| (event, arg.to_string(), timeout))
        .chain(
            OBSERVED_EVENTS
                .iter()
                .map(|&(event, arg)| (event, arg.to_string(), OBSERVE_TIMEOUT)),
        )
        .collect();
    install_events(settings, program, &every)
}

/// Adds (or brings up to date) hitl's hook for each `(EVENT, ARGS, timeout)`:
/// `program hook ARGS` under `EVENT`, waited for `timeout` seconds. The shape is
/// Claude Code's, which Codex's `hooks.json` shares. True if anything changed.
pub fn install_events(
    settings: &mut Value,
    program: &str,
    every: &[(&str, String, u64)],
) -> Result<bool> {
    let before = settings.clone();
    let Some(root) = settings.as_object_mut() else {
        bail!("the settings are not a JSON object");
    };
    let hooks = root.entry("hooks").or_insert_with(|| json!({}));
    let Some(hooks) = hooks.as_object_mut() else {
        bail!("\"hooks\" is not a JSON object");
    };
    for (event, arg, timeout) in every {
        let handler = json!({
            "type": "command",
            "command": hook_command(program, arg),
            "timeout": timeout,
        });
        let groups = hooks.entry(*event).or_insert_with(|| json!([]));
        let Some(groups) = groups.as_array_mut() else {
            bail!("\"hooks\".\"{event}\" is not a JSON array");
        };
        let mut found = false;
        for group in groups.iter_mut() {
            if let Some(list) = group.get_mut("hooks").and_then(Value::as_array_mut) {
                for h in list.iter_mut().filter(|h| is_ours(h)) {
                    *h = handler.clone();
                    found = true;
                }
            }
        }
        if !found {
            groups.push(json!({ "hooks": [handler] }));
        }
    }
    Ok(*settings != before)
}

/// Takes out every handler of hitl's, and the groups and events left empty by it.
/// True if anything changed.
pub fn remove(settings: &mut Value) -> bool {
    let Some(hooks) = settings.get_mut("hooks").and_then(Value::as_object_mut) else {
        return false;
    };
    let mut changed = false;
    let mut emptied_events = Vec::new();
    for (event, groups) in hooks.iter_mut() {
        let Some(list) = groups.as_array_mut() else {
            continue;
        };
        list.retain_mut(|group| {
            let Some(handlers) = group.get_mut("hooks").and_then(Value::as_array_mut) else {
                return true;
            };
            let n = handlers.len();
            handlers.retain(|h| !is_ours(h));
            if handlers.len() == n {
                return true;
            }
            changed = true;
            !handlers.is_empty()
        });
        if list.is_empty() {
            emptied_events.push(event.clone());
        }
    }
    if changed {
        for e in emptied_events {
            hooks.remove(&e);
        }
        if hooks.is_empty()
            && let Some(root) = settings.as_object_mut()
        {
            root.remove("hooks");
        }
    }
    changed
}

/// The events whose hooks include one of hitl's, and the programs those run
/// (`hitl`, or a path), for `hitl doctor`.
pub fn wired_hooks(settings: &Value) -> (Vec<String>, Vec<String>) {
    let (mut events, mut programs) = (Vec::new(), Vec::<String>::new());
    let Some(hooks) = settings.get("hooks").and_then(Value::as_object) else {
        return (events, programs);
    };
    for (event, groups) in hooks {
        let ours = groups
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|g| g.get("hooks").and_then(Value::as_array))
            .flatten()
            .filter(|h| is_ours(h));
        let mut any = false;
        for handler in ours {
            any = true;
            let command = handler.get("command").and_then(Value::as_str).unwrap_or("");
            let words: Vec<&str> = command.split_whitespace().collect();
            if let Some(w) = words.windows(2).find(|w| is_hitl(w[0]) && w[1] == "hook") {
                let program = w[0].trim_matches('\'').to_string();
                if !programs.contains(&program) {
                    programs.push(program);
                }
            }
        }
        if any {
            events.push(event.clone());
        }
    }
    (events, programs)
}

/// Whether hitl's MCP server is at `place` in `config`.
pub fn has_mcp(config: &Value, place: &McpPlace) -> bool {
    let root = match place {
        McpPlace::Root => Some(config),
        McpPlace::Project(folder) => config.get("projects").and_then(|p| p.get(folder)),
    };
    root.and_then(|r| r.get("mcpServers"))
        .and_then(Value::as_object)
        .is_some_and(|servers| servers.values().any(is_our_mcp_server))
}

/// Reads `path` as a settings object (`{}` when it does not exist).
pub fn read(path: &Path) -> Result<Value> {
    match std::fs::read_to_string(path) {
        Ok(text) if text.trim().is_empty() => Ok(Value::Object(Map::new())),
        Ok(text) => {
            let v: Value = serde_json::from_str(&text).with_context(|| {
                format!(
                    "{} is not valid JSON; fix it, then run this again",
                    path.display()
                )
            })?;
            if !v.is_object() {
                bail!("{} does not hold a JSON object", path.display());
            }
            Ok(v)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Value::Object(Map::new())),
        Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
    }
}

/// Writes `settings` to `path` atomically, pretty-printed; an empty object removes
/// the file instead.
pub fn write(path: &Path, settings: &Value) -> Result<()> {
    if settings.as_object().is_some_and(Map::is_empty) {
        match std::fs::remove_file(path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(e).with_context(|| format!("removing {}", path.display()));
            }
            _ => return Ok(()),
        }
    }
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut text = serde_json::to_string_pretty(settings)?;
    text.push('\n');
    crate::spool::write_atomic(dir, path, text.as_bytes(), true)
        .with_context(|| format!("writing {}", path.display()))
}

/// Changes the JSON file at `path` with `change` (installing hitl's part when
/// `install`, else taking it out), writing it only when `change` says it changed.
/// `kept` holds the file's bytes from before hitl's first change: taking hitl's part
/// out puts those very bytes back when the file then says the same as they do, so
/// a file hitl touched and left is the file the user had, byte for byte.
pub fn change_file(
    path: &Path,
    kept: &Path,
    install: bool,
    change: impl FnOnce(&mut Value) -> Result<bool>,
) -> Result<bool> {
    let mut value = read(path)?;
    if !change(&mut value)? {
        return Ok(false);
    }
    if install {
        if !kept.exists() {
            let before = match std::fs::read_to_string(path) {
                Ok(text) => Some(text),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
                Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
            };
            write(kept, &json!({ "file": path, "before": before }))?;
        }
        write(path, &value)?;
        return Ok(true);
    }
    let before = std::fs::read_to_string(kept)
        .ok()
        .and_then(|t| serde_json::from_str::<Value>(&t).ok())
        .and_then(|k| k.get("before").and_then(Value::as_str).map(str::to_string));
    match before {
        Some(text) if serde_json::from_str::<Value>(&text).ok().as_ref() == Some(&value) => {
            let dir = path.parent().unwrap_or(Path::new("."));
            crate::spool::write_atomic(dir, path, text.as_bytes(), true)
                .with_context(|| format!("writing {}", path.display()))?;
        }
        _ => write(path, &value)?,
    }
    match std::fs::remove_file(kept) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(e).with_context(|| format!("removing {}", kept.display()))
        }
        _ => Ok(true),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn theirs() -> Value {
        json!({
            "permissions": { "allow": ["Bash(npm test)"] },
            "hooks": {
                "PreToolUse": [
                    { "matcher": "Bash", "hooks": [
                        { "type": "command", "command": "./block-rm.sh", "timeout": 30 } ] }
                ],
                "Stop": [ { "hooks": [ { "type": "command", "command": "notify-send done" } ] } ]
            }
        })
    }

    #[test]
    fn install_keeps_everything_else_and_is_idempotent() {
        let mut s = theirs();
        assert!(install(&mut s, "hitl", 360).unwrap());
        let once = s.clone();
        assert!(
            !install(&mut s, "hitl", 360).unwrap(),
            "a second run changes nothing"
        );
        assert_eq!(s, once);
        assert_eq!(s["permissions"], theirs()["permissions"]);
        let pre = s["hooks"]["PreToolUse"].as_array().unwrap();
        assert_eq!(pre.len(), 2);
        assert_eq!(pre[0], theirs()["hooks"]["PreToolUse"][0]);
        assert_eq!(
            pre[1]["hooks"][0],
            json!({ "type": "command", "timeout": 360,
                "command": "command -v hitl >/dev/null 2>&1 && hitl hook pre-tool-use || true" })
        );
        assert_eq!(
            s["hooks"]["PermissionRequest"][0]["hooks"][0]["command"],
            "command -v hitl >/dev/null 2>&1 && hitl hook permission-request || true"
        );
        // An older hitl's plain command is taken as hitl's and brought up to date.
        let mut old = json!({ "hooks": { "Stop": [ { "hooks": [
            { "type": "command", "command": "hitl hook stop", "timeout": 10 } ] } ] } });
        install(&mut old, "hitl", 360).unwrap();
        assert_eq!(old["hooks"]["Stop"].as_array().unwrap().len(), 1, "{old}");
        // A new timeout updates hitl's handlers in place.
        assert!(install(&mut s, "/opt/bin/hitl", 700).unwrap());
        let pre = s["hooks"]["PreToolUse"].as_array().unwrap();
        assert_eq!(pre.len(), 2);
        assert_eq!(pre[1]["hooks"][0]["timeout"], 700);
    }

    #[test]
    fn remove_undoes_exactly_what_install_added() {
        let mut s = theirs();
        install(&mut s, "hitl", 360).unwrap();
        assert!(remove(&mut s));
        assert_eq!(s, theirs());
        assert!(!remove(&mut s), "nothing of hitl's is left");

        let mut empty = json!({});
        install(&mut empty, "hitl", 360).unwrap();
        assert!(remove(&mut empty));
        assert_eq!(empty, json!({}));
    }

    #[test]
    fn the_mcp_server_is_added_once_kept_up_to_date_and_taken_out() {
        let theirs = json!({ "mcpServers": { "db": { "command": "pg-mcp", "args": [] } } });
        let mut c = theirs.clone();
        assert!(install_mcp(&mut c, "hitl").unwrap());
        assert!(!install_mcp(&mut c, "hitl").unwrap(), "idempotent");
        assert_eq!(
            c["mcpServers"]["hitl"],
            json!({ "type": "stdio", "command": "hitl", "args": ["mcp"] })
        );
        c["mcpServers"]["hitl"]["env"] = json!({ "RUST_LOG": "debug" });
        assert!(install_mcp(&mut c, "/opt/hitl").unwrap());
        assert_eq!(c["mcpServers"]["hitl"]["env"]["RUST_LOG"], "debug", "kept");
        assert!(remove_mcp(&mut c));
        assert_eq!(c, theirs);
        assert!(!remove_mcp(&mut c));

        let mut fresh = json!({});
        install_mcp(&mut fresh, "hitl").unwrap();
        assert!(remove_mcp(&mut fresh));
        assert_eq!(fresh, json!({}));

        let mut taken = json!({ "mcpServers": { "hitl": { "command": "other" } } });
        assert!(install_mcp(&mut taken, "hitl").is_err());
        assert!(!remove_mcp(&mut taken), "another program's is left alone");
    }

    #[test]
    fn a_settings_file_of_the_wrong_shape_is_refused() {
        assert!(install(&mut json!([]), "hitl", 1).is_err());
        assert!(install(&mut json!({ "hooks": [] }), "hitl", 1).is_err());
        assert!(install(&mut json!({ "hooks": { "PreToolUse": {} } }), "hitl", 1).is_err());
    }
}
