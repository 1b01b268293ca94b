//! `hitl task …`: seed 002's task runner from the command line. Every command but
//! `attach`, `peek` and `event` asks the project's listener, which owns the sessions
//! and their queues (`/api/v1/tasks`); `attach` and `peek` look at hitl's tmux server
//! directly.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use reqwest::Method;
use serde_json::{Value, json};

use crate::api::client::Client;
use crate::spool::{ListenerInfo, Spool};
use crate::tasks::files::TaskFiles;
use crate::tasks::headless::is_headless;
use crate::tasks::{SessionStatus, Submitted, TaskResult, TaskView, tmux::Tmux};

/// `hitl task wait`: the task completed.
pub const EXIT_COMPLETED: u8 = 0;
/// `hitl task wait`: the task ended otherwise (failed, canceled, rejected).
pub const EXIT_NOT_COMPLETED: u8 = 1;
/// `hitl task wait`: still running when the wait ran out.
pub const EXIT_STILL_RUNNING: u8 = 2;
/// Any `hitl task` command: the listener could not be asked, or refused.
pub const EXIT_CANNOT_ASK: u8 = 3;

/// What `hitl task` does.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum TaskCommand {
    /// Start (or adopt) a session: an agent (default `claude`) in a tmux session of
    /// hitl's, working in one folder, taking one task at a time.
    ///
    /// `--command "claude -p"` runs headless instead, for servers without a
    /// terminal: Claude Code in print mode once per task, asking for permissions
    /// through hitl (`--permission-prompt-tool mcp__hitl__permission_prompt`).
    Session {
        /// Its name (letters, digits, `.`, `_`, `-`).
        name: String,
        /// The folder the agent works in.
        #[arg(long)]
        workspace: PathBuf,
        /// The agent's command line, split at spaces (default: claude).
        #[arg(long)]
        command: Option<String>,
        /// The tmux key that interrupts the agent (default: Escape, Claude Code's).
        #[arg(long)]
        interrupt_key: Option<String>,
        /// Work in a git worktree of the workspace's repository on BRANCH (made from
        /// the current commit if it does not exist): `<repository>/.worktrees/NAME`.
        #[arg(long, value_name = "BRANCH")]
        worktree: Option<String>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// List the sessions with their queues.
    Sessions {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// End a session: its agent stopped (its tmux session killed) and the session
    /// forgotten. Refused while a task of it runs or waits: cancel those first. Its
    /// tasks stay on record; a worktree it worked in stays.
    End {
        /// The session.
        name: String,
        /// Print JSON (the session as it stood).
        #[arg(long)]
        json: bool,
    },
    /// Attach this terminal to a session (detach with C-b d).
    Attach {
        /// The session.
        name: String,
    },
    /// Print the last lines of a session's screen.
    Peek {
        /// The session.
        name: String,
        /// How many lines.
        #[arg(long, default_value_t = 40)]
        lines: usize,
    },
    /// Queue a task for a session; prints its id and place.
    Submit {
        /// The session.
        session: String,
        /// What to do.
        instruction: String,
        /// urgent, high or normal.
        #[arg(long)]
        priority: Option<String>,
        /// A file whose text goes into CONTEXT.md.
        #[arg(long)]
        context: Option<PathBuf>,
        /// A file whose text is SPECS.md.
        #[arg(long)]
        specs: Option<PathBuf>,
        /// Seconds the task may work, not counting waits for a person (default 300).
        #[arg(long)]
        timeout: Option<u64>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// List the tasks.
    List {
        /// Only this session's.
        #[arg(long)]
        session: Option<String>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Show how a task stands.
    Status {
        /// The task.
        id: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Wait for a task to end. Exit 0 completed, 1 ended otherwise, 2 still running.
    Wait {
        /// The task.
        id: String,
        /// Seconds to wait (default: for ever).
        #[arg(long)]
        timeout: Option<f64>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Print a task's result: its summary read, and its artifacts.
    Result {
        /// The task.
        id: String,
        /// Print JSON (RESULTS.json).
        #[arg(long)]
        json: bool,
    },
    /// Cancel a task: a waiting one is taken out, a running one interrupted.
    Cancel {
        /// The task.
        id: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Move a waiting task to another place in its session's queue (1: next). It
    /// takes the priority of the task it now goes before: moved ahead of an urgent
    /// one, it is urgent.
    Move {
        /// The task.
        id: String,
        /// Its new place (1: next; beyond the end: last).
        position: usize,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Submit an ended task again, as a new task.
    Retry {
        /// The task.
        id: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// What a session's agent hooks run (Claude Code's hook JSON on stdin).
    #[command(hide = true)]
    Event {
        /// The hook event.
        event: String,
    },
}

/// Runs `hitl task …`; the exit code.
pub fn run(dir: Option<PathBuf>, command: TaskCommand) -> Result<u8> {
    match command {
        TaskCommand::Event { event } => {
            crate::tasks::event::record(&event);
            return Ok(0);
        }
        TaskCommand::Attach { name } => {
            let tmux = Tmux::default();
            if !tmux.has_session(&name) {
                if headless_session(dir.as_deref(), &name).is_some() {
                    bail!(
                        "session {name} runs headless (claude -p): there is no screen to attach to; `hitl task peek {name}` shows its output"
                    );
                }
                bail!("no task session {name} (hitl task sessions lists them)");
            }
            let status = tmux
                .attach_command(&name)
                .status()
                .context("running tmux")?;
            return Ok(if status.success() { 0 } else { 1 });
        }
        TaskCommand::Peek { name, lines } => {
            let tmux = Tmux::default();
            if !tmux.has_session(&name) {
                let Some(files) = headless_session(dir.as_deref(), &name) else {
                    bail!("no task session {name} (hitl task sessions lists them)");
                };
                println!("{}", crate::tasks::headless::screen(&files, &name, lines));
                return Ok(0);
            }
            println!("{}", tmux.capture(&name, lines)?);
            return Ok(0);
        }
        _ => {}
    }
    let client = listener(dir.as_deref())?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(call(&client, command))
}

/// The task files of the project, if session `name` there runs headless.
fn headless_session(dir: Option<&std::path::Path>, name: &str) -> Option<TaskFiles> {
    let spool = Spool::locate(dir).ok()?;
    let files = TaskFiles::new(&spool);
    files
        .load_sessions()
        .iter()
        .any(|s| s.name == name && is_headless(&s.command))
        .then_some(files)
}

/// A client of the project's listener, which runs the tasks.
fn listener(dir: Option<&std::path::Path>) -> Result<Client> {
    let spool = Spool::locate(dir)?;
    let url = ListenerInfo::running(&spool)
        .and_then(|l| l.http)
        .ok_or_else(|| {
            anyhow!(
                "no listener serves {} over HTTP: tasks run under `hitl listen` there",
                spool.project().display()
            )
        })?;
    Client::new(&url, crate::api::client::Destination::Listener)
}

async fn call(client: &Client, command: TaskCommand) -> Result<u8> {
    let print_json =
        |v: &Value| println!("{}", serde_json::to_string_pretty(v).unwrap_or_default());
    match command {
        TaskCommand::Session {
            name,
            workspace,
            command,
            interrupt_key,
            worktree,
            json,
        } => {
            let workspace = std::path::absolute(&workspace)
                .with_context(|| format!("reading {}", workspace.display()))?;
            let body = json!({
                "name": name,
                "workspace": workspace,
                "command": command.map(|c| c.split_whitespace().map(str::to_string).collect::<Vec<_>>()),
                "interrupt_key": interrupt_key,
                "worktree": worktree,
            });
            let (_, v) = client
                .call(
                    Method::POST,
                    "/api/v1/task-sessions",
                    Some(&body),
                    "starting the session",
                )
                .await?;
            if json {
                print_json(&v);
            } else {
                let s: SessionStatus = serde_json::from_value(v)?;
                let watch = if is_headless(&s.session.command) {
                    "headless, once per task: hitl task peek"
                } else {
                    "hitl task attach"
                };
                println!(
                    "session {} runs `{}` in {} ({watch} {} to watch)",
                    s.session.name,
                    s.session.command.join(" "),
                    s.session.workspace.display(),
                    s.session.name
                );
            }
        }
        TaskCommand::Sessions { json } => {
            let (_, v) = client
                .call(
                    Method::GET,
                    "/api/v1/task-sessions",
                    None,
                    "listing the sessions",
                )
                .await?;
            if json {
                print_json(&v);
                return Ok(0);
            }
            let list: Vec<SessionStatus> = serde_json::from_value(v)?;
            if list.is_empty() {
                println!(
                    "No task sessions. Start one with `hitl task session NAME --workspace DIR`."
                );
                return Ok(0);
            }
            println!(
                "{:<20} {:<8} {:<40} {:>6}  WORKSPACE",
                "SESSION", "STATE", "CURRENT", "QUEUED"
            );
            for s in list {
                let state = match (s.alive, s.session.ready, s.is_executing) {
                    (false, _, _) => "gone",
                    (true, false, _) => "starting",
                    (true, true, true) => "busy",
                    (true, true, false) => "idle",
                };
                println!(
                    "{:<20} {:<8} {:<40} {:>6}  {}",
                    s.session.name,
                    state,
                    s.current_task_id.as_deref().unwrap_or("-"),
                    s.queued_tasks,
                    s.session.workspace.display()
                );
            }
        }
        TaskCommand::End { name, json } => {
            let (_, v) = client
                .call(
                    Method::DELETE,
                    &format!("/api/v1/task-sessions/{name}"),
                    None,
                    "ending the session",
                )
                .await?;
            if json {
                print_json(&v);
                return Ok(0);
            }
            let s: SessionStatus = serde_json::from_value(v)?;
            println!("ended session {}", s.session.name);
            if s.session.worktree.is_some() {
                eprintln!(
                    "its worktree stays, with the work in it: {}",
                    s.session.workspace.display()
                );
            }
        }
        TaskCommand::Submit {
            session,
            instruction,
            priority,
            context,
            specs,
            timeout,
            json,
        } => {
            let read = |f: Option<PathBuf>| -> Result<Option<String>> {
                f.map(|f| {
                    std::fs::read_to_string(&f).with_context(|| format!("reading {}", f.display()))
                })
                .transpose()
            };
            let body = json!({
                "session": session,
                "instruction": instruction,
                "priority": priority,
                "context": read(context)?,
                "specs": read(specs)?,
                "timeout": timeout,
            });
            let (_, v) = client
                .call(
                    Method::POST,
                    "/api/v1/tasks",
                    Some(&body),
                    "submitting the task",
                )
                .await?;
            if json {
                print_json(&v);
            } else {
                let s: Submitted = serde_json::from_value(v)?;
                println!("{}", s.task.id);
                match s.position {
                    0 => eprintln!("queued for {}", s.task.session),
                    p => eprintln!("queued, position {p}"),
                }
            }
        }
        TaskCommand::List { session, json } => {
            let (_, v) = client
                .call(Method::GET, "/api/v1/tasks", None, "listing the tasks")
                .await?;
            let list: Vec<TaskView> = serde_json::from_value(v)?;
            let list: Vec<TaskView> = list
                .into_iter()
                .filter(|t| session.as_ref().is_none_or(|s| &t.task.session == s))
                .collect();
            if json {
                print_json(&serde_json::to_value(&list)?);
                return Ok(0);
            }
            if list.is_empty() {
                println!("No tasks.");
                return Ok(0);
            }
            println!(
                "{:<42} {:<14} {:<8} {:<8} {:<9} INSTRUCTION",
                "TASK", "SESSION", "PRIORITY", "OUTCOME", "STATE"
            );
            for t in list {
                let t = t.task;
                let first: String = t
                    .instruction
                    .lines()
                    .next()
                    .unwrap_or("")
                    .chars()
                    .take(50)
                    .collect();
                println!(
                    "{:<42} {:<14} {:<8} {:<8} {:<9} {first}",
                    t.id,
                    t.session,
                    t.priority.as_str(),
                    t.outcome.map_or("-", |o| o.as_str()),
                    t.state.as_str()
                );
            }
        }
        TaskCommand::Status { id, json } => {
            let (_, v) = client
                .call(
                    Method::GET,
                    &format!("/api/v1/tasks/{id}"),
                    None,
                    "looking the task up",
                )
                .await?;
            show(v, json, |x: TaskView| print_task(&x))?;
        }
        TaskCommand::Wait { id, timeout, json } => {
            let until =
                timeout.map(|s| tokio::time::Instant::now() + Duration::from_secs_f64(s.max(0.0)));
            loop {
                let left = until.map(|u| u.saturating_duration_since(tokio::time::Instant::now()));
                let step = left.map_or(60.0, |l| l.as_secs_f64().min(60.0));
                let (status, v) = client
                    .call(
                        Method::GET,
                        &format!("/api/v1/tasks/{id}/wait?timeout={step:.3}"),
                        None,
                        "waiting for the task",
                    )
                    .await?;
                let view: TaskView = serde_json::from_value(v.clone())?;
                let done = status != reqwest::StatusCode::ACCEPTED;
                if done || left.is_some_and(|l| l.is_zero()) {
                    if json {
                        print_json(&v);
                    } else {
                        print_task(&view);
                    }
                    return Ok(match view.task.state {
                        crate::tasks::TaskState::Completed => EXIT_COMPLETED,
                        s if s.is_final() => EXIT_NOT_COMPLETED,
                        _ => EXIT_STILL_RUNNING,
                    });
                }
            }
        }
        TaskCommand::Result { id, json } => {
            let (_, v) = client
                .call(
                    Method::GET,
                    &format!("/api/v1/tasks/{id}/result"),
                    None,
                    "reading the result",
                )
                .await?;
            show(v, json, |x: TaskResult| print_result(&x))?;
        }
        TaskCommand::Cancel { id, json } => {
            let (_, v) = client
                .call(
                    Method::POST,
                    &format!("/api/v1/tasks/{id}/cancel"),
                    None,
                    "cancelling the task",
                )
                .await?;
            show(v, json, |t: crate::tasks::Task| {
                println!("{id}: {}", t.state)
            })?;
        }
        TaskCommand::Move { id, position, json } => {
            let (_, v) = client
                .call(
                    Method::POST,
                    &format!("/api/v1/tasks/{id}/move"),
                    Some(&json!({ "position": position })),
                    "moving the task",
                )
                .await?;
            show(v, json, |t: TaskView| {
                println!(
                    "{id}: position {}, priority {}",
                    t.position.unwrap_or(0),
                    t.task.priority.as_str()
                )
            })?;
        }
        TaskCommand::Retry { id, json } => {
            let (_, v) = client
                .call(
                    Method::POST,
                    &format!("/api/v1/tasks/{id}/retry"),
                    None,
                    "retrying the task",
                )
                .await?;
            show(v, json, |s: Submitted| println!("{}", s.task.id))?;
        }
        TaskCommand::Event { .. } | TaskCommand::Attach { .. } | TaskCommand::Peek { .. } => {
            unreachable!("handled without the listener")
        }
    }
    Ok(0)
}

/// Prints `v` as JSON, or as `human` shows it to people.
fn show<T: serde::de::DeserializeOwned>(v: Value, json: bool, human: impl FnOnce(T)) -> Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        human(serde_json::from_value(v)?);
    }
    Ok(())
}

fn print_task(v: &TaskView) {
    let t = &v.task;
    println!("{}  {}  {}", t.id, t.state, t.session);
    if let Some(p) = v.position {
        println!("  queued, position {p}");
    }
    if let Some(o) = t.outcome {
        println!("  outcome: {}", o.as_str());
    }
    if let Some(r) = &t.reason {
        println!("  {r}");
    }
    if let Some(u) = &t.usage {
        println!("  {}", usage_line(u));
    }
}

/// `3 turns, 30 in / 15 out tokens, $0.0004`.
fn usage_line(u: &crate::tasks::usage::TaskUsage) -> String {
    let mut line = format!(
        "{} turns, {} in / {} out tokens",
        u.turns,
        u.input_tokens + u.cache_read_input_tokens + u.cache_creation_input_tokens,
        u.output_tokens
    );
    if let Some(cost) = u.cost_usd {
        line += &format!(", ${cost:.4}");
    }
    line
}

fn print_result(r: &TaskResult) {
    println!("{}  {}  {}", r.task_id, r.state, r.outcome.as_str());
    if !r.summary.objective.is_empty() {
        println!("Objective: {}", r.summary.objective);
    }
    for a in &r.summary.accomplishments {
        println!("  - {a}");
    }
    println!("Tests: {:?}", r.summary.tests.verdict);
    println!("Artifacts:");
    for a in &r.artifacts.artifacts {
        println!("  {} ({} bytes)", a.path, a.bytes);
    }
    for l in &r.artifacts.left_out {
        println!("  left out {}: {}", l.path, l.reason);
    }
    match (r.duration_secs, &r.usage) {
        (Some(d), Some(u)) => println!("Took {d:.1} s: {}", usage_line(u)),
        (Some(d), None) => println!("Took {d:.1} s"),
        (None, Some(u)) => println!("{}", usage_line(u)),
        (None, None) => {}
    }
}
