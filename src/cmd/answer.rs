//! `hitl answer` and `hitl cancel`: answer from any terminal or script, with or without
//! a listener running.
//!
//! With the project's listener running, the answer goes through it, as every other
//! responder's does (`POST /api/v1/requests/{id}/respond`): the broker writes the
//! file, records the history and tells its UIs. Without one (or for a question it has
//! not taken yet) the answer goes straight into the spool with the same exclusive
//! create the broker uses, so whoever writes first wins and everyone else is told who
//! did; a broker started later finds the answer file and takes the question out of its
//! queue.

use std::path::PathBuf;

use crate::api::client::Destination;
use anyhow::{Context, Result, bail};

use crate::{
    config::Paths,
    protocol::{Answer, AnswerShape, ParsedQuestion, Reply, Request, Status},
    spool::{
        Created, Spool,
        questions::{self, DEFAULT_MAX_QUESTION_BYTES},
    },
    store::{HistoryQuery, Store, StoreOp},
};

/// What to answer.
#[derive(Debug, Clone)]
pub enum AnswerWith {
    /// Text (a number or an option's text for select questions, y/n for yes/no);
    /// for a `questions` request, one answer per question.
    Text(Vec<String>),
    /// Approve or deny an approval or permission request.
    Decision {
        /// True to approve.
        approve: bool,
        /// Why.
        comment: Option<String>,
        /// "Always allow this here": `Some(None)` for the rule the request offers,
        /// `Some(Some(rule))` for one of the human's own.
        always: Option<Option<String>>,
    },
    /// Cancel the question.
    Cancel {
        /// Why.
        reason: Option<String>,
    },
}

/// `hitl answer` / `hitl cancel` arguments.
#[derive(Debug, Clone)]
pub struct AnswerOptions {
    /// The question's id.
    pub id: String,
    /// The reply.
    pub with: AnswerWith,
    /// The project folder.
    pub dir: Option<PathBuf>,
    /// History database URL.
    pub db: Option<String>,
    /// Print the answer written as JSON.
    pub json: bool,
}

/// The reply `opts` gives to `request`, or why it does not fit.
fn reply_for(opts: &AnswerOptions, request: &Request) -> Result<Reply> {
    Ok(match &opts.with {
        AnswerWith::Text(words) => {
            // A form takes one answer per question (one per line to `interpret`);
            // anything else takes the words as one text, however the shell split it.
            let joiner = match request.answer_shape() {
                AnswerShape::Form { .. } => "\n",
                _ => " ",
            };
            request.interpret(&words.join(joiner)).map_err(|e| {
                anyhow::anyhow!("{e} (question {} is a {} question)", opts.id, request.kind)
            })?
        }
        AnswerWith::Decision {
            approve,
            comment,
            always,
        } => {
            if !matches!(request.answer_shape(), AnswerShape::Decision { .. }) {
                bail!(
                    "--approve/--deny answer approval and permission requests; question {} is a {} question",
                    opts.id,
                    request.kind
                );
            }
            let remember = match always {
                None => None,
                Some(_) if !approve => bail!("--always goes with --approve"),
                Some(Some(rule)) => Some(rule.clone()),
                Some(None) => Some(
                    request
                        .always_allow()
                        .with_context(|| {
                            format!(
                                "question {} offers no rule to always allow (give one: --always 'Bash(CMD:*)')",
                                opts.id
                            )
                        })?
                        .to_string(),
                ),
            };
            Reply::Approval {
                approved: *approve,
                comment: comment.clone(),
                remember,
            }
        }
        AnswerWith::Cancel { reason } => Reply::Cancel {
            reason: reason.clone(),
        },
    })
}

/// How a finished question ended, for "question X is …" messages.
fn ended(status: Status, by: Option<&str>) -> String {
    let by = by.map(|b| format!(" by {b}")).unwrap_or_default();
    match status {
        Status::Answered => format!("already answered{by}"),
        Status::Cancelled => format!("already cancelled{by}"),
        Status::Timeout => "already timed out".to_string(),
        Status::Withdrawn => "withdrawn by its asker".to_string(),
        Status::Abandoned => "abandoned: its asker exited".to_string(),
        Status::Rejected => "rejected as bad input".to_string(),
        Status::Pending => "still pending".to_string(),
    }
}

/// The name recorded as the responder: `cli:USER`.
/// Who answers from this command line: `cli:` and the OS user (by its uid when the
/// environment does not say, as under cron or a service).
fn responder() -> String {
    let user = std::env::var("USER")
        .or_else(|_| std::env::var("LOGNAME"))
        .ok()
        .filter(|u| !u.is_empty())
        .unwrap_or_else(crate::runtime::process::user_name);
    format!("cli:{user}")
}

