//! The listener's side: every run it knows of relayed to the broker, in place of
//! seed 003's trampoline.
//!
//! Runs are known by registration (`hitl mailbox init` writes
//! `.helpers/mailboxes/NAME.json`) or by pattern (`hitl listen --mailbox
//! '/tmp/historian-*'`), found as they appear. Each agent's folder is watched (one
//! inotify instance for all, the broker's own kind of watcher, made when the first
//! run is followed; where inotify is refused, the runs are read every 250 ms):
//!
//! - a `question` becomes a request of origin `mailbox` (a select of its options),
//!   asked with an idempotency key naming that file (run, agent, inode, mtime), so a
//!   listener started again finds the same request instead of asking twice;
//! - its end goes back by renaming the question away (`.question.ID`), writing
//!   `answer` whole, and removing the renamed question, so an agent's next question
//!   is never the one removed; a listener killed in between finishes the delivery
//!   from the store's record at its next start;
//! - a `question` the agent removes withdraws its request;
//! - statuses and the transcript feed the activity feed, and supervise the run:
//!   every agent done ends it; an agent in `error`, or whose process (`pid`) is gone,
//!   or silent past its heartbeat, or a Claude Code sub-agent that stopped (its
//!   `SubagentStop` hook) before saying it was done, fails it, as does the run's timeout (time spent
//!   waiting for the user not counted); a failed run's questions are withdrawn, its
//!   agents' processes still running stopped, and `.hitl/report.json` says how it
//!   ended.

