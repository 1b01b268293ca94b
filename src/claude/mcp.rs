//! `hitl mcp`: an MCP server on stdio, so that any MCP client (Claude Code, an
//! SDK-built agent) can ask the human through hitl. Its tools:
//!
//! - `ask_human`: a question of any kind (text, yes/no, select, multiselect,
//!   approval), answered from any hitl UI;
//! - `request_approval`: approve or deny an action, with the human's comment;
//! - `permission_prompt`: the tool for `claude -p --permission-prompt-tool
//!   mcp__hitl__permission_prompt`, answering in the JSON text Claude Code reads;
//! - `mailbox_*` (`mcp_mailbox.rs`): seed 003's mailboxes, for sub-agents.
//!
//! Each call becomes a request of origin `mcp` on the project's listener (found
//! through `.listener.json`, as `hitl hook` finds it), held in its store, and is
//! waited on with the long poll. While it waits, progress notifications keep the
//! client from timing out; a call the client cancels, or a server told to stop, is
//! withdrawn from the queue. Stdout is the protocol: logs go to stderr.

use std::{path::PathBuf, sync::Arc, time::Duration};

use anyhow::{Context, Result};
use rmcp::{
    ErrorData, RoleServer, ServerHandler, ServiceExt,
    handler::server::{router::tool::ToolRouter, wrapper::Parameters},
    model::{
        CallToolResult, ContentBlock, Implementation, ProgressNotificationParam,
        ServerCapabilities, ServerConfig,
    },
    service::RequestContext,
    tool, tool_handler, tool_router,
};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio_util::{sync::CancellationToken, task::TaskTracker};

use crate::{
    claude::{
        decision::{Decision, HookEvent},
        hook::{self, Step},
    },
    config::{self, Paths},
    protocol::{Answer, AnswerStatus, Kind, Origin, Priority, Request},
    spool::{ListenerInfo, Spool},
};

/// How often a waiting call tells the client it is still waiting.
const PROGRESS_EVERY: Duration = Duration::from_secs(10);
/// How often a waiting call looks whether someone is still at hitl to answer.
const PRESENCE_EVERY: Duration = Duration::from_millis(250);
/// What the agent is told when nobody is at hitl: a tool error it can act on.
const NOBODY_THERE: &str = "nobody is at hitl to answer right now (no terminal prompt or \
    dashboard is open): ask the user here in the conversation instead, or go on without";

/// How long a stopping server gives its withdrawals to reach the listener.
const WITHDRAW_WITHIN: Duration = Duration::from_secs(3);

/// Runs the MCP server on stdin/stdout until the client closes it or a signal stops
/// it; questions still waiting are withdrawn.
pub fn run(project: Option<PathBuf>) -> Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    runtime.block_on(async {
        let server = McpServer::new(project)?;
        let (stopping, calls) = (server.stopping.clone(), server.calls.clone());
        let (stdin, stdout) = rmcp::transport::stdio();
        let stdin = WatchedStdin {
            inner: stdin,
            closed: stopping.clone(),
        };
        let service = server
            .serve((stdin, stdout))
            .await
            .context("starting the MCP session on stdio")?;
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::select! {
            quit = service.waiting() => { quit.context("serving MCP")?; }
            _ = term.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
        // Whatever still waits is withdrawn, not left for a human to answer in vain.
        stopping.cancel();
        calls.close();
        let _ = tokio::time::timeout(WITHDRAW_WITHIN, calls.wait()).await;
        Ok(())
    })
}

/// Stdin that cancels `closed` at its end. A client closes stdin first when it
/// stops the server: its waiting questions are withdrawn then and there, not after
/// the seconds rmcp gives handlers to finish.
struct WatchedStdin {
    inner: tokio::io::Stdin,
    closed: CancellationToken,
}

impl tokio::io::AsyncRead for WatchedStdin {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = std::pin::Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(polled, std::task::Poll::Ready(Ok(())))
            && buf.filled().len() == before
            && buf.remaining() > 0
        {
            self.closed.cancel();
        }
        polled
    }
}

