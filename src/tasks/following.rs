//! How the runner follows a session's agent: its hooks' events (a failed login:
//! `auth-required`), the questions it asks a human (on the broker's changes), its
//! first-run screens (asked of a person, their choice made), interrupts, and the
//! agent exiting under a task (started again, resumed where Claude Code saved its
//! conversation).

use std::path::Path;
use std::time::{Duration, Instant};

use jiff::Timestamp;

use super::agent::{AgentEvent, is_claude};
use super::artifacts;
use super::headless::is_headless;
use super::prompt;
use super::record::{Task, TaskState};
use super::runner::{Ending, Runner, millis_since};
use super::summary;

impl Runner {
    /// A question to a human joined or left the broker's queue: one a task's agent
    /// asked (it carries the task's id as a tag) puts the task in `input-required`
    /// (its clock stopped) until the last of them is answered.
    pub(super) fn on_broker_change(&mut self, change: crate::broker::Change) {
        use crate::broker::Change;
        let (request, queued) = match &change {
            Change::Queued(p) => (&p.request, true),
            Change::Finished(f) => {
                if f.pending.request.origin == crate::protocol::Origin::Task {
                    self.first_run_answered(f);
                    return;
                }
                (&f.pending.request, false)
            }
            _ => return,
        };
        let Some((name, id)) = self.live.iter().find_map(|(name, l)| {
            let id = l.current.as_ref()?;
            request
                .tags
                .iter()
                .any(|t| t == id)
                .then(|| (name.clone(), id.clone()))
        }) else {
            return;
        };
        let Some(live) = self.live.get_mut(&name) else {
            return;
        };
        if queued {
            live.asking.insert(request.id.clone());
            let why: String = request.content.chars().take(200).collect();
            self.wait_for_person(&id, &format!("asked a human: {why}"));
        } else {
            live.asking.remove(&request.id);
            if live.asking.is_empty() {
                self.back_to_work(&id);
            }
        }
    }

    /// Task `id` no longer waits for a person: its clock goes on.
    pub(super) fn back_to_work(&mut self, id: &str) {
        let Some(t) = self.find_mut(id) else { return };
        if t.state != TaskState::InputRequired {
            return;
        }
        t.state = TaskState::Working;
        if let Some(since) = t.waiting_since.take() {
            t.waited_ms += millis_since(since);
        }
        t.reason = None;
        self.save(id);
    }