/// The pending spool question `id` names: its whole id, or (as git takes commits)
/// the start of one, four characters or more, that no other pending question's id
/// starts with. An error when several do.
fn find_question(spool: &Spool, id: &str) -> Result<Option<(PathBuf, ParsedQuestion)>> {
    // Fast path: canonical and seed 000 questions are named after their id.
    let direct = spool.questions().join(format!("{id}.json"));
    if let questions::Loaded::Question(q) =
        questions::load_question(&direct, DEFAULT_MAX_QUESTION_BYTES)
        && q.request.id == id
    {
        return Ok(Some((direct, *q)));
    }
    let mut starting = Vec::new();
    for p in questions::question_paths(spool).unwrap_or_default() {
        if let questions::Loaded::Question(q) =
            questions::load_question(&p, DEFAULT_MAX_QUESTION_BYTES)
        {
            if q.request.id == id {
                return Ok(Some((p, *q)));
            }
            if id.len() >= MIN_PREFIX && q.request.id.starts_with(id) {
                starting.push((p, *q));
            }
        }
    }
    match starting.len() {
        0 | 1 => Ok(starting.pop()),
        n => {
            let ids: Vec<&str> = starting
                .iter()
                .map(|(_, q)| q.request.id.as_str())
                .collect();
            bail!(
                "{id} starts {n} pending questions' ids ({}); give more of it",
                ids.join(", ")
            )
        }
    }
}

/// The fewest characters of an id that name a question by its start.
const MIN_PREFIX: usize = 4;

/// Which request an id names: a spool question's and a request made over HTTP may
/// share one (an asker names its own file), so `spool:ID` and `http:ID` say which.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Which {
    Spool,
    Http,
    Either,
}

/// The id without its `spool:`/`http:` prefix, and which it names.
fn which(id: &str) -> (Which, &str) {
    if let Some(rest) = id.strip_prefix("spool:") {
        (Which::Spool, rest)
    } else if let Some(rest) = id.strip_prefix("http:") {
        (Which::Http, rest)
    } else {
        (Which::Either, id)
    }
}

/// Whether the listener (or `server`) holds a pending request made another way than
/// the spool with this id.
async fn held_elsewhere(server: Option<&(String, Destination)>, id: &str) -> bool {
    let Some((server, to)) = server else {
        return false;
    };
    let Ok(client) = crate::api::client::Client::new(server, *to) else {
        return false;
    };
    match tokio::time::timeout(std::time::Duration::from_secs(3), client.pending()).await {
        // A spool question (a hook's too) names its project; a stored request none.
        Ok(Ok(list)) => list.iter().any(|v| v.project.is_none() && v.id == id),
        _ => false,
    }
}

/// `hitl cancel --all [--agent NAME]`: cancels every pending request of the project
/// (those `hitl pending` lists), or every one of an agent (its id or its name), one
/// after another as `hitl cancel ID` would; a request that ended meanwhile is said and
/// passed over. Fails if nothing was pending, or if any cancel failed.
pub async fn cancel_all(
    dir: Option<PathBuf>,
    agent: Option<String>,
    reason: Option<String>,
    db: Option<String>,
) -> Result<()> {
    let spool = Spool::locate(dir.as_deref())?;
    // Listed as `hitl pending` lists them, which asks the listener on a runtime of
    // its own: off this one's threads.
    let listed = spool.clone();
    let all = tokio::task::spawn_blocking(move || super::inspect::pending_names(&listed))
        .await
        .context("listing what is pending")?;
    let chosen: Vec<String> = all
        .into_iter()
        .filter(|(_, id, name)| agent.as_ref().is_none_or(|a| a == id || a == name))
        .map(|(which, _, _)| which)
        .collect();
    if chosen.is_empty() {
        match &agent {
            Some(a) => bail!(
                "no pending request of agent {a:?} in {} (see `hitl pending`)",
                spool.project().display()
            ),
            None => bail!("nothing is pending in {}", spool.project().display()),
        }
    }
    let mut failed = 0;
    for id in &chosen {
        let done = run(AnswerOptions {
            id: id.clone(),
            with: AnswerWith::Cancel {
                reason: reason.clone(),
            },
            dir: Some(spool.project().to_path_buf()),
            db: db.clone(),
            json: false,
        })
        .await;
        if let Err(e) = done {
            eprintln!("hitl: {id}: {e:#}");
            failed += 1;
        }
    }
    if failed > 0 {
        bail!("{failed} of {} not cancelled", chosen.len());
    }
    Ok(())
}

