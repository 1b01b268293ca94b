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
use tokio::sync::{mpsc, oneshot};

use crate::{
    agents,
    broker::{Broker, BrokerOptions, spawn_store_writer},
    config::{self, Paths},
    server,
    spool::{
        Spool,
        watch::{SpoolEvent, SpoolWatcher},
        write_atomic,
    },
    store::Store,
    ui,
};

/// Which responder answers in this process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum UiKind {
    /// Sequential prompt on this terminal (stdin may be a pipe).
    Terminal,
    /// None: answer with `hitl answer` or other UIs.
    None,
}

/// How to listen: the flags of `hitl listen` (their doc comments are its help text).
#[derive(Debug, Clone, clap::Args)]
pub struct ListenOptions {
    /// Project folders to serve (default: the current one).
    pub dirs: Vec<PathBuf>,
    /// Who answers in this terminal.
    #[arg(long, value_enum, default_value_t = UiKind::Terminal)]
    pub ui: UiKind,
    /// History database: sqlite://PATH (default: the user data folder's hitl.db).
    #[arg(long, env = "HITL_DB")]
    pub db: Option<String>,
    /// Serve the HTTP API here (default: the [http] listen_addr setting,
    /// 127.0.0.1:4000, or a free port if that one is taken).
    #[arg(long, value_name = "ADDR", conflicts_with = "no_http")]
    pub http: Option<String>,
    /// Do not serve HTTP.
    #[arg(long)]
    pub no_http: bool,
    /// Answer every question with TEXT (yes/no: yes, select: first option, approvals:
    /// approved). For demos, tests and benchmarks only.
    #[arg(long, value_name = "TEXT")]
    pub auto_answer: Option<String>,
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

fn write_listener_info(spool: &Spool, projects: &[PathBuf], http: Option<&str>) -> Result<()> {
    let me = agents::this_process();
    let info = serde_json::json!({
        "version": crate::protocol::VERSION,
        "pid": me.pid,
        "start_time": me.start_time,
        "started_at": jiff::Timestamp::now(),
        "projects": projects,
        "http": http,
        "socket": null,
    });
    let mut bytes = serde_json::to_vec_pretty(&info)?;
    bytes.push(b'\n');
    write_atomic(&spool.tmp(), &spool.listener_info_file(), &bytes, false)
        .with_context(|| format!("writing {}", spool.listener_info_file().display()))
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

/// How often the spools are read when inotify is not available.
const POLL_EVERY: std::time::Duration = std::time::Duration::from_millis(100);

/// Asks the broker to read every spool again, every [`POLL_EVERY`].
fn spawn_poller(events: mpsc::UnboundedSender<SpoolEvent>) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(POLL_EVERY);
        while events.send(SpoolEvent::Rescan).is_ok() {
            tick.tick().await;
        }
    });
}

