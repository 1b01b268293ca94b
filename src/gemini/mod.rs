//! `hitl init --gemini`: hitl's hooks in Gemini CLI's `settings.json` (the
//! project's `.gemini/settings.json`, or `~/.gemini/settings.json` for every
//! project), everything else there kept, taken out again with `--remove`.
//!
//! Gemini's hooks have Claude Code's shape (`{"hooks": {"BeforeTool": [{"matcher": …,
//! "hooks": [{"type": "command", "command": …, "timeout": …}]}]}}`), so they are
//! merged and taken out by `claude::settings`; its events have names of their own
//! (`BeforeTool` is hitl's `pre-tool-use`), and its timeouts are milliseconds. A
//! project's hooks run only in a folder the user trusts (Gemini asks, and warns once
//! about the hooks it found).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde_json::Value;

use crate::claude::settings;

/// Gemini CLI's events hitl's hook runs for, and the `hitl hook` event each is:
/// the first decides (a shell command or a write asked of the human), the rest only
/// note what the agent does.
pub const EVENTS: &[(&str, &str)] = &[
    ("BeforeTool", "pre-tool-use"),
    ("AfterTool", "post-tool-use"),
    ("BeforeAgent", "user-prompt-submit"),
    ("AfterAgent", "stop"),
    ("Notification", "notification"),
    ("SessionStart", "session-start"),
    ("SessionEnd", "session-end"),
];

/// Gemini CLI's folder of the user's: `.gemini` in `$GEMINI_CLI_HOME`, else in the
/// home.
pub fn home() -> Result<PathBuf> {
    let home = std::env::var_os("GEMINI_CLI_HOME")
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var_os("HOME").filter(|h| !h.is_empty()))
        .context("HOME is not set")?;
    Ok(PathBuf::from(home).join(".gemini"))
}

/// Where hitl's hooks go: the project's `.gemini/settings.json`, or the user's for
/// every project (`user`).
pub fn settings_file(project: &Path, user: bool) -> Result<PathBuf> {
    Ok(if user {
        home()?.join("settings.json")
    } else {
        project.join(".gemini/settings.json")
    })
}

/// Merges hitl's hooks into the settings at `path` (`timeout`: seconds Gemini waits
/// for a decision), or takes them out; `kept`: where the file's bytes from before
/// are kept. Returns whether it changed.
pub fn wire(path: &Path, kept: &Path, program: &str, timeout: u64, install: bool) -> Result<bool> {
    let every: Vec<(&str, String, u64)> = EVENTS
        .iter()
        .map(|&(event, arg)| {
            let seconds = if arg == "pre-tool-use" {
                timeout
            } else {
                settings::OBSERVE_TIMEOUT
            };
            (event, format!("--agent gemini {arg}"), seconds * 1000)
        })
        .collect();
    settings::change_file(path, kept, install, |s| {
        if install {
            settings::install_events(s, program, &every)
                .with_context(|| format!("merging hitl's hooks into {}", path.display()))
        } else {
            Ok(settings::remove(s))
        }
    })
}

/// Whether Gemini CLI trusts the folder `dir`, and so runs the hooks in its
/// `.gemini/settings.json` (read as Gemini 0.61 reads it): `GEMINI_CLI_TRUST_WORKSPACE`,
/// folder trust switched off in the user's settings (`security.folderTrust.enabled =
/// false`: every folder trusted), else the longest rule of `trustedFolders.json`
/// (`$GEMINI_CLI_TRUSTED_FOLDERS_PATH`) whose folder holds `dir` (`TRUST_PARENT`: the
/// parent of the one named) — `DO_NOT_TRUST` or none: not trusted.
pub fn trusts_folder(dir: &Path) -> Result<bool> {
    match std::env::var("GEMINI_CLI_TRUST_WORKSPACE").as_deref() {
        Ok("true") => return Ok(true),
        Ok("false") => return Ok(false),
        _ => {}
    }
    if std::env::var("GEMINI_RESTRICTED_MODE").as_deref() == Ok("true") {
        return Ok(false);
    }
    let home = home()?;
    let user = settings::read(&home.join("settings.json"))?;
    let file = std::env::var_os("GEMINI_CLI_TRUSTED_FOLDERS_PATH")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| home.join("trustedFolders.json"));
    Ok(trusted_by(dir, &user, &settings::read(&file)?))
}

/// [`trusts_folder`] by the user's settings and the trusted folders' rules.
fn trusted_by(dir: &Path, user: &Value, rules: &Value) -> bool {
    if user.pointer("/security/folderTrust/enabled") == Some(&Value::Bool(false)) {
        return true;
    }
    let real = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let dir = real(dir);
    let mut best: Option<(usize, &str)> = None;
    for (rule, level) in rules.as_object().into_iter().flatten() {
        let level = level.as_str().unwrap_or("");
        let named = Path::new(rule);
        let folder = if level == "TRUST_PARENT" {
            named.parent().unwrap_or(named)
        } else {
            named
        };
        if dir.starts_with(real(folder)) && best.is_none_or(|(len, _)| rule.len() > len) {
            best = Some((rule.len(), level));
        }
    }
    matches!(best, Some((_, "TRUST_FOLDER" | "TRUST_PARENT")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_folder_is_trusted_by_the_longest_rule_that_holds_it() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let (work, inner, other) = (
            root.join("work"),
            root.join("work/secret"),
            root.join("x/y"),
        );
        for d in [&work, &inner, &other] {
            std::fs::create_dir_all(d).unwrap();
        }
        let rules = serde_json::json!({
            work.display().to_string(): "TRUST_FOLDER",
            inner.display().to_string(): "DO_NOT_TRUST",
            root.join("x/sibling").display().to_string(): "TRUST_PARENT",
        });
        let user = serde_json::json!({});
        assert!(trusted_by(&work, &user, &rules));
        assert!(trusted_by(&work.join("sub"), &user, &rules));
        assert!(!trusted_by(&inner, &user, &rules));
        assert!(
            trusted_by(&other, &user, &rules),
            "TRUST_PARENT: the parent's"
        );
        assert!(!trusted_by(&root, &user, &rules));
        // Folder trust switched off: every folder.
        let off = serde_json::json!({"security": {"folderTrust": {"enabled": false}}});
        assert!(trusted_by(&root, &off, &rules));
    }

    #[test]
    fn wiring_keeps_the_users_settings_and_removing_puts_them_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(".gemini/settings.json");
        let kept = dir.path().join("kept.json");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let theirs = "{\n  \"theme\": \"GitHub\"\n}\n";
        std::fs::write(&path, theirs).unwrap();
        assert!(wire(&path, &kept, "hitl", 180, true).unwrap());
        let written: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(written["theme"], "GitHub");
        let handler = &written["hooks"]["BeforeTool"][0]["hooks"][0];
        assert_eq!(handler["timeout"], 180_000, "milliseconds");
        assert!(
            handler["command"]
                .as_str()
                .unwrap()
                .contains("hitl hook --agent gemini pre-tool-use"),
            "{handler}"
        );
        assert!(!wire(&path, &kept, "hitl", 180, true).unwrap());
        assert!(wire(&path, &kept, "hitl", 180, false).unwrap());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), theirs);
    }
}
