//! `hitl init --codex`: hitl's hooks in Codex CLI's `hooks.json` (the project's
//! `.codex/hooks.json`, or `$CODEX_HOME/hooks.json` for every project), and their
//! trust recorded in `$CODEX_HOME/config.toml`, since Codex runs no hook nobody
//! trusted (and `codex exec` skips one without a word).
//!
//! Codex's `hooks.json` has Claude Code's shape (`{"hooks": {"PreToolUse": [{"matcher":
//! …, "hooks": [{"type": "command", "command": …, "timeout": …}]}]}}`), so it is merged
//! and taken out as Claude Code's settings are (`claude::settings`), with the file's
//! bytes from before kept for `--remove`. Trust is per handler:
//! `[hooks.state."FILE:EVENT:GROUP:HANDLER"] trusted_hash = "sha256:…"`, the SHA-256 of
//! the handler's identity as compact JSON with sorted keys: `{"event_name":
//! "pre_tool_use", "hooks": [{"async": false, "command": …, "timeout": …, "type":
//! "command"}], "matcher": …}` (checked against `codex app-server`'s `hooks/list`,
//! which reports the hash Codex computes).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::claude::settings;

/// The events hitl decides on, as Codex names them, and as `hitl hook` takes them.
pub const HOOKED_EVENTS: &[(&str, &str)] = &[
    ("PreToolUse", "pre-tool-use"),
    ("PermissionRequest", "permission-request"),
];

/// The events hitl only notes, for the activity feed and the agents' status.
pub const OBSERVED_EVENTS: &[(&str, &str)] = &[
    ("PostToolUse", "post-tool-use"),
    ("UserPromptSubmit", "user-prompt-submit"),
    ("Stop", "stop"),
    ("SessionStart", "session-start"),
];

/// Codex's folder of settings: `$CODEX_HOME`, else `~/.codex`.
pub fn home() -> Result<PathBuf> {
    if let Some(h) = std::env::var_os("CODEX_HOME").filter(|h| !h.is_empty()) {
        return Ok(PathBuf::from(h));
    }
    let home = std::env::var_os("HOME").context("HOME is not set")?;
    Ok(PathBuf::from(home).join(".codex"))
}

/// Where hitl's hooks go: the project's `.codex/hooks.json`, or `$CODEX_HOME`'s for
/// every project (`user`).
pub fn hooks_file(project: &Path, user: bool) -> Result<PathBuf> {
    Ok(if user {
        home()?.join("hooks.json")
    } else {
        project.join(".codex/hooks.json")
    })
}

/// Merges hitl's hooks into the `hooks.json` at `path` (`timeout`: seconds Codex
/// waits for a decision) and trusts them in `config`, Codex's `config.toml`; or
/// takes both out again. `kept`: where the file's bytes from before are kept.
/// Returns whether `hooks.json` changed.
pub fn wire(
    path: &Path,
    kept: &Path,
    config: &Path,
    program: &str,
    timeout: u64,
    install: bool,
) -> Result<bool> {
    let every: Vec<(&str, String, u64)> = HOOKED_EVENTS
        .iter()
        .map(|&(event, arg)| (event, format!("--agent codex {arg}"), timeout))
        .chain(OBSERVED_EVENTS.iter().map(|&(event, arg)| {
            (
                event,
                format!("--agent codex {arg}"),
                settings::OBSERVE_TIMEOUT,
            )
        }))
        .collect();
    // The trust of hitl's handlers as they were, to take out what they no longer are.
    let before = trusted_keys(path, &settings::read(path)?);
    let changed = settings::change_file(path, kept, install, |s| {
        if install {
            settings::install_events(s, program, &every)
                .with_context(|| format!("merging hitl's hooks into {}", path.display()))
        } else {
            Ok(settings::remove(s))
        }
    })?;
    let now = if install {
        trusted_keys(path, &settings::read(path)?)
    } else {
        Vec::new()
    };
    trust(config, &before, &now)?;
    Ok(changed)
}

