//! The agent's side, for `hitl mailbox …` and the MCP tools: ask the user, send a
//! request, take it, reply, take the result, report a status, log, share state.
//! One request and one result at a time, every file written whole, every wait on
//! inotify. A wait killed from outside leaves its question or request in place, and
//! the same call made again picks it up instead of asking twice.

use std::{
    path::PathBuf,
    time::{Duration, Instant},
};

use anyhow::{Context, Result, bail};
use nix::sys::signal::Signal;

use super::{
    files,
    keyvalue::KeyValues,
    layout::{Mailbox, Run},
    question::{Ending, Question},
    wait::{FileWait, Waited},
};

/// How a wait of the agent's ended when it got nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoValue {
    /// Its own deadline passed.
    TimedOut,
    /// Ctrl-C: a question is withdrawn.
    Interrupted(Signal),
    /// Stopped from outside (SIGTERM, SIGHUP): the question or wait stays, for the
    /// same command run again.
    Kept(Signal),
    /// Every other agent of the run is done: no request will come.
    PeersDone,
    /// An agent of the run failed (status `error`), or the run did.
    PeerFailed,
    /// The caller stopped waiting.
    Stopped,
}

/// A wait's outcome: a value, or why there is none.
pub type Got<T> = std::result::Result<T, NoValue>;

/// How a wait is run: its deadline, whether it takes signals (a command) or not (a
/// server thread, which says when to stop instead).
pub struct WaitSpec<'a> {
    /// Give up after this long.
    pub timeout: Option<Duration>,
    /// Take SIGINT/SIGTERM/SIGHUP as the wait's end.
    pub signals: bool,
    /// Asked every second: true ends the wait ([`NoValue::Stopped`]).
    pub stop: &'a mut dyn FnMut() -> bool,
}

impl WaitSpec<'_> {
    fn deadline(&self) -> Option<Instant> {
        self.timeout.map(|t| Instant::now() + t)
    }
}

fn no_value<T>(w: Waited<T>) -> NoValue {
    match w {
        Waited::Ready(_) => unreachable!("a value is not a missing one"),
        Waited::TimedOut => NoValue::TimedOut,
        Waited::Interrupted(s @ (Signal::SIGTERM | Signal::SIGHUP)) => NoValue::Kept(s),
        Waited::Interrupted(s) => NoValue::Interrupted(s),
        Waited::Stopped => NoValue::Stopped,
    }
}

/// Asks the user `question` through `mailbox` and waits for the answer. Asked again
/// with the same question (the first call was killed), it waits for that question's
/// answer, or takes the one that came meanwhile.
pub fn ask(mailbox: &Mailbox, question: &Question, spec: WaitSpec<'_>) -> Result<Got<Ending>> {
    let text = question.pairs().to_text()?;
    let (qpath, apath, marker) = (mailbox.question(), mailbox.answer(), mailbox.asking());
    let taken = mailbox.dir().join(".answer.taken");
    let ours = files::read(&marker)?.is_some_and(|m| m.bytes == text.as_bytes());
    let mut wait = FileWait::new(&[mailbox.dir()], spec.signals)
        .with_context(|| format!("watching {}", mailbox.dir().display()))?;
    match files::read(&qpath)? {
        Some(q) if q.bytes == text.as_bytes() => {}
        Some(_) => bail!(
            "{} already has a question waiting ({}); it is answered first",
            mailbox.agent,
            qpath.display()
        ),
        None if ours && (taken.exists() || apath.exists()) => {}
        None => {
            // An answer nobody took (an earlier question's): kept aside, not read
            // as this question's.
            if apath.exists() {
                let aside = mailbox.dir().join(format!(
                    ".answer.unread.{}",
                    jiff::Timestamp::now().as_millisecond()
                ));
                files::take(&apath, &aside)?;
            }
            files::write(&mailbox.run, &marker, text.as_bytes())?;
            files::write(&mailbox.run, &qpath, text.as_bytes())?;
        }
    }
    let deadline = spec.deadline();
    let got = wait.wait(
        deadline,
        || Ok((taken.exists() || apath.exists()).then_some(())),
        &mut *spec.stop,
    )?;
    let none = match got {
        Waited::Ready(()) => None,
        Waited::Interrupted(s @ (Signal::SIGTERM | Signal::SIGHUP)) => {
            return Ok(Err(NoValue::Kept(s)));
        }
        other => Some(no_value(other)),
    };
    if none.is_some() {
        // Withdrawn (the relay withdraws its request when the file goes), then looked
        // at once more: an answer written meanwhile wins.
        if files::read(&qpath)?.is_some_and(|q| q.bytes == text.as_bytes()) {
            files::remove(&qpath)?;
        }
    }
    files::take(&apath, &taken)?;
    let answer = files::read_pairs(&taken)?;
    let Some(pairs) = answer else {
        files::remove(&marker)?;
        return Ok(Err(none.unwrap_or(NoValue::Stopped)));
    };
    let ending = Ending::read(&pairs, Some(question));
    files::remove(&taken)?;
    files::remove(&marker)?;
    Ok(Ok(ending))
}