    pub(super) fn on_agent_event(&mut self, ev: AgentEvent) {
        let name = ev.session.clone();
        let Some(session) = self.sessions.get_mut(&name) else {
            return;
        };
        if ev.agent_session_id.is_some() && session.agent_session_id != ev.agent_session_id {
            session.agent_session_id = ev.agent_session_id.clone();
            let s = session.clone();
            let _ = self.files.save_session(&s);
        }
        if let Some(path) = &ev.transcript_path
            && let Some(l) = self.live.get_mut(&name)
        {
            l.transcript = Some(path.into());
        }
        let current = self.live.get(&name).and_then(|l| l.current.clone());
        if ev.event == "StopFailure" {
            let error = ev.error.clone().unwrap_or_default();
            if super::agent::needs_login(&error)
                && let Some(id) = &current
            {
                // Claude Code has given up on its model (after its retries): nothing
                // goes on until someone logs it in, then retries the task.
                let said = ev.message.clone().unwrap_or_default();
                self.login_needed(id, &format!("{error}: {said}"));
                return;
            }
        }
        let event = if ev.event == "StopFailure" {
            // Any other failed turn ends as a stop does.
            "Stop"
        } else {
            ev.event.as_str()
        };
        match event {
            "SessionStart" => {
                if let Some(s) = self.sessions.get_mut(&name) {
                    s.ready = true;
                    let s = s.clone();
                    let _ = self.files.save_session(&s);
                }
            }
            "UserPromptSubmit" | "PreToolUse" | "PostToolUse" => {
                let Some(id) = current else { return };
                if let Some(l) = self.live.get_mut(&name) {
                    // At work again.
                    l.stopped = false;
                }
                let confirms = ev.event != "UserPromptSubmit"
                    || ev
                        .prompt
                        .as_deref()
                        .is_some_and(|p| p.contains(&format!("Task {id}")));
                if confirms && let Some(l) = self.live.get_mut(&name) {
                    l.confirmed = true;
                }
                let Some(t) = self.find_mut(&id) else { return };
                let mut changed = false;
                if confirms && !t.delivered {
                    t.delivered = true;
                    changed = true;
                }
                if changed {
                    self.save(&id);
                }
                // At work again, unless a question it asked still waits.
                if self.live.get(&name).is_some_and(|l| l.asking.is_empty()) {
                    self.back_to_work(&id);
                }
            }
            "Stop" => {
                self.settling.remove(&name);
                if let Some(done) = self.finishing.remove(&name) {
                    // The turn that wrote the last summary ended: its transcript is
                    // whole.
                    let transcript = self.live.get(&name).and_then(|l| l.transcript.clone());
                    let usage = transcript.and_then(|path| {
                        let since = self.find(&done)?.started_at?;
                        super::usage::from_transcript(&path, since)
                    });
                    self.usage_after_the_end(&done, usage);
                }
                let Some(id) = current else { return };
                if let Some(l) = self.live.get_mut(&name) {
                    l.stopped = true;
                }
                self.check_summary(&name);
                let interrupting = self.live.get(&name).and_then(|l| l.interrupting.clone());
                if let Some((_, ending)) = interrupting {
                    self.interrupted(&name, ending);
                    return;
                }
                let still = self.live.get(&name).and_then(|l| l.current.clone());
                if still.as_deref() != Some(id.as_str()) {
                    return;
                }
                let reminded = self.live.get(&name).is_some_and(|l| l.reminded);
                if !reminded {
                    if let Some(l) = self.live.get_mut(&name) {
                        l.reminded = true;
                    }
                    if let Some(t) = self.find(&id) {
                        let text = prompt::reminder(t);
                        self.type_in(&name, text, None);
                    }
                } else {
                    self.wait_for_person(&id, "the agent stopped without its summary");
                }
            }
            "Notification" => {
                let Some(id) = current else { return };
                let why = ev
                    .message
                    .unwrap_or_else(|| "the agent waits for input".into());
                self.wait_for_person(&id, &why);
            }
            "SessionEnd" => {
                // `/clear` goes on in the same process; any other end is the agent
                // exiting, which the next look at its pane finds (and resumes or
                // fails the task, [`Runner::agent_alive`]).
                if ev.reason.as_deref() == Some("clear") {
                    return;
                }
                if let Some(s) = self.sessions.get_mut(&name) {
                    s.ready = false;
                    let s = s.clone();
                    let _ = self.files.save_session(&s);
                }
                if current.is_some() {
                    self.check_summary(&name);
                }
                if let Some(l) = self.live.get_mut(&name) {
                    l.ended = ev.reason.or(Some("exit".into()));
                }
            }
            _ => {}
        }
    }

    /// Task `id` waits for a person: its clock stops.
    pub(super) fn wait_for_person(&mut self, id: &str, why: &str) {
        let Some(t) = self.find_mut(id) else { return };
        if t.state != TaskState::Working {
            return;
        }
        t.state = TaskState::InputRequired;
        t.waiting_since = Some(Timestamp::now());
        t.reason = Some(why.to_string());
        self.save(id);
    }

    /// Presses the session's interrupt key (a headless agent is sent SIGTERM); the
    /// task ends once the agent stopped.
    pub(super) fn interrupt(&mut self, name: &str, ending: Ending) {
        if is_headless(&self.sessions[name].command) {
            self.interrupt_headless(name);
        } else {
            let key = self.sessions[name].interrupt_key.clone();
            if let Err(e) = self.tmux.send_keys(name, &[&key]) {
                tracing::warn!("tasks: interrupting {name}: {e:#}");
            }
        }
        if let Some(l) = self.live.get_mut(name) {
            l.interrupting = Some((Instant::now(), ending));
        }
    }

