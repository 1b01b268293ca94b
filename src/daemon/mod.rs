//! The daemon as a library function: a broker over some project spools and a store,
//! the ways back to askers, the replica sync, the HTTP API and any number of
//! responders. `hitl listen` and `hitl serve` are thin commands over [`start`], and
//! tests start one in-process.
//!
//! Start-up order matters for "nothing lost": open the store, start watching the
//! spools, *then* let the broker read them (its first rescan), so a question written
//! at any moment is seen by the watch, the scan, or both. The ways back subscribe
//! before the broker runs, so no change is missed.

pub mod replica;

use std::{net::SocketAddr, path::PathBuf};

use anyhow::{Result, bail};
use tokio::{
    sync::{mpsc, oneshot},
    task::JoinHandle,
};

use crate::{
    broker::{Broker, BrokerHandle, BrokerOptions},
    config::Settings,
    server,
    spool::{
        Spool,
        watch::{SpoolEvent, SpoolWatcher},
    },
    store::{Store, spawn_store_writer},
};

/// How many threads the daemon's async runtime gets for a store at `db_url`.
///
/// One with SQLite: the broker is one task, SQLite's writes have a thread of their own
/// and blocking work the blocking pool, so a second worker had little to do but be
/// woken. Tokio wakes an idle worker for every task scheduled, and on a small virtual
/// machine that wake-up was a fifth of a lone HTTP request's time (seed round p50
/// 0.81x with one worker; pairs a second and the spool's figures unchanged).
/// PostgreSQL's writes and reads are tasks on the runtime itself, and keep two.
pub fn worker_threads(db_url: &str) -> usize {
    if crate::store::is_postgres_url(db_url) {
        2
    } else {
        1
    }
}

/// A responder: started once the broker runs (the terminal prompt, the TUI; dialogs
/// and webhooks next), with what it may read. It runs until the daemon stops, which
/// aborts it.
pub type Responder = Box<dyn FnOnce(ResponderContext) -> JoinHandle<()> + Send>;

pub use crate::ui::ResponderContext;

/// What to run.
pub struct DaemonOptions {
    /// Project spools to serve (none for `hitl serve`).
    pub spools: Vec<Spool>,
    /// The store: `sqlite://PATH` or `postgres://…`.
    pub db_url: String,
    /// Layered settings.
    pub settings: Settings,
    /// Serve HTTP here: the address, and whether a taken port gives way to a free one.
    pub http: Option<(String, bool)>,
    /// Where the API token lives.
    pub config_dir: PathBuf,
    /// Responders to start.
    pub responders: Vec<Responder>,
    /// Answer everything at once with this text (`--auto-answer`), as the broker's
    /// own rule.
    pub auto_answer: Option<String>,
    /// Patterns of mailbox run folders to relay besides the spools' registered runs
    /// (`hitl listen --mailbox`).
    pub mailboxes: Vec<String>,
    /// Announce new requests on the desktop, where there is one (`hitl listen`
    /// without `--no-notify`).
    pub notify: bool,
}

/// A running daemon, from [`start`].
pub struct Daemon {
    /// The broker's handle.
    pub handle: BrokerHandle,
    /// Where HTTP is served, if it is.
    pub http_addr: Option<SocketAddr>,
    /// Its URL (`https://…` when it serves TLS), if it serves HTTP.
    pub http_url: Option<String>,
    /// The SHA-256 (hex) of the certificate it presents now, when it serves TLS.
    pub tls_sha256: Option<tokio::sync::watch::Receiver<String>>,
    /// The channels that reach a person away from the desk (`telegram`).
    pub reachable: Vec<String>,
    /// Held while this daemon runs the user's Telegram bot or Slack app.
    _channels: Vec<nix::fcntl::Flock<std::fs::File>>,
    broker_task: JoinHandle<()>,
    stop_broker: oneshot::Sender<()>,
    http: Option<server::Running>,
    tasks: Vec<JoinHandle<()>>,
    store_task: JoinHandle<()>,
    _watcher: Option<SpoolWatcher>,
    /// Keeps the broker's event channel open (and quiet, without spools).
    _events: mpsc::UnboundedSender<SpoolEvent>,
}

