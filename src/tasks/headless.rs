//! Headless sessions, for servers without a terminal: `--command "codex exec"` runs
//! Codex CLI once per task (`--json`, the prompt on its stdin, resumed with `codex
//! exec resume`; its tool calls guarded by the hooks `hitl init --codex` wires),
//! `--command "gemini -p --approval-mode yolo"` Gemini CLI (`--output-format
//! stream-json`, the prompt on its stdin, resumed with `--resume`; guarded by the
//! hooks `hitl init --gemini` wires), and
//! `--command "claude -p"` runs Claude Code in print mode once per task, the typed text on its stdin, with
//! `--output-format stream-json --verbose` (its output kept as the task's
//! `stream.jsonl`: turns, tokens, cost and a transcript to peek at) and
//! `--permission-prompt-tool mcp__hitl__permission_prompt` through hitl's own MCP
//! server, so a tool that needs permission is asked of a person through the broker.
//! The queue, states and results are the same as in tmux: the task is done when its
//! summary appears; a run that ends without one is resumed once with the reminder,
//! then given the fallback summary.
//!
//! The agent runs in a process group of its own (an interrupt reaches the MCP
//! servers it started) with its output going to files, not pipes: after `kill -9` of
//! the listener it works on, and the next listener follows it by pid and start time.

use std::path::Path;

use super::agent::{is_claude, is_codex, is_gemini};
use super::files::TaskFiles;
use super::usage;
use crate::runtime::process::{ProcessRef, is_alive};

/// The tool `claude -p` asks for permission through.
pub const PERMISSION_TOOL: &str = "mcp__hitl__permission_prompt";

/// Whether `command` runs Claude Code in print mode (`claude -p`), Codex CLI's
/// `codex exec` or Gemini CLI's `gemini -p`.
pub fn is_headless(command: &[String]) -> bool {
    let args = || command.iter().skip(1);
    (is_claude(command) && args().any(|a| a == "-p" || a == "--print"))
        || (is_codex(command) && args().any(|a| a == "exec"))
        || (is_gemini(command) && args().any(|a| a == "-p" || a == "--prompt"))
}

/// Why a headless `command` cannot be run as one, if it cannot: its output must be
/// the stream hitl reads.
pub fn check(command: &[String]) -> Result<(), String> {
    if is_codex(command) {
        return Ok(());
    }
    let format = command
        .iter()
        .position(|a| a == "--output-format" || (a == "-o" && is_gemini(command)))
        .and_then(|i| command.get(i + 1))
        .map(String::as_str)
        .or_else(|| {
            command
                .iter()
                .find_map(|a| a.strip_prefix("--output-format="))
        });
    match format {
        None | Some("stream-json") => Ok(()),
        Some(other) => Err(format!(
            "a headless session reads `--output-format stream-json`, not {other:?}: leave the flag out and hitl adds it"
        )),
    }
}

/// The command line of one run: the session's command and what hitl needs of it.
pub fn command_line(session: &[String], mcp_config: &Path, resume: Option<&str>) -> Vec<String> {
    let has = |flag: &str| {
        session
            .iter()
            .any(|a| a == flag || a.starts_with(&format!("{flag}=")))
    };
    if is_codex(session) {
        // `codex exec [its flags] [resume] --json --skip-git-repo-check [SESSION] -`:
        // its events as JSON lines, the prompt on stdin, any folder (a task's
        // workspace need not be a repository); the session's own flags (`-s
        // workspace-write`) stay before `resume`, where `codex exec` reads them.
        let mut line = session.to_vec();
        if resume.is_some() {
            line.push("resume".into());
        }
        if !has("--json") {
            line.push("--json".into());
        }
        if !has("--skip-git-repo-check") {
            line.push("--skip-git-repo-check".into());
        }
        if let Some(id) = resume {
            line.push(id.to_string());
        }
        line.push("-".into());
        return line;
    }
    if is_gemini(session) {
        // `gemini [its flags] -p "" --output-format stream-json [--resume ID]`: the
        // prompt on stdin (`-p`'s text is appended to it: a bare `-p` gets an empty
        // one), its events as JSON lines.
        let mut line = Vec::with_capacity(session.len() + 5);
        let mut args = session.iter().peekable();
        while let Some(a) = args.next() {
            line.push(a.clone());
            if (a == "-p" || a == "--prompt") && args.peek().is_none_or(|n| n.starts_with('-')) {
                line.push(String::new());
            }
        }
        if !has("--output-format") && !has("-o") {
            line.extend(["--output-format".into(), "stream-json".into()]);
        }
        if let Some(id) = resume {
            line.extend(["--resume".into(), id.to_string()]);
        }
        return line;
    }
    let mut line = session.to_vec();
    if !has("--output-format") {
        line.extend(["--output-format".into(), "stream-json".into()]);
    }
    if !has("--verbose") {
        line.push("--verbose".into());
    }
    if !has("--permission-prompt-tool") {
        line.extend(["--permission-prompt-tool".into(), PERMISSION_TOOL.into()]);
    }
    // `=`: the flag takes several values, and must not take the next argument too.
    line.push(format!("--mcp-config={}", mcp_config.display()));
    if let Some(id) = resume {
        line.extend(["--resume".into(), id.to_string()]);
    }
    line
}