    /// The interrupted agent stopped (or did not in time): the task ends as `ending`
    /// says.
    pub(super) fn interrupted(&mut self, name: &str, ending: Ending) {
        let Some(id) = self.live.get(name).and_then(|l| l.current.clone()) else {
            return;
        };
        let headless = is_headless(&self.sessions[name].command);
        if let Some(agent) = self.live.get_mut(name).and_then(|l| l.agent.take()) {
            // It did not stop in time.
            super::headless::signal(agent, nix::sys::signal::Signal::SIGKILL);
        }
        match ending {
            Ending::Canceled => {
                self.end(&id, TaskState::Canceled, None, Some("canceled".into()));
            }
            Ending::TimedOut | Ending::Ended => {
                let Some(task) = self.find(&id).cloned() else {
                    return;
                };
                let workspace = self.sessions[name].workspace.clone();
                let pane = if headless {
                    super::headless::screen(&self.files, name, 100)
                } else {
                    self.tmux.capture(name, 100).unwrap_or_default()
                };
                let since = task.started_at.unwrap_or(task.submitted_at);
                let changed = changed_files(&workspace, since);
                let text = summary::fallback(&id, &pane, &changed);
                let path = self.files.root().join(&id).join("fallback-summary.md");
                if let Err(e) = std::fs::write(&path, &text) {
                    tracing::error!("tasks: writing {}: {e}", path.display());
                }
                let why = match ending {
                    Ending::TimedOut => format!(
                        "timed out after {} s without a summary; the summary is hitl's fallback",
                        task.timeout_secs
                    ),
                    _ => "the agent ended without a summary (reminded once); the summary is \
                          hitl's fallback"
                        .to_string(),
                };
                self.finish(&task, &workspace, &path, &text, Some(why));
            }
        }
        self.start_next_everywhere();
    }
}

impl Runner {
    /// Whether session `name`'s agent still runs under task `id`. When its tmux
    /// session (or the agent in it) is gone, the agent is started again: Claude Code
    /// first on its own conversation (`--resume`, the id its hooks gave) and told to
    /// carry on; when that cannot be (no conversation was saved yet), afresh with the
    /// whole task typed in again. A third exit fails the task with the reason.
    pub(super) fn agent_alive(&mut self, name: &str, id: &str) -> bool {
        if self.tmux.has_session(name) && !self.tmux.pane_dead(name) {
            return true;
        }
        let why = self
            .live
            .get_mut(name)
            .and_then(|l| l.ended.take())
            .map(|r| format!(" ({r})"))
            .unwrap_or_default();
        let Some(mut session) = self.sessions.get(name).cloned() else {
            return false;
        };
        let restarts = self.live.get(name).map_or(0, |l| l.restarts);
        self.tmux.kill_session(name);
        session.ready = false;
        let _ = self.files.save_session(&session);
        self.sessions.insert(name.to_string(), session.clone());
        let resume = session
            .agent_session_id
            .clone()
            .filter(|_| is_claude(&session.command) && restarts == 0);
        if restarts >= 2 || (restarts == 1 && !is_claude(&session.command)) {
            self.end(
                id,
                TaskState::Failed,
                None,
                Some(format!(
                    "the agent exited{why} again after it was started again"
                )),
            );
            return false;
        }
        match self.start_agent(&session, resume.as_deref()) {
            Ok(()) => {
                tracing::info!("tasks: session {name} started again for {id} (resume: {resume:?})");
                if let Some(l) = self.live.get_mut(name) {
                    l.restarts = restarts + 1 + u8::from(resume.is_none());
                    l.retype = true;
                    l.resumed = resume.is_some();
                }
                false
            }
            Err(e) => {
                self.end(
                    id,
                    TaskState::Failed,
                    None,
                    Some(format!(
                        "the agent exited{why}, and starting it again failed: {e}"
                    )),
                );
                false
            }
        }
    }