use std::{
    collections::{BTreeMap, HashMap},
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use anyhow::Result;
use tokio::{
    sync::{broadcast::error::RecvError, mpsc},
    task::JoinHandle,
};

use super::{
    agent::{is_done, is_error},
    files::{self, Identity},
    keyvalue::KeyValues,
    layout::{self, DEFAULT_RUN_TIMEOUT, Mailbox, Run, RunMeta},
    question::{Ending, Question},
    registry,
    report::{self, Report},
};
use crate::{
    broker::{BrokerHandle, Change, Finished},
    protocol::{
        Answer, AnswerStatus, Kind, Origin, Reply, Request, Status, activity::ActivityNote,
    },
    spool::{Spool, watch::SpoolEvent, watch::SpoolWatcher},
    store::{NewEvent, Store},
};

/// What the relay relays.
#[derive(Debug, Clone, Default)]
pub struct RelayOptions {
    /// The projects whose registered runs it relays (the first one's activity feed
    /// carries runs found by pattern).
    pub spools: Vec<Spool>,
    /// Glob patterns naming run folders (`/tmp/historian-*`).
    pub patterns: Vec<String>,
}

/// Who answers for the relay when it withdraws a question.
const RELAY: &str = "mailbox";

/// How often runs are supervised and patterns looked at again (and, where inotify
/// is refused, read).
const TICK: Duration = Duration::from_millis(250);

/// Starts the relay. Nothing to relay (no project, no pattern): `None`.
pub fn spawn(
    broker: BrokerHandle,
    store: Store,
    opts: RelayOptions,
) -> Result<Option<JoinHandle<()>>> {
    if opts.spools.is_empty() && opts.patterns.is_empty() {
        return Ok(None);
    }
    let patterns = opts
        .patterns
        .iter()
        .map(|p| Pattern::new(p))
        .collect::<Result<Vec<_>>>()?;
    let (tx, rx) = mpsc::unbounded_channel();
    let mut relay = Relay {
        broker,
        store,
        watcher: Watcher::NotYet(tx),
        spools: opts.spools,
        patterns,
        watched: HashMap::new(),
        runs: BTreeMap::new(),
        requests: HashMap::new(),
        refused: Default::default(),
    };
    Ok(Some(tokio::spawn(async move { relay.run(rx).await })))
}

/// A pattern of run folders.
struct Pattern {
    glob: globset::GlobMatcher,
    /// The folder above its first wildcard.
    base: PathBuf,
    /// How many folders below `base` a match is.
    depth: usize,
}

impl Pattern {
    fn new(pattern: &str) -> Result<Pattern> {
        let path = std::path::absolute(pattern)?;
        let glob = globset::GlobBuilder::new(&path.to_string_lossy())
            .literal_separator(true)
            .build()
            .map_err(|e| anyhow::anyhow!("--mailbox {pattern:?}: {e}"))?
            .compile_matcher();
        let wild = |s: &str| s.contains(['*', '?', '[', '{']);
        let parts: Vec<_> = path.components().collect();
        let literal = parts
            .iter()
            .take_while(|c| !wild(&c.as_os_str().to_string_lossy()))
            .count();
        let base: PathBuf = parts[..literal].iter().collect();
        Ok(Pattern {
            glob,
            depth: parts.len() - literal,
            base,
        })
    }

    /// The run folders matching now.
    fn expand(&self) -> Vec<PathBuf> {
        let mut level = vec![self.base.clone()];
        for _ in 0..self.depth {
            level = level
                .iter()
                .flat_map(|d| std::fs::read_dir(d).into_iter().flatten().flatten())
                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                .map(|e| e.path())
                .collect();
        }
        if self.depth == 0 {
            return Vec::new();
        }
        level.retain(|p| self.glob.is_match(p));
        level
    }
}

/// What a watched folder is.
#[derive(Debug, Clone)]
enum Watched {
    /// A project's `.helpers/mailboxes/`.
    Registry,
    /// The folder a pattern's runs appear in.
    Parent,
    /// A run's folder.
    Run(PathBuf),
    /// An agent's folder: its run's, and its name.
    Agent(PathBuf, String),
}

/// One run, as the relay follows it.
struct RunState {
    run: Run,
    meta: RunMeta,
    /// The project whose feed carries it.
    project: Option<PathBuf>,
    agents: BTreeMap<String, AgentState>,
    /// When the relay first saw it.
    seen: Instant,
    /// Time spent with a question waiting for the user, before `waiting_since`.
    waited: Duration,
    /// Since when a question has been waiting, if one is.
    waiting_since: Option<Instant>,
    /// How far the transcript has been read.
    transcript_read: u64,
    /// It ended (done or failed).
    ended: bool,
}

/// One agent of a run.
#[derive(Default)]
struct AgentState {
    /// Its status as last read.
    status: Option<String>,
    /// The question being asked for it.
    asking: Option<Asking>,
}

/// A question file, asked.
struct Asking {
    identity: Identity,
    question: Question,
    /// The request's id, once the broker has it.
    id: Option<String>,
}

/// The relay's inotify instance: made when the first run is followed (a listener
/// with no run takes none of the user's 128), or refused, when the relay reads the
/// runs on its tick instead.
enum Watcher {
    NotYet(mpsc::UnboundedSender<SpoolEvent>),
    On(SpoolWatcher),
    /// Refused: the sender is kept, so that the events channel stays open.
    Refused {
        _events: mpsc::UnboundedSender<SpoolEvent>,
    },
}

struct Relay {
    broker: BrokerHandle,
    store: Store,
    watcher: Watcher,
    spools: Vec<Spool>,
    patterns: Vec<Pattern>,
    watched: HashMap<PathBuf, Watched>,
    runs: BTreeMap<PathBuf, RunState>,
    /// The runs and agents of the requests asked, by request id.
    requests: HashMap<String, (PathBuf, String)>,
    /// Folders refused (not this user's alone), said once.
    refused: std::collections::HashSet<PathBuf>,
}

impl Relay {
    async fn run(&mut self, mut events: mpsc::UnboundedReceiver<SpoolEvent>) {
        let mut changes = self.broker.subscribe();
        for spool in self.spools.clone() {
            let dir = registry::dir(&spool);
            if let Err(e) = std::fs::create_dir_all(&dir) {
                tracing::warn!("mailboxes: creating {}: {e}", dir.display());
            }
        }
        self.discover().await;
        let mut tick = tokio::time::interval(TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                event = events.recv() => match event {
                    Some(event) => self.event(event).await,
                    None => return,
                },
                change = changes.recv() => match change {
                    Ok(Change::Finished(f)) => self.finished(&f).await,
                    Ok(Change::Activity(a)) if a.event.hook_event_type == "SubagentStop" => {
                        self.subagent_stopped(&a.event.payload).await;
                    }
                    Ok(_) => {}
                    Err(RecvError::Lagged(_)) => self.check_requests().await,
                    Err(RecvError::Closed) => return,
                },
                _ = tick.tick() => self.tick().await,
            }
        }
    }

    /// Watches `dir` (inotify made now if it was not yet, with the registries and the
    /// patterns' folders, so that a new run is seen at once too).
    fn watch(&mut self, dir: &Path, what: Watched) {
        if self.watched.contains_key(dir) {
            return;
        }
        if let Watcher::NotYet(tx) = &self.watcher {
            let made = match std::env::var_os("HITL_FORCE_POLL") {
                Some(_) => Err(anyhow::anyhow!("HITL_FORCE_POLL is set")),
                None => SpoolWatcher::new(tx.clone()),
            };
            self.watcher = match made {
                Ok(w) => Watcher::On(w),
                Err(e) => {
                    tracing::warn!(
                        "mailboxes: {e:#}; runs are read every {} ms instead",
                        TICK.as_millis()
                    );
                    Watcher::Refused {
                        _events: tx.clone(),
                    }
                }
            };
            let mut first: Vec<(PathBuf, Watched)> = self
                .spools
                .iter()
                .map(|s| (registry::dir(s), Watched::Registry))
                .collect();
            first.extend(
                self.patterns
                    .iter()
                    .filter(|p| p.depth == 1)
                    .map(|p| (p.base.clone(), Watched::Parent)),
            );
            for (d, w) in first {
                self.watch(&d, w);
            }
        }
        let Watcher::On(watcher) = &mut self.watcher else {
            // Read on the tick instead; known, so it is read.
            self.watched.insert(dir.to_path_buf(), what);
            return;
        };
        match watcher.watch(dir) {
            Ok(()) => {
                self.watched.insert(dir.to_path_buf(), what);
            }
            Err(e) => tracing::debug!("mailboxes: {e:#}"),
        }
    }

    /// Every run registered or matching a pattern, followed if new.
    async fn discover(&mut self) {
        let mut found: Vec<(PathBuf, Option<PathBuf>)> = Vec::new();
        for spool in &self.spools {
            for dir in registry::runs(spool) {
                found.push((dir, Some(spool.project().to_path_buf())));
            }
        }
        let project = self.spools.first().map(|s| s.project().to_path_buf());
        for p in &self.patterns {
            for dir in p.expand() {
                found.push((dir, project.clone()));
            }
        }
        for (dir, project) in found {
            self.follow(&dir, project).await;
        }
    }

    /// Starts following the run at `dir` (once).
    async fn follow(&mut self, dir: &Path, project: Option<PathBuf>) {
        if self.runs.contains_key(dir) {
            return;
        }
        let Ok(run) = Run::open(dir) else { return };
        if let Err(why) = layout::private(&run.dir) {
            if self.refused.insert(run.dir.clone()) {
                tracing::warn!("mailboxes: not relaying {}: {why}", run.dir.display());
            }
            return;
        }
        // A run found by pattern is registered with the first project, so that
        // `hitl mailbox list`, `hitl agents` and the dashboard know it too.
        if let Some(spool) = self.spools.first()
            && !self
                .spools
                .iter()
                .any(|s| registry::entry_file(s, &run).exists())
            && let Err(e) = registry::register(spool, &run)
        {
            tracing::warn!("mailboxes: {e:#}");
        }
        let meta = run.meta();
        let ended = report::read(&run).is_some();
        let transcript_read = std::fs::metadata(run.transcript()).map_or(0, |m| m.len());
        tracing::info!("mailboxes: following run {}", run.dir.display());
        self.runs.insert(
            run.dir.clone(),
            RunState {
                project: meta.project.clone().or(project),
                run: run.clone(),
                meta,
                agents: BTreeMap::new(),
                seen: Instant::now(),
                waited: Duration::ZERO,
                waiting_since: None,
                transcript_read,
                ended,
            },
        );
        self.watch(&run.dir, Watched::Run(run.dir.clone()));
        for agent in run.agents() {
            self.follow_agent(&run.dir, &agent).await;
        }
        self.supervise(&run.dir).await;
    }

    /// Starts following agent `name` of the run at `dir`, and looks at its files.
    async fn follow_agent(&mut self, dir: &Path, name: &str) {
        let Some(state) = self.runs.get_mut(dir) else {
            return;
        };
        if state.agents.contains_key(name) || layout::private(&dir.join(name)).is_err() {
            return;
        }
        state.agents.insert(name.to_string(), AgentState::default());
        let agent_dir = dir.join(name);
        self.watch(
            &agent_dir,
            Watched::Agent(dir.to_path_buf(), name.to_string()),
        );
        self.finish_deliveries(dir, name).await;
        self.look_at_question(dir, name, true).await;
    }

    async fn event(&mut self, event: SpoolEvent) {
        let (path, closed, removed) = match event {
            SpoolEvent::Rescan => return self.rescan().await,
            SpoolEvent::Changed { path, closed } => (path, closed, false),
            SpoolEvent::Removed { path } => (path, true, true),
        };
        let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
            return;
        };
        let name = name.to_string_lossy().into_owned();
        let Some(what) = self.watched.get(parent).cloned() else {
            return;
        };
        match what {
            Watched::Registry => {
                if !removed && name.ends_with(".json") && !name.starts_with('.') {
                    let project = self
                        .spools
                        .iter()
                        .find(|s| registry::dir(s) == parent)
                        .map(|s| s.project().to_path_buf());
                    if let Some(dir) = registry::read_entry(&path) {
                        self.follow(&dir, project).await;
                    }
                }
            }
            Watched::Parent => {
                if !removed && path.is_dir() && self.patterns.iter().any(|p| p.glob.is_match(&path))
                {
                    let project = self.spools.first().map(|s| s.project().to_path_buf());
                    self.follow(&path, project).await;
                }
            }
            Watched::Run(run) => {
                if name == "transcript.log" {
                    self.read_transcript(&run);
                } else if !removed && layout::is_agent_name(&name) && path.is_dir() {
                    self.follow_agent(&run, &name).await;
                }
            }
            Watched::Agent(run, agent) => match name.as_str() {
                // A half-written question is read again when its writer closes it.
                "question" if closed => self.look_at_question(&run, &agent, false).await,
                "status" | "pid" => self.supervise(&run).await,
                _ => {}
            },
        }
    }

    /// Everything read again: events were lost.
    async fn rescan(&mut self) {
        self.discover().await;
        let agents: Vec<(PathBuf, String)> = self
            .runs
            .iter()
            .flat_map(|(d, s)| s.run.agents().into_iter().map(move |a| (d.clone(), a)))
            .collect();
        for (dir, agent) in agents {
            self.follow_agent(&dir, &agent).await;
            self.look_at_question(&dir, &agent, true).await;
        }
        self.check_requests().await;
    }

    /// Agent `agent`'s `question` changed: asked if new, withdrawn if gone.
    async fn look_at_question(&mut self, dir: &Path, agent: &str, rescan: bool) {
        let Some(state) = self.runs.get(dir) else {
            return;
        };
        let Ok(mailbox) = state.run.mailbox(agent) else {
            return;
        };
        let read = match files::read(&mailbox.question()) {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!("mailboxes: {e:#}");
                return;
            }
        };
        let asked = state
            .agents
            .get(agent)
            .and_then(|a| a.asking.as_ref())
            .map(|a| (a.identity, a.id.clone()));
        match (read, asked) {
            (Some(r), Some((identity, _))) if r.identity == identity => {}
            (None, None) => {}
            (None, Some((_, id))) => {
                // The agent took its question back.
                if !rescan || files::identity(&mailbox.question()).is_none() {
                    self.forget(dir, agent);
                    if let Some(id) = id {
                        self.withdraw(&id, "the agent removed its question").await;
                    }
                }
            }
            (Some(r), before) => {
                if let Some((_, Some(id))) = before {
                    self.forget(dir, agent);
                    self.withdraw(&id, "the agent asked another question instead")
                        .await;
                }
                self.ask(dir, agent, r).await;
            }
        }
    }

    /// Stops tracking agent `agent`'s question.
    fn forget(&mut self, dir: &Path, agent: &str) {
        if let Some(a) = self.runs.get_mut(dir).and_then(|s| s.agents.get_mut(agent))
            && let Some(asking) = a.asking.take()
            && let Some(id) = asking.id
        {
            self.requests.remove(&id);
        }
        self.note_waiting(dir);
    }

    /// Asks the broker the question in `read`, as agent `agent` of the run at `dir`.
    async fn ask(&mut self, dir: &Path, agent: &str, read: files::Read) {
        let Some(state) = self.runs.get_mut(dir) else {
            return;
        };
        let pairs = KeyValues::parse(&String::from_utf8_lossy(&read.bytes));
        let question = Question::read(&pairs);
        let run = state.run.clone();
        let ended = state.ended;
        state.agents.entry(agent.to_string()).or_default().asking = Some(Asking {
            identity: read.identity,
            question: question.clone(),
            id: None,
        });
        let mailbox = Mailbox {
            run: run.clone(),
            agent: agent.to_string(),
        };
        if ended {
            let why = "the run has ended".to_string();
            self.deliver(dir, agent, None, Ending::Cancelled(Some(why)));
            return;
        }
        let (request, event) = request_for(&mailbox, &question, &read.identity);
        match self.broker.ask(request, event).await {
            Ok(asked) => {
                let id = asked.event_id.to_string();
                if let Some(a) = self
                    .runs
                    .get_mut(dir)
                    .and_then(|s| s.agents.get_mut(agent))
                    .and_then(|a| a.asking.as_mut())
                    .filter(|a| a.identity == read.identity)
                {
                    a.id = Some(id.clone());
                }
                self.requests
                    .insert(id.clone(), (dir.to_path_buf(), agent.to_string()));
                self.note_waiting(dir);
                if asked.existing || asked.pending.is_none() {
                    // Asked before (by a listener since gone), or ended at once.
                    self.check_request(&id).await;
                }
            }
            Err(e) => tracing::warn!(
                "mailboxes: asking {}'s question in {}: {e}; asked again shortly",
                agent,
                dir.display()
            ),
        }
    }

    /// Whether a question waits for the user in the run at `dir`; counts the time
    /// it waits (not the run's own).
    fn note_waiting(&mut self, dir: &Path) {
        let Some(state) = self.runs.get_mut(dir) else {
            return;
        };
        let waiting = state.agents.values().any(|a| a.asking.is_some());
        match (waiting, state.waiting_since) {
            (true, None) => state.waiting_since = Some(Instant::now()),
            (false, Some(since)) => {
                state.waited += since.elapsed();
                state.waiting_since = None;
            }
            _ => {}
        }
    }

    /// A request ended: its answer goes back, if it is one of ours.
    async fn finished(&mut self, f: &Finished) {
        let id = &f.pending.request.id;
        let Some((dir, agent)) = self.requests.get(id).cloned() else {
            return;
        };
        let Some(question) = self.question_of(&dir, &agent, id) else {
            return;
        };
        let ending = ending_of(&question, f.status, f.answer.as_ref(), f.reason.as_deref());
        self.deliver(&dir, &agent, Some(id), ending);
    }

    fn question_of(&self, dir: &Path, agent: &str, id: &str) -> Option<Question> {
        self.runs
            .get(dir)?
            .agents
            .get(agent)?
            .asking
            .as_ref()
            .filter(|a| a.id.as_deref() == Some(id))
            .map(|a| a.question.clone())
    }

    /// Writes `ending` as agent `agent`'s answer: its question renamed away first
    /// (only the very file asked about), the answer written whole, the renamed
    /// question removed.
    fn deliver(&mut self, dir: &Path, agent: &str, id: Option<&str>, ending: Ending) {
        let Some(state) = self.runs.get_mut(dir) else {
            return;
        };
        let Some(asking) = state.agents.get_mut(agent).and_then(|a| a.asking.take()) else {
            return;
        };
        if let Some(id) = &asking.id {
            self.requests.remove(id);
        }
        let mailbox = Mailbox {
            run: state.run.clone(),
            agent: agent.to_string(),
        };
        let aside = mailbox.answering(id.unwrap_or("ended"));
        if let Err(e) = deliver_file(&mailbox, &asking.identity, &aside, &ending) {
            tracing::warn!("mailboxes: answering {agent} in {}: {e:#}", dir.display());
        }
        self.note_waiting(dir);
    }

    /// Deliveries a listener killed mid-way left: a question renamed away whose
    /// answer was not written yet.
    async fn finish_deliveries(&mut self, dir: &Path, agent: &str) {
        let Some(state) = self.runs.get(dir) else {
            return;
        };
        let Ok(mailbox) = state.run.mailbox(agent) else {
            return;
        };
        let aside: Vec<(PathBuf, String)> = std::fs::read_dir(mailbox.dir())
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().into_string().ok()?;
                let id = name.strip_prefix(".question.")?.to_string();
                Some((e.path(), id))
            })
            .collect();
        for (path, id) in aside {
            let Ok(Some(read)) = files::read(&path) else {
                continue;
            };
            let question = Question::read(&KeyValues::parse(&String::from_utf8_lossy(&read.bytes)));
            let ending = match self.store.find_request(&id).await {
                Ok(Some(s)) if s.status != Status::Pending => {
                    ending_of(&question, s.status, s.answer.as_ref(), s.reason.as_deref())
                }
                _ => {
                    // Not ended after all: asked again as it was.
                    if !mailbox.question().exists() {
                        let _ = crate::spool::rename_no_replace(&path, &mailbox.question());
                    }
                    continue;
                }
            };
            if !mailbox.answer().exists()
                && let Err(e) = write_answer(&mailbox, &ending)
            {
                tracing::warn!("mailboxes: answering {agent} in {}: {e:#}", dir.display());
                continue;
            }
            let _ = files::remove(&path);
        }
    }

    /// Requests that ended while the relay did not hear of it (a lagged broadcast,
    /// a listener started again): their ends go back now.
    async fn check_requests(&mut self) {
        let ids: Vec<String> = self.requests.keys().cloned().collect();
        for id in ids {
            self.check_request(&id).await;
        }
    }

    async fn check_request(&mut self, id: &str) {
        if self.broker.find_stored(id).await.is_some() {
            return;
        }
        let Some((dir, agent)) = self.requests.get(id).cloned() else {
            return;
        };
        let Some(question) = self.question_of(&dir, &agent, id) else {
            return;
        };
        match self.store.find_request(id).await {
            Ok(Some(s)) if s.status != Status::Pending => {
                let ending = ending_of(&question, s.status, s.answer.as_ref(), s.reason.as_deref());
                self.deliver(&dir, &agent, Some(id), ending);
            }
            Ok(_) => {}
            Err(e) => tracing::warn!("mailboxes: reading request {id}: {e:#}"),
        }
    }

    /// Withdraws request `id` (if still pending), saying why.
    async fn withdraw(&mut self, id: &str, why: &str) {
        if let Some(p) = self.broker.find_stored(id).await {
            let reply = Reply::Cancel {
                reason: Some(why.to_string()),
            };
            let _ = self.broker.respond(p.seq, reply, RELAY).await;
        }
    }

    async fn tick(&mut self) {
        self.discover().await;
        // A run whose folder was deleted (`hitl mailbox gc`) is forgotten.
        let gone: Vec<PathBuf> = self.runs.keys().filter(|d| !d.is_dir()).cloned().collect();
        for dir in gone {
            self.runs.remove(&dir);
            self.requests.retain(|_, (d, _)| *d != dir);
            self.watched.retain(|w, _| !w.starts_with(&dir));
        }
        let dirs: Vec<PathBuf> = self.runs.keys().cloned().collect();
        if matches!(self.watcher, Watcher::Refused { .. }) {
            // Without inotify, every run is read on the tick.
            for dir in &dirs {
                let agents = self.runs[dir].run.agents();
                for agent in agents {
                    self.follow_agent(dir, &agent).await;
                    self.look_at_question(dir, &agent, true).await;
                }
                self.read_transcript(dir);
            }
        }
        for dir in dirs {
            // Questions the broker could not take yet are asked again.
            let unasked: Vec<String> = self.runs[&dir]
                .agents
                .iter()
                .filter(|(_, a)| a.asking.as_ref().is_some_and(|a| a.id.is_none()))
                .map(|(n, _)| n.clone())
                .collect();
            for agent in unasked {
                if let Some(a) = self
                    .runs
                    .get_mut(&dir)
                    .and_then(|s| s.agents.get_mut(&agent))
                {
                    a.asking = None;
                }
                self.look_at_question(&dir, &agent, true).await;
            }
            self.supervise(&dir).await;
        }
    }

    /// A Claude Code sub-agent stopped (its `SubagentStop` hook, noted by `hitl
    /// hook`): if it was a run's agent (its type `plugin:NAME` naming the agent, its
    /// transcript naming the run's folder, as the seed's prompt "Work directory:
    /// …" does) and had not said it was done, it is gone and the run fails.
    async fn subagent_stopped(&mut self, payload: &serde_json::Value) {
        let Some(kind) = payload.get("agent_type").and_then(|v| v.as_str()) else {
            return;
        };
        // A run registered since the last tick counts too.
        self.discover().await;
        let name = kind.rsplit(':').next().unwrap_or(kind).to_string();
        let transcript = payload
            .get("agent_transcript_path")
            .and_then(|v| v.as_str())
            .and_then(|p| crate::spool::read_untrusted(Path::new(p), 64 << 20).ok())
            .map(|b| String::from_utf8_lossy(&b).into_owned());
        let candidates: Vec<PathBuf> = self
            .runs
            .iter()
            .filter(|(_, s)| !s.ended && s.agents.contains_key(&name))
            .map(|(d, _)| d.clone())
            .collect();
        let named: Vec<&PathBuf> = candidates
            .iter()
            .filter(|d| {
                transcript
                    .as_deref()
                    .is_some_and(|t| t.contains(&*d.to_string_lossy()))
            })
            .collect();
        // The run its transcript names; without one, the only run it can be.
        let run = match (named.as_slice(), candidates.as_slice()) {
            ([one], _) => (*one).clone(),
            ([], [only]) => only.clone(),
            _ => return,
        };
        let done = self.runs[&run]
            .run
            .mailbox(&name)
            .ok()
            .and_then(|m| m.status())
            .is_some_and(|s| is_done(&s));
        if !done {
            let why = format!("{name}'s Claude Code sub-agent ({kind}) stopped before it was done");
            if let Ok(mailbox) = self.runs[&run].run.mailbox(&name) {
                mark_error(&mailbox);
            }
            self.end(&run, report::FAILED, Some(why)).await;
        }
    }

    /// Reads what was added to the run's transcript: each line an activity event.
    fn read_transcript(&mut self, dir: &Path) {
        let Some(state) = self.runs.get_mut(dir) else {
            return;
        };
        let Some(project) = state.project.clone() else {
            return;
        };
        let path = state.run.transcript();
        let Ok(bytes) = crate::spool::read_untrusted(&path, layout::MAX_FILE_BYTES * 64) else {
            return;
        };
        let len = bytes.len() as u64;
        if len < state.transcript_read {
            // Written over from the start.
            state.transcript_read = 0;
        }
        let new = &bytes[state.transcript_read as usize..];
        let Some(end) = new.iter().rposition(|b| *b == b'\n') else {
            return;
        };
        let text = String::from_utf8_lossy(&new[..end]).into_owned();
        state.transcript_read += end as u64 + 1;
        let run = state.run.name();
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let (agent, event, message) = parse_transcript_line(line);
            let note = ActivityNote {
                source_app: format!("mailbox {run}"),
                session_id: run.clone(),
                hook_event_type: "MailboxTranscript".into(),
                payload: serde_json::json!({
                    "run": dir, "line": line, "agent": agent, "event": event, "message": message,
                }),
                timestamp_ms: jiff::Timestamp::now().as_millisecond(),
                agent_id: layout::agent_id(&run, agent.unwrap_or("run")),
                agent_name: agent.unwrap_or("run").to_string(),
                decision: None,
                reason: None,
            };
            self.broker.note_activity(project.clone(), note);
        }
    }

    /// Looks at the run's agents: statuses noted, and the run ended when all are
    /// done, or failed when one is in error, gone, or the run took too long.
    async fn supervise(&mut self, dir: &Path) {
        let Some(state) = self.runs.get_mut(dir) else {
            return;
        };
        if state.ended {
            return;
        }
        let run = state.run.clone();
        let names = run.agents();
        let mut changed = Vec::new();
        let mut failure: Option<String> = None;
        let mut all_done = !names.is_empty();
        for name in &names {
            let Ok(mailbox) = run.mailbox(name) else {
                continue;
            };
            let status = mailbox.status();
            let a = state.agents.entry(name.clone()).or_default();
            if a.status != status {
                a.status = status.clone();
                if let Some(s) = &status {
                    changed.push((name.clone(), s.clone()));
                }
            }
            let done = status.as_deref().is_some_and(is_done);
            all_done &= done;
            if failure.is_some() || done {
                continue;
            }
            if status.as_deref().is_some_and(is_error) {
                failure = Some(format!("{name} reported error"));
            } else if let Some((pid, start)) = mailbox.process()
                && !crate::runtime::process::is_alive(pid, start)
            {
                failure = Some(format!("{name}'s process ({pid}) ended before it was done"));
                mark_error(&mailbox);
            } else if let Some(beat) = state.meta.heartbeat_s
                && let Ok(m) = std::fs::metadata(mailbox.status_file())
                && m.modified()
                    .is_ok_and(|t| t.elapsed().is_ok_and(|e| e > Duration::from_secs(beat)))
            {
                failure = Some(format!("{name} has not reported its status for {beat}s"));
                mark_error(&mailbox);
            }
        }
        let timeout = state.meta.timeout_s.unwrap_or(DEFAULT_RUN_TIMEOUT);
        let waited = state.waited + state.waiting_since.map_or(Duration::ZERO, |s| s.elapsed());
        let working = state.seen.elapsed().saturating_sub(waited);
        if failure.is_none() && !all_done && timeout > 0 && working > Duration::from_secs(timeout) {
            failure = Some(format!(
                "the run took longer than {timeout}s (not counting {}s waiting for the user)",
                waited.as_secs()
            ));
        }
        let project = state.project.clone();
        for (agent, status) in changed {
            if let Some(project) = &project {
                self.note(
                    project,
                    &run,
                    &agent,
                    "MailboxStatus",
                    serde_json::json!({ "status": status }),
                );
            }
        }
        if let Some(why) = failure {
            self.end(dir, report::FAILED, Some(why)).await;
        } else if all_done {
            self.end(dir, report::DONE, None).await;
        }
    }

    fn note(
        &self,
        project: &Path,
        run: &Run,
        agent: &str,
        event: &str,
        payload: serde_json::Value,
    ) {
        let name = run.name();
        let mut payload = payload;
        if let Some(o) = payload.as_object_mut() {
            o.insert("run".into(), run.dir.display().to_string().into());
            o.insert("agent".into(), agent.into());
        }
        self.broker.note_activity(
            project.to_path_buf(),
            ActivityNote {
                source_app: format!("mailbox {name}"),
                session_id: name.clone(),
                hook_event_type: event.into(),
                payload,
                timestamp_ms: jiff::Timestamp::now().as_millisecond(),
                agent_id: layout::agent_id(&name, agent),
                agent_name: agent.to_string(),
                decision: None,
                reason: None,
            },
        );
    }

    /// Ends the run: open questions withdrawn (a failed run's), the report written.
    async fn end(&mut self, dir: &Path, state_name: &str, reason: Option<String>) {
        let Some(state) = self.runs.get_mut(dir) else {
            return;
        };
        state.ended = true;
        let run = state.run.clone();
        let project = state.project.clone();
        let waited = state.waited + state.waiting_since.map_or(Duration::ZERO, |s| s.elapsed());
        let ran = state.seen.elapsed();
        // As the files say now (an agent found gone was just marked in error).
        let agents: serde_json::Map<String, serde_json::Value> = state
            .agents
            .keys()
            .map(|n| {
                (
                    n.clone(),
                    run.mailbox(n).ok().and_then(|m| m.status()).into(),
                )
            })
            .collect();
        let open: Vec<(String, Option<String>)> = state
            .agents
            .iter()
            .filter_map(|(n, a)| a.asking.as_ref().map(|q| (n.clone(), q.id.clone())))
            .collect();
        let why = format!(
            "the run {}",
            match &reason {
                Some(r) => format!("failed: {r}"),
                None => "ended".into(),
            }
        );
        for (agent, id) in open {
            match id {
                Some(id) => self.withdraw(&id, &why).await,
                None => self.deliver(dir, &agent, None, Ending::Cancelled(Some(why.clone()))),
            }
        }
        if reason.is_some() {
            stop_agents(&run);
        }
        let state_json: serde_json::Value = files::read(&run.state_file())
            .ok()
            .flatten()
            .and_then(|r| serde_json::from_slice(&r.bytes).ok())
            .unwrap_or(serde_json::Value::Null);
        let text = |k: &str| {
            state_json
                .get(k)
                .and_then(|v| v.as_str())
                .map(str::to_string)
        };
        let clean_branch = text("clean_branch");
        let commits = match (&project, text("base_commit"), &clean_branch) {
            (Some(p), Some(base), Some(branch)) => report::commits(p, &base, branch),
            _ => Vec::new(),
        };
        let report = Report {
            state: state_name.to_string(),
            reason: reason.clone(),
            ended_ms: jiff::Timestamp::now().as_millisecond(),
            ran_s: ran.as_secs_f64(),
            waited_s: waited.as_secs_f64(),
            agents,
            state_json,
            clean_branch,
            commits,
            transcript_tail: report::transcript_tail(&run),
        };
        let mut json = serde_json::to_vec_pretty(&report).unwrap_or_default();
        json.push(b'\n');
        if let Err(e) = files::write(&run, &run.report_file(), &json) {
            tracing::warn!(
                "mailboxes: writing the report of {}: {e:#}",
                run.dir.display()
            );
        }
        match &reason {
            Some(r) => tracing::warn!("mailboxes: run {} failed: {r}", run.dir.display()),
            None => tracing::info!("mailboxes: run {} is done", run.dir.display()),
        }
        if let Some(project) = project {
            self.note(
                &project,
                &run,
                "run",
                "MailboxRunEnded",
                serde_json::json!({ "state": state_name, "reason": reason }),
            );
        }
    }
}

