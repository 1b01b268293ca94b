//! `hitl mcp`'s mailbox tools (seed 003), for Claude Code sub-agents, which cannot
//! use AskUserQuestion nor block in a shell command for long: `mailbox_ask`,
//! `mailbox_send`, `mailbox_recv`, `mailbox_reply`, `mailbox_result`,
//! `mailbox_status`. Each does what `hitl mailbox …` does, on the run's files; a
//! wait runs on a blocking thread (inotify, as the commands wait) while the call
//! tells the client of progress, and ends when the client cancels it or the server
//! stops. A mailbox question reaches the user through the listener's relay like
//! any agent's in the run.

use std::{
    collections::BTreeMap,
    path::PathBuf,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use rmcp::{
    ErrorData, RoleServer,
    handler::server::wrapper::Parameters,
    model::{CallToolResult, ProgressNotificationParam},
    service::RequestContext,
    tool, tool_router,
};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::mcp::McpServer;
use crate::mailbox::{
    agent::{self, Got, NoValue, WaitSpec},
    keyvalue::{self, KeyValues},
    layout::Mailbox,
    question::{Ending, Question},
};

/// How often a waiting call tells the client it is still waiting.
const PROGRESS_EVERY: Duration = Duration::from_secs(10);

/// `mailbox_ask`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct MailboxAsk {
    /// The asking agent's mailbox: the run's folder and the agent, RUN_DIR/AGENT.
    pub mailbox: PathBuf,
    /// The question (the file's CONTEXT).
    pub context: String,
    /// The options (OPTION_1, OPTION_2…); none: the user types an answer.
    #[serde(default)]
    pub options: Vec<String>,
    /// A plan or other text shown with the question (the file's PLAN).
    #[serde(default)]
    pub plan: Option<String>,
    /// Seconds to wait before withdrawing the question; none waits for ever.
    #[serde(default)]
    pub timeout: Option<u64>,
}

/// `mailbox_send`'s and `mailbox_reply`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct MailboxWrite {
    /// The mailbox: for a send the receiving agent's, for a reply your own
    /// (RUN_DIR/AGENT).
    pub mailbox: PathBuf,
    /// The keys and values (COMMIT_NUMBER, DESCRIPTION; STATUS, COMMIT_HASH…).
    pub pairs: BTreeMap<String, Value>,
}

/// `mailbox_recv`'s and `mailbox_result`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct MailboxWait {
    /// The mailbox: for recv your own, for result the replying agent's
    /// (RUN_DIR/AGENT).
    pub mailbox: PathBuf,
    /// Seconds to wait; none waits until something comes or the run ends.
    #[serde(default)]
    pub timeout: Option<u64>,
}

/// `mailbox_status`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct MailboxStatus {
    /// The agent's mailbox (RUN_DIR/AGENT).
    pub mailbox: PathBuf,
    /// The new status (planning, executing, idle, working, done, error…); none
    /// reads it.
    #[serde(default)]
    pub status: Option<String>,
}

fn invalid(e: impl std::fmt::Display) -> ErrorData {
    ErrorData::invalid_params(format!("{e:#}"), None)
}

fn pairs_of(map: BTreeMap<String, Value>) -> Result<KeyValues, ErrorData> {
    let mut kv = KeyValues::new();
    for (k, v) in map {
        if !keyvalue::is_key(&k) {
            return Err(invalid(format!(
                "{k:?} is not a shell variable name (letters, digits and _)"
            )));
        }
        let text = match v {
            Value::String(s) => s,
            Value::Null => String::new(),
            other => other.to_string(),
        };
        kv.set(&k, text);
    }
    Ok(kv)
}

fn object_of(pairs: &KeyValues) -> Value {
    Value::Object(
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.into()))
            .collect(),
    )
}

/// Why a wait got nothing, as the tools say it.
fn why(n: NoValue) -> (&'static str, &'static str) {
    match n {
        NoValue::TimedOut => ("timeout", "nothing came within the timeout"),
        NoValue::PeersDone => (
            "peers_done",
            "every other agent is done: nothing more will come",
        ),
        NoValue::PeerFailed => ("failed", "an agent of the run failed, or the run did"),
        NoValue::Interrupted(_) | NoValue::Kept(_) | NoValue::Stopped => {
            ("withdrawn", "the call was cancelled")
        }
    }
}