    /// Types task `t` into the agent of session `name`, started again: told to carry
    /// on when it was resumed on its conversation, else the whole task.
    pub(super) fn retype(&mut self, name: &str, t: &Task) {
        let resumed = self.live.get(name).is_some_and(|l| l.resumed);
        if let Some(l) = self.live.get_mut(name) {
            l.retype = false;
            l.sent_at = Some(Instant::now());
            l.confirmed = false;
            l.enter_again = false;
            l.stopped = false;
        }
        if !resumed {
            self.type_in(name, prompt::typed(t), Some(t.id.clone()));
            return;
        }
        let text = format!(
            "Task {id}: this session was restarted in the middle of the task. Carry on with it \
             from where it stands (INSTRUCTIONS.md has it), then create summaries/{id}.md as \
             described there.",
            id = t.id
        );
        self.type_in(name, text, Some(t.id.clone()));
    }
}

/// How long after a choice the same screen may still show (being redrawn) before it
/// is taken for a new one.
const REDRAW_WITHIN: std::time::Duration = std::time::Duration::from_secs(3);

impl Runner {
    /// Session `name`'s agent shows first-run `screen` (`text`): the person is asked,
    /// once (an approval of origin `task`, waiting for ever: nobody else decides).
    pub(super) fn first_run(&mut self, name: &str, screen: super::firstrun::Screen, text: &str) {
        if let Some((asked, chosen)) = self.first_runs.get(name)
            && *asked == screen
            && chosen.is_none_or(|t| t.elapsed() < REDRAW_WITHIN)
        {
            return;
        }
        let Some(broker) = self.broker.clone() else {
            tracing::warn!(
                "tasks: session {name} shows Claude Code's {} screen; attach to it to answer (hitl task attach {name})",
                screen.name()
            );
            return;
        };
        self.first_runs.insert(name.to_string(), (screen, None));
        let workspace = self.sessions[name].workspace.clone();
        let question = screen.question(name, &workspace, text);
        let current = self.live.get(name).and_then(|l| l.current.clone());
        let request = crate::protocol::Request {
            origin: crate::protocol::Origin::Task,
            working_dir: Some(workspace.display().to_string()),
            tags: current.into_iter().collect(),
            context: serde_json::json!({
                "task_session": name,
                "first_run": screen.name(),
                "screen": text.lines().filter(|l| !l.trim().is_empty()).collect::<Vec<_>>().join("\n"),
            }),
            ..crate::protocol::Request::new(
                name,
                format!("task session {name}"),
                crate::protocol::Kind::Approval,
                question.clone(),
            )
        };
        let event = crate::store::NewEvent {
            source_app: format!("task session {name}"),
            session_id: name.to_string(),
            hook_event_type: "HumanInTheLoop".into(),
            payload: serde_json::json!({}),
            extra: serde_json::Map::new(),
            timestamp_ms: request.timestamp.as_millisecond(),
            hitl: Some(serde_json::json!({
                "type": request.kind.seed004_name(),
                "question": question,
                "choices": [],
                "timeout": null,
            })),
            idempotency_key: None,
        };
        let name = name.to_string();
        let tx = self.tx.clone();
        tokio::spawn(async move {
            if let Err(e) = broker.ask(request, event).await {
                tracing::error!("tasks: asking about session {name}'s first-run screen: {e}");
                let _ = tx.send(super::runner::Command::FirstRunNotAsked { session: name });
            }
        });
    }