/// An agent found gone is reported as in error, in its own status file, where its
/// peers, `hitl agents` and the report read it.
fn mark_error(mailbox: &Mailbox) {
    if let Err(e) = files::write(&mailbox.run, &mailbox.status_file(), b"error\n") {
        tracing::warn!("mailboxes: {e:#}");
    }
}

/// A failed run's agents still running are stopped (SIGTERM), as the seed's
/// trampoline kills them: those whose pid file names their process with its start
/// time, so a pid used again since is never signalled.
fn stop_agents(run: &Run) {
    for name in run.agents() {
        let Ok(mailbox) = run.mailbox(&name) else {
            continue;
        };
        let Some((pid, Some(start))) = mailbox.process() else {
            continue;
        };
        if crate::runtime::process::is_alive(pid, Some(start))
            && mailbox.status().is_none_or(|s| !is_done(&s))
            && let Ok(pid) = i32::try_from(pid)
        {
            tracing::info!(
                "mailboxes: stopping {name} (pid {pid}) of the failed run {}",
                run.dir.display()
            );
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGTERM,
            );
        }
    }
}

/// The request and its event for `question` in `mailbox`, read from the file
/// `identity`.
fn request_for(mailbox: &Mailbox, question: &Question, identity: &Identity) -> (Request, NewEvent) {
    let run = mailbox.run.name();
    let kind = if question.options.is_empty() {
        Kind::Text
    } else {
        Kind::Select
    };
    let content = question.shown();
    let request = Request {
        origin: Origin::Mailbox,
        options: question.options.clone(),
        working_dir: Some(mailbox.run.dir.display().to_string()),
        context: serde_json::json!({
            "mailbox_run": mailbox.run.dir.display().to_string(),
            "mailbox_agent": mailbox.agent,
        }),
        ..Request::new(
            layout::agent_id(&run, &mailbox.agent),
            mailbox.agent.clone(),
            kind,
            content.clone(),
        )
    };
    let key = format!(
        "mailbox:{}:{}:{}:{}:{}",
        mailbox.run.dir.display(),
        mailbox.agent,
        identity.dev,
        identity.ino,
        identity.mtime_ns
    );
    let event = NewEvent {
        source_app: format!("mailbox {run}"),
        session_id: run,
        hook_event_type: "HumanInTheLoop".into(),
        payload: serde_json::json!({}),
        extra: serde_json::Map::new(),
        timestamp_ms: request.timestamp.as_millisecond(),
        hitl: Some(serde_json::json!({
            "type": kind.seed004_name(),
            "question": content,
            "choices": question.options,
            "timeout": null,
        })),
        idempotency_key: Some(key),
    };
    (request, event)
}

