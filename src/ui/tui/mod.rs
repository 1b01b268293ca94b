//! `hitl listen --ui tui`: a full-screen inbox in the terminal (ratatui over
//! crossterm), a responder like the line prompt: every pending request across
//! projects, agents, tasks and mailbox runs, most urgent first; the selected one's
//! detail; answers typed in place and sent through the broker; views of the agents,
//! tasks, history and activity feed.
//!
//! `app.rs` is the state and what keys do to it, `keys.rs` which key is which
//! action, `draw.rs` the drawing; this file runs them: the terminal taken and given
//! back (on exit, on a panic, when the daemon stops the task), keys read on a thread
//! of their own, the broker's changes followed, the views read again while shown.
//! While the TUI has the terminal, the listener's own messages go to
//! `.helpers/listener.log` instead of over the screen.

pub mod app;
pub mod draw;
pub mod keys;
#[cfg(test)]
mod tests;

use std::{
    io::Write,
    path::PathBuf,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use ratatui::crossterm::event::{self, Event};
use tokio::sync::{broadcast::error::RecvError, mpsc};

use self::app::{App, Effect, Mode, Table, View};
use super::ResponderContext;
use crate::{
    broker::{Change, PendingRequest, presence::Attendance},
    spool::Spool,
};

/// Who TUI answers are from.
pub const RESPONDER: &str = "tui";

/// How often the screen is drawn again with nothing new (ages, notices).
const TICK: Duration = Duration::from_millis(250);
/// How often a view other than the inbox is read again while shown.
const REFRESH_EVERY: Duration = Duration::from_secs(2);

/// Whether the TUI can run here: stdin and stdout are a terminal.
pub fn available() -> bool {
    use std::io::IsTerminal;
    std::io::stdin().is_terminal() && std::io::stdout().is_terminal()
}

/// The terminal, taken: raw mode and the alternate screen (`ratatui::init`, whose
/// panic hook gives it back too), the listener's stderr sent to a log file. Given
/// back when dropped: on exit, and when the daemon aborts the task.
struct Screen {
    terminal: ratatui::DefaultTerminal,
    saved_stderr: Option<std::os::fd::OwnedFd>,
    keys_stop: Arc<AtomicBool>,
}

impl Screen {
    fn take(log: Option<&PathBuf>) -> std::io::Result<Screen> {
        let saved_stderr = log.and_then(|path| redirect_stderr(path).ok());
        let terminal = ratatui::try_init()?;
        Ok(Screen {
            terminal,
            saved_stderr,
            keys_stop: Arc::new(AtomicBool::new(false)),
        })
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        self.keys_stop.store(true, Ordering::Relaxed);
        ratatui::restore();
        if let Some(fd) = self.saved_stderr.take() {
            let _ = nix::unistd::dup2_stderr(&fd);
        }
    }
}

/// Points stderr at `path` (appended); returns the old stderr, to put back.
fn redirect_stderr(path: &PathBuf) -> std::io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::AsFd;
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)?;
    let saved = nix::unistd::dup(std::io::stderr().as_fd())?;
    nix::unistd::dup2_stderr(file.as_fd())?;
    Ok(saved)
}

/// Key presses and resizes, read on a thread of their own until `stop`.
fn read_keys(stop: Arc<AtomicBool>) -> mpsc::UnboundedReceiver<Event> {
    let (tx, rx) = mpsc::unbounded_channel();
    std::thread::Builder::new()
        .name("tui-keys".into())
        .spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                match event::poll(Duration::from_millis(100)) {
                    Ok(true) => match event::read() {
                        Ok(e) => {
                            if tx.send(e).is_err() {
                                return;
                            }
                        }
                        Err(_) => return,
                    },
                    Ok(false) => {}
                    Err(_) => return,
                }
            }
        })
        .expect("spawning the key reader");
    rx
}

/// Starts the TUI: the terminal is taken at once (so that what the listener says
/// from now on goes to its log, not over the screen), then the TUI runs until the
/// broker stops, or the person quits (which stops the listener, as Ctrl-C would).
/// `spools`: the projects, for the agents view and the log file.
pub fn start(
    context: ResponderContext,
    attendance: Attendance,
    spools: Vec<Spool>,
) -> tokio::task::JoinHandle<()> {
    let log = spools.first().map(|s| s.root().join("listener.log"));
    match Screen::take(log.as_ref()) {
        Ok(screen) => tokio::spawn(run(screen, context, attendance, spools)),
        Err(e) => {
            eprintln!("hitl: the TUI could not take the terminal ({e}); answer with `hitl answer`");
            tokio::spawn(async move {
                let _attendance = attendance;
            })
        }
    }
}

