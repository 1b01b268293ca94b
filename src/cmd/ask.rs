//! `hitl ask`: the agent's side. Write the question into the spool, wait for the
//! answer, print it alone on stdout, exit 0 answered / 1 cancelled or denied /
//! 2 timed out / 3 cannot ask.
//!
//! Synchronous on purpose: one process per question, and a whole ask should cost a
//! few milliseconds beyond the human. On timeout or Ctrl-C the question is withdrawn
//! (its file removed) so it leaves the queue.

use std::{io::Write, path::PathBuf, time::Duration};

use anyhow::{Context, Result, bail};
use serde_json::Value;

use crate::{
    agents,
    config::{self, Paths},
    protocol::{
        Answer, Asker, FormQuestion, Kind, MAX_TIMEOUT_SECS, Origin, Priority, Request, form,
    },
    spool::{self, ListenerInfo, Spool, ask::Asked, kept::Found},
};

/// How often a waiting asker wakes for its chores (the no-listener hint, the heartbeat).
const TICK: Duration = Duration::from_secs(1);
/// Every this many ticks a waiting asker refreshes its agent's `last_seen`.
const HEARTBEAT_TICKS: u64 = 10;

/// Exit status: cancelled or denied.
pub const EXIT_CANCELLED: u8 = 1;
/// Exit status: timed out.
pub const EXIT_TIMEOUT: u8 = 2;
/// Exit status: could not ask at all.
pub const EXIT_CANNOT_ASK: u8 = 3;
/// Exit status: interrupted by a signal (128 + SIGINT), question withdrawn.
pub const EXIT_INTERRUPTED: u8 = 130;

/// What to ask: the flags of `hitl ask` (their doc comments are its help text).
#[derive(Debug, Clone, clap::Args)]
pub struct AskOptions {
    /// The question (several words are joined with spaces); `-` reads it from stdin.
    #[arg(required = true, value_name = "QUESTION")]
    pub question: Vec<String>,
    /// What kind of answer is wanted (text, yesno, select, multiselect, approval,
    /// permission, questions or number).
    #[arg(long = "type", short = 't', default_value = "text")]
    pub kind: Kind,
    /// A choice for select and multiselect (repeat for each).
    #[arg(long = "option", short = 'o', value_name = "O")]
    pub options: Vec<String>,
    /// Several questions at once (type questions), as a JSON array in Claude Code's
    /// AskUserQuestion shape: `[{"question": "…", "header": "…", "multiSelect":
    /// false, "options": [{"label": "…", "description": "…"}]}]`. The answer is
    /// printed a line per question ("question: answer"); `--json` has the map.
    #[arg(long, value_name = "JSON")]
    pub questions: Option<String>,
    /// The least a number answer may be (type number).
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub min: Option<serde_json::Number>,
    /// The most a number answer may be (type number).
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub max: Option<serde_json::Number>,
    /// Seconds to wait; 0 waits for ever (default: the [ask] timeout setting, 300).
    #[arg(long, value_name = "S")]
    pub timeout: Option<u64>,
    /// How urgent it is (normal, high or urgent).
    #[arg(long)]
    pub priority: Option<Priority>,
    /// How many different people must approve (type approval or permission): 2 for
    /// two-person approval, counted by the listener. Every surface of this
    /// machine's user counts as one person; the others are reached elsewhere (a
    /// Telegram group). One denial ends it.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=5))]
    pub approvals: u32,
    /// A tag to file it under, shown beside it and a filter of `hitl history`
    /// (repeat, or separate with commas); $HITL_TAGS's tags are added to every
    /// question.
    #[arg(long = "tag", value_name = "TAG", value_delimiter = ',')]
    pub tags: Vec<String>,
    /// Context for the human, as a JSON value.
    #[arg(long, value_name = "JSON")]
    pub context: Option<String>,
    /// The project folder (default: the nearest one with .helpers/).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Print the whole answer as JSON.
    #[arg(long)]
    pub json: bool,
    /// Ask a hitl server over HTTP (like http://127.0.0.1:4000) instead of the
    /// project's spool; several, comma-separated, are replicas tried in turn. A
    /// server that restarts is waited out. The token comes from HITL_TOKEN or the
    /// user's token file.
    #[arg(long, env = "HITL_SERVER", value_name = "URL")]
    pub server: Option<String>,
}

