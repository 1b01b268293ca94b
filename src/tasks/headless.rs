//! Headless sessions, for servers without a terminal: `--command "claude -p"` runs
//! Claude Code in print mode once per task, the typed text on its stdin, with
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

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Instant;

use anyhow::{Context, Result};
use tokio::io::AsyncWriteExt;

use super::agent::{is_claude, shell_quote};
use super::files::TaskFiles;
use super::record::TaskState;
use super::runner::{Command, Ending, Runner};
use super::usage;
use crate::runtime::process::{ProcessRef, is_alive, start_time};

/// The tool `claude -p` asks for permission through.
pub const PERMISSION_TOOL: &str = "mcp__hitl__permission_prompt";

/// Whether `command` runs Claude Code in print mode (`claude -p`).
pub fn is_headless(command: &[String]) -> bool {
    is_claude(command) && command.iter().skip(1).any(|a| a == "-p" || a == "--print")
}

/// Why a headless `command` cannot be run as one, if it cannot: its output must be
/// the stream hitl reads.
pub fn check(command: &[String]) -> Result<(), String> {
    let format = command
        .iter()
        .position(|a| a == "--output-format")
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
    let mut line = session.to_vec();
    let has = |flag: &str| {
        session
            .iter()
            .any(|a| a == flag || a.starts_with(&format!("{flag}=")))
    };
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

/// One run's files: where its output goes.
pub struct RunFiles {
    /// stream-json output (appended to by each run of the task).
    pub stream: PathBuf,
    /// Its stderr.
    pub stderr: PathBuf,
    /// `PID START_TIME` of the running agent.
    pub pid: PathBuf,
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

impl Runner {
    /// Starts task `id`'s run in headless session `name`: `prompt` on the agent's
    /// stdin, resuming Claude Code's conversation `resume` if given. Its exit comes
    /// back as [`Command::Exited`].
    pub(super) fn run_headless(
        &mut self,
        name: &str,
        id: &str,
        prompt: String,
        resume: Option<&str>,
    ) -> Result<()> {
        let session = self.sessions[name].clone();
        let files = self.files.run_files(id);
        let config = self.files.mcp_config();
        let project = self.files.project();
        std::fs::write(
            &config,
            serde_json::to_vec_pretty(&mcp_config(&self.exe, &project))?,
        )
        .with_context(|| format!("writing {}", config.display()))?;
        let line = command_line(&session.command, &config, resume);
        let open = |path: &Path| {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .with_context(|| format!("opening {}", path.display()))
        };
        let mut command = tokio::process::Command::new(&line[0]);
        command
            .args(&line[1..])
            .current_dir(&session.workspace)
            .env("HITL_TASK_SESSION", name)
            .env("HITL_TASK_EVENTS", self.files.events_dir())
            .stdin(Stdio::piped())
            .stdout(open(&files.stream)?)
            .stderr(open(&files.stderr)?)
            .process_group(0);
        for var in super::nesting::inherited() {
            command.env_remove(var);
        }
        let mut child = command.spawn().with_context(|| {
            format!(
                "starting {}",
                line.iter()
                    .map(|a| shell_quote(a))
                    .collect::<Vec<_>>()
                    .join(" ")
            )
        })?;
        let pid = child.id().unwrap_or(0);
        let agent = ProcessRef {
            pid,
            start_time: start_time(pid).unwrap_or(0),
        };
        std::fs::write(&files.pid, format!("{} {}\n", agent.pid, agent.start_time))
            .with_context(|| format!("writing {}", files.pid.display()))?;
        let mut stdin = child.stdin.take();
        let tx = self.tx.clone();
        let task = id.to_string();
        tokio::spawn(async move {
            if let Some(stdin) = stdin.as_mut() {
                let _ = stdin.write_all(prompt.as_bytes()).await;
                let _ = stdin.shutdown().await;
            }
            drop(stdin);
            let _ = child.wait().await;
            let _ = tx.send(Command::Exited { id: task });
        });
        if let Some(l) = self.live.get_mut(name) {
            l.agent = Some(agent);
            l.sent_at = Some(Instant::now());
            l.stopped = false;
        }
        if let Some(t) = self.find_mut(id) {
            t.delivered = true;
        }
        self.save(id);
        Ok(())
    }

    /// Task `id`'s headless run ended (its process exited, or a listener that did not
    /// start it saw it gone): the summary ends the task; without one the run is
    /// resumed once with the reminder, then the task gets the fallback summary.
    pub(super) fn headless_exited(&mut self, id: &str) {
        let files = self.files.run_files(id);
        let end = usage::read_stream(&files.stream);
        let Some(name) = self
            .live
            .iter()
            .find(|(_, l)| l.current.as_deref() == Some(id))
            .map(|(n, _)| n.clone())
        else {
            // Ended by its summary while the agent finished its turn: what the run
            // cost is known now, and the session is free.
            self.usage_after_the_end(id, end.usage);
            return;
        };
        if let Some(l) = self.live.get_mut(&name) {
            l.agent = None;
            l.stopped = true;
        }
        if let Some(t) = self.find_mut(id) {
            t.usage = end.usage.clone();
        }
        if end.session_id.is_some()
            && let Some(s) = self.sessions.get_mut(&name)
            && s.agent_session_id != end.session_id
        {
            s.agent_session_id = end.session_id.clone();
            let s = s.clone();
            let _ = self.files.save_session(&s);
        }
        if let Some((_, ending)) = self.live.get(&name).and_then(|l| l.interrupting.clone()) {
            self.interrupted(&name, ending);
            return;
        }
        self.check_summary(&name);
        if self.live.get(&name).and_then(|l| l.current.as_deref()) != Some(id) {
            self.start_next_everywhere();
            return;
        }
        if end.needs_login() {
            let why = end.result.clone().unwrap_or_else(|| "a login".into());
            self.end(
                id,
                TaskState::AuthRequired,
                None,
                Some(format!("the agent needs a login: {why}")),
            );
            self.start_next_everywhere();
            return;
        }
        let reminded = self.live.get(&name).is_some_and(|l| l.reminded);
        if !reminded && let Some(resume) = end.session_id.clone() {
            if let Some(l) = self.live.get_mut(&name) {
                l.reminded = true;
            }
            let Some(task) = self.find(id).cloned() else {
                return;
            };
            let text = super::prompt::reminder(&task);
            if let Err(e) = self.run_headless(&name, id, text, Some(&resume)) {
                tracing::warn!("tasks: reminding {id}: {e:#}");
            } else {
                return;
            }
        }
        // No summary after the reminder: what the agent did is the fallback's.
        self.interrupted(&name, Ending::Ended);
    }

    /// Reads what task `id`'s headless run has written since the last look: an API
    /// call refused for its credentials stops the run, and the task is
    /// `auth-required` (Claude Code would retry it for minutes).
    pub(super) fn follow_stream(&mut self, name: &str, id: &str) {
        use std::io::{BufRead, Seek};
        let Some(offset) = self.live.get(name).map(|l| l.stream_read) else {
            return;
        };
        let path = self.files.run_files(id).stream;
        let Ok(mut file) = std::fs::File::open(&path) else {
            return;
        };
        if file.seek(std::io::SeekFrom::Start(offset)).is_err() {
            return;
        }
        let mut read = offset;
        let mut refused = None;
        let mut lines = std::io::BufReader::new(file);
        let mut line = String::new();
        // Whole lines only: a line being written is read next time.
        while lines.read_line(&mut line).is_ok_and(|n| n > 0) && line.ends_with('\n') {
            read += line.len() as u64;
            refused = refused.or_else(|| usage::refuses_login(&line));
            line.clear();
        }
        if let Some(l) = self.live.get_mut(name) {
            l.stream_read = read;
        }
        if let Some(why) = refused {
            let agent = self.live.get_mut(name).and_then(|l| l.agent.take());
            if let Some(agent) = agent {
                signal(agent, nix::sys::signal::Signal::SIGTERM);
            }
            self.end(
                id,
                TaskState::AuthRequired,
                None,
                Some(format!("the agent needs a login: {why}")),
            );
            self.start_next_everywhere();
        }
    }

    /// Interrupts a headless run: SIGTERM to its process group, SIGKILL once
    /// [`super::runner::STOP_WITHIN`] has passed ([`Runner::interrupted`]).
    pub(super) fn interrupt_headless(&mut self, name: &str) {
        if let Some(agent) = self.live.get(name).and_then(|l| l.agent) {
            signal(agent, nix::sys::signal::Signal::SIGTERM);
        }
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
