//! `hitl listen`: run the broker over one or more projects with a local responder.
//!
//! Start-up order matters for "nothing lost": take each project's lock, open history,
//! start watching, *then* read the spools (the broker's first rescan), so a question
//! written at any moment is seen by the watch, the scan, or both. Only then are the
//! pid files written and "ready" printed. On SIGINT/SIGTERM the broker stops taking
//! work, history is flushed, and the pid files are removed; pending questions stay in
//! the spool for the next start.

use std::{
    fs::File,
    io::{Read, Seek, Write},
    path::PathBuf,
};

use anyhow::{Context, Result, bail};
use nix::fcntl::{Flock, FlockArg};

use crate::{
    config::{self, Paths},
    daemon::{self, DaemonOptions},
    spool::{ListenerInfo, Spool},
    ui,
};

/// Which responder answers in this process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum UiKind {
    /// A full-screen inbox in this terminal (the default when stdin and stdout are
    /// a terminal).
    Tui,
    /// Sequential prompt on this terminal (stdin may be a pipe; the default when it
    /// is not a terminal).
    Terminal,
    /// A desktop dialog per request (zenity, yad or kdialog; osascript on macOS);
    /// without a display or one of them, the terminal prompt.
    Dialog,
    /// None: answer with `hitl answer` or other UIs.
    None,
}

/// How to listen: the flags of `hitl listen` (their doc comments are its help text).
#[derive(Debug, Clone, clap::Args)]
pub struct ListenOptions {
    /// Project folders to serve (default: the current one).
    pub dirs: Vec<PathBuf>,
    /// Who answers in this terminal (default: tui when stdin and stdout are a
    /// terminal, else terminal).
    #[arg(long, value_enum)]
    pub ui: Option<UiKind>,
    /// History database: sqlite://PATH (default: the user data folder's hitl.db).
    #[arg(long, env = "HITL_DB")]
    pub db: Option<String>,
    /// Serve the HTTP API here: a port (4001), localhost:PORT or IP:PORT; or "off"
    /// for nowhere (default: the [http] listen_addr setting, 127.0.0.1:4000). A port
    /// that is taken stops the listener, saying by whom; only the default 4000, when
    /// your own program holds it (another project's listener), gives way to a port of
    /// this project's own, the same each run. Port 0: any free port.
    #[arg(long, value_name = "ADDR", conflicts_with = "no_http")]
    pub http: Option<String>,
    /// Do not serve HTTP.
    #[arg(long)]
    pub no_http: bool,
    /// Answer every question with TEXT (yes/no: yes, select: first option, approvals:
    /// approved). For demos, tests and benchmarks only.
    #[arg(long, value_name = "TEXT")]
    pub auto_answer: Option<String>,
    /// Count a human as present even with no prompt or dashboard attached, so hooks
    /// wait for an answer instead of leaving the call to Claude Code (for when you
    /// answer with `hitl answer` or a script).
    #[arg(long)]
    pub attended: bool,
    /// Relay the mailbox runs (`hitl mailbox`) whose folders match GLOB, as they appear
    /// (e.g. '/tmp/historian-*'; any number), besides the runs `hitl mailbox init`
    /// registered with this project.
    #[arg(long, value_name = "GLOB")]
    pub mailbox: Vec<String>,
    /// No desktop notifications of new requests (on by default where a desktop
    /// session is).
    #[arg(long)]
    pub no_notify: bool,
}

/// Holds a project's `.listener.pid` lock; removes the pid files when dropped.
struct ProjectLock {
    spool: Spool,
    _lock: Flock<File>,
}

impl Drop for ProjectLock {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(self.spool.listener_info_file());
        let _ = std::fs::remove_file(self.spool.listener_pid_file());
    }
}

/// Takes the project's listener lock. The kernel releases a `flock` when its holder
/// dies, so a pid file left by a killed listener is reclaimed without guessing.
fn lock_project(spool: &Spool) -> Result<ProjectLock> {
    let path = spool.listener_pid_file();
    let file = File::options()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .with_context(|| format!("opening {}", path.display()))?;
    let mut lock = match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
        Ok(l) => l,
        Err((mut f, _)) => {
            let mut pid = String::new();
            let _ = f.read_to_string(&mut pid);
            bail!(
                "another listener (pid {}) already serves {}; stop it first, or answer its \
                 questions with `hitl answer`",
                pid.trim(),
                spool.project().display()
            );
        }
    };
    lock.set_len(0)?;
    lock.rewind()?;
    writeln!(lock, "{}", std::process::id())?;
    lock.sync_data()?;
    Ok(ProjectLock {
        spool: spool.clone(),
        _lock: lock,
    })
}

/// Unblocks SIGINT, SIGTERM and SIGHUP for this thread and the threads it starts
/// later. A blocked mask is inherited from the parent process, and a listener that
/// cannot see SIGTERM cannot stop cleanly. Call before building the runtime.
pub fn unblock_stop_signals() -> Result<()> {
    let mut ours = nix::sys::signal::SigSet::empty();
    for s in [
        nix::sys::signal::Signal::SIGINT,
        nix::sys::signal::Signal::SIGTERM,
        nix::sys::signal::Signal::SIGHUP,
    ] {
        ours.add(s);
    }
    ours.thread_unblock()?;
    Ok(())
}