/// The MCP configuration headless agents get: hitl's server, asking through the
/// listener of `project`.
pub fn mcp_config(exe: &Path, project: &Path) -> serde_json::Value {
    serde_json::json!({
        "mcpServers": {
            "hitl": {
                "command": exe,
                "args": ["mcp", "--dir", project],
            }
        }
    })
}

/// A headless session's "screen": the output of its running (or last) task, read,
/// its last `lines` lines.
pub fn screen(files: &TaskFiles, session: &str, lines: usize) -> String {
    let tasks = files.load_tasks();
    let Some(last) = tasks
        .iter()
        .rev()
        .find(|t| t.session == session && t.started_at.is_some())
    else {
        return String::new();
    };
    let text = usage::render_stream(&files.run_files(&last.id).stream);
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// Whether the process `pid_file` names still runs.
pub fn running(pid_file: &Path) -> Option<ProcessRef> {
    let text = std::fs::read_to_string(pid_file).ok()?;
    let mut words = text.split_whitespace();
    let pid: u32 = words.next()?.parse().ok()?;
    let start: u64 = words.next()?.parse().ok()?;
    is_alive(pid, Some(start)).then_some(ProcessRef {
        pid,
        start_time: start,
    })
}

/// Sends `signal` to the process group of `agent` (its MCP servers too).
pub fn signal(agent: ProcessRef, signal: nix::sys::signal::Signal) {
    if !is_alive(agent.pid, Some(agent.start_time)) {
        return;
    }
    let group = nix::unistd::Pid::from_raw(agent.pid as i32);
    if let Err(e) = nix::sys::signal::killpg(group, signal) {
        tracing::warn!("tasks: signalling agent {}: {e}", agent.pid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn print_mode_claude_is_headless() {
        assert!(is_headless(&words("claude -p")));
        assert!(is_headless(&words("/opt/bin/claude --print --model x")));
        assert!(!is_headless(&words("claude")));
        assert!(!is_headless(&words("aider -p")));
        assert!(is_headless(&words("codex exec")));
        assert!(!is_headless(&words("codex")));
        assert!(is_headless(&words(
            "/usr/bin/gemini -p --approval-mode yolo"
        )));
        assert!(!is_headless(&words("gemini")));
    }

    #[test]
    fn gemini_reads_the_prompt_on_stdin_and_resumes_its_session() {
        let m = Path::new("/m");
        let mut expected = words("gemini -p");
        expected.push(String::new());
        expected.extend(words("--approval-mode yolo --output-format stream-json"));
        assert_eq!(
            command_line(&words("gemini -p --approval-mode yolo"), m, None),
            expected
        );
        let line = command_line(&words("gemini --approval-mode yolo -p"), m, Some("s-1"));
        assert_eq!(
            line[3..],
            [
                "-p",
                "",
                "--output-format",
                "stream-json",
                "--resume",
                "s-1"
            ]
        );
        // Its own text after `-p` is kept (appended to the task's).
        assert_eq!(
            command_line(&words("gemini -p terse -o stream-json"), m, None),
            words("gemini -p terse -o stream-json")
        );
        assert!(check(&words("gemini -p -o text")).is_err());
        assert!(check(&words("gemini -p")).is_ok());
    }

    #[test]
    fn codex_exec_reads_the_prompt_on_stdin_and_resumes_its_thread() {
        let m = Path::new("/m");
        assert_eq!(
            command_line(&words("codex exec -s workspace-write"), m, None),
            words("codex exec -s workspace-write --json --skip-git-repo-check -")
        );
        assert_eq!(
            command_line(&words("codex exec"), m, Some("t-1")),
            words("codex exec resume --json --skip-git-repo-check t-1 -")
        );
        assert!(check(&words("codex exec")).is_ok());
    }

    #[test]
    fn hitl_adds_what_it_reads_and_asks_through() {
        let line = command_line(&words("claude -p"), Path::new("/p/mcp.json"), Some("s-1"));
        assert_eq!(
            line,
            words(
                "claude -p --output-format stream-json --verbose --permission-prompt-tool \
                 mcp__hitl__permission_prompt --mcp-config=/p/mcp.json --resume s-1"
            )
        );
        let own = words("claude -p --permission-prompt-tool mcp__x__y --verbose");
        let line = command_line(&own, Path::new("/m"), None);
        assert_eq!(
            line.iter()
                .filter(|a| *a == "--permission-prompt-tool")
                .count(),
            1
        );
        assert_eq!(line.iter().filter(|a| *a == "--verbose").count(), 1);
        assert!(check(&words("claude -p --output-format text")).is_err());
        assert!(check(&words("claude -p --output-format=json")).is_err());
        assert!(check(&words("claude -p --output-format stream-json")).is_ok());
    }
}
