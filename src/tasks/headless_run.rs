//! How the runner runs a session's headless agent (`claude -p`, see
//! [`super::headless`]): one process per task run, its exit followed, its output
//! read as it grows (a refused login stops it), resumed once with the reminder when
//! it ended without its summary, interrupted by signal.

use std::path::Path;
use std::process::Stdio;
use std::time::Instant;

use anyhow::{Context, Result};
use tokio::io::AsyncWriteExt;

use super::agent::shell_quote;
use super::headless::{command_line, mcp_config, signal};
use super::runner::{Command, Ending, Runner};
use super::usage;
use crate::runtime::process::{ProcessRef, start_time};

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
        let line = self.contained(&session, command_line(&session.command, &config, resume));
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
            let why = end.result.clone().unwrap_or_else(|| "refused".into());
            self.login_needed(id, &why);
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
            self.login_needed(id, &why);
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
