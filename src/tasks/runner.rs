//! The task runner: one tokio task that owns every session and task (pueue's way:
//! state changed in one place), reached through [`TaskHandle`]. Per session it runs
//! one task at a time, urgent before high before normal, then oldest: it writes the
//! context files, pastes the task into the agent's pane and presses Enter, then
//! waits for the task's summary (inotify on `summaries/`, never the screen) or for
//! what the agent's hooks report (`events/`): the prompt taken, a stop without a
//! summary, a wait for a person, the agent's exit. A task that outlives its timeout
//! (not counting time waiting for a person) is interrupted, given seed 002's
//! fallback summary, and only then is the next one typed in.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Result;
use jiff::Timestamp;
use tokio::sync::{broadcast, mpsc, oneshot};

use super::agent::{
    AGENT_EVENTS, AgentEvent, ENTER_PAUSE, empty_claude_input, is_claude, program_of, shell_quote,
};
use super::artifacts::{self, DEFAULT_MAX_BYTES};
use super::files::TaskFiles;
use super::headless::{self, is_headless};
use super::prompt;
use super::record::{SessionStatus, Task, TaskResult, TaskSession, TaskState};
use super::spec::{SessionSpec, Submitted, TaskError, TaskSpec, TaskView};
use super::summary::{self, Outcome};
use super::tmux::{NewSession, Tmux};
use super::usage;
use crate::runtime::process::is_alive;
use crate::spool::watch::{SpoolEvent, SpoolWatcher};

/// The default time a task may work, in seconds (seed 002's).
pub const DEFAULT_TIMEOUT_SECS: u64 = 300;

/// How long the agent has to confirm a task reached it (its prompt hook) before
/// Enter is pressed once more.
const CONFIRM_WITHIN: Duration = Duration::from_secs(5);

/// How long an interrupted agent has to stop before the runner goes on anyway.
pub(super) const STOP_WITHIN: Duration = Duration::from_secs(5);

/// How long a Claude Code session may go on after its task's summary before the
/// next task is typed in anyway: its Stop hook says when it is done.
const SETTLE_WITHIN: Duration = Duration::from_secs(30);

/// How often timeouts and readiness are looked at.
const TICK: Duration = Duration::from_millis(100);

pub(super) enum Command {
    CreateSession {
        spec: SessionSpec,
        done: oneshot::Sender<Result<SessionStatus, TaskError>>,
    },
    Sessions {
        done: oneshot::Sender<Vec<SessionStatus>>,
    },
    EndSession {
        name: String,
        done: oneshot::Sender<Result<SessionStatus, TaskError>>,
    },
    Submit {
        spec: TaskSpec,
        done: oneshot::Sender<Result<Submitted, TaskError>>,
    },
    List {
        done: oneshot::Sender<Vec<TaskView>>,
    },
    Get {
        id: String,
        done: oneshot::Sender<Option<TaskView>>,
    },
    Cancel {
        id: String,
        done: oneshot::Sender<Result<Task, TaskError>>,
    },
    Retry {
        id: String,
        done: oneshot::Sender<Result<Submitted, TaskError>>,
    },
    Move {
        id: String,
        position: usize,
        done: oneshot::Sender<Result<TaskView, TaskError>>,
    },
    /// The send of a task finished (on a blocking thread).
    Sent {
        id: String,
        result: Result<(), String>,
    },
    /// A headless agent working on task `id` exited.
    Exited { id: String },
    /// Asking about session `session`'s first-run screen failed: ask again at the
    /// next look.
    FirstRunNotAsked { session: String },
    /// The person's choice on a first-run screen was made in session `session`.
    FirstRunChosen {
        session: String,
        screen: super::firstrun::Screen,
        yes: bool,
    },
}

/// The runner's handle: cheap to clone, every call a message to its task.
#[derive(Clone)]
pub struct TaskHandle {
    tx: mpsc::UnboundedSender<Command>,
    changes: broadcast::Sender<Task>,
    files: TaskFiles,
}

impl TaskHandle {
    async fn call<T>(&self, make: impl FnOnce(oneshot::Sender<T>) -> Command) -> Option<T> {
        let (done, rx) = oneshot::channel();
        self.tx.send(make(done)).ok()?;
        rx.await.ok()
    }

    /// Makes (or adopts) a session.
    pub async fn create_session(&self, spec: SessionSpec) -> Result<SessionStatus, TaskError> {
        self.call(|done| Command::CreateSession { spec, done })
            .await
            .unwrap_or(Err(TaskError::Stopped))
    }

    /// Every session with its queue.
    pub async fn sessions(&self) -> Vec<SessionStatus> {
        self.call(|done| Command::Sessions { done })
            .await
            .unwrap_or_default()
    }

    /// Ends session `name`: its agent stopped, the session forgotten. Refused while
    /// it has a task running or waiting (cancel them first): nothing submitted is
    /// dropped by ending its session.
    pub async fn end_session(&self, name: &str) -> Result<SessionStatus, TaskError> {
        let name = name.to_string();
        self.call(|done| Command::EndSession { name, done })
            .await
            .unwrap_or(Err(TaskError::Stopped))
    }

    /// Queues a task.
    pub async fn submit(&self, spec: TaskSpec) -> Result<Submitted, TaskError> {
        self.call(|done| Command::Submit { spec, done })
            .await
            .unwrap_or(Err(TaskError::Stopped))
    }

    /// Every task, in submission order.
    pub async fn list(&self) -> Vec<TaskView> {
        self.call(|done| Command::List { done })
            .await
            .unwrap_or_default()
    }

    /// Task `id`.
    pub async fn get(&self, id: &str) -> Option<TaskView> {
        let id = id.to_string();
        self.call(|done| Command::Get { id, done }).await.flatten()
    }

    /// Task `id`'s result, once it has ended with one.
    pub fn result(&self, id: &str) -> Option<TaskResult> {
        self.files.load_result(id)
    }

    /// Cancels task `id`: a waiting one is taken out, a running one interrupted.
    pub async fn cancel(&self, id: &str) -> Result<Task, TaskError> {
        let id = id.to_string();
        self.call(|done| Command::Cancel { id, done })
            .await
            .unwrap_or(Err(TaskError::Stopped))
    }

