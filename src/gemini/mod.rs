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

#[cfg(test)]
mod tests {
    use super::*;

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