/// How often the spools are read when inotify is not available.
const POLL_EVERY: std::time::Duration = std::time::Duration::from_millis(100);

/// Starts everything; returns once the broker runs and HTTP (if any) is bound.
pub async fn start(opts: DaemonOptions) -> Result<Daemon> {
    let DaemonOptions {
        spools,
        db_url,
        settings,
        http,
        config_dir,
        responders,
        auto_answer,
        mailboxes,
        notify,
    } = opts;
    crate::ui::webhooks::validate(&settings.webhooks, &settings.http.delivery_hosts)?;
    if let Some(t) = &settings.telegram {
        crate::ui::telegram::validate(t)?;
    }
    if let Some(s) = &settings.slack {
        crate::ui::slack::validate(s)?;
    }
    settings.escalation.validate()?;
    for (channel, shown, configured) in [
        ("telegram", "[telegram] bot", settings.telegram.is_some()),
        ("slack", "[slack] app", settings.slack.is_some()),
    ] {
        if !configured && settings.escalation.names(channel) {
            anyhow::bail!(
                "[escalation] names {channel}, and there is no {shown} to send with \
                 (see docs/answering.md)"
            );
        }
    }
    let store = Store::open(&db_url).await?;
    let reader = store.clone();
    let unfinished = crate::broker::Unfinished::read(&store).await?;
    let (store_tx, store_task) = spawn_store_writer(store);

    let (events_tx, events_rx) = mpsc::unbounded_channel();
    let watcher = watch(&spools, events_tx.clone());
    let (broker, handle) = Broker::new(
        spools.clone(),
        BrokerOptions {
            max_question_bytes: settings.listen.max_question_bytes,
            durable: settings.spool.fsync,
            auto_answer,
            keep_when_stopped: std::time::Duration::from_secs(settings.ask.keep_when_stopped),
        },
        store_tx,
        unfinished,
    );
    // The ways back follow the broker's changes from its first one.
    let deliverer = server::Deliverer::new(&settings.http);
    let mut tasks = vec![deliverer.spawn(handle.clone(), reader.clone())];
    let (stop_broker, stop_rx) = oneshot::channel::<()>();
    let broker_task = tokio::spawn(broker.run(events_rx, async {
        let _ = stop_rx.await;
    }));
    // Requests made or ended by other brokers sharing the store.
    tasks.push(crate::daemon::replica::spawn(
        reader.clone(),
        handle.clone(),
    ));
    // History does not grow for ever.
    tasks.push(crate::store::spawn_sweeps(
        reader.clone(),
        settings.history.retention(),
    ));
    // Tasks run where their tmux sessions do: under a listener with a project, kept
    // in its first project's `.helpers/tasks/`.
    let task_runner = match spools.first() {
        Some(spool) => match crate::tasks::runner::spawn(
            crate::tasks::files::TaskFiles::new(spool),
            crate::tasks::tmux::Tmux::default(),
            settings.tasks.agents.clone(),
            settings.tasks.boundary,
            Some(handle.clone()),
        ) {
            Ok((runner, task)) => {
                tasks.push(task);
                Some(runner)
            }
            Err(e) => {
                eprintln!("hitl: tasks are off: {e:#}");
                None
            }
        },
        None => None,
    };
    // Mailbox runs (seed 003): their questions asked here, their answers written back.
    if let Some(relay) = crate::mailbox::relay::spawn(
        handle.clone(),
        reader.clone(),
        crate::mailbox::relay::RelayOptions {
            spools: spools.clone(),
            patterns: mailboxes,
        },
    )? {
        tasks.push(relay);
    }
    let spools_for_status = spools.first().cloned();
    let mut context = ResponderContext {
        broker: handle.clone(),
        store: reader.clone(),
        tasks: task_runner.clone(),
        login_link: None,
    };
    let http = match http {
        None => None,
        Some((addr, fallback)) => Some(
            server::start(
                &addr,
                fallback,
                server::Backends {
                    broker: handle.clone(),
                    store: reader,
                    deliverer,
                    spools,
                    tasks: task_runner,
                },
                &settings.http,
                &config_dir,
            )
            .await?,
        ),
    };
    context.login_link = http.as_ref().map(server::Running::login_links);
    for r in responders {
        tasks.push(r(context.clone()));
    }
    let link_base = http.as_ref().map(|h| h.url.clone());
    // Desktop notifications, where there is a desktop.
    if notify && crate::ui::notify::available() {
        tasks.push(crate::ui::notify::start(context.clone(), link_base.clone()));
    }
    // The channels away from the desk, each following the escalation ladder's steps.
    let mut away = Vec::new();
    // Web Push to the devices that subscribed (none until one does).
    if let Some(h) = &http {
        away.push("push".to_string());
        let (push, live) = h.push();
        tasks.push(crate::push::notifier::start(&handle, push, live));
    }
    // Webhooks (opt-in, `[[webhooks]]`), linking to this server's dashboard.
    if !settings.webhooks.is_empty() {
        tasks.push(crate::ui::webhooks::start(
            context.clone(),
            settings.webhooks.clone(),
            link_base,
            spools_for_status,
        ));
    }
    // Telegram and Slack (opt-in, `[telegram]`, `[slack]`): one daemon of the
    // user's runs each.
    let mut reachable = Vec::new();
    let mut held = Vec::new();
    let mut hold = |name: &str| match crate::ui::take_channel(&config_dir, &format!("{name}.lock"))
    {
        Ok(Some(lock)) => {
            held.push(lock);
            reachable.push(name.to_string());
            away.push(name.to_string());
            true
        }
        Ok(None) => {
            tracing::warn!(
                "{name}: another listener of yours runs it; this one's requests are not sent there"
            );
            false
        }
        Err(e) => {
            tracing::warn!("{name}: {e:#}");
            false
        }
    };
    if let Some(t) = &settings.telegram
        && hold("telegram")
    {
        let chats = crate::ui::telegram::Chats::new(t.clone(), &settings.escalation);
        tasks.push(crate::ui::telegram::start(handle.clone(), chats));
    }
    if let Some(s) = &settings.slack
        && hold("slack")
    {
        let channels = crate::ui::slack::Channels::new(s.clone(), &settings.escalation);
        tasks.push(crate::ui::slack::start(handle.clone(), channels));
    }
    // The ladder last: every channel above follows the broker already, so none
    // misses a step it announces.
    tasks.push(crate::broker::ladder::start(
        &handle,
        settings.escalation.clone(),
        away,
        crate::broker::ladder::Clock::real(),
    ));
    Ok(Daemon {
        reachable,
        _channels: held,
        http_addr: http.as_ref().map(|h| h.local),
        http_url: http.as_ref().map(|h| h.url.clone()),
        tls_sha256: http.as_ref().and_then(|h| h.tls_sha256.clone()),
        handle,
        broker_task,
        stop_broker,
        http,
        tasks,
        store_task,
        _watcher: watcher,
        _events: events_tx,
    })
}