/// Runs the listener until SIGINT or SIGTERM.
pub async fn run(opts: ListenOptions) -> Result<()> {
    let mut stop_signals = StopSignals::catch()?;
    let dirs = if opts.dirs.is_empty() {
        vec![std::env::current_dir().context("reading the current folder")?]
    } else {
        opts.dirs.clone()
    };
    let mut spools = Vec::new();
    for d in &dirs {
        let abs =
            std::fs::canonicalize(d).with_context(|| format!("no such folder {}", d.display()))?;
        let spool = Spool::new(&abs);
        if !spool.exists() {
            bail!(
                "{} is not initialised for hitl (no .helpers/ folder); run: hitl init {}",
                abs.display(),
                d.display()
            );
        }
        spool.ensure_layout()?;
        if !spools.contains(&spool) {
            spools.push(spool);
        }
    }
    let paths = Paths::from_env();
    let settings = config::load(&paths, spools.first().map(|s| s.config_file()).as_deref())?;
    // Hooks read the policy on each call; a broken one is said here, where someone
    // is looking (the hook then leaves every call to Claude Code's own prompt).
    if let Err(e) = crate::guard::policy::validate(&settings.hook) {
        eprintln!(
            "hitl: warning: {e:#}; `hitl hook` asks Claude Code's own prompt until it is fixed"
        );
    }
    let locks = spools
        .iter()
        .map(lock_project)
        .collect::<Result<Vec<_>>>()?;

    let db_url = opts.db.clone().unwrap_or_else(|| paths.db_url());
    let http = match (opts.no_http, &opts.http) {
        (true, _) => None,
        (false, Some(addr)) if addr == "off" => None,
        (false, Some(addr)) => Some((addr.clone(), false)),
        (false, None) if settings.http.listen_addr == "off" => None,
        // Only the default gives way (see server::bind): a port the user chose is kept.
        (false, None) => Some((
            settings.http.listen_addr.clone(),
            settings.http.listen_addr == crate::config::DEFAULT_LISTEN_ADDR,
        )),
    };
    let mut ui_kind = opts.ui.unwrap_or(if ui::tui::available() {
        UiKind::Tui
    } else {
        UiKind::Terminal
    });
    let dialogs = match ui_kind {
        UiKind::Dialog => match ui::dialog::find() {
            Ok(program) => Some(program),
            Err(why) => {
                eprintln!("hitl: {why}: answering in this terminal instead");
                ui_kind = UiKind::Terminal;
                None
            }
        },
        _ => None,
    };
    let responder: daemon::Responder = match (&opts.auto_answer, ui_kind) {
        (Some(text), _) => {
            eprintln!(
                "hitl: WARNING: --auto-answer is on: every question is answered {text:?} \
                 (yes/no: yes, select: first option, approvals: approved) without a human"
            );
            // The broker's own rule (see `BrokerOptions::auto_answer`), which answers
            // at once: present for as long as it runs.
            attending("auto-answer")
        }
        (None, UiKind::Terminal) => Box::new(|c| {
            // Present from the start: `.listener.json` says so before "ready".
            let attendance = c.broker.attend("terminal");
            tokio::spawn(ui::terminal::run(c.broker, attendance))
        }),
        (None, UiKind::Tui) => {
            let spools = spools.clone();
            Box::new(move |c| {
                let attendance = c.broker.attend("tui");
                ui::tui::start(c, attendance, spools)
            })
        }
        (None, UiKind::Dialog) => {
            let program = dialogs.expect("found above");
            Box::new(move |c| {
                let attendance = c.broker.attend("dialog");
                tokio::spawn(ui::dialog::run(c, program, attendance))
            })
        }
        (None, UiKind::None) => Box::new(|_| tokio::spawn(std::future::pending::<()>())),
    };
    let mut responders = vec![responder];
    if opts.attended {
        responders.push(attending("attended"));
    }
    let mut daemon = daemon::start(DaemonOptions {
        spools: spools.clone(),
        db_url: db_url.clone(),
        settings,
        http,
        config_dir: paths.config_dir.clone(),
        responders,
        auto_answer: opts.auto_answer.clone(),
        mailboxes: opts.mailbox.clone(),
        notify: !opts.no_notify,
    })
    .await?;
    let http_url = daemon.http_url.clone();

    let projects: Vec<PathBuf> = spools.iter().map(|s| s.project().to_path_buf()).collect();
    let mut presence = daemon.handle.presence().watch();
    let mut info = ListenerInfo::new(&projects, http_url.as_deref());
    let mut certificate = daemon.tls_sha256.clone();
    info.tls_sha256 = certificate.as_mut().map(|c| c.borrow_and_update().clone());
    info.present = presence.borrow_and_update().clone();
    info.reachable = daemon.reachable.clone();
    for s in &spools {
        info.write(s)
            .with_context(|| format!("writing {}", s.listener_info_file().display()))?;
    }
    // Hooks read who is present from the file: kept true as UIs come and go. The
    // user's commands read which certificate to trust from it: kept true as it is
    // renewed.
    let presence_task = tokio::spawn({
        let spools = spools.clone();
        async move {
            loop {
                tokio::select! {
                    changed = presence.changed() => {
                        if changed.is_err() {
                            return;
                        }
                        info.present = presence.borrow_and_update().clone();
                    }
                    Some(sha) = async {
                        match certificate.as_mut() {
                            Some(c) => c.changed().await.ok().map(|()| c.borrow_and_update().clone()),
                            None => std::future::pending().await,
                        }
                    } => info.tls_sha256 = Some(sha),
                }
                for s in &spools {
                    if let Err(e) = info.write(s) {
                        tracing::warn!("writing {}: {e}", s.listener_info_file().display());
                    }
                }
            }
        }
    });
    // Without HTTP nothing can ask what this listener holds besides its spools'
    // question files: it keeps a list in each spool instead.
    let held_task = http_url
        .is_none()
        .then(|| tokio::spawn(keep_held_listed(daemon.handle.clone(), spools.clone())));
    let names: Vec<String> = projects.iter().map(|p| p.display().to_string()).collect();
    eprintln!(
        "hitl: listening on {} (history: {})",
        names.join(", "),
        crate::store::redact_url(&db_url)
    );
    if let Some(url) = &http_url {
        eprintln!("hitl: HTTP API on {url}");
        // Opened once, the link leaves the token in a cookie for the page.
        if let Some(link) = daemon.login_link() {
            eprintln!(
                "hitl: dashboard on {link} (a one-time login link; `hitl dashboard` makes another)"
            );
        }
    }
    eprintln!("hitl: ready");

    tokio::select! {
        _ = stop_signals.recv() => {}
        // The broker only ends when told to; ending on its own is a bug (a panic).
        // Stop loudly so a supervisor restarts us: the spool keeps every question.
        r = daemon.crashed() => return r,
    }
    eprintln!("hitl: stopping; pending questions stay queued for the next start");
    // Hooks waiting on us step aside at once rather than notice we are gone.
    presence_task.abort();
    if let Some(t) = held_task {
        t.abort();
    }
    for s in &spools {
        let _ = std::fs::remove_file(s.listener_info_file());
        let _ = std::fs::remove_file(s.held_file());
    }
    daemon.stop().await;
    drop(locks);
    Ok(())
}