/// Sends `pairs` to `to` as its `inbox/request`. The request before must have been
/// taken; sending the same request again (a command run twice) does nothing.
pub fn send(to: &Mailbox, pairs: &KeyValues) -> Result<()> {
    let text = pairs.to_text()?;
    std::fs::create_dir_all(to.inbox())
        .with_context(|| format!("creating {}", to.inbox().display()))?;
    if let Some(r) = files::read(&to.request())? {
        if r.bytes == text.as_bytes() {
            return Ok(());
        }
        bail!(
            "{} has a request it has not taken yet ({}); one at a time",
            to.agent,
            to.request().display()
        );
    }
    // The last result was read by whoever sent this: it is done with.
    files::remove(&to.taken_result())?;
    if !files::write_new(&to.run, &to.request(), text.as_bytes())? {
        bail!(
            "{} was sent another request meanwhile; one at a time",
            to.agent
        );
    }
    Ok(())
}

/// Waits for a request to `mailbox` and takes it (`inbox/request` renamed away, so
/// a later `rm` of it is harmless). A request taken and not replied to yet is given
/// again. Ends without one when every other agent is done, or one failed.
pub fn recv(mailbox: &Mailbox, spec: WaitSpec<'_>) -> Result<Got<KeyValues>> {
    let peers: Vec<Mailbox> = mailbox
        .run
        .agents()
        .into_iter()
        .filter(|a| *a != mailbox.agent)
        .filter_map(|a| mailbox.run.mailbox(&a).ok())
        .collect();
    let mut dirs: Vec<PathBuf> = vec![mailbox.inbox(), mailbox.run.own_dir()];
    dirs.extend(peers.iter().map(Mailbox::dir));
    take_when_there(
        &mailbox.request(),
        &mailbox.taken_request(),
        &dirs,
        &mailbox.run,
        &peers,
        spec,
    )
}

/// Takes the file `from` (renamed to `taken`, then read) once it is there, watching
/// `dirs`; a file taken before and not done with is given again. Ends without one
/// when the run is over for `peers` (see [`run_over`]).
fn take_when_there(
    from: &std::path::Path,
    taken: &std::path::Path,
    dirs: &[PathBuf],
    run: &Run,
    peers: &[Mailbox],
    spec: WaitSpec<'_>,
) -> Result<Got<KeyValues>> {
    if let Some(pairs) = files::read_pairs(taken)? {
        return Ok(Ok(pairs));
    }
    let mut wait = FileWait::new(dirs, spec.signals)
        .with_context(|| format!("watching {}", dirs[0].display()))?;
    let deadline = spec.deadline();
    let got = wait.wait(
        deadline,
        || {
            if files::take(from, taken).map_err(std::io::Error::other)? {
                return Ok(Some(Ok(())));
            }
            Ok(run_over(run, peers).map(Err))
        },
        &mut *spec.stop,
    )?;
    match got {
        Waited::Ready(Ok(())) => Ok(Ok(files::read_pairs(taken)?.unwrap_or_default())),
        Waited::Ready(Err(why)) => Ok(Err(why)),
        other => Ok(Err(no_value(other))),
    }
}

/// Whether no request can come any more: an agent failed, or every peer is done.
fn run_over(run: &Run, peers: &[Mailbox]) -> Option<NoValue> {
    if super::report::failed(run) {
        return Some(NoValue::PeerFailed);
    }
    let statuses: Vec<Option<String>> = peers.iter().map(Mailbox::status).collect();
    if statuses.iter().flatten().any(|s| is_error(s)) {
        return Some(NoValue::PeerFailed);
    }
    (!peers.is_empty() && statuses.iter().all(|s| s.as_deref().is_some_and(is_done)))
        .then_some(NoValue::PeersDone)
}

/// Whether a status says the agent is done (the seed's `grep -q done`).
pub fn is_done(status: &str) -> bool {
    status.contains("done")
}

/// Whether a status says the agent failed.
pub fn is_error(status: &str) -> bool {
    status.contains("error")
}