/// Answers (or cancels) one question.
pub async fn run(mut opts: AnswerOptions) -> Result<()> {
    let (target, id) = which(&opts.id);
    opts.id = id.to_string();
    crate::protocol::validate_id(&opts.id)
        .with_context(|| format!("{:?} is not a question id", opts.id))?;
    let server_env = std::env::var("HITL_SERVER").ok().filter(|s| !s.is_empty());
    let spool = match (Spool::locate(opts.dir.as_deref()), &server_env) {
        (Ok(s), _) => s,
        // No project here, but a server to ask.
        (Err(_), Some(server)) if opts.dir.is_none() => {
            return match answer_remote(server, Destination::Given, &opts).await? {
                Some(()) => Ok(()),
                None => bail!("no request {} on {server}", opts.id),
            };
        }
        (Err(e), _) => return Err(e),
    };
    let paths = Paths::from_env();
    let db_url = opts.db.clone().unwrap_or_else(|| paths.db_url());

    let server = match server_env.clone() {
        Some(given) => Some((given, Destination::Given)),
        None => crate::spool::ListenerInfo::running(&spool)
            .and_then(|l| l.http)
            .map(|url| (url, Destination::Listener)),
    };
    let found = match target {
        Which::Http => None,
        _ => find_question(&spool, &opts.id)?,
    };
    // Named by the start of its id: the whole id from here on.
    if let Some((_, q)) = &found {
        opts.id = q.request.id.clone();
    }
    if found.is_some() && target == Which::Either && held_elsewhere(server.as_ref(), &opts.id).await
    {
        bail!(
            "{id} names two pending requests: a question in the spool and a request made \
             over HTTP; say which: `spool:{id}` or `http:{id}`",
            id = opts.id
        );
    }
    if target == Which::Spool && found.is_none() {
        bail!(
            "no pending question {} in the spool of {} (see `hitl pending`)",
            opts.id,
            spool.project().display()
        );
    }
    let Some((question_path, q)) = found else {
        // Not a file in the spool: it may be a request made over HTTP, held by the
        // project's listener or by the server in HITL_SERVER.
        if let Some((server, to)) = server
            && answer_remote(&server, to, &opts).await?.is_some()
        {
            return Ok(());
        }
        // Not in the spool: say what became of it, from its tombstone or history.
        if let Some(a) = questions::read_answer(&spool.answers().join(format!("{}.json", opts.id)))
            && a.id == opts.id
        {
            bail!(
                "question {} is already {} by {}",
                opts.id,
                a.status.as_str(),
                a.responded_by
            );
        }
        if let Ok(store) = Store::open(&db_url).await {
            let q = HistoryQuery {
                id: Some(opts.id.clone()),
                limit: 1,
                ..Default::default()
            };
            if let Some(h) = store.history(&q).await?.into_iter().next() {
                let by = h
                    .responded_by
                    .map(|b| format!(" by {b}"))
                    .unwrap_or_default();
                bail!("question {} is already {}{by}", opts.id, h.status);
            }
        }
        bail!(
            "no pending question {} in {} (see `hitl pending`)",
            opts.id,
            spool.project().display()
        );
    };
    // With the project's listener running, the answer goes through it, as every
    // other responder's does: it writes the file, records the history and tells its
    // UIs. One it has not taken yet (just written) is answered here.
    if let Some(listener) = crate::spool::ListenerInfo::running(&spool).and_then(|l| l.http)
        && answer_through_listener(&listener, &opts, &spool, &q.request)
            .await?
            .is_some()
    {
        return Ok(());
    }
    let answer_path = questions::answer_path(&spool, &q);
    if let Some(existing) = questions::read_answer(&answer_path)
        && existing.id == q.request.id
        && existing.timestamp >= q.request.timestamp
    {
        bail!(
            "question {} is {}",
            opts.id,
            ended(existing.status.into(), Some(&existing.responded_by))
        );
    }

    let reply = reply_for(&opts, &q.request)?;
    // Several people's approval is counted by the listener, never by one of them
    // writing the answer alone (a denial needs nobody else).
    let approves = matches!(reply, Reply::Approval { approved: true, .. });
    if approves && q.request.approvals_needed() > 1 {
        bail!(
            "question {} needs {} different people's approval, which the project's listener \
             counts: start `hitl listen` and approve there",
            opts.id,
            q.request.approvals_needed()
        );
    }
    let answer = Answer::from_reply(&q.request, reply, &responder());
    match questions::deliver(&spool, &question_path, &q, &answer, true)
        .with_context(|| format!("writing the answer to {}", answer_path.display()))?
    {
        Created::Created => {}
        Created::AlreadyExists => {
            let how = match questions::read_answer(&answer_path) {
                Some(a) => ended(a.status.into(), Some(&a.responded_by)),
                None => "already answered or withdrawn".to_string(),
            };
            bail!("question {} is {how}", opts.id);
        }
    }
    record(&db_url, &spool, q, &answer).await;
    print_done(&answer, opts.json)
}