    /// Submits ended task `id` again, as a new task.
    pub async fn retry(&self, id: &str) -> Result<Submitted, TaskError> {
        let id = id.to_string();
        self.call(|done| Command::Retry { id, done })
            .await
            .unwrap_or(Err(TaskError::Stopped))
    }

    /// Moves waiting task `id` to `position` (1: next) in its session's queue.
    pub async fn move_to(&self, id: &str, position: usize) -> Result<TaskView, TaskError> {
        let id = id.to_string();
        self.call(|done| Command::Move { id, position, done })
            .await
            .unwrap_or(Err(TaskError::Stopped))
    }

    /// Every change to a task from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<Task> {
        self.changes.subscribe()
    }
}

/// What the runner knows of a session beyond its record.
#[derive(Debug, Default)]
pub(super) struct Live {
    /// The task typed in, not ended.
    pub(super) current: Option<String>,
    /// When it was typed in (this run of the runner), for the Enter retry.
    pub(super) sent_at: Option<Instant>,
    /// Whether Enter was pressed again.
    pub(super) enter_again: bool,
    /// The agent confirmed the text typed in last (its prompt hook): a task typed in
    /// again after a restart needs its own confirmation, though it was delivered.
    pub(super) confirmed: bool,
    /// Whether the stop reminder was typed.
    pub(super) reminded: bool,
    /// Being interrupted since, and how the task ends once the agent stopped.
    pub(super) interrupting: Option<(Instant, Ending)>,
    /// The agent stopped (its Stop hook) since the task was typed in.
    pub(super) stopped: bool,
    /// How often the agent was started again under the task.
    pub(super) restarts: u8,
    /// The last start again was `claude --resume` (the agent has the task already).
    pub(super) resumed: bool,
    /// The task is to be typed in again once the resumed agent is ready.
    pub(super) retype: bool,
    /// Why the agent's session ended (its SessionEnd hook), while it has not been
    /// seen to run again.
    pub(super) ended: Option<String>,
    /// The questions to a human the agent asked for the task that still wait.
    pub(super) asking: std::collections::HashSet<String>,
    /// The transcript the agent's hooks named (its turns and tokens).
    pub(super) transcript: Option<PathBuf>,
    /// A headless agent's process, while it runs.
    pub(super) agent: Option<crate::runtime::process::ProcessRef>,
    /// That process was started by an earlier listener: its exit is seen by looking.
    pub(super) adopted: bool,
    /// How far its output (`stream.jsonl`) has been read.
    pub(super) stream_read: u64,
}

/// How an interrupted task ends.
#[derive(Debug, Clone)]
pub(super) enum Ending {
    /// Its timeout: seed 002's fallback summary, completed and partial.
    TimedOut,
    /// A cancel.
    Canceled,
    /// The agent ended its work (a headless run exited, reminded once) without a
    /// summary: seed 002's fallback summary, completed and partial.
    Ended,
}

/// The runner's state.
pub(super) struct Runner {
    pub(super) files: TaskFiles,
    pub(super) tmux: Tmux,
    /// The hitl binary the agents' hooks run.
    pub(super) exe: PathBuf,
    /// The programs a session may run (`[tasks] agents`).
    pub(super) agents: Vec<String>,
    /// Agents start inside `hitl run`'s boundary (`[tasks] boundary`).
    pub(super) boundary: bool,
    pub(super) sessions: HashMap<String, TaskSession>,
    pub(super) live: HashMap<String, Live>,
    /// Sessions whose agent is still finishing the turn that ended its last task
    /// (typed in now, the next task would wait in its input box), since when.
    pub(super) settling: HashMap<String, Instant>,
    pub(super) tasks: Vec<Task>,
    pub(super) next_seq: u64,
    /// Ticks so far (some looks are made every tenth).
    pub(super) ticks: u64,
    /// The watcher of `events/` and every session's `summaries/`, made with the first
    /// session (a listener without tasks spends no inotify instance on them).
    pub(super) watcher: Option<SpoolWatcher>,
    /// Where the watcher sends what it sees.
    pub(super) watch_events: mpsc::UnboundedSender<SpoolEvent>,
    /// inotify was refused: the tick looks instead.
    pub(super) unwatched: bool,
    pub(super) changes: broadcast::Sender<Task>,
    pub(super) tx: mpsc::UnboundedSender<Command>,
    /// The broker, whose activity feed hears of each task's changes of state.
    pub(super) broker: Option<crate::broker::BrokerHandle>,
    /// The state each task was last noted in the feed in.
    pub(super) noted: HashMap<String, TaskState>,
    /// The task each settling session's agent is finishing the turn of (its usage
    /// is read again once the turn ends).
    pub(super) finishing: HashMap<String, String>,
    /// The first-run screen each session's agent shows that a person was asked
    /// about, and when their choice was made (`None`: not yet).
    pub(super) first_runs: HashMap<String, (super::firstrun::Screen, Option<Instant>)>,
}

/// Starts the runner over `files` (loading what it kept). Must be called inside a
/// tokio runtime.
pub fn spawn(
    files: TaskFiles,
    tmux: Tmux,
    agents: Vec<String>,
    boundary: bool,
    broker: Option<crate::broker::BrokerHandle>,
) -> Result<(TaskHandle, tokio::task::JoinHandle<()>)> {
    files.ensure()?;
    let (tx, rx) = mpsc::unbounded_channel();
    let (changes, _) = broadcast::channel(256);
    let (events_tx, events_rx) = mpsc::unbounded_channel();
    let tasks = files.load_tasks();
    let sessions: HashMap<String, TaskSession> = files
        .load_sessions()
        .into_iter()
        .map(|s| (s.name.clone(), s))
        .collect();
    let mut runner = Runner {
        next_seq: tasks.iter().map(|t| t.seq).max().unwrap_or(0) + 1,
        exe: std::env::current_exe().unwrap_or_else(|_| PathBuf::from("hitl")),
        agents,
        boundary,
        files: files.clone(),
        tmux,
        live: sessions
            .keys()
            .map(|n| (n.clone(), Live::default()))
            .collect(),
        settling: HashMap::new(),
        ticks: 0,
        sessions,
        tasks,
        watcher: None,
        watch_events: events_tx,
        unwatched: false,
        changes: changes.clone(),
        tx: tx.clone(),
        noted: HashMap::new(),
        finishing: HashMap::new(),
        first_runs: HashMap::new(),
        broker: broker.clone(),
    };
    runner.noted = runner
        .tasks
        .iter()
        .map(|t| (t.id.clone(), t.state))
        .collect();
    runner.resume_after_restart();
    let asks = broker.map(|b| b.subscribe());
    let task = tokio::spawn(runner.run(rx, events_rx, asks));
    Ok((TaskHandle { tx, changes, files }, task))
}