/// Replies to the request `mailbox` took: `outbox/result`. The result before must
/// have been taken; the same result again does nothing.
pub fn reply(mailbox: &Mailbox, pairs: &KeyValues) -> Result<()> {
    let text = pairs.to_text()?;
    std::fs::create_dir_all(mailbox.outbox())
        .with_context(|| format!("creating {}", mailbox.outbox().display()))?;
    match files::read(&mailbox.result())? {
        Some(r) if r.bytes == text.as_bytes() => {}
        Some(_) => bail!(
            "the last result of {} was not taken yet ({}); one at a time",
            mailbox.agent,
            mailbox.result().display()
        ),
        None => {
            if !files::write_new(&mailbox.run, &mailbox.result(), text.as_bytes())? {
                bail!("{} wrote another result meanwhile", mailbox.agent);
            }
        }
    }
    files::remove(&mailbox.taken_request())
}

/// Waits for `mailbox`'s result and takes it. Ends without one when that agent
/// failed, or is done without replying.
pub fn result(mailbox: &Mailbox, spec: WaitSpec<'_>) -> Result<Got<KeyValues>> {
    take_when_there(
        &mailbox.result(),
        &mailbox.taken_result(),
        &[mailbox.outbox(), mailbox.dir(), mailbox.run.own_dir()],
        &mailbox.run,
        std::slice::from_ref(mailbox),
        spec,
    )
}

/// Sets `mailbox`'s status (and, with `pid`, the process whose death makes it
/// gone).
pub fn set_status(mailbox: &Mailbox, status: &str, pid: Option<u32>) -> Result<()> {
    let status = status.trim();
    if status.is_empty() || status.contains('\n') {
        bail!("a status is one word or line, e.g. working");
    }
    if let Some(pid) = pid {
        let Some(start) = crate::runtime::process::start_time(pid) else {
            bail!("no process {pid}");
        };
        files::write(
            &mailbox.run,
            &mailbox.pid_file(),
            format!("{pid} {start}\n").as_bytes(),
        )?;
    }
    files::write(
        &mailbox.run,
        &mailbox.status_file(),
        format!("{status}\n").as_bytes(),
    )
}

/// The transcript line the seed's agents append:
/// `[YYYY-MM-DD HH:MM:SS] [AGENT:name] [EVENT] Message`.
pub fn transcript_line(agent: &str, event: &str, message: &str) -> String {
    let now = jiff::Zoned::now();
    format!(
        "[{}] [AGENT:{agent}] [{event}] {}",
        now.strftime("%Y-%m-%d %H:%M:%S"),
        message.replace('\n', " ")
    )
}

/// Appends a line to the run's transcript.
pub fn log(run: &Run, agent: &str, event: &str, message: &str) -> Result<()> {
    if agent.contains(']') || event.contains(']') || agent.contains('\n') || event.contains('\n') {
        bail!("an agent's or event's name holds no ']' or newline");
    }
    files::append_line(&run.transcript(), &transcript_line(agent, event, message))
}

/// Reads `key` of the run's `state.json`.
pub fn state_get(run: &Run, key: &str) -> Result<Option<serde_json::Value>> {
    Ok(read_state(run)?.remove(key))
}

/// Sets `key` of the run's `state.json` (under a lock: two agents updating it at
/// once both land).
pub fn state_set(run: &Run, key: &str, value: serde_json::Value) -> Result<()> {
    let own = run.own_dir();
    std::fs::create_dir_all(&own).with_context(|| format!("creating {}", own.display()))?;
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(own.join("state.lock"))
        .context("opening the state's lock")?;
    let _held = nix::fcntl::Flock::lock(lock, nix::fcntl::FlockArg::LockExclusive)
        .map_err(|(_, e)| e)
        .context("locking state.json")?;
    let mut state = read_state(run)?;
    state.insert(key.to_string(), value);
    let mut json = serde_json::to_vec_pretty(&serde_json::Value::Object(state))?;
    json.push(b'\n');
    files::write(run, &run.state_file(), &json)
}