/// Says what was sent: the answer as JSON with `--json`, else one line.
fn print_done(answer: &Answer, json: bool) -> Result<()> {
    if json {
        println!("{}", serde_json::to_string(answer)?);
        return Ok(());
    }
    let id = &answer.id;
    let comment = answer
        .comment
        .as_deref()
        .filter(|c| !c.is_empty())
        .map(|c| format!(" ({})", crate::protocol::text::visible_line(c)))
        .unwrap_or_default();
    match (answer.status, answer.approved) {
        (crate::protocol::AnswerStatus::Cancelled, _) => println!("cancelled {id}{comment}"),
        (_, Some(true)) => println!("approved {id}{comment}"),
        (_, Some(false)) => println!("denied {id}{comment}"),
        _ => {
            let text = crate::protocol::text::visible_line(&answer.content);
            println!("answered {id}: {text}{comment}")
        }
    }
    Ok(())
}

/// Answers the spool question `question` of `spool` through the project's listener
/// at `base`. `None`: the listener does not hold that very question (not taken yet,
/// or the id names another project's question or a request made over HTTP).
async fn answer_through_listener(
    base: &str,
    opts: &AnswerOptions,
    spool: &Spool,
    question: &Request,
) -> Result<Option<()>> {
    let client = crate::api::client::Client::new(base, Destination::Listener)?;
    let Ok(Some(view)) = client.view(&question.id).await else {
        return Ok(None);
    };
    let same = view.project.as_deref() == Some(spool.project())
        && view.request.agent_id == question.agent_id
        && view.request.timestamp == question.timestamp;
    if !same {
        return Ok(None);
    }
    if view.status != Status::Pending {
        bail!("question {} is already {}", opts.id, view.status);
    }
    respond_with(&client, &view.request, opts).await.map(Some)
}

/// Answers request `opts.id` on the server at `base`. `None`: the server has no such
/// request. A request that has ended is an error saying how.
async fn answer_remote(base: &str, to: Destination, opts: &AnswerOptions) -> Result<Option<()>> {
    let client = crate::api::client::Client::new(base, to)?;
    client.require_user("answering on a server")?;
    let Some((request, status)) = client.get(&opts.id).await? else {
        return Ok(None);
    };
    if status != Status::Pending {
        bail!("question {} is already {status} (on {base})", opts.id);
    }
    respond_with(&client, &request, opts).await.map(Some)
}

/// Sends `opts`' reply to the pending `request` through `client`, and says what it sent.
async fn respond_with(
    client: &crate::api::client::Client,
    request: &Request,
    opts: &AnswerOptions,
) -> Result<()> {
    let reply = reply_for(opts, request)?;
    let answer = match client.respond(request, &reply, &responder()).await {
        Ok(a) => a,
        // Counted toward an approval that needs several people: said, not failed.
        Err(e) => match e.downcast_ref::<crate::api::client::Refused>() {
            Some(r) if r.status == 202 => {
                if opts.json {
                    println!(
                        "{}",
                        serde_json::json!({ "id": request.id, "recorded": r.message })
                    );
                } else {
                    println!("{}: {}", request.id, r.message);
                }
                return Ok(());
            }
            _ => return Err(e).with_context(|| format!("question {} was not answered", opts.id)),
        },
    };
    print_done(&answer, opts.json)
}

/// Best effort: the answer is delivered already; history can be repaired by a
/// listener's rescan, so a store error is only a warning.
async fn record(db_url: &str, spool: &Spool, q: ParsedQuestion, answer: &Answer) {
    let op = StoreOp::Finished {
        project: spool.project().display().to_string(),
        request: Box::new(q.request),
        variant: q.variant,
        status: answer.status.into(),
        answer: Some(Box::new(answer.clone())),
        reason: None,
    };
    let result = async {
        let store = Store::open(db_url).await?;
        store.apply(&[op]).await?;
        store.close().await;
        anyhow::Ok(())
    }
    .await;
    if let Err(e) = result {
        eprintln!("hitl: warning: answer delivered but not recorded in history: {e:#}");
    }
}