#[tool_router(router = mailbox_router, vis = "pub(super)")]
impl McpServer {
    #[tool(
        description = "Mailbox (hitl mailbox): ask the user a question from a run's agent \
        (RUN_DIR/AGENT) and wait for the answer, for sub-agents that cannot ask the user \
        themselves. Returns JSON: status, answer (\"Option N\"), option (N), text."
    )]
    async fn mailbox_ask(
        &self,
        Parameters(args): Parameters<MailboxAsk>,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let mailbox = Mailbox::parse(&args.mailbox).map_err(invalid)?;
        let question = Question {
            context: args.context,
            options: args.options,
            details: args
                .plan
                .map(|p| vec![("PLAN".to_string(), p)])
                .unwrap_or_default(),
        };
        let timeout = args.timeout.map(Duration::from_secs);
        let got = self
            .waiting(&context, move |stop| {
                agent::ask(&mailbox, &question, spec(timeout, stop))
            })
            .await?;
        Ok(match got {
            Ok(ending) => {
                let (answer, option, text) = match &ending {
                    Ending::Chose { number, text } => {
                        (format!("Option {number}"), Some(*number), text.clone())
                    }
                    Ending::Text(t) => (t.clone(), None, t.clone()),
                    Ending::Cancelled(_) | Ending::Timeout => (String::new(), None, String::new()),
                };
                let report = json!({
                    "status": ending.status(),
                    "answer": answer,
                    "option": option,
                    "text": text,
                });
                if matches!(ending, Ending::Chose { .. } | Ending::Text(_)) {
                    CallToolResult::structured(report)
                } else {
                    CallToolResult::structured_error(report)
                }
            }
            Err(n) => {
                let (status, message) = why(n);
                CallToolResult::structured_error(json!({ "status": status, "message": message }))
            }
        })
    }

    #[tool(
        description = "Mailbox: send a request (KEY=VALUE pairs) to an agent of the run \
        (RUN_DIR/AGENT, the receiver): its inbox/request. One at a time: the one before \
        must have been taken."
    )]
    async fn mailbox_send(
        &self,
        Parameters(args): Parameters<MailboxWrite>,
    ) -> Result<CallToolResult, ErrorData> {
        let to = Mailbox::parse(&args.mailbox).map_err(invalid)?;
        agent::send(&to, &pairs_of(args.pairs)?).map_err(invalid)?;
        Ok(CallToolResult::structured(json!({ "status": "sent" })))
    }

    #[tool(
        description = "Mailbox: wait for a request to your agent (RUN_DIR/AGENT) and take \
        it. Returns JSON: status (request, peers_done when every other agent is done and \
        you should finish, failed, timeout) and the request's keys."
    )]
    async fn mailbox_recv(
        &self,
        Parameters(args): Parameters<MailboxWait>,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        self.take_pairs(args, &context, "request", agent::recv)
            .await
    }

    #[tool(
        description = "Mailbox: reply to the request your agent (RUN_DIR/AGENT) took: its \
        outbox/result (KEY=VALUE pairs, e.g. STATUS=SUCCESS)."
    )]
    async fn mailbox_reply(
        &self,
        Parameters(args): Parameters<MailboxWrite>,
    ) -> Result<CallToolResult, ErrorData> {
        let mailbox = Mailbox::parse(&args.mailbox).map_err(invalid)?;
        agent::reply(&mailbox, &pairs_of(args.pairs)?).map_err(invalid)?;
        Ok(CallToolResult::structured(json!({ "status": "replied" })))
    }

    #[tool(
        description = "Mailbox: wait for the result of the agent you sent a request to \
        (RUN_DIR/AGENT) and take it. Returns JSON: status (result, peers_done, failed, \
        timeout) and the result's keys."
    )]
    async fn mailbox_result(
        &self,
        Parameters(args): Parameters<MailboxWait>,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        self.take_pairs(args, &context, "result", agent::result)
            .await
    }

    #[tool(
        description = "Mailbox: read or set an agent's status (RUN_DIR/AGENT): planning, \
        executing, idle, working, done, error. The run ends when every agent is done, \
        and fails when one is in error."
    )]
    async fn mailbox_status(
        &self,
        Parameters(args): Parameters<MailboxStatus>,
    ) -> Result<CallToolResult, ErrorData> {
        let mailbox = Mailbox::parse(&args.mailbox).map_err(invalid)?;
        if let Some(s) = &args.status {
            agent::set_status(&mailbox, s, None).map_err(invalid)?;
        }
        Ok(CallToolResult::structured(json!({
            "agent": mailbox.agent,
            "status": mailbox.status(),
        })))
    }
}