/// The MCP server: where it asks, and the calls it has in flight.
#[derive(Clone)]
pub struct McpServer {
    /// The project whose listener is asked: `--dir`, else `CLAUDE_PROJECT_DIR`,
    /// else the working folder.
    project: Arc<PathBuf>,
    /// Cancelled when the server stops: every waiting call withdraws its question.
    stopping: CancellationToken,
    /// The calls that ask, so that stopping can wait for their withdrawals.
    calls: TaskTracker,
    tool_router: ToolRouter<McpServer>,
}

/// `ask_human`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct AskHuman {
    /// The question, as the human should read it.
    pub question: String,
    /// The kind of answer wanted (default text).
    #[serde(rename = "type", default)]
    pub kind: Option<AskedKind>,
    /// The choices, for select and multiselect (two or more).
    #[serde(default)]
    pub options: Vec<String>,
    /// Seconds to wait for an answer; 0 waits for ever. Default: the project's
    /// `[ask] timeout`.
    #[serde(default)]
    pub timeout: Option<u64>,
    /// How soon it should be answered (default: the project's `[ask] priority`).
    #[serde(default)]
    pub priority: Option<Priority>,
    /// What helps the human answer: files, a diff, a command, links (text or JSON).
    #[serde(default)]
    pub context: Option<Value>,
    /// Tags to file it under (`ci`, `frontend`): shown beside it, a filter of history.
    #[serde(default)]
    pub tags: Vec<String>,
}

/// `request_approval`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct RequestApproval {
    /// What is to be done, such as "deploy 1.4 to production".
    pub action: String,
    /// Why, and what it touches (text or JSON).
    #[serde(default)]
    pub context: Option<Value>,
    /// Seconds to wait; 0 waits for ever. Default: the project's `[ask] timeout`.
    #[serde(default)]
    pub timeout: Option<u64>,
    /// How soon it should be answered (default: the project's `[ask] priority`).
    #[serde(default)]
    pub priority: Option<Priority>,
    /// Tags to file it under (`ci`, `frontend`): shown beside it, a filter of history.
    #[serde(default)]
    pub tags: Vec<String>,
}

/// `permission_prompt`'s arguments, as `claude -p --permission-prompt-tool` sends
/// them.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct PermissionPrompt {
    /// The tool asking to run.
    pub tool_name: String,
    /// Its input.
    #[serde(default)]
    pub input: serde_json::Map<String, Value>,
    /// The tool use's id.
    #[serde(default)]
    pub tool_use_id: Option<String>,
}

/// A kind of answer `ask_human` takes: those an agent asks plainly
/// ([`Kind::asked_plainly`]), read by their names and aliases.
#[derive(Debug, Clone, Copy)]
pub struct AskedKind(Kind);

impl<'de> Deserialize<'de> for AskedKind {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<AskedKind, D::Error> {
        match Kind::deserialize(d)? {
            k if k.asked_plainly() => Ok(AskedKind(k)),
            k => Err(serde::de::Error::custom(format!(
                "ask_human does not ask {k} questions"
            ))),
        }
    }
}

impl JsonSchema for AskedKind {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "AnswerKind".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        Kind::schema_of(Kind::asked_plainly)
    }
}

/// Why a call could not be asked, told to the agent as a tool error.
struct NotAsked(String);

#[tool_router]
impl McpServer {
    /// A server asking through the listener of `project` (see [`McpServer::project`]).
    pub fn new(project: Option<PathBuf>) -> Result<McpServer> {
        let project = match project {
            Some(p) => p,
            None => match std::env::var_os("CLAUDE_PROJECT_DIR").filter(|p| !p.is_empty()) {
                Some(p) => PathBuf::from(p),
                None => std::env::current_dir().context("finding the working folder")?,
            },
        };
        Ok(McpServer {
            project: Arc::new(project),
            stopping: CancellationToken::new(),
            calls: TaskTracker::new(),
            tool_router: Self::tool_router() + Self::mailbox_router(),
        })
    }