/// Watches every spool; when inotify is refused or sees only part of the writes (a
/// network file system), reads the spools on a timer too. Slower, never silent.
fn watch(spools: &[Spool], tx: mpsc::UnboundedSender<SpoolEvent>) -> Option<SpoolWatcher> {
    if spools.is_empty() {
        return None;
    }
    let remote: Vec<String> = spools
        .iter()
        .filter(|s| crate::spool::is_network_fs(s.root()))
        .map(|s| s.project().display().to_string())
        .collect();
    let watched = (|| {
        let mut watcher = SpoolWatcher::new(tx.clone())?;
        for s in spools {
            watcher.watch(&s.questions())?;
            watcher.watch(&s.answers())?;
            watcher.watch(&s.activity())?;
        }
        anyhow::Ok(watcher)
    })();
    match watched {
        Ok(w) if remote.is_empty() => Some(w),
        Ok(w) => {
            // inotify sees only this machine's writes on a network file system.
            eprintln!(
                "hitl: {} on a network file system: also reading the spool every {} ms",
                remote.join(", "),
                POLL_EVERY.as_millis()
            );
            spawn_poller(tx);
            Some(w)
        }
        Err(e) => {
            // inotify refused (the user's 128 instances are taken, or the watch table is
            // full): read the spools on a timer instead.
            eprintln!(
                "hitl: warning: {e:#}; polling the spool every {} ms instead",
                POLL_EVERY.as_millis()
            );
            spawn_poller(tx);
            None
        }
    }
}