/// A wait's spec on a server thread: no signals; stopped by `stop`.
fn spec(timeout: Option<Duration>, stop: Arc<AtomicBool>) -> WaitSpec<'static> {
    WaitSpec {
        timeout,
        signals: false,
        stop: Box::leak(Box::new(move || stop.load(Ordering::Relaxed))),
    }
}

fn pairs_result(what: &str, got: Got<KeyValues>) -> CallToolResult {
    match got {
        Ok(pairs) => CallToolResult::structured(json!({ "status": what, what: object_of(&pairs) })),
        Err(n) => {
            let (status, message) = why(n);
            let report = json!({ "status": status, "message": message });
            if matches!(n, NoValue::PeersDone) {
                CallToolResult::structured(report)
            } else {
                CallToolResult::structured_error(report)
            }
        }
    }
}

impl McpServer {
    /// `mailbox_recv` and `mailbox_result`: `take` (one of `agent`'s) on a blocking
    /// thread, its pairs reported as `what`.
    async fn take_pairs(
        &self,
        args: MailboxWait,
        context: &RequestContext<RoleServer>,
        what: &str,
        take: fn(&Mailbox, WaitSpec<'static>) -> anyhow::Result<Got<KeyValues>>,
    ) -> Result<CallToolResult, ErrorData> {
        let mailbox = Mailbox::parse(&args.mailbox).map_err(invalid)?;
        let timeout = args.timeout.map(Duration::from_secs);
        let got = self
            .waiting(context, move |stop| take(&mailbox, spec(timeout, stop)))
            .await?;
        Ok(pairs_result(what, got))
    }

    /// Runs the wait `work` on a blocking thread, telling the client of progress
    /// meanwhile; the client cancelling the call, or the server stopping, stops it
    /// (within the wait's once-a-second look).
    async fn waiting<T: Send + 'static>(
        &self,
        context: &RequestContext<RoleServer>,
        work: impl FnOnce(Arc<AtomicBool>) -> anyhow::Result<T> + Send + 'static,
    ) -> Result<T, ErrorData> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let mut task = tokio::task::spawn_blocking(move || work(flag));
        let token = context.meta.get_progress_token();
        let started = tokio::time::Instant::now();
        let mut ticks = tokio::time::interval(PROGRESS_EVERY);
        let stopping = self.stopping().clone();
        loop {
            tokio::select! {
                done = &mut task => {
                    return done
                        .map_err(|e| ErrorData::internal_error(format!("the wait failed: {e}"), None))?
                        .map_err(|e| ErrorData::internal_error(format!("{e:#}"), None));
                }
                _ = context.ct.cancelled(), if !stop.load(Ordering::Relaxed) => {
                    stop.store(true, Ordering::Relaxed);
                }
                _ = stopping.cancelled(), if !stop.load(Ordering::Relaxed) => {
                    stop.store(true, Ordering::Relaxed);
                }
                _ = ticks.tick() => {
                    if let Some(token) = &token {
                        let waited = started.elapsed().as_secs();
                        let note = ProgressNotificationParam::new(token.clone(), waited as f64)
                            .with_message(format!("waiting on the mailbox ({waited} s)"));
                        let _ = context.peer.notify_progress(note).await;
                    }
                }
            }
        }
    }
}