    /// Cancelled when the server stops.
    pub(super) fn stopping(&self) -> &CancellationToken {
        &self.stopping
    }

    #[tool(
        description = "Ask the human a question and wait for the answer: free text, yes/no, \
        one or several of your options, or approve/deny. The human answers from hitl \
        (terminal, dashboard, phone). Returns the answer as JSON: status (answered, \
        cancelled, timeout), answer, and approved/choices/comment where they apply."
    )]
    async fn ask_human(
        &self,
        Parameters(args): Parameters<AskHuman>,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let kind: Kind = args.kind.map_or(Kind::Text, |k| k.0);
        if kind.needs_options() && args.options.len() < 2 {
            return Err(ErrorData::invalid_params(
                format!("a {kind} question needs two or more options"),
                None,
            ));
        }
        let question = Asked {
            kind,
            content: args.question,
            options: args.options,
            timeout: args.timeout,
            priority: args.priority,
            tags: args.tags,
            context: args.context,
        };
        Ok(self.ask_and_report(question, context).await)
    }

    #[tool(
        description = "Ask the human to approve or deny an action before you take it, and \
        wait. Returns JSON: approved (true/false), the human's comment, status."
    )]
    async fn request_approval(
        &self,
        Parameters(args): Parameters<RequestApproval>,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let question = Asked {
            kind: Kind::Approval,
            content: format!("Approve: {}?", args.action.trim_end_matches('?')),
            options: Vec::new(),
            timeout: args.timeout,
            priority: args.priority,
            tags: args.tags,
            context: args.context,
        };
        Ok(self.ask_and_report(question, context).await)
    }

    #[tool(
        description = "Claude Code's permission prompt (claude -p --permission-prompt-tool \
        mcp__hitl__permission_prompt): asks the human whether a tool may run and returns \
        {\"behavior\":\"allow\",\"updatedInput\":…} or {\"behavior\":\"deny\",\"message\":…} \
        as JSON text."
    )]
    async fn permission_prompt(
        &self,
        Parameters(args): Parameters<PermissionPrompt>,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let input = Value::Object(args.input);
        let decision = self
            .permission(&args.tool_name, &input, args.tool_use_id, context)
            .await;
        // Always the full input: an empty `updatedInput` would run the tool with `{}`.
        let verdict = match decision {
            Decision::Allow { updated_input, .. } => json!({
                "behavior": "allow",
                "updatedInput": updated_input.unwrap_or(input),
            }),
            Decision::Deny { reason }
            | Decision::Ask { reason }
            | Decision::Notice { message: reason } => {
                json!({ "behavior": "deny", "message": reason })
            }
            // (An elicitation's answer is not a tool call's: never made here.)
            Decision::NoOpinion | Decision::Elicit { .. } => json!({
                "behavior": "deny",
                "message": "no human approved this in hitl",
            }),
        };
        Ok(CallToolResult::success(vec![ContentBlock::text(
            verdict.to_string(),
        )]))
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("hitl", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "hitl puts your questions in front of the human who runs you. Use \
                 ask_human when you need a decision, a fact or a choice only they can give, \
                 and request_approval before anything risky or irreversible. Calls wait \
                 until the human answers or the timeout passes.",
            )
    }
}

/// A question from `ask_human` or `request_approval`.
struct Asked {
    kind: Kind,
    content: String,
    options: Vec<String>,
    timeout: Option<u64>,
    priority: Option<Priority>,
    tags: Vec<String>,
    context: Option<Value>,
}