    /// A question about a first-run screen ended: the person's choice is made on
    /// the screen (anything but an approval refuses).
    pub(super) fn first_run_answered(&mut self, finished: &crate::broker::Finished) {
        let request = &finished.pending.request;
        // Only the runner's own question (asked as this user, by the session's
        // name), not one another OS user made look like it over HTTP.
        if request.created_by_other().is_some() {
            return;
        }
        let context = &request.context;
        let (Some(name), Some(which)) = (
            context
                .get("task_session")
                .and_then(serde_json::Value::as_str),
            context.get("first_run").and_then(serde_json::Value::as_str),
        ) else {
            return;
        };
        let Some(screen) = [
            super::firstrun::Screen::Trust,
            super::firstrun::Screen::McpServer,
        ]
        .into_iter()
        .find(|s| s.name() == which) else {
            return;
        };
        if !self.sessions.contains_key(name) || request.agent_id != name {
            return;
        }
        let yes = finished.answer.as_ref().and_then(|a| a.approved) == Some(true);
        let tmux = self.tmux.clone();
        let tx = self.tx.clone();
        let session = name.to_string();
        tokio::task::spawn_blocking(move || {
            // Moved, looked at again, and Enter only once the cursor is on the choice.
            for _ in 0..4 {
                let Ok(text) = tmux.capture(&session, usize::from(super::tmux::PANE_ROWS)) else {
                    break;
                };
                if super::firstrun::Screen::recognise(&text) != Some(screen) {
                    break;
                }
                match screen.moves(&text, yes) {
                    Some(keys) if keys.is_empty() => {
                        let _ = tmux.send_keys(&session, &["Enter"]);
                        break;
                    }
                    Some(keys) => {
                        let _ = tmux.send_keys(&session, &keys);
                        std::thread::sleep(super::agent::ENTER_PAUSE);
                    }
                    None => break,
                }
            }
            let _ = tx.send(super::runner::Command::FirstRunChosen {
                session,
                screen,
                yes,
            });
        });
    }

    /// The choice on session `name`'s first-run `screen` was made. A refused trust
    /// ends the session (Claude Code exits): its tasks fail, saying why.
    pub(super) fn first_run_chosen(
        &mut self,
        name: &str,
        screen: super::firstrun::Screen,
        yes: bool,
    ) {
        self.first_runs
            .insert(name.to_string(), (screen, Some(std::time::Instant::now())));
        if yes || screen != super::firstrun::Screen::Trust {
            self.start_next_everywhere();
            return;
        }
        let Some(workspace) = self.sessions.get(name).map(|s| s.workspace.clone()) else {
            return;
        };
        let why = format!(
            "Claude Code was not allowed to trust {}, and exited",
            workspace.display()
        );
        let ids: Vec<String> = self
            .tasks
            .iter()
            .filter(|t| {
                t.session == name
                    && matches!(
                        t.state,
                        super::record::TaskState::Submitted
                            | super::record::TaskState::Working
                            | super::record::TaskState::InputRequired
                    )
            })
            .map(|t| t.id.clone())
            .collect();
        for id in ids {
            self.end(
                &id,
                super::record::TaskState::Failed,
                None,
                Some(why.clone()),
            );
        }
    }
}

/// Files of the workspace changed since `since`, newest first, without the context
/// files, summaries and build outputs (seed 002's fallback names up to four).
fn changed_files(workspace: &Path, since: Timestamp) -> Vec<String> {
    let mut found: Vec<(std::time::SystemTime, String)> = Vec::new();
    let since = std::time::UNIX_EPOCH + Duration::from_millis(since.as_millisecond().max(0) as u64);
    let mut stack = vec![workspace.to_path_buf()];
    let mut seen = 0;
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            seen += 1;
            if seen > 20_000 {
                break;
            }
            let path = e.path();
            let name = e.file_name().to_string_lossy().into_owned();
            let Ok(meta) = e.metadata() else { continue };
            if meta.is_dir() {
                if !name.starts_with('.')
                    && !["target", "node_modules", "dist", "build", "summaries"]
                        .contains(&name.as_str())
                {
                    stack.push(path);
                }
                continue;
            }
            if artifacts::CONTEXT_FILES.contains(&name.as_str()) && dir == workspace {
                continue;
            }
            if let Ok(m) = meta.modified()
                && m >= since
                && let Ok(rel) = path.strip_prefix(workspace)
            {
                found.push((m, rel.to_string_lossy().into_owned()));
            }
        }
    }
    found.sort_by_key(|f| std::cmp::Reverse(f.0));
    found.into_iter().map(|(_, p)| p).collect()
}