/// Asks the broker to read every spool again, every [`POLL_EVERY`].
fn spawn_poller(events: mpsc::UnboundedSender<SpoolEvent>) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(POLL_EVERY);
        while events.send(SpoolEvent::Rescan).is_ok() {
            tick.tick().await;
        }
    });
}

impl Daemon {
    /// A one-time link into the dashboard (see `server::login`), when HTTP is served.
    pub fn login_link(&self) -> Option<String> {
        self.http
            .as_ref()
            .map(|h| h.login_link(server::login::AT_START))
    }

    /// Waits until the broker stops by itself, which is a bug (a panic): the caller
    /// should stop loudly so a supervisor restarts it. Pending work stays queued.
    pub async fn crashed(&mut self) -> Result<()> {
        let r = (&mut self.broker_task).await;
        bail!(
            "the broker stopped unexpectedly ({}); pending requests stay queued",
            match r {
                Ok(()) => "no error".to_string(),
                Err(e) => e.to_string(),
            }
        )
    }

    /// Stops taking work, stops the broker and flushes history. Pending requests stay
    /// in the spool and the store for the next start.
    pub async fn stop(self) {
        let Daemon {
            handle,
            broker_task,
            stop_broker,
            http,
            tasks,
            store_task,
            _watcher,
            _events,
            ..
        } = self;
        if let Some(http) = http {
            http.stop().await;
        }
        let _ = stop_broker.send(());
        let _ = broker_task.await;
        for t in tasks {
            t.abort();
        }
        drop(handle);
        drop(_watcher);
        drop(_events);
        // Connections still open hold a handle (and so the writer's channel) for a
        // moment longer; everything sent has been written by then.
        let _ = tokio::time::timeout(std::time::Duration::from_secs(5), store_task).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        broker::Change,
        protocol::{Kind, Reply, Request},
    };

    #[test]
    fn one_worker_thread_with_sqlite_two_with_postgres() {
        assert_eq!(worker_threads("sqlite:///tmp/h.db"), 1);
        assert_eq!(worker_threads("/tmp/h.db"), 1);
        assert_eq!(worker_threads("postgres://u@h/db"), 2);
    }

    /// A daemon started in-process (no spools, HTTP on a free port) with a responder
    /// of the test's own: a request made over HTTP is answered by it and the answer
    /// reaches the asker's long poll.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn serves_http_with_any_responder_in_process() {
        let dir = tempfile::tempdir().unwrap();
        let responder: Responder = Box::new(|c: ResponderContext| {
            let h = c.broker;
            tokio::spawn(async move {
                let mut changes = h.subscribe();
                while let Ok(change) = changes.recv().await {
                    if let Change::Queued(p) = change {
                        let reply = Reply::Text("from the test's responder".into());
                        let _ = h.respond(p.seq, reply, "test").await;
                    }
                }
            })
        });
        let daemon = start(DaemonOptions {
            spools: Vec::new(),
            db_url: format!("sqlite://{}", dir.path().join("h.db").display()),
            settings: Settings::default(),
            http: Some(("127.0.0.1:0".into(), false)),
            config_dir: dir.path().to_path_buf(),
            responders: vec![responder],
            auto_answer: None,
            mailboxes: Vec::new(),
            notify: false,
        })
        .await
        .unwrap();
        let base = format!("http://{}", daemon.http_addr.unwrap());
        let token = std::fs::read_to_string(dir.path().join("token")).unwrap();
        let client =
            crate::api::client::Client::with_token(&base, Some(token.trim().to_string())).unwrap();
        let request = Request {
            timeout: Some(30),
            ..Request::new("t", "T", Kind::Text, "Who answers?")
        };
        let id = client
            .create(&request, crate::protocol::Origin::Http, "k-1")
            .await
            .unwrap();
        let answer = client.wait(&id).await.unwrap().expect("answered");
        assert_eq!(answer.content, "from the test's responder");
        assert_eq!(answer.responded_by, "test");
        daemon.stop().await;
    }
}