impl McpServer {
    /// Asks `question` and turns its end into the tool's result: the answer as JSON,
    /// a tool error when it ended unanswered or could not be asked.
    async fn ask_and_report(
        &self,
        question: Asked,
        context: RequestContext<RoleServer>,
    ) -> CallToolResult {
        let (spool, url, request) = match self.question(question, &context) {
            Ok(found) => found,
            Err(NotAsked(why)) => {
                return CallToolResult::error(vec![ContentBlock::text(why)]);
            }
        };
        let left = Arc::new(std::sync::atomic::AtomicBool::new(false));
        match self.wait(spool, url, request, context, left.clone()).await {
            Ok(None) if left.load(std::sync::atomic::Ordering::Relaxed) => {
                CallToolResult::structured_error(json!({
                    "status": "withdrawn",
                    "message": NOBODY_THERE,
                }))
            }
            Ok(Some(answer)) => {
                let report = report(&answer);
                if answer.status == AnswerStatus::Answered {
                    CallToolResult::structured(report)
                } else {
                    CallToolResult::structured_error(report)
                }
            }
            Ok(None) => CallToolResult::structured_error(json!({
                "status": "withdrawn",
                "message": "the question was withdrawn before anyone answered",
            })),
            Err(e) => CallToolResult::error(vec![ContentBlock::text(format!(
                "hitl could not ask the human: {e:#}"
            ))]),
        }
    }

    /// The project's spool and its listener's address, or why there is none.
    fn locate(&self) -> Result<(Spool, String), NotAsked> {
        let project = self.project.as_path();
        let spool = Spool::find(project).ok_or_else(|| {
            NotAsked(format!(
                "{} is not a hitl project: the human has to run `hitl init` there",
                project.display()
            ))
        })?;
        let Some(listener) = ListenerInfo::running(&spool) else {
            return Err(NotAsked(format!(
                "no hitl listener is running for {}: ask the user here in the conversation \
                 instead (for hitl, the human has to start `hitl listen` there)",
                spool.project().display()
            )));
        };
        if !listener.someone_answers() {
            // A question nobody sees only stalls the agent: it asks the user itself.
            return Err(NotAsked(NOBODY_THERE.into()));
        }
        let url = listener.http.ok_or_else(|| {
            NotAsked(format!(
                "the hitl listener for {} (pid {}) serves no HTTP, which MCP asks through: \
                 the human has to restart it without --no-http",
                spool.project().display(),
                listener.pid
            ))
        })?;
        Ok((spool, url))
    }

    /// The request for `asked`, and the listener to ask.
    fn question(
        &self,
        asked: Asked,
        context: &RequestContext<RoleServer>,
    ) -> Result<(Spool, String, Request), NotAsked> {
        let project = self.project.as_path();
        let (spool, url) = self.locate()?;
        let settings = config::load(&Paths::from_env(), Some(&spool.config_file()))
            .map_err(|e| NotAsked(format!("hitl's settings cannot be read: {e:#}")))?;
        // Named by what the MCP client calls itself, unless it runs in a known agent.
        let client = context.peer.peer_info().map(|i| i.client_info.name.clone());
        let who = crate::agents::identify_mcp_client(client.as_deref());
        let timeout = asked.timeout.unwrap_or(settings.ask.timeout);
        let context = match asked.context {
            None | Some(Value::Null) => Value::Null,
            Some(Value::Object(map)) => Value::Object(map),
            Some(other) => json!({ "context": other }),
        };
        let request = Request {
            working_dir: Some(project.display().to_string()),
            options: asked.options,
            priority: asked.priority.unwrap_or(settings.ask.priority),
            timeout: Some(timeout).filter(|&t| t > 0),
            tags: Request::tags_with_env(&asked.tags),
            context,
            ..Request::new(who.id, who.name, asked.kind, asked.content)
        };
        Ok((spool, url, request))
    }