/// Each of hitl's handlers in `hooks` (the file at `path`) with its trust key and
/// hash.
fn trusted_keys(path: &Path, hooks: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let Some(events) = hooks.get("hooks").and_then(Value::as_object) else {
        return out;
    };
    for (event, groups) in events {
        for (g, group) in groups.as_array().into_iter().flatten().enumerate() {
            let matcher = group.get("matcher").and_then(Value::as_str);
            for (h, handler) in group
                .get("hooks")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .enumerate()
            {
                let Some(command) = handler.get("command").and_then(Value::as_str) else {
                    continue;
                };
                if !command.contains(" hook --agent codex ") {
                    continue;
                }
                let timeout = handler
                    .get("timeout")
                    .and_then(Value::as_u64)
                    .unwrap_or(600);
                let snake = snake_case(event);
                let key = format!("{}:{snake}:{g}:{h}", path.display());
                out.push((key, trust_hash(&snake, matcher, command, timeout)));
            }
        }
    }
    out
}

/// `PreToolUse` → `pre_tool_use`, as Codex names events in trust keys.
fn snake_case(event: &str) -> String {
    let mut out = String::new();
    for (i, c) in event.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// The hash Codex keeps for a trusted handler: SHA-256 over the compact JSON, keys
/// sorted, of the handler's identity.
pub fn trust_hash(event: &str, matcher: Option<&str>, command: &str, timeout: u64) -> String {
    // serde_json's maps keep keys sorted (no `preserve_order` for `json!`'s own
    // maps is assumed: the identity is built in sorted order by hand).
    let mut identity = serde_json::Map::new();
    identity.insert("event_name".into(), json!(event));
    identity.insert(
        "hooks".into(),
        json!([{ "async": false, "command": command, "timeout": timeout, "type": "command" }]),
    );
    if let Some(m) = matcher {
        identity.insert("matcher".into(), json!(m));
    }
    let text = Value::Object(identity).to_string();
    let digest = Sha256::digest(text.as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// Writes `now`'s trust into Codex's `config.toml` at `config`, and takes out what
/// `before` trusted that `now` does not; everything else in the file is kept as it
/// is.
fn trust(config: &Path, before: &[(String, String)], now: &[(String, String)]) -> Result<()> {
    let mut doc = crate::config::toml_to_edit(config)?;
    // toml_edit writes back what it read, byte for byte: an unchanged file is left.
    let read = doc.to_string();
    let hooks = doc
        .entry("hooks")
        .or_insert_with(|| toml_edit::Item::Table(implicit_table()));
    let Some(hooks) = hooks.as_table_mut() else {
        anyhow::bail!("{}: [hooks] is not a table", config.display());
    };
    let state = hooks
        .entry("state")
        .or_insert_with(|| toml_edit::Item::Table(implicit_table()));
    let Some(state) = state.as_table_mut() else {
        anyhow::bail!("{}: [hooks.state] is not a table", config.display());
    };
    for (key, _) in before {
        if !now.iter().any(|(k, _)| k == key) {
            state.remove(key);
        }
    }
    for (key, hash) in now {
        let entry = state
            .entry(key)
            .or_insert_with(|| toml_edit::Item::Table(toml_edit::Table::new()));
        if let Some(t) = entry.as_table_mut() {
            t["trusted_hash"] = toml_edit::value(hash.as_str());
        }
    }
    if state.is_empty() {
        hooks.remove("state");
    }
    if hooks.is_empty() {
        doc.remove("hooks");
    }
    let out = doc.to_string();
    if out == read {
        return Ok(());
    }
    if let Some(dir) = config.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let dir = config.parent().unwrap_or(Path::new("."));
    crate::spool::write_atomic(dir, config, out.as_bytes(), true)
        .with_context(|| format!("writing {}", config.display()))
}

fn implicit_table() -> toml_edit::Table {
    let mut t = toml_edit::Table::new();
    t.set_implicit(true);
    t
}

/// hitl's handlers in the `hooks.json` at `path` (how many), and the keys of those
/// whose trust `config` does not record as they are now: Codex skips those.
pub fn untrusted(path: &Path, config: &Path) -> Result<(usize, Vec<String>)> {
    let ours = trusted_keys(path, &settings::read(path)?);
    let recorded: toml::Table = match std::fs::read_to_string(config) {
        Ok(text) => text
            .parse()
            .with_context(|| format!("reading {} (Codex's settings)", config.display()))?,
        Err(_) => toml::Table::new(),
    };
    let state = recorded
        .get("hooks")
        .and_then(|h| h.get("state"))
        .and_then(|s| s.as_table());
    let stale = ours
        .iter()
        .filter(|(key, hash)| {
            state
                .and_then(|s| s.get(key))
                .and_then(|e| e.get("trusted_hash"))
                .and_then(|h| h.as_str())
                != Some(hash.as_str())
        })
        .map(|(key, _)| key.clone())
        .collect();
    Ok((ours.len(), stale))
}

/// Whether Codex trusts the project at `dir` (`[projects."DIR"] trust_level =
/// "trusted"` in its `config.toml`): it loads a project's `.codex/` only then.
pub fn trusts_project(config: &Path, dir: &Path) -> bool {
    let Ok(text) = std::fs::read_to_string(config) else {
        return false;
    };
    let Ok(doc) = text.parse::<toml_edit::DocumentMut>() else {
        return false;
    };
    doc.get("projects")
        .and_then(|p| p.get(dir.display().to_string()))
        .and_then(|p| p.get("trust_level"))
        .and_then(|t| t.as_str())
        == Some("trusted")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The hash `codex app-server`'s `hooks/list` reported (Codex 0.171.0) for a
    /// handler `/tmp/cx/hook.sh` under PreToolUse with matcher `Bash`.
    #[test]
    fn the_trust_hash_is_codexs() {
        assert_eq!(
            trust_hash("pre_tool_use", Some("Bash"), "/tmp/cx/hook.sh", 600),
            "sha256:0a12bcf163ac8b0615908cf34efdddeb696fa772b50d6b31628a24a649622b54"
        );
        assert_eq!(snake_case("PermissionRequest"), "permission_request");
    }

    #[test]
    fn wiring_trusts_each_handler_and_removing_it_leaves_the_files_as_they_were() {
        let dir = tempfile::tempdir().unwrap();
        let hooks = dir.path().join(".codex/hooks.json");
        let kept = dir.path().join("kept.json");
        let config = dir.path().join("home/config.toml");
        std::fs::create_dir_all(config.parent().unwrap()).unwrap();
        let theirs = "model = \"o3\"   # mine\n\n[projects.\"/w\"]\ntrust_level = \"trusted\"\n";
        std::fs::write(&config, theirs).unwrap();
        assert!(wire(&hooks, &kept, &config, "hitl", 180, true).unwrap());
        let text = std::fs::read_to_string(&config).unwrap();
        let doc: toml::Table = text.parse().unwrap();
        let state = doc["hooks"]["state"].as_table().unwrap();
        assert_eq!(state.len(), HOOKED_EVENTS.len() + OBSERVED_EVENTS.len());
        let key = format!("{}:pre_tool_use:0:0", hooks.display());
        let written: Value =
            serde_json::from_str(&std::fs::read_to_string(&hooks).unwrap()).unwrap();
        let handler = &written["hooks"]["PreToolUse"][0]["hooks"][0];
        assert_eq!(
            state[&key]["trusted_hash"].as_str().unwrap(),
            trust_hash(
                "pre_tool_use",
                None,
                handler["command"].as_str().unwrap(),
                180
            )
        );
        assert!(text.starts_with(theirs), "the rest kept as it was: {text}");
        // Again: nothing changes.
        assert!(!wire(&hooks, &kept, &config, "hitl", 180, true).unwrap());
        // Removed: the settings as they were, byte for byte.
        assert!(wire(&hooks, &kept, &config, "hitl", 180, false).unwrap());
        assert_eq!(std::fs::read_to_string(&config).unwrap(), theirs);
        assert!(trusts_project(&config, Path::new("/w")));
        assert_eq!(untrusted(&hooks, &config).unwrap(), (0, vec![]));
        // Put in, then the trust lost: every handler would be skipped.
        wire(&hooks, &kept, &config, "hitl", 180, true).unwrap();
        assert_eq!(untrusted(&hooks, &config).unwrap().1.len(), 0);
        std::fs::write(&config, theirs).unwrap();
        let (ours, stale) = untrusted(&hooks, &config).unwrap();
        assert_eq!((ours, stale.len()), (6, 6));
        assert!(!trusts_project(&config, Path::new("/x")));
    }
}