/// How a request's end reads as an answer file.
fn ending_of(
    question: &Question,
    status: Status,
    answer: Option<&Answer>,
    reason: Option<&str>,
) -> Ending {
    match (status, answer) {
        (Status::Answered, Some(a)) if a.status == AnswerStatus::Answered => {
            question.ending_of(&a.content)
        }
        (Status::Timeout, _) => Ending::Timeout,
        (_, a) => Ending::Cancelled(
            reason
                .map(str::to_string)
                .or_else(|| a.and_then(|a| a.comment.clone())),
        ),
    }
}

/// The delivery itself: the question renamed away (only if it is still the file
/// asked about), the answer written, the renamed question removed.
fn deliver_file(mailbox: &Mailbox, asked: &Identity, aside: &Path, ending: &Ending) -> Result<()> {
    let question = mailbox.question();
    if files::identity(&question) != Some(*asked) {
        // Taken back, or already another question: nobody waits for this answer.
        return Ok(());
    }
    files::take(&question, aside)?;
    if files::identity(aside) != Some(*asked) {
        // Replaced between the look and the rename: that one is the agent's next
        // question; it goes back.
        let _ = crate::spool::rename_no_replace(aside, &question);
        return Ok(());
    }
    write_answer(mailbox, ending)?;
    files::remove(aside)
}