    /// The human's decision on `tool` running with `input`, through the same policy
    /// and question as `hitl hook permission-request`, always asked.
    async fn permission(
        &self,
        tool: &str,
        input: &Value,
        tool_use_id: Option<String>,
        context: RequestContext<RoleServer>,
    ) -> Decision {
        // Nobody to ask is a denial with the reason, whatever the hook's policy for
        // unanswered calls: `claude -p` has no prompt of its own to fall back on.
        let url = match self.locate() {
            Ok((_, url)) => url,
            Err(NotAsked(why)) => return Decision::Deny { reason: why },
        };
        let call = json!({
            "hook_event_name": "permission_prompt",
            "tool_name": tool,
            "tool_input": input,
            "tool_use_id": tool_use_id,
            "cwd": std::env::current_dir().unwrap_or_else(|_| self.project.as_ref().clone()),
        });
        let step = hook::prepare(
            HookEvent::PermissionRequest,
            &call,
            Some(&self.project),
            true,
            super::decision::HookAgent::Claude,
        );
        match step {
            Err(e) => Decision::Deny {
                reason: format!("hitl could not ask the human: {e:#}"),
            },
            Ok(Step::Decided(d)) => d,
            Ok(Step::Ask(q)) => {
                let asked = self
                    .wait(
                        q.spool.clone(),
                        url,
                        q.request.clone(),
                        context,
                        Arc::default(),
                    )
                    .await;
                q.conclude(asked)
            }
        }
    }

    /// Asks `request` of the listener at `url` and waits for its end, telling the
    /// client of progress; withdrawn when the client cancels the call or the server
    /// stops.
    async fn wait(
        &self,
        spool: Spool,
        url: String,
        request: Request,
        context: RequestContext<RoleServer>,
        left: Arc<std::sync::atomic::AtomicBool>,
    ) -> Result<Option<Answer>> {
        let (ct, stopping) = (context.ct.clone(), self.stopping.clone());
        let watched = spool.clone();
        let stop = async move {
            // The last person leaving hands the question back (`left`), as a hook
            // does; a listener restarting meanwhile is waited out.
            let nobody = async {
                let mut every = tokio::time::interval(PRESENCE_EVERY);
                loop {
                    every.tick().await;
                    if ListenerInfo::running(&watched).is_some_and(|l| !l.someone_answers()) {
                        left.store(true, std::sync::atomic::Ordering::Relaxed);
                        return;
                    }
                }
            };
            tokio::select! {
                _ = ct.cancelled() => "the agent cancelled the question".to_string(),
                _ = stopping.cancelled() => "the agent's MCP session ended".to_string(),
                () = nobody => "nobody is at hitl any more".to_string(),
            }
        };
        let asking = self.calls.spawn(async move {
            crate::api::client::ask_listener(&spool, &url, &request, Origin::Mcp, stop).await
        });
        let mut asking = std::pin::pin!(asking);
        let token = context.meta.get_progress_token();
        let started = tokio::time::Instant::now();
        let mut ticks = tokio::time::interval(PROGRESS_EVERY);
        loop {
            tokio::select! {
                done = &mut asking => {
                    return done.context("the question's task failed")?;
                }
                _ = ticks.tick() => {
                    if let Some(token) = &token {
                        let waited = started.elapsed().as_secs();
                        let message = match waited {
                            0 => "asked: waiting for the human".to_string(),
                            s => format!("waiting for the human ({s} s)"),
                        };
                        let note = ProgressNotificationParam::new(token.clone(), waited as f64)
                            .with_message(message);
                        let _ = context.peer.notify_progress(note).await;
                    }
                }
            }
        }
    }
}

/// The answer as the tools report it: status, the answer's text, and the fields
/// its kind has.
fn report(answer: &Answer) -> Value {
    let mut out = json!({
        "status": answer.status.as_str(),
        "answer": answer.content,
        "responded_by": answer.responded_by,
    });
    if let Some(approved) = answer.approved {
        out["approved"] = json!(approved);
    }
    if let Some(choices) = &answer.choices {
        out["choices"] = json!(choices);
    }
    if let Some(comment) = answer.comment.as_deref().filter(|c| !c.is_empty()) {
        out["comment"] = json!(comment);
    }
    out
}