async fn run(
    mut screen: Screen,
    context: ResponderContext,
    attendance: Attendance,
    spools: Vec<Spool>,
) {
    let _attendance = attendance;
    let mut keys = read_keys(screen.keys_stop.clone());
    let broker = context.broker.clone();
    let mut changes = broker.subscribe();
    let mut app = App::new();
    app.set_requests(broker.pending().await, Instant::now());
    app.flash = None;
    if let Some(spool) = spools.first() {
        app.notify(
            format!(
                "listening on {} · messages in .helpers/listener.log · w: the web dashboard",
                spool.project().display()
            ),
            Instant::now(),
        );
    }
    let mut tick = tokio::time::interval(TICK);
    let mut refreshed: Option<(View, Instant)> = None;
    loop {
        let now = Instant::now();
        app.expire(now);
        if app.view != View::Inbox
            && refreshed.is_none_or(|(v, at)| v != app.view || at.elapsed() >= REFRESH_EVERY)
        {
            let table = read_view(app.view, &context, &spools).await;
            app.set_table(app.view, table);
            refreshed = Some((app.view, Instant::now()));
        }
        let stamp = jiff::Timestamp::now();
        if screen
            .terminal
            .draw(|f| draw::draw(f, &app, stamp))
            .is_err()
        {
            return;
        }
        tokio::select! {
            key = keys.recv() => {
                let Some(key) = key else { return };
                let Event::Key(key) = key else { continue };
                let Some(action) = keys::action(&app.mode, key) else { continue };
                match app.act(action) {
                    Effect::None => {}
                    Effect::Respond { seq, id, reply } => {
                        if let Err(e) = broker.respond(seq, reply, RESPONDER).await {
                            app.notify(format!("not sent ({id}): {e}"), Instant::now());
                        }
                    }
                    Effect::ShowWebLink => {
                        app.mode = Mode::Web(context.login_link.as_ref().map(|mint| mint()));
                    }
                    Effect::Quit => {
                        // The listener stops as on Ctrl-C: its own signal handling.
                        let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGTERM);
                    }
                }
            }
            change = changes.recv() => match change {
                Ok(Change::Queued(_)) => {
                    // A bell: the terminal (or tmux, over SSH) says so.
                    let _ = std::io::stdout().write_all(b"\x07");
                    let _ = std::io::stdout().flush();
                    app.set_requests(broker.pending().await, Instant::now());
                }
                Ok(Change::Finished(f)) => {
                    if f.responded_by() != Some(RESPONDER) {
                        app.left(&f.pending.request.content, f.status, f.responded_by(), Instant::now());
                    }
                    app.set_requests(broker.pending().await, Instant::now());
                }
                Ok(Change::Reached(_)) => {}
                Ok(Change::Updated(_)) | Err(RecvError::Lagged(_)) => {
                    app.set_requests(broker.pending().await, Instant::now());
                }
                Ok(Change::Activity(a)) => {
                    if let Some(table) = app.tables.get_mut(View::Activity.title()) {
                        table.rows.insert(0, activity_row(&a.stored()));
                        table.rows.truncate(500);
                    }
                }
                Err(RecvError::Closed) => return,
            },
            _ = tick.tick() => {}
        }
    }
}

/// The rows of `view`, read now.
async fn read_view(view: View, c: &ResponderContext, spools: &[Spool]) -> Table {
    match view {
        View::Inbox => Table::default(),
        View::Agents => agents_table(&c.broker.pending().await, spools),
        View::Tasks => match &c.tasks {
            None => Table {
                empty: "Tasks do not run under this listener.".into(),
                ..Table::default()
            },
            Some(tasks) => tasks_table(tasks.list().await),
        },
        View::History => {
            let query = crate::store::HistoryQuery {
                limit: 200,
                ..Default::default()
            };
            match c.store.history(&query).await {
                Ok(rows) => Table {
                    header: ["ended", "agent", "kind", "question", "answer"]
                        .map(String::from)
                        .to_vec(),
                    rows: rows
                        .into_iter()
                        .map(|h| {
                            let answer = match (&h.answer, &h.responded_by) {
                                (Some(a), Some(by)) => format!("{a} ({by})"),
                                (Some(a), None) => a.clone(),
                                _ => String::new(),
                            };
                            vec![
                                h.status.as_str().to_string(),
                                h.agent_name,
                                h.kind.to_string(),
                                h.content,
                                answer,
                            ]
                        })
                        .collect(),
                    empty: "Nothing asked yet.".into(),
                },
                Err(e) => Table {
                    empty: format!("History cannot be read: {e:#}"),
                    ..Table::default()
                },
            }
        }
        View::Activity => match c.store.recent_events(200, 4 << 20).await {
            Ok(events) => Table {
                header: ["when", "agent", "event", "what"]
                    .map(String::from)
                    .to_vec(),
                rows: events.iter().map(activity_row).collect(),
                empty: "No activity yet: agents' hook events appear here.".into(),
            },
            Err(e) => Table {
                empty: format!("The activity feed cannot be read: {e:#}"),
                ..Table::default()
            },
        },
    }
}