fn read_state(run: &Run) -> Result<serde_json::Map<String, serde_json::Value>> {
    let Some(read) = files::read(&run.state_file())? else {
        return Ok(serde_json::Map::new());
    };
    if read.bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(serde_json::Map::new());
    }
    match serde_json::from_slice(&read.bytes) {
        Ok(serde_json::Value::Object(m)) => Ok(m),
        Ok(_) => bail!("{} is not a JSON object", run.state_file().display()),
        Err(e) => bail!("{} does not read as JSON: {e}", run.state_file().display()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mailbox::layout::{InitSpec, init};

    fn run() -> (tempfile::TempDir, Run) {
        let tmp = tempfile::tempdir().unwrap();
        let run = init(&InitSpec {
            dir: tmp.path().join("run"),
            agents: vec!["narrator".into(), "scribe".into()],
            state: Default::default(),
            timeout_s: None,
            heartbeat_s: None,
            project: None,
        })
        .unwrap();
        (tmp, run)
    }

    fn quick() -> WaitSpec<'static> {
        WaitSpec {
            timeout: Some(Duration::from_millis(50)),
            signals: false,
            stop: Box::leak(Box::new(|| false)),
        }
    }

    #[test]
    fn a_request_is_taken_once_and_given_again_until_replied() {
        let (_tmp, run) = run();
        let scribe = run.mailbox("scribe").unwrap();
        let mut req = KeyValues::new();
        req.set("COMMIT_NUMBER", "1");
        req.set(
            "DESCRIPTION",
            "Add class attribute syntax support to parser",
        );
        send(&scribe, &req).unwrap();
        send(&scribe, &req).unwrap();
        let mut other = req.clone();
        other.set("COMMIT_NUMBER", "2");
        assert!(send(&scribe, &other).is_err(), "one request at a time");
        assert_eq!(recv(&scribe, quick()).unwrap(), Ok(req.clone()));
        assert!(!scribe.request().exists(), "taken");
        assert_eq!(
            recv(&scribe, quick()).unwrap(),
            Ok(req.clone()),
            "given again"
        );
        let mut res = KeyValues::new();
        res.set("STATUS", "SUCCESS");
        reply(&scribe, &res).unwrap();
        assert_eq!(recv(&scribe, quick()).unwrap(), Err(NoValue::TimedOut));
        assert_eq!(result(&scribe, quick()).unwrap(), Ok(res.clone()));
        assert_eq!(
            result(&scribe, quick()).unwrap(),
            Ok(res),
            "until the next send"
        );
        send(&scribe, &other).unwrap();
        assert_eq!(result(&scribe, quick()).unwrap(), Err(NoValue::TimedOut));
    }

    #[test]
    fn recv_ends_when_the_peers_are_done_or_failed() {
        let (_tmp, run) = run();
        let scribe = run.mailbox("scribe").unwrap();
        let narrator = run.mailbox("narrator").unwrap();
        set_status(&narrator, "done", None).unwrap();
        assert_eq!(recv(&scribe, quick()).unwrap(), Err(NoValue::PeersDone));
        set_status(&narrator, "error", None).unwrap();
        assert_eq!(recv(&scribe, quick()).unwrap(), Err(NoValue::PeerFailed));
        assert_eq!(
            result(&narrator, quick()).unwrap(),
            Err(NoValue::PeerFailed)
        );
    }

    #[test]
    fn an_answer_that_came_while_the_asker_was_away_is_taken_by_the_same_ask() {
        let (_tmp, run) = run();
        let narrator = run.mailbox("narrator").unwrap();
        let q = Question {
            context: "Created commit plan with 2 commits".into(),
            options: vec!["Proceed".into(), "Cancel".into()],
            details: vec![],
        };
        assert_eq!(ask(&narrator, &q, quick()).unwrap(), Err(NoValue::TimedOut));
        assert!(!narrator.question().exists(), "withdrawn at its deadline");
        // Killed from outside: the question stays; the relay answers meanwhile.
        files::write(
            &run,
            &narrator.asking(),
            q.pairs().to_text().unwrap().as_bytes(),
        )
        .unwrap();
        let ending = q.ending_of("Cancel");
        files::write(
            &run,
            &narrator.answer(),
            ending.pairs().to_text().unwrap().as_bytes(),
        )
        .unwrap();
        assert_eq!(ask(&narrator, &q, quick()).unwrap(), Ok(ending));
        assert!(!narrator.answer().exists() && !narrator.asking().exists());
        // A stale answer is not read as a new question's.
        files::write(&run, &narrator.answer(), b"ANSWER='Option 1'\n").unwrap();
        assert_eq!(ask(&narrator, &q, quick()).unwrap(), Err(NoValue::TimedOut));
    }

    #[test]
    fn state_updates_keep_every_key() {
        let (_tmp, run) = run();
        state_set(&run, "commits_completed", 1.into()).unwrap();
        state_set(&run, "clean_branch", "x-clean".into()).unwrap();
        assert_eq!(
            state_get(&run, "commits_completed").unwrap(),
            Some(1.into())
        );
        assert_eq!(
            state_get(&run, "clean_branch").unwrap(),
            Some("x-clean".into())
        );
        assert!(state_get(&run, "work_dir").unwrap().is_some());
        log(&run, "narrator", "PLAN", "two commits").unwrap();
        let t = std::fs::read_to_string(run.transcript()).unwrap();
        assert!(
            t.ends_with("] [AGENT:narrator] [PLAN] two commits\n"),
            "{t}"
        );
    }
}