fn write_answer(mailbox: &Mailbox, ending: &Ending) -> Result<()> {
    let text = ending.pairs().to_text()?;
    files::write(&mailbox.run, &mailbox.answer(), text.as_bytes())
}

/// A transcript line's agent, event and message
/// (`[time] [AGENT:name] [EVENT] message`), where it has them.
fn parse_transcript_line(line: &str) -> (Option<&str>, Option<&str>, &str) {
    let mut rest = line;
    let mut fields = Vec::new();
    while let Some(r) = rest.trim_start().strip_prefix('[') {
        let Some(end) = r.find(']') else { break };
        fields.push(&r[..end]);
        rest = &r[end + 1..];
        if fields.len() == 3 {
            break;
        }
    }
    let agent = fields.iter().find_map(|f| f.strip_prefix("AGENT:"));
    let event = if fields.len() >= 3 {
        Some(fields[2])
    } else {
        None
    };
    (agent, event, rest.trim())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transcript_lines_read_as_the_seed_writes_them() {
        assert_eq!(
            parse_transcript_line("[2026-11-27 05:01:02] [AGENT:narrator] [PLAN] Two commits"),
            (Some("narrator"), Some("PLAN"), "Two commits")
        );
        assert_eq!(
            parse_transcript_line("free text"),
            (None, None, "free text")
        );
    }

    #[test]
    fn patterns_find_runs_one_level_down() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir(tmp.path().join("historian-1")).unwrap();
        std::fs::create_dir(tmp.path().join("other")).unwrap();
        let p = Pattern::new(&format!("{}/historian-*", tmp.path().display())).unwrap();
        assert_eq!(p.depth, 1);
        assert_eq!(p.base, tmp.path());
        assert_eq!(p.expand(), [tmp.path().join("historian-1")]);
    }
}