/// One event of the activity feed as a row: when, who, what kind, what.
fn activity_row(e: &crate::store::StoredEvent) -> Vec<String> {
    let ev = &e.event;
    let when = jiff::Timestamp::from_millisecond(ev.timestamp_ms)
        .map(|t| {
            t.to_zoned(jiff::tz::TimeZone::system())
                .strftime("%H:%M:%S")
                .to_string()
        })
        .unwrap_or_default();
    let who = ev
        .extra
        .get("agent_name")
        .and_then(|v| v.as_str())
        .unwrap_or(&ev.source_app)
        .to_string();
    let p = &ev.payload;
    let text = |k: &str| p.get(k).and_then(|v| v.as_str()).map(str::to_string);
    let what = text("line")
        .or_else(|| text("message"))
        .or_else(|| text("tool_name"))
        .or_else(|| text("prompt"))
        .or_else(|| text("instruction"))
        .or_else(|| text("status"))
        .unwrap_or_default();
    vec![when, who, ev.hook_event_type.clone(), what]
}

/// The agents: the spools' registries, the mailbox runs' agents, and the agents
/// asking another way (over HTTP, MCP) with requests waiting.
fn agents_table(pending: &[Arc<PendingRequest>], spools: &[Spool]) -> Table {
    let waiting: std::collections::HashSet<String> =
        pending.iter().map(|p| p.request.agent_id.clone()).collect();
    let count = |id: &str| pending.iter().filter(|p| p.request.agent_id == id).count();
    let status = |s: crate::agents::AgentStatus| {
        serde_json::to_value(s)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default()
    };
    let mut rows = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for spool in spools {
        let project = spool.project().display().to_string();
        for a in crate::agents::list_agents(spool, &waiting) {
            seen.insert(a.agent_id.clone());
            rows.push(vec![
                a.name.clone(),
                status(a.status),
                "spool".into(),
                count(&a.agent_id).to_string(),
                project.clone(),
            ]);
        }
        for a in crate::mailbox::roster::agents(spool) {
            seen.insert(a.agent_id.clone());
            let shown = if waiting.contains(&a.agent_id) {
                "waiting".to_string()
            } else {
                a.mailbox_status.clone().unwrap_or_else(|| status(a.status))
            };
            rows.push(vec![
                a.name.clone(),
                shown,
                "mailbox".into(),
                count(&a.agent_id).to_string(),
                format!("run {}", a.run.display()),
            ]);
        }
    }
    for p in pending {
        let r = &p.request;
        if seen.insert(r.agent_id.clone()) {
            rows.push(vec![
                r.agent_name.clone(),
                "waiting".into(),
                p.origin.as_str().into(),
                count(&r.agent_id).to_string(),
                r.working_dir.clone().unwrap_or_default(),
            ]);
        }
    }
    Table {
        header: ["agent", "status", "origin", "waiting", "where"]
            .map(String::from)
            .to_vec(),
        rows,
        empty: "No agents have asked yet.".into(),
    }
}

fn tasks_table(tasks: Vec<crate::tasks::TaskView>) -> Table {
    let name = |v: serde_json::Value| v.as_str().map(str::to_string).unwrap_or_default();
    Table {
        header: ["session", "state", "priority", "task"]
            .map(String::from)
            .to_vec(),
        rows: tasks
            .into_iter()
            .map(|t| {
                let state = name(serde_json::to_value(t.task.state).unwrap_or_default());
                let shown = match t.position {
                    Some(n) => format!("{state} #{n}"),
                    None => state,
                };
                vec![
                    t.task.session.clone(),
                    shown,
                    t.task.priority.as_str().to_string(),
                    t.task.instruction.clone(),
                ]
            })
            .collect(),
        empty: "No tasks: hitl task submit SESSION TEXT hands one to a session.".into(),
    }
}