fn build_request(
    opts: &AskOptions,
    spool: Option<&Spool>,
    settings: &config::Settings,
) -> Result<(Request, agents::Identity)> {
    let content = if opts.question == ["-"] {
        // From stdin: no argument-length limit (128 KiB per argument on Linux), and
        // the text is kept byte for byte, trailing newline included.
        let mut text = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut text)
            .context("reading the question from stdin (it must be UTF-8)")?;
        text
    } else {
        opts.question.join(" ")
    };
    if content.trim().is_empty() {
        bail!("the question is empty");
    }
    if opts.kind.needs_options() && opts.options.is_empty() {
        bail!("a {} question needs at least one --option", opts.kind);
    }
    let (kind, questions) = match &opts.questions {
        None if opts.kind == Kind::Questions => {
            bail!("a questions request needs --questions JSON (its questions)")
        }
        None => (opts.kind, Vec::new()),
        Some(_) if !matches!(opts.kind, Kind::Text | Kind::Questions) => {
            bail!(
                "--questions asks a questions request, not a {} one",
                opts.kind
            )
        }
        Some(json) => {
            let questions: Vec<FormQuestion> = serde_json::from_str(json)
                .context("--questions is not a JSON array of questions")?;
            form::check(&questions).map_err(|e| anyhow::anyhow!("--questions: {e}"))?;
            (Kind::Questions, questions)
        }
    };
    if (opts.min.is_some() || opts.max.is_some()) && kind != Kind::Number {
        bail!("--min and --max go with --type number");
    }
    if let (Some(min), Some(max)) = (&opts.min, &opts.max)
        && min.as_f64() > max.as_f64()
    {
        bail!("--min {min} is more than --max {max}: no number could answer");
    }
    let timeout = opts.timeout.unwrap_or(settings.ask.timeout);
    if timeout > MAX_TIMEOUT_SECS {
        bail!(
            "a timeout of {timeout} s is more than a week ({MAX_TIMEOUT_SECS} s); 0 waits for ever"
        );
    }
    let context = match &opts.context {
        Some(text) => serde_json::from_str::<Value>(text)
            .with_context(|| format!("--context is not valid JSON: {text:?}"))?,
        None => Value::Null,
    };
    let who = agents::identify();
    let me = agents::this_process();
    let mut metadata = serde_json::Map::new();
    if let Some(p) = who.process {
        // For the broker, which keeps the agent registry.
        let p = agents::AgentProcess {
            pid: p.pid,
            start_time: p.start_time,
        };
        metadata.insert(agents::AGENT_PROCESS_KEY.into(), serde_json::to_value(p)?);
    }
    let request = Request {
        id: uuid::Uuid::now_v7().simple().to_string(),
        working_dir: std::env::current_dir()
            .ok()
            .or_else(|| spool.map(|s| s.project().to_path_buf()))
            .map(|d| d.display().to_string()),
        options: opts.options.clone(),
        questions,
        minimum: opts.min.clone(),
        maximum: opts.max.clone(),
        priority: opts.priority.unwrap_or(settings.ask.priority),
        timeout: Some(timeout).filter(|&t| t > 0),
        tags: Request::tags_with_env(&opts.tags),
        approvals: opts.approvals,
        context,
        metadata,
        asker: Some(Asker {
            pid: me.pid,
            start_time: Some(me.start_time),
        }),
        ..Request::new(&who.id, &who.name, kind, content)
    };
    Ok((request, who))
}