impl Runner {
    async fn run(
        mut self,
        mut rx: mpsc::UnboundedReceiver<Command>,
        mut events: mpsc::UnboundedReceiver<SpoolEvent>,
        mut asks: Option<broadcast::Receiver<crate::broker::Change>>,
    ) {
        let mut tick = tokio::time::interval(TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                cmd = rx.recv() => match cmd {
                    Some(cmd) => self.on_command(cmd),
                    None => return,
                },
                Some(ev) = events.recv() => self.on_file_event(ev),
                change = async { asks.as_mut()?.recv().await.ok() }, if asks.is_some() => {
                    if let Some(change) = change {
                        self.on_broker_change(change);
                    }
                }
                _ = tick.tick() => self.on_tick(),
            }
        }
    }

    pub(super) fn on_command(&mut self, cmd: Command) {
        match cmd {
            Command::CreateSession { spec, done } => {
                let _ = done.send(self.create_session(spec));
            }
            Command::Sessions { done } => {
                let mut names: Vec<&String> = self.sessions.keys().collect();
                names.sort();
                let list = names.into_iter().map(|n| self.status_of(n)).collect();
                let _ = done.send(list);
            }
            Command::EndSession { name, done } => {
                let _ = done.send(self.end_session(&name));
            }
            Command::Submit { spec, done } => {
                let _ = done.send(self.submit(spec, 0));
                self.start_next_everywhere();
            }
            Command::List { done } => {
                let views = self.tasks.iter().map(|t| self.view(t)).collect();
                let _ = done.send(views);
            }
            Command::Get { id, done } => {
                let _ = done.send(self.find(&id).map(|t| self.view(t)));
            }
            Command::Cancel { id, done } => {
                let _ = done.send(self.cancel(&id));
                self.start_next_everywhere();
            }
            Command::Retry { id, done } => {
                let result = match self.find(&id) {
                    None => Err(TaskError::NotFound(format!("no task {id}"))),
                    Some(t) if !t.state.is_final() => Err(TaskError::Conflict(format!(
                        "task {id} is {}: only an ended task is retried",
                        t.state
                    ))),
                    Some(t) => {
                        let spec = TaskSpec {
                            session: t.session.clone(),
                            instruction: t.instruction.clone(),
                            priority: Some(t.priority),
                            context: t.context.clone(),
                            specs: t.specs.clone(),
                            timeout: Some(t.timeout_secs),
                        };
                        let attempt = t.attempt + 1;
                        self.submit(spec, attempt)
                    }
                };
                let _ = done.send(result);
                self.start_next_everywhere();
            }
            Command::Move { id, position, done } => {
                let _ = done.send(self.move_to(&id, position));
            }
            Command::Sent { id, result } => self.sent(&id, result),
            Command::Exited { id } => self.headless_exited(&id),
            Command::FirstRunNotAsked { session } => {
                self.first_runs.remove(&session);
            }
            Command::FirstRunChosen {
                session,
                screen,
                yes,
            } => self.first_run_chosen(&session, screen, yes),
        }
    }

    /// A session's status: the record and its queue.
    pub(super) fn status_of(&self, name: &str) -> SessionStatus {
        let session = self.sessions[name].clone();
        let current = self.live.get(name).and_then(|l| l.current.clone());
        SessionStatus {
            alive: is_headless(&session.command) || self.tmux.has_session(name),
            is_executing: current.is_some(),
            current_task_id: current,
            queued_tasks: self.queued(name).count(),
            agent_name: name.to_string(),
            session,
        }
    }

    pub(super) fn view(&self, t: &Task) -> TaskView {
        let position = (t.state == TaskState::Submitted).then(|| {
            self.queued(&t.session)
                .position(|q| q.id == t.id)
                .map_or(0, |p| p + 1)
        });
        TaskView {
            task: t.clone(),
            position,
        }
    }

    pub(super) fn find(&self, id: &str) -> Option<&Task> {
        self.tasks.iter().find(|t| t.id == id)
    }

    pub(super) fn find_mut(&mut self, id: &str) -> Option<&mut Task> {
        self.tasks.iter_mut().find(|t| t.id == id)
    }

    /// Session `name`'s waiting tasks in the order they will run.
    pub(super) fn queued<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Task> + 'a {
        let mut waiting: Vec<&Task> = self
            .tasks
            .iter()
            .filter(|t| t.session == name && t.state == TaskState::Submitted)
            .collect();
        waiting.sort_by_key(|t| (std::cmp::Reverse(t.priority), t.queue_key.unwrap_or(t.seq)));
        waiting.into_iter()
    }

    /// Keeps task `id` as it now is and tells whoever follows (the activity feed
    /// when its state changed).
    pub(super) fn save(&mut self, id: &str) {
        let Some(t) = self.find(id) else { return };
        if let Err(e) = self.files.save_task(t) {
            tracing::error!("tasks: keeping {id}: {e:#}");
        }
        self.tell(id);
    }

    /// Tells whoever follows of task `id`, as it now is.
    fn tell(&mut self, id: &str) {
        let Some(t) = self.find(id) else { return };
        let _ = self.changes.send(t.clone());
        if self.noted.get(id) != Some(&t.state) {
            let note = self.activity_note(t);
            self.noted.insert(id.to_string(), t.state);
            if let Some(broker) = &self.broker {
                broker.note_activity(self.files.project(), note);
            }
        }
    }

    /// Task `t`'s state, as an event of the activity feed: `TaskWorking`,
    /// `TaskCompleted`…, from its session (the feed's session and agent) in its
    /// workspace (the feed's app).
    fn activity_note(&self, t: &Task) -> crate::protocol::activity::ActivityNote {
        let app = self
            .sessions
            .get(&t.session)
            .and_then(|s| s.workspace.file_name())
            .map_or_else(|| "tasks".to_string(), |n| n.to_string_lossy().into_owned());
        let event: String = t
            .state
            .as_str()
            .split('-')
            .map(|w| w[..1].to_uppercase() + &w[1..])
            .collect();
        let instruction: String = t.instruction.chars().take(200).collect();
        crate::protocol::activity::ActivityNote {
            source_app: app,
            session_id: t.session.clone(),
            hook_event_type: format!("Task{event}"),
            payload: serde_json::json!({
                "task_id": t.id,
                "state": t.state,
                "outcome": t.outcome,
                "priority": t.priority,
                "instruction": instruction,
                "message": format!("{}: {}", t.id, t.reason.as_deref().unwrap_or(&instruction)),
            }),
            timestamp_ms: Timestamp::now().as_millisecond(),
            agent_id: t.session.clone(),
            agent_name: t.session.clone(),
            decision: None,
            reason: t.reason.clone(),
        }
    }

    pub(super) fn create_session(&mut self, spec: SessionSpec) -> Result<SessionStatus, TaskError> {
        crate::protocol::validate_id(&spec.name)
            .map_err(|e| TaskError::Invalid(format!("session name {:?}: {e}", spec.name)))?;
        let mut workspace = spec.workspace.canonicalize().map_err(|e| {
            TaskError::NotFound(format!("workspace {}: {e}", spec.workspace.display()))
        })?;
        if let Some(branch) = &spec.worktree {
            let tree = super::worktree::ensure(&workspace, &spec.name, branch)
                .map_err(TaskError::Invalid)?;
            workspace = tree
                .canonicalize()
                .map_err(|e| TaskError::Failed(format!("worktree {}: {e}", tree.display())))?;
        }
        if !workspace.is_dir() {
            return Err(TaskError::NotFound(format!(
                "workspace {} is not a folder",
                workspace.display()
            )));
        }
        if workspace.parent().is_none() {
            return Err(TaskError::Forbidden(format!(
                "workspace {} is not a project folder",
                workspace.display()
            )));
        }
        if let Some(other) = self
            .sessions
            .values()
            .find(|s| s.workspace == workspace && s.name != spec.name)
        {
            return Err(TaskError::Conflict(format!(
                "session {} already works in {} (two agents there would overwrite each other's CONTEXT.md)",
                other.name,
                workspace.display()
            )));
        }
        if let Some(existing) = self.sessions.get(&spec.name)
            && existing.workspace != workspace
        {
            return Err(TaskError::Conflict(format!(
                "session {} works in {}",
                spec.name,
                existing.workspace.display()
            )));
        }
        let command = spec
            .command
            .clone()
            .filter(|c| !c.is_empty())
            .unwrap_or_else(|| vec!["claude".to_string()]);
        let program = program_of(&command).unwrap_or_default();
        let allowed = self.agents.iter().any(|a| {
            a == program
                || (!a.contains('/')
                    && Path::new(program)
                        .file_name()
                        .is_some_and(|n| n == a.as_str()))
        });
        if !allowed {
            return Err(TaskError::Forbidden(format!(
                "{program:?} is not an agent sessions may run; name it in [tasks] agents of config.toml (now {:?}; the listener reads it when it starts, so restart it after a change)",
                self.agents
            )));
        }
        // Said now, not as the tmux session that ended at once ("no server running").
        if crate::runtime::process::find_program(program, &workspace).is_none() {
            return Err(TaskError::Invalid(if program.contains('/') {
                format!(
                    "the agent {program:?} is not a program that can run (from {})",
                    workspace.display()
                )
            } else {
                format!(
                    "the agent {program:?} is not on the listener's PATH: install it (Claude Code: `npm install -g @anthropic-ai/claude-code`), or name another with --command"
                )
            }));
        }
        let headless = is_headless(&command);
        if headless {
            headless::check(&command).map_err(TaskError::Invalid)?;
        }
        let session = TaskSession {
            name: spec.name.clone(),
            workspace: workspace.clone(),
            interrupt_key: spec
                .interrupt_key
                .clone()
                .unwrap_or_else(|| "Escape".into()),
            created_at: Timestamp::now(),
            // A headless agent is started for each task.
            ready: headless,
            agent_session_id: None,
            worktree: spec.worktree.clone(),
            command,
        };
        prompt::exclude_from_git(&workspace).map_err(|e| TaskError::Failed(format!("{e:#}")))?;
        std::fs::create_dir_all(workspace.join("summaries"))
            .map_err(|e| TaskError::Failed(format!("creating summaries/: {e}")))?;
        if !headless && !self.tmux.has_session(&session.name) {
            self.start_agent(&session, None)?;
        }
        self.watch_summaries(&session);
        self.files
            .save_session(&session)
            .map_err(|e| TaskError::Failed(format!("{e:#}")))?;
        self.live.entry(session.name.clone()).or_default();
        let name = session.name.clone();
        self.sessions.insert(name.clone(), session);
        Ok(self.status_of(&name))
    }

    /// Ends session `name` (see [`TaskHandle::end_session`]); how it stood last. Its
    /// tasks stay on record, and a worktree it worked in stays (it holds the work).
    pub(super) fn end_session(&mut self, name: &str) -> Result<SessionStatus, TaskError> {
        if !self.sessions.contains_key(name) {
            return Err(TaskError::NotFound(format!("no task session {name}")));
        }
        let status = self.status_of(name);
        if let Some(running) = &status.current_task_id {
            return Err(TaskError::Conflict(format!(
                "session {name} is working on task {running}{}: cancel what it has first (`hitl task cancel ID`), or wait for it",
                match status.queued_tasks {
                    0 => String::new(),
                    n => format!(" and {n} more wait"),
                }
            )));
        }
        if status.queued_tasks > 0 {
            let waiting: Vec<&str> = self.queued(name).map(|t| t.id.as_str()).collect();
            let (what, them) = match waiting.len() {
                1 => ("a task".to_string(), "it"),
                n => (format!("{n} tasks"), "them"),
            };
            return Err(TaskError::Conflict(format!(
                "session {name} has {what} waiting ({}): cancel {them} first (`hitl task cancel ID`), or wait for {them}",
                waiting.join(", "),
            )));
        }
        self.files
            .remove_session(name)
            .map_err(|e| TaskError::Failed(format!("{e:#}")))?;
        self.files.set_current_task(name, None);
        if !is_headless(&status.session.command) {
            self.tmux.kill_session(name);
        }
        self.sessions.remove(name);
        self.live.remove(name);
        self.settling.remove(name);
        self.finishing.remove(name);
        self.first_runs.remove(name);
        Ok(SessionStatus {
            alive: false,
            ..status
        })
    }

    /// Watches `session`'s `summaries/` (and, with the first, `events/`).
    pub(super) fn watch_summaries(&mut self, session: &TaskSession) {
        if self.watcher.is_none() && !self.unwatched {
            let made = SpoolWatcher::new(self.watch_events.clone()).and_then(|mut w| {
                w.watch(&self.files.events_dir())?;
                Ok(w)
            });
            match made {
                Ok(w) => self.watcher = Some(w),
                Err(e) => {
                    tracing::warn!("tasks: no file watcher ({e:#}); looking every tick");
                    self.unwatched = true;
                }
            }
        }
        if let Some(w) = &mut self.watcher
            && let Err(e) = w.watch(&session.workspace.join("summaries"))
        {
            tracing::warn!("tasks: {e:#}");
        }
    }

    /// Starts the session's agent in tmux. Claude Code gets hitl's hooks through
    /// `--settings`, which tell the runner what it does (the user's own settings are
    /// left alone).
    pub(super) fn start_agent(
        &self,
        session: &TaskSession,
        resume: Option<&str>,
    ) -> Result<(), TaskError> {
        let mut command = session.command.clone();
        if let Some(id) = resume {
            command.push("--resume".into());
            command.push(id.to_string());
        }
        if is_claude(&command) {
            self.write_agent_settings()
                .map_err(|e| TaskError::Failed(format!("{e:#}")))?;
            command.push("--settings".into());
            command.push(self.files.agent_settings().to_string_lossy().into_owned());
        }
        let command = self.contained(session, command);
        let env = vec![
            ("HITL_TASK_SESSION".to_string(), session.name.clone()),
            (
                "HITL_TASK_EVENTS".to_string(),
                self.files.events_dir().to_string_lossy().into_owned(),
            ),
        ];
        self.tmux
            .new_session(&NewSession {
                name: &session.name,
                dir: &session.workspace,
                command: &command,
                env: &env,
            })
            .map_err(|e| TaskError::Failed(format!("{e:#}")))
    }

    /// `command` as the runner starts it: through `hitl run`, inside its boundary,
    /// unless `[tasks] boundary = false` (`hitl run` refuses, and the agent does not
    /// start, where this machine cannot make one).
    pub(super) fn contained(&self, session: &TaskSession, command: Vec<String>) -> Vec<String> {
        if !self.boundary {
            return command;
        }
        // The workspace is the agent's; its hooks' events go to the runner's folder.
        let mut line = vec![
            self.exe.to_string_lossy().into_owned(),
            "run".to_string(),
            "--dir".to_string(),
            session.workspace.to_string_lossy().into_owned(),
            "--writable".to_string(),
            self.files.events_dir().to_string_lossy().into_owned(),
            // The runner's settings for the agent, its MCP configuration, the
            // listener's address: read where the workspace lies apart from them.
            "--visible".to_string(),
            crate::spool::Spool::new(self.files.project())
                .root()
                .to_string_lossy()
                .into_owned(),
            "--".to_string(),
        ];
        line.extend(command);
        line
    }

    /// The Claude Code settings with hitl's task hooks.
    pub(super) fn write_agent_settings(&self) -> Result<()> {
        let exe = self.exe.to_string_lossy();
        let mut hooks = serde_json::Map::new();
        for event in AGENT_EVENTS {
            hooks.insert(
                event.to_string(),
                serde_json::json!([{ "hooks": [{
                    "type": "command",
                    "command": format!("{} task event {event}", shell_quote(&exe)),
                }]}]),
            );
        }
        let settings = serde_json::json!({ "hooks": hooks });
        std::fs::write(
            self.files.agent_settings(),
            serde_json::to_vec_pretty(&settings)?,
        )?;
        Ok(())
    }

    pub(super) fn submit(&mut self, spec: TaskSpec, attempt: u32) -> Result<Submitted, TaskError> {
        if spec.instruction.trim().is_empty() {
            return Err(TaskError::Invalid("the instruction is empty".into()));
        }
        let timeout_secs = spec.timeout.unwrap_or(DEFAULT_TIMEOUT_SECS);
        if timeout_secs == 0 || timeout_secs > crate::protocol::MAX_TIMEOUT_SECS {
            return Err(TaskError::Invalid(format!(
                "timeout must be 1 to {} seconds",
                crate::protocol::MAX_TIMEOUT_SECS
            )));
        }
        let known = self.sessions.contains_key(&spec.session);
        let task = Task {
            id: format!("task-{}", uuid::Uuid::now_v7()),
            session: spec.session.clone(),
            instruction: spec.instruction,
            priority: spec.priority.unwrap_or_default(),
            context: spec.context,
            specs: spec.specs,
            timeout_secs,
            state: if known {
                TaskState::Submitted
            } else {
                TaskState::Rejected
            },
            outcome: None,
            reason: (!known).then(|| format!("no session {}", spec.session)),
            submitted_at: Timestamp::now(),
            started_at: None,
            ended_at: (!known).then(Timestamp::now),
            waited_ms: 0,
            waiting_since: None,
            delivered: false,
            fallback_summary: false,
            seq: self.next_seq,
            queue_key: None,
            attempt,
            usage: None,
        };
        self.next_seq += 1;
        let id = task.id.clone();
        self.tasks.push(task);
        if let Err(e) = self.files.save_task(self.find(&id).expect("just added")) {
            self.tasks.pop();
            return Err(TaskError::Failed(format!("{e:#}")));
        }
        self.tell(&id);
        let t = self.find(&id).expect("just added");
        if !known {
            return Err(TaskError::NotFound(format!(
                "no session {} (task {id} is rejected); start one with `hitl task session {} --workspace DIR`",
                spec.session, spec.session
            )));
        }
        let position = self
            .queued(&t.session)
            .position(|q| q.id == id)
            .map_or(0, |p| p + 1);
        Ok(Submitted {
            task: t.clone(),
            position,
        })
    }

    /// Moves waiting task `id` to `position` (1: next, beyond the end: last) in its
    /// session's queue. The queue runs by priority first, so the task takes the
    /// priority of the task it now goes before (or, last, after): moved ahead of an
    /// urgent task, it is urgent.
    pub(super) fn move_to(&mut self, id: &str, position: usize) -> Result<TaskView, TaskError> {
        let Some(t) = self.find(id) else {
            return Err(TaskError::NotFound(format!("no task {id}")));
        };
        if t.state != TaskState::Submitted {
            return Err(TaskError::Conflict(format!(
                "task {id} is {}: only a waiting task is moved",
                t.state
            )));
        }
        if position == 0 {
            return Err(TaskError::Invalid("positions start at 1 (next)".into()));
        }
        let session = t.session.clone();
        let mut order: Vec<String> = self
            .queued(&session)
            .filter(|q| q.id != id)
            .map(|q| q.id.clone())
            .collect();
        // The keys the queue has, handed out again in the new order.
        let mut keys: Vec<u64> = self
            .queued(&session)
            .map(|q| q.queue_key.unwrap_or(q.seq))
            .collect();
        keys.sort_unstable();
        let at = (position - 1).min(order.len());
        let neighbour = order
            .get(at)
            .or_else(|| at.checked_sub(1).and_then(|i| order.get(i)));
        let priority = neighbour
            .and_then(|n| self.find(n))
            .map_or(self.find(id).expect("known").priority, |n| n.priority);
        order.insert(at, id.to_string());
        let mut changed = Vec::new();
        for (qid, key) in order.iter().zip(keys) {
            let Some(q) = self.find_mut(qid) else {
                continue;
            };
            let before = (q.queue_key, q.priority);
            q.queue_key = Some(key);
            if qid == id {
                q.priority = priority;
            }
            if (q.queue_key, q.priority) != before {
                changed.push(qid.clone());
            }
        }
        for qid in changed {
            self.save(&qid);
        }
        let t = self.find(id).expect("known");
        Ok(self.view(t))
    }

    pub(super) fn cancel(&mut self, id: &str) -> Result<Task, TaskError> {
        let Some(t) = self.find(id) else {
            return Err(TaskError::NotFound(format!("no task {id}")));
        };
        if t.state.is_final() {
            return Err(TaskError::Conflict(format!(
                "task {id} has ended ({})",
                t.state
            )));
        }
        let session = t.session.clone();
        let running = self
            .live
            .get(&session)
            .is_some_and(|l| l.current.as_deref() == Some(id));
        if running {
            self.interrupt(&session, Ending::Canceled);
        } else {
            self.end(id, TaskState::Canceled, None, Some("canceled".into()));
        }
        Ok(self.find(id).cloned().expect("known"))
    }

    /// Ends task `id` in `state`.
    pub(super) fn end(
        &mut self,
        id: &str,
        state: TaskState,
        outcome: Option<Outcome>,
        reason: Option<String>,
    ) {
        let Some(t) = self.find_mut(id) else { return };
        if let Some(since) = t.waiting_since.take() {
            t.waited_ms += millis_since(since);
        }
        t.state = state;
        t.outcome = outcome.or(t.outcome);
        t.reason = reason.or(t.reason.take());
        t.ended_at = Some(Timestamp::now());
        let session = t.session.clone();
        if let Some(l) = self.live.get_mut(&session)
            && l.current.as_deref() == Some(id)
        {
            *l = Live::default();
            self.files.set_current_task(&session, None);
        }
        self.save(id);
    }

    /// Records the usage of task `id`, ended by its summary before its agent's turn
    /// did (a headless agent exited, Claude Code's Stop: its transcript is whole
    /// now), in its record and its RESULTS.json, and lets its session go on.
    pub(super) fn usage_after_the_end(&mut self, id: &str, usage: Option<usage::TaskUsage>) {
        let Some(t) = self.find_mut(id) else { return };
        let session = t.session.clone();
        if usage.is_some() {
            t.usage = usage.clone();
            self.save(id);
            if let Some(mut result) = self.files.load_result(id) {
                result.usage = usage;
                if let Err(e) = self.files.save_result(&result) {
                    tracing::error!("tasks: writing {id}'s RESULTS.json: {e:#}");
                }
            }
        }
        self.settling.remove(&session);
        self.start_next_everywhere();
    }

    /// Task `id`'s agent cannot reach its model until someone logs it in: the task
    /// ends `auth-required` (retried once that is done), and the session goes on.
    pub(super) fn login_needed(&mut self, id: &str, why: &str) {
        self.end(
            id,
            TaskState::AuthRequired,
            None,
            Some(format!("the agent needs a login: {why}")),
        );
        self.start_next_everywhere();
    }

    /// Types the next task into every idle, ready session.
    pub(super) fn start_next_everywhere(&mut self) {
        let mut names: Vec<String> = self.sessions.keys().cloned().collect();
        names.sort();
        for name in names {
            self.start_next(&name);
        }
    }

    pub(super) fn start_next(&mut self, name: &str) {
        let idle = self.live.get(name).is_some_and(|l| l.current.is_none());
        // A task waiting first: readiness costs a look at tmux, every tick.
        let Some(next) = self.queued(name).next().map(|t| t.id.clone()) else {
            return;
        };
        if !idle {
            return;
        }
        if let Some(since) = self.settling.get(name) {
            if since.elapsed() < SETTLE_WITHIN {
                return;
            }
            self.settling.remove(name);
        }
        if !self.is_ready(name) {
            return;
        }
        let session = self.sessions[name].clone();
        let Some(t) = self.find_mut(&next) else {
            return;
        };
        t.state = TaskState::Working;
        t.started_at = Some(Timestamp::now());
        let task = t.clone();
        if let Err(e) = prompt::write_context_files(&session.workspace, &task) {
            self.end(&next, TaskState::Failed, None, Some(format!("{e:#}")));
            return;
        }
        let live = self.live.entry(name.to_string()).or_default();
        *live = Live {
            current: Some(next.clone()),
            sent_at: Some(Instant::now()),
            ..Live::default()
        };
        self.save(&next);
        self.files.set_current_task(name, Some(&next));
        if is_headless(&session.command) {
            if let Err(e) = self.run_headless(name, &next, prompt::typed(&task), None) {
                self.end(
                    &next,
                    TaskState::Failed,
                    None,
                    Some(format!("the agent could not be started: {e:#}")),
                );
            }
            return;
        }
        self.type_in(name, prompt::typed(&task), Some(next));
    }

    /// Types `text` into session `name`'s agent on a blocking thread, reporting how
    /// it went for task `id` ([`Command::Sent`]). Claude Code's input box is emptied
    /// first: an interrupted prompt comes back into it, and a paste would join it.
    pub(super) fn type_in(&self, name: &str, text: String, id: Option<String>) {
        let tmux = self.tmux.clone();
        let tx = self.tx.clone();
        let name = name.to_string();
        let claude = self
            .sessions
            .get(&name)
            .is_some_and(|s| is_claude(&s.command));
        tokio::task::spawn_blocking(move || {
            if claude {
                empty_claude_input(&tmux, &name);
            }
            let result = tmux
                .paste_and_enter(&name, &text, ENTER_PAUSE)
                .map_err(|e| format!("{e:#}"));
            if let Some(id) = id {
                let _ = tx.send(Command::Sent { id, result });
            }
        });
    }

    pub(super) fn sent(&mut self, id: &str, result: Result<(), String>) {
        if let Err(why) = result {
            self.end(
                id,
                TaskState::Failed,
                None,
                Some(format!("the task could not be typed in: {why}")),
            );
            self.start_next_everywhere();
        }
    }

    /// Whether session `name`'s agent takes input: its SessionStart hook fired, or
    /// its prompt is on the screen; and, for Claude Code, no first-run screen is up
    /// (asked of a person instead, [`Runner::first_run`]).
    pub(super) fn is_ready(&mut self, name: &str) -> bool {
        let Some(s) = self.sessions.get(name) else {
            return false;
        };
        if is_headless(&s.command) {
            return true;
        }
        let claude = is_claude(&s.command);
        if s.ready && !claude {
            return true;
        }
        if !self.tmux.has_session(name) || self.tmux.pane_dead(name) {
            return false;
        }
        if self
            .first_runs
            .get(name)
            .is_some_and(|(_, chosen)| chosen.is_none())
        {
            // A first-run screen waits for a person: nothing to look at until then.
            return false;
        }
        let screen = self.tmux.capture(name, 60).unwrap_or_default();
        if claude && let Some(first) = super::firstrun::Screen::recognise(&screen) {
            self.first_run(name, first, &screen);
            return false;
        }
        let Some(s) = self.sessions.get(name) else {
            return false;
        };
        if s.ready {
            return true;
        }
        let up = if is_claude(&s.command) {
            screen.lines().any(|l| l.trim_start().starts_with('❯'))
        } else {
            !screen.trim().is_empty()
        };
        if up && let Some(s) = self.sessions.get_mut(name) {
            s.ready = true;
            let s = s.clone();
            let _ = self.files.save_session(&s);
        }
        up
    }

    /// After a restart: a task that was typed in goes on (its summary may be there
    /// already); the queues go on.
    pub(super) fn resume_after_restart(&mut self) {
        let sessions: Vec<TaskSession> = self.sessions.values().cloned().collect();
        for s in &sessions {
            self.watch_summaries(s);
        }
        let mut gone = Vec::new();
        let running: Vec<(String, String)> = self
            .tasks
            .iter()
            .filter(|t| matches!(t.state, TaskState::Working | TaskState::InputRequired))
            .map(|t| (t.session.clone(), t.id.clone()))
            .collect();
        for (session, id) in running {
            if !self.sessions.contains_key(&session) {
                self.end(
                    &id,
                    TaskState::Failed,
                    None,
                    Some(format!("session {session} is gone")),
                );
                continue;
            }
            let live = self.live.entry(session.clone()).or_default();
            live.current = Some(id.clone());
            if is_headless(&self.sessions[&session].command) {
                // The agent may work on: followed by pid, its output by file.
                match headless::running(&self.files.run_files(&id).pid) {
                    Some(agent) => {
                        live.agent = Some(agent);
                        live.adopted = true;
                    }
                    None => gone.push(id.clone()),
                }
            }
            self.check_summary(&session);
        }
        self.read_agent_events();
        for id in gone {
            self.headless_exited(&id);
        }
    }

    pub(super) fn on_file_event(&mut self, ev: SpoolEvent) {
        match ev {
            SpoolEvent::Changed { path, .. } => {
                if path.starts_with(self.files.events_dir()) {
                    self.read_agent_events();
                } else if let Some(name) = self.session_of_summary(&path) {
                    self.check_summary(&name);
                    self.late_summary(&path);
                    self.start_next_everywhere();
                }
            }
            SpoolEvent::Removed { .. } => {}
            SpoolEvent::Rescan => {
                self.read_agent_events();
                let names: Vec<String> = self.sessions.keys().cloned().collect();
                for n in names {
                    self.check_summary(&n);
                }
            }
        }
    }

    /// The session whose `summaries/` holds `path`.
    pub(super) fn session_of_summary(&self, path: &Path) -> Option<String> {
        let dir = path.parent()?;
        self.sessions
            .values()
            .find(|s| s.workspace.join("summaries") == dir)
            .map(|s| s.name.clone())
    }

    /// Ends session `name`'s task if its summary is there, whole.
    pub(super) fn check_summary(&mut self, name: &str) {
        let Some(id) = self.live.get(name).and_then(|l| l.current.clone()) else {
            return;
        };
        if self.live[name].interrupting.is_some() {
            // A cancel or a timeout is ending it; a summary now is a late one.
            return;
        }
        let workspace = self.sessions[name].workspace.clone();
        let Some(task) = self.find(&id).cloned() else {
            return;
        };
        let path = workspace.join(task.summary_path());
        let Ok(text) = std::fs::read_to_string(&path) else {
            return;
        };
        if !summary::is_complete(&text) {
            return;
        }
        self.finish(&task, &workspace, &path, &text, None);
    }

    /// The agent's own summary at `path` for a task that has ended with hitl's
    /// fallback (it came after the timeout): kept in the task's RESULTS.json as
    /// `late_summary`, read, without changing the task's state or outcome.
    pub(super) fn late_summary(&mut self, path: &Path) {
        let Some(id) = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_suffix(".md"))
        else {
            return;
        };
        let Some(t) = self.find(id) else { return };
        if !t.state.is_final() || !t.fallback_summary {
            return;
        }
        let Some(mut result) = self.files.load_result(id) else {
            return;
        };
        if result.late_summary.is_some() {
            return;
        }
        let Ok(text) = std::fs::read_to_string(path) else {
            return;
        };
        if !summary::is_complete(&text) {
            return;
        }
        result.late_summary = Some(summary::parse(&text));
        if let Err(e) = self.files.save_result(&result) {
            tracing::error!("tasks: writing {id}'s RESULTS.json: {e:#}");
        }
        tracing::info!("tasks: {id}'s own summary came after its fallback; kept as late_summary");
    }

    /// Ends `task` with the summary at `path`: the agent's, or hitl's fallback
    /// (`fallback` says why there is one).
    pub(super) fn finish(
        &mut self,
        task: &Task,
        workspace: &Path,
        path: &Path,
        text: &str,
        fallback: Option<String>,
    ) {
        let reason = fallback;
        let fallback = reason.is_some();
        let parsed = summary::parse(text);
        let artifacts =
            artifacts::collect(workspace, path, &parsed.deliverables, DEFAULT_MAX_BYTES);
        let read = |name: &str| std::fs::read_to_string(workspace.join(name)).ok();
        let outcome = if parsed.status == Outcome::Unknown && fallback {
            Outcome::Partial
        } else {
            parsed.status
        };
        let duration_secs = task
            .started_at
            .map(|s| (Timestamp::now().as_millisecond() - s.as_millisecond()) as f64 / 1000.0);
        // A headless run reports its own; an interactive one's transcript has them.
        let usage = task.usage.clone().or_else(|| {
            let transcript = self.live.get(&task.session)?.transcript.clone()?;
            usage::from_transcript(&transcript, task.started_at?)
        });
        let result = TaskResult {
            task_id: task.id.clone(),
            state: TaskState::Completed,
            outcome,
            summary: parsed,
            artifacts,
            status_txt: read("STATUS.txt"),
            errors_md: read("ERRORS.md"),
            duration_secs,
            usage: usage.clone(),
            late_summary: None,
        };
        if let Err(e) = self.files.save_result(&result) {
            tracing::error!("tasks: writing {}'s RESULTS.json: {e:#}", task.id);
        }
        if let Some(t) = self.find_mut(&task.id) {
            t.fallback_summary = fallback;
            t.usage = usage;
        }
        // The summary is the agent's last act but one: its turn ends after it (a
        // headless agent's process exits).
        let stopped = self.live.get(&task.session).is_some_and(|l| l.stopped);
        let running = self
            .live
            .get(&task.session)
            .is_some_and(|l| l.agent.is_some());
        let claude = self
            .sessions
            .get(&task.session)
            .is_some_and(|s| is_claude(&s.command));
        if !fallback && claude && (!stopped || running) {
            self.settling.insert(task.session.clone(), Instant::now());
            self.finishing.insert(task.session.clone(), task.id.clone());
        }
        self.end(&task.id, TaskState::Completed, Some(outcome), reason);
    }

    /// Reads (and removes) what the agents' hooks left in `events/`.
    pub(super) fn read_agent_events(&mut self) {
        let dir = self.files.events_dir();
        let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
            .into_iter()
            .flatten()
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.extension().is_some_and(|e| e == "json")
                    && !p
                        .file_name()
                        .is_some_and(|n| n.to_string_lossy().starts_with('.'))
            })
            .collect();
        // Named by time: in the order they happened.
        paths.sort();
        for path in paths {
            let event = std::fs::read(&path)
                .ok()
                .and_then(|b| serde_json::from_slice::<AgentEvent>(&b).ok());
            let _ = std::fs::remove_file(&path);
            if let Some(ev) = event {
                self.on_agent_event(ev);
            }
        }
        self.start_next_everywhere();
    }

    pub(super) fn on_tick(&mut self) {
        self.ticks += 1;
        let names: Vec<String> = self.sessions.keys().cloned().collect();
        if self.unwatched && !names.is_empty() {
            self.read_agent_events();
            for name in &names {
                self.check_summary(name);
            }
        }
        for name in names {
            let Some(live) = self.live.get(&name) else {
                continue;
            };
            if let Some((since, ending)) = live.interrupting.clone() {
                if since.elapsed() >= STOP_WITHIN {
                    self.interrupted(&name, ending);
                }
                continue;
            }
            let Some(id) = live.current.clone() else {
                self.start_next(&name);
                continue;
            };
            let Some(t) = self.find(&id).cloned() else {
                continue;
            };
            if is_headless(&self.sessions[&name].command) {
                if self.ticks.is_multiple_of(10) {
                    self.follow_stream(&name, &id);
                    if self.live.get(&name).and_then(|l| l.current.as_deref()) != Some(&id) {
                        continue;
                    }
                }
                // An agent an earlier listener started: is it still there?
                if self.ticks.is_multiple_of(10)
                    && let Some(l) = self.live.get(&name)
                    && l.adopted
                    && l.agent
                        .is_some_and(|a| !is_alive(a.pid, Some(a.start_time)))
                {
                    self.headless_exited(&id);
                    continue;
                }
            } else if self.ticks.is_multiple_of(10) && !self.agent_alive(&name, &id) {
                // Once a second: is the agent still there?
                continue;
            }
            if self.live.get(&name).is_some_and(|l| l.retype) {
                if self.is_ready(&name) {
                    self.retype(&name, &t);
                }
                continue;
            }
            // The Enter once more, when the agent did not confirm the task.
            let command = &self.sessions[&name].command;
            if is_claude(command)
                && !is_headless(command)
                && let Some(l) = self.live.get_mut(&name)
                && !l.confirmed
                && !l.enter_again
                && l.sent_at.is_some_and(|s| s.elapsed() >= CONFIRM_WITHIN)
            {
                l.enter_again = true;
                let _ = self.tmux.send_keys(&name, &["Enter"]);
            }
            if t.state == TaskState::Working
                && let Some(started) = t.started_at
            {
                let worked = millis_since(started).saturating_sub(t.waited_ms);
                if worked >= t.timeout_secs * 1000 {
                    self.check_summary(&name);
                    if self.live.get(&name).and_then(|l| l.current.as_deref()) == Some(id.as_str())
                    {
                        self.interrupt(&name, Ending::TimedOut);
                    }
                }
            }
        }
    }
}

pub(super) fn millis_since(t: Timestamp) -> u64 {
    (Timestamp::now().as_millisecond() - t.as_millisecond()).max(0) as u64
}