/// Keeps each spool's `queue/held.json` ([`Spool::held_file`]) the list of requests
/// the broker holds that live in the store (a mailbox's questions, a task's
/// first-run screens), rewritten as they come and go.
async fn keep_held_listed(broker: crate::broker::BrokerHandle, spools: Vec<Spool>) {
    use crate::broker::Change;
    use tokio::sync::broadcast::error::RecvError;
    let mut changes = broker.subscribe();
    let write = async || {
        let held: Vec<crate::api::RequestView> = broker
            .pending()
            .await
            .iter()
            .filter(|p| p.stored)
            .map(|p| crate::api::RequestView::of_pending(p))
            .collect();
        let mut bytes = serde_json::to_vec_pretty(&held).unwrap_or_default();
        bytes.push(b'\n');
        for s in &spools {
            if let Err(e) = s.replace_file(&s.held_file(), &bytes) {
                tracing::warn!("writing {}: {e}", s.held_file().display());
            }
        }
    };
    write().await;
    loop {
        let stored = match changes.recv().await {
            Ok(Change::Queued(p) | Change::Updated(p)) => p.stored,
            Ok(Change::Finished(f)) => f.pending.stored,
            Ok(_) => false,
            Err(RecvError::Lagged(_)) => true,
            Err(RecvError::Closed) => return,
        };
        if stored {
            write().await;
        }
    }
}

/// A responder that only marks a human as present while the listener runs.
fn attending(kind: &'static str) -> daemon::Responder {
    Box::new(move |c| {
        // Taken now, not in the task: `.listener.json` says so before "ready".
        let attendance = c.broker.attend(kind);
        tokio::spawn(async move {
            let _attendance = attendance;
            std::future::pending::<()>().await
        })
    })
}

/// The signals that stop the listener, caught from the moment this is made.
pub(crate) struct StopSignals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
}

impl StopSignals {
    /// Starts catching SIGTERM, SIGINT and SIGHUP. Made before "ready" is printed: a
    /// stop sent the moment the listener says it is ready must not be missed.
    pub(crate) fn catch() -> Result<StopSignals> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(StopSignals {
            term: signal(SignalKind::terminate())?,
            int: signal(SignalKind::interrupt())?,
            hup: signal(SignalKind::hangup())?,
        })
    }

    /// Waits for any of them.
    pub(crate) async fn recv(&mut self) {
        tokio::select! {
            _ = self.term.recv() => {}
            _ = self.int.recv() => {}
            _ = self.hup.recv() => {}
        }
    }
}