/// Asks and waits. Returns the exit status; errors mean "cannot ask" (3).
pub fn run(opts: AskOptions) -> Result<u8> {
    if let Some(server) = opts.server.clone().filter(|s| !s.is_empty()) {
        return run_remote(&opts, &server);
    }
    let spool = Spool::locate(opts.dir.as_deref())?;
    let paths = Paths::from_env();
    let settings = config::load(&paths, Some(&spool.config_file()))?;
    let (mut request, who) = build_request(&opts, Some(&spool), &settings)?;
    let keep = settings.ask.keep_when_stopped > 0;
    // The same agent asking what an asker stopped from outside asked: that question.
    let again = keep.then(|| spool::kept::find(&spool, &request)).flatten();
    let reattached = again.is_some();
    match again {
        None => {}
        Some(Found::Answered {
            request: kept,
            answer,
        }) => {
            eprintln!(
                "hitl: question {} was answered while nobody waited for it",
                kept.id
            );
            spool::kept::forget(&spool, &kept);
            let _ = std::fs::remove_file(spool.questions().join(format!("{}.json", kept.id)));
            print_answer(&answer, opts.json)?;
            return Ok(answer.exit_code());
        }
        Some(Found::Pending(kept)) => {
            eprintln!(
                "hitl: question {} (asked before, by an asker that was stopped) is still \
                 pending; waiting for its answer",
                kept.id
            );
            request = ask_again(*kept, request);
        }
    }

    let asked = spool::ask::ask(&spool, &request, settings.spool.fsync, keep, TICK, |tick| {
        // Only a question that waits is worth a look at whether anyone listens; a
        // pid file left by a killed listener does not count, the process does.
        if tick == 1 && ListenerInfo::running(&spool).is_none() {
            // No broker to keep the registry: say this agent waits.
            let _ = agents::record_waiting(&spool, &who, request.working_dir.as_deref());
            eprintln!(
                "hitl: no listener is running for {}; the question waits until one \
                 starts (hitl listen) or someone runs: hitl answer {} TEXT",
                spool.project().display(),
                request.id
            );
        }
        if tick.is_multiple_of(HEARTBEAT_TICKS) {
            let _ = agents::record_heartbeat(&spool, &who);
        }
        std::ops::ControlFlow::Continue(())
    })?;
    if reattached && !matches!(asked, Asked::Kept(_)) {
        spool::kept::forget(&spool, &request);
    }
    match asked {
        Asked::Answered(answer) => {
            print_answer(&answer, opts.json)?;
            Ok(answer.exit_code())
        }
        Asked::Kept(sig) => {
            let minutes = settings.ask.keep_when_stopped.div_ceil(60);
            eprintln!(
                "hitl: stopped by {sig}; question kept; run the same command again to get \
                 the answer (question {}, kept for {minutes} min)",
                request.id
            );
            Ok(128 + sig as u8)
        }
        Asked::TimedOut => {
            eprintln!(
                "hitl: no answer within {}s; question {} withdrawn",
                request.timeout.unwrap_or(0),
                request.id
            );
            Ok(EXIT_TIMEOUT)
        }
        Asked::Interrupted(_) | Asked::GaveUp => {
            eprintln!("hitl: interrupted; question {} withdrawn", request.id);
            Ok(EXIT_INTERRUPTED)
        }
    }
}

/// The kept question `kept`, asked again by the asker of `now`: its id, text and
/// age, with the new asker and the new asker's time to wait from now.
fn ask_again(mut kept: Request, now: Request) -> Request {
    let waited = now
        .timestamp
        .duration_since(kept.timestamp)
        .as_secs()
        .max(0) as u64;
    kept.timeout = now.timeout.map(|t| t + waited);
    kept.asker = now.asker;
    kept.metadata = now.metadata;
    kept.working_dir = now.working_dir;
    kept
}

/// Asks a server over HTTP: create the request (with an idempotency key, so a retry
/// cannot ask twice), then long-poll until it ends. The server keeps the timeout; on
/// Ctrl-C the question is cancelled. Unreachable server: exit 3.
/// How long `hitl ask --server` keeps trying to hand its question to a server.
const CREATE_RETRIES_FOR: Duration = Duration::from_secs(30);

/// No server took the question.
#[derive(Debug, thiserror::Error)]
#[error("{0:#}")]
struct CouldNotAsk(anyhow::Error);