fn watch_spools(spools: &[Spool], tx: mpsc::UnboundedSender<SpoolEvent>) -> Result<SpoolWatcher> {
    let mut watcher = SpoolWatcher::new(tx)?;
    for s in spools {
        watcher.watch(&s.questions())?;
        watcher.watch(&s.answers())?;
    }
    Ok(watcher)
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
    let settings = config::load(&paths, spools.first())?;
    let locks = spools
        .iter()
        .map(lock_project)
        .collect::<Result<Vec<_>>>()?;

    let db_url = opts.db.clone().unwrap_or_else(|| paths.db_url());
    let store = Store::open(&db_url).await?;
    let reader = store.clone();
    let undelivered = store.undelivered().await?;
    let remote_pending = store.pending_remote().await?;
    let (store_tx, store_task) = spawn_store_writer(store);

    let (events_tx, events_rx) = mpsc::unbounded_channel();
    let remote: Vec<String> = spools
        .iter()
        .filter(|s| crate::spool::is_network_fs(s.root()))
        .map(|s| s.project().display().to_string())
        .collect();
    let watcher = match watch_spools(&spools, events_tx.clone()) {
        Ok(w) if remote.is_empty() => Some(w),
        Ok(w) => {
            // inotify sees only this machine's writes on a network file system.
            eprintln!(
                "hitl: {} on a network file system: also reading the spool every {} ms",
                remote.join(", "),
                POLL_EVERY.as_millis()
            );
            spawn_poller(events_tx);
            Some(w)
        }
        Err(e) => {
            // inotify refused (the user's 128 instances are taken, or the watch table is
            // full): read the spools on a timer instead. Slower, never silent.
            eprintln!(
                "hitl: warning: {e:#}; polling the spool every {} ms instead",
                POLL_EVERY.as_millis()
            );
            spawn_poller(events_tx);
            None
        }
    };

    let (broker, handle) = Broker::new(
        spools.clone(),
        BrokerOptions {
            max_question_bytes: settings.listen.max_question_bytes,
            durable: settings.listen.fsync,
        },
        store_tx,
        undelivered,
        remote_pending,
    );
    let (stop_tx, stop_rx) = oneshot::channel::<()>();
    let mut broker_task = tokio::spawn(broker.run(events_rx, async {
        let _ = stop_rx.await;
    }));

    // Requests made over HTTP by other brokers sharing the store join this queue.
    let replica_task = crate::replica::spawn(reader.clone(), handle.clone());
    let http = match (opts.no_http, &opts.http) {
        (true, _) => None,
        (false, Some(addr)) => Some((addr.clone(), false)),
        (false, None) if settings.http.listen_addr == "off" => None,
        (false, None) => Some((settings.http.listen_addr.clone(), true)),
    };
    let http = match http {
        None => None,
        Some((addr, fallback)) => Some(
            server::start(
                &addr,
                fallback,
                handle.clone(),
                reader,
                &settings.http,
                &paths.config_dir,
                spools.clone(),
            )
            .await?,
        ),
    };
    let http_url = http.as_ref().map(|h| format!("http://{}", h.local));

    let projects: Vec<PathBuf> = spools.iter().map(|s| s.project().to_path_buf()).collect();
    for s in &spools {
        write_listener_info(s, &projects, http_url.as_deref())?;
    }
    let names: Vec<String> = projects.iter().map(|p| p.display().to_string()).collect();
    eprintln!(
        "hitl: listening on {} (history: {})",
        names.join(", "),
        crate::store::redact_url(&db_url)
    );
    if let Some(url) = &http_url {
        eprintln!("hitl: HTTP API on {url}");
    }
    let responder = match (&opts.auto_answer, opts.ui) {
        (Some(text), _) => {
            eprintln!(
                "hitl: WARNING: --auto-answer is on: every question is answered {text:?} \
                 (yes/no: yes, select: first option, approvals: approved) without a human"
            );
            tokio::spawn(ui::auto::run(handle.clone(), text.clone()))
        }
        (None, UiKind::Terminal) => tokio::spawn(ui::terminal::run(handle.clone())),
        (None, UiKind::None) => tokio::spawn(std::future::pending::<()>()),
    };
    eprintln!("hitl: ready");

    tokio::select! {
        _ = stop_signals.recv() => {}
        // The broker only ends when told to; ending on its own is a bug (a panic).
        // Stop loudly so a supervisor restarts us: the spool keeps every question.
        r = &mut broker_task => {
            bail!("the broker stopped unexpectedly ({}); pending questions stay in the spool",
                match r { Ok(()) => "no error".to_string(), Err(e) => e.to_string() });
        }
    }
    eprintln!("hitl: stopping; pending questions stay queued for the next start");
    if let Some(http) = http {
        http.stop().await;
    }
    replica_task.abort();
    let _ = stop_tx.send(());
    let _ = broker_task.await;
    responder.abort();
    drop(handle);
    drop(watcher);
    // Connections still open hold a handle (and so the writer's channel) for a moment
    // longer; everything sent has been written by then.
    let _ = tokio::time::timeout(std::time::Duration::from_secs(5), store_task).await;
    drop(locks);
    Ok(())
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