fn run_remote(opts: &AskOptions, server: &str) -> Result<u8> {
    let spool = match &opts.dir {
        Some(_) => Some(Spool::locate(opts.dir.as_deref())?),
        None => std::env::current_dir().ok().and_then(|d| Spool::find(&d)),
    };
    let paths = Paths::from_env();
    let settings = config::load(&paths, spool.as_ref().map(|s| s.config_file()).as_deref())?;
    let (request, _who) = build_request(opts, spool.as_ref(), &settings)?;
    let mut servers =
        crate::api::client::Servers::new(server, crate::api::client::Destination::Given)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the HTTP runtime")?;
    let key = uuid::Uuid::now_v7().to_string();
    let outcome = runtime.block_on(async {
        // The question is safe in the store once created: a server that restarts
        // or dies meanwhile is waited out, or another replica asked, until the
        // question's own deadline (and a minute's grace for the server to say so).
        let now = tokio::time::Instant::now();
        let deadline = request.timeout.map(|t| now + Duration::from_secs(t + 60));
        // Nothing is asked until a server takes it: give up on creating sooner.
        let create_by = now
            + request.timeout.map_or(CREATE_RETRIES_FOR, |t| {
                CREATE_RETRIES_FOR.min(Duration::from_secs(t))
            });
        let id = match servers
            .create(&request, Origin::Http, &key, Some(create_by))
            .await
        {
            Ok(id) => id,
            Err(e) => return Err(CouldNotAsk(e).into()),
        };
        tokio::select! {
            answer = servers.wait(&id, deadline) => answer.map(|a| (id, Some(a))),
            _ = tokio::signal::ctrl_c() => {
                let reply = crate::protocol::Reply::Cancel {
                    reason: Some("the asker was interrupted".into()),
                };
                let mut r = request.clone();
                r.id = id.clone();
                let _ = servers.current().respond(&r, &reply, &r.agent_name).await;
                Ok((id, None))
            }
        }
    });
    let outcome = match outcome {
        Ok(o) => o,
        Err(e) if e.is::<CouldNotAsk>() => return Err(e),
        // Created, then no server could be reached until the question's deadline.
        Err(e) if crate::api::client::is_transient(&e) => {
            eprintln!("hitl: {e:#}; no server answered before the question's deadline");
            return Ok(EXIT_TIMEOUT);
        }
        Err(e) => return Err(e),
    };
    match outcome {
        (id, None) => {
            eprintln!("hitl: interrupted; question {id} cancelled");
            Ok(EXIT_INTERRUPTED)
        }
        (id, Some(None)) => {
            eprintln!("hitl: question {id} ended without an answer");
            Ok(EXIT_CANCELLED)
        }
        (_, Some(Some(answer))) => {
            if answer.status == crate::protocol::AnswerStatus::Timeout && !opts.json {
                eprintln!("hitl: no answer within {}s", request.timeout.unwrap_or(0));
                return Ok(EXIT_TIMEOUT);
            }
            print_answer(&answer, opts.json)?;
            Ok(answer.exit_code())
        }
    }
}

/// An answer as `hitl ask` prints it: its text, and a denial's reason after it
/// (`denied: wait for the changelog`), which a script would show its user.
fn plain_answer(answer: &Answer) -> std::borrow::Cow<'_, str> {
    match answer.comment.as_deref().map(str::trim) {
        Some(why) if answer.approved == Some(false) && !why.is_empty() => {
            format!("{}: {why}", answer.content).into()
        }
        _ => answer.content.as_str().into(),
    }
}

fn print_answer(answer: &Answer, json: bool) -> Result<()> {
    let mut out = std::io::stdout().lock();
    let written = if json {
        serde_json::to_writer(&mut out, answer)
            .map_err(std::io::Error::from)
            .and_then(|()| out.write_all(b"\n"))
    } else {
        if answer.status != crate::protocol::AnswerStatus::Answered {
            let why = answer.comment.as_deref().unwrap_or(answer.status.as_str());
            eprintln!("hitl: {} ({why})", answer.status.as_str());
        }
        if answer.status == crate::protocol::AnswerStatus::Answered {
            out.write_all(plain_answer(answer).as_bytes())
                .and_then(|()| out.write_all(b"\n"))
        } else {
            Ok(())
        }
    };
    match written.and_then(|()| out.flush()) {
        Ok(()) => Ok(()),
        // The reader went away (`hitl ask … | head -c1`): not our error.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(e).context("printing the answer"),
    }
}
