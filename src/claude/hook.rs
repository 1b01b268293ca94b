//! `hitl hook EVENT`: Claude Code's hook handler. Reads the hook's JSON on stdin,
//! decides by the guard's policy ([`crate::guard::policy`]), asks the human through the project's
//! spool when the policy says so and a listener runs (as `hitl ask` does; shown with
//! the origin `hook`, and every hitl UI can answer), and writes Claude Code's decision
//! JSON on stdout.
//!
//! Stdout is the protocol: nothing else is ever written there (messages go to
//! stderr), and the exit status is 0 whatever happens, so that a decision is always
//! read from the JSON (Claude Code ignores exit 2 for PermissionRequest, and any other
//! failure status lets the call through unannounced).

use std::{
    io::{Read, Write},
    ops::ControlFlow,
    path::{Path, PathBuf},
};

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

use super::decision::{Decision, HookAgent, HookEvent};
use super::{elicit::Elicitation, feed};
use crate::guard::{
    mode::PermissionMode,
    policy::{self, Concern, Place},
    rules, shell,
};
use crate::{
    config::{self, HookSettings, Paths, Unanswered},
    protocol::{Answer, AnswerStatus, FormQuestion, Kind, Origin, Priority, Request, form},
    spool::{self, ListenerInfo, Spool, ask::Asked},
};

/// How often a waiting hook looks at whether anyone will still answer (the listener
/// runs, a human is present): a hook whose listener stopped, or whose last human
/// left, hands the call back to Claude Code within about this (plus the
/// listener's `ABSENCE_GRACE` for a departure).
const ASK_TICK: std::time::Duration = std::time::Duration::from_millis(150);

/// The largest hook input read (a Write's content can be big; past this a tool
/// call is left to Claude Code's own prompt rather than read without bound).
const MAX_INPUT_BYTES: u64 = 16 << 20;

/// Runs the hook for `event` on stdin; writes the decision on stdout.
pub fn run(event: HookEvent, agent: HookAgent) -> Result<()> {
    let input = match read_input() {
        Ok(input) => agent.input(input),
        // A call hitl cannot read is not waved through: for a tool call, Claude
        // Code's own prompt decides (a PermissionRequest without a decision shows
        // it anyway); other events carry no decision.
        Err(e) => {
            eprintln!("hitl hook: {e:#}");
            if event == HookEvent::PreToolUse {
                // Codex and Gemini CLI have no prompt of their own to hand it to that
                // hitl can name: refused there.
                let ask = if agent == HookAgent::Claude {
                    Decision::Ask {
                        reason: format!(
                            "hitl could not read this call ({e:#}); asking here instead"
                        ),
                    }
                } else {
                    Decision::Deny {
                        reason: format!("hitl could not read this call ({e:#})"),
                    }
                };
                if let Some(out) = agent.output(event, &ask) {
                    let mut stdout = std::io::stdout().lock();
                    writeln!(stdout, "{out}").and_then(|()| stdout.flush())?;
                }
            }
            return Ok(());
        }
    };
    let (decision, asked) = match prepare(event, &input, None, false, agent) {
        Ok(Step::Decided(d)) => (d, false),
        Ok(Step::Ask(question)) => (question.ask(), true),
        // A call hitl could not judge is not waved through.
        Err(e) => {
            eprintln!("hitl hook: {e:#}");
            let reason = format!("hitl could not judge this call ({e:#})");
            let tool = input.get("tool_name").and_then(Value::as_str).unwrap_or("");
            let decision = if PermissionMode::of(&input).runs_unasked(tool) {
                Decision::Deny { reason }
            } else {
                Decision::Ask { reason }
            };
            (decision, false)
        }
    };
    if let Some(out) = agent.output(event, &decision) {
        let mut stdout = std::io::stdout().lock();
        writeln!(stdout, "{out}").and_then(|()| stdout.flush())?;
    }
    // After the answer is out: the feed never holds Claude Code up. A call that was
    // asked is in the feed already, as its request.
    if asked {
        return Ok(());
    }
    let place = place(&input);
    let spool = Spool::find(&place.project).or_else(|| Spool::find(&place.cwd));
    let decides = matches!(
        event,
        HookEvent::PreToolUse | HookEvent::PermissionRequest | HookEvent::Elicitation
    );
    feed::note(
        spool.as_ref(),
        &place.project,
        event,
        &input,
        decides.then_some(&decision),
        agent,
    );
    Ok(())
}

/// The hook's input: at most [`MAX_INPUT_BYTES`] of UTF-8 JSON.
fn read_input() -> Result<Value> {
    let mut input = Vec::new();
    std::io::stdin()
        .take(MAX_INPUT_BYTES + 1)
        .read_to_end(&mut input)
        .context("reading the hook input from stdin")?;
    if input.len() as u64 > MAX_INPUT_BYTES {
        bail!("the hook input is over {} MiB", MAX_INPUT_BYTES >> 20);
    }
    // serde_json takes invalid UTF-8 and lone surrogates in strings as errors too.
    serde_json::from_slice(&input).context("the hook input is not JSON")
}

/// What a call needs, by the policy: decided at once, or a question for the human.
pub(crate) enum Step {
    /// Decided without asking.
    Decided(Decision),
    /// A question to ask the project's listener.
    Ask(Box<Question>),
}

/// A question for the human about one tool call, and what its end will mean.
pub(crate) struct Question {
    /// The project's spool, where the question is asked.
    pub spool: Spool,
    /// Whether the question file is fsynced (`[spool] fsync`).
    fsync: bool,
    /// The question.
    pub request: Request,
    concern: Concern,
    unanswered: Unanswered,
    tool: String,
    tool_input: Value,
    /// Claude Code's own "always allow" suggestions (PermissionRequest).
    suggestions: Option<Value>,
    /// What an MCP server asked for (Elicitation).
    elicitation: Option<Elicitation>,
}

/// Works out what a call needs. `project`: the project, when not the hook's
/// (`CLAUDE_PROJECT_DIR`, else the call's folder). `always_ask`: a call no rule
/// names is asked about too (the permission prompt of `claude -p`, which is only
/// called when Claude Code would otherwise ask).
pub(crate) fn prepare(
    event: HookEvent,
    input: &Value,
    project: Option<&Path>,
    always_ask: bool,
    agent: HookAgent,
) -> Result<Step> {
    let decided = |d| Ok(Step::Decided(d));
    if !matches!(
        event,
        HookEvent::PreToolUse | HookEvent::PermissionRequest | HookEvent::Elicitation
    ) {
        return decided(Decision::NoOpinion);
    }
    let mut place = place(input);
    if let Some(project) = project {
        place.project = project.to_path_buf();
    }
    // A Bash line is read on a thread of its own while the spool is found and the
    // settings load: the parser's cost hides behind theirs.
    if input.get("tool_name").and_then(Value::as_str) == Some("Bash")
        && let Some(command) = input.pointer("/tool_input/command").and_then(Value::as_str)
    {
        place.reading = Some(shell::Reading::start(
            command,
            &place.cwd,
            place.home.as_deref(),
        ));
    }
    let spool = Spool::find(&place.project).or_else(|| Spool::find(&place.cwd));
    // Settings that cannot be read do not switch the guard off (an agent that can
    // break the file would switch it off at will): the built-in rules decide, and
    // the user is told what is wrong.
    let (settings, fsync, broken) = match config::load(
        &Paths::from_env(),
        spool.as_ref().map(|s| s.config_file()).as_deref(),
    ) {
        Ok(s) => (s.hook, s.spool.fsync, None),
        Err(e) => (HookSettings::default(), false, Some(e)),
    };
    // A pattern of the settings that does not compile is found when the call
    // needs it (compiling every one on each call would cost more than the call).
    let project = place.project.clone();
    let (step, broken) = match decide(
        event,
        input,
        &settings,
        fsync,
        place.clone(),
        spool.clone(),
        always_ask,
    ) {
        Err(e) if e.is::<BrokenSettings>() => (
            decide(
                event,
                input,
                &HookSettings::default(),
                fsync,
                place,
                spool.clone(),
                always_ask,
            )?,
            Some(e),
        ),
        step => (step?, broken),
    };
    let broken = broken.map(|e| {
        eprintln!("hitl hook: {e:#}");
        format!(
            "hitl: its settings are broken, so only its built-in rules apply until they \
             are fixed (`hitl status` shows the error): {e:#}"
        )
    });
    // The question is asked for the hook's own agent (`codex-…`, `gemini-…`).
    let step = match step {
        Step::Ask(mut q) if agent != HookAgent::Claude => {
            if let Some((id, name)) = feed::session_agent(input, &project, agent) {
                q.request.agent_id = id;
                q.request.agent_name = name;
            }
            if let Some(rest) = q.request.content.strip_prefix("Allow Claude ") {
                q.request.content = format!("Allow {} {rest}", agent.names().1);
            }
            Step::Ask(q)
        }
        other => other,
    };
    // Where the call stands is said in every decision that gives a reason.
    let step = match step {
        Step::Decided(d @ (Decision::Ask { .. } | Decision::Deny { .. }))
            if inside_boundary(spool.as_ref()) =>
        {
            Step::Decided(with_note(d, "inside hitl run's boundary"))
        }
        other => other,
    };
    let Some(message) = broken else {
        return Ok(step);
    };
    Ok(match step {
        Step::Decided(Decision::NoOpinion) => {
            let session = input
                .get("session_id")
                .and_then(Value::as_str)
                .unwrap_or("");
            Step::Decided(if first_time_said(session, &message) {
                Decision::Notice { message }
            } else {
                Decision::NoOpinion
            })
        }
        Step::Decided(d) => Step::Decided(with_note(d, &message)),
        other => other,
    })
}

/// `decision` with `note` said after its reason (an ask's or a denial's; the rest
/// carry none).
fn with_note(decision: Decision, note: &str) -> Decision {
    match decision {
        Decision::Ask { reason } => Decision::Ask {
            reason: format!("{reason} ({note})"),
        },
        Decision::Deny { reason } => Decision::Deny {
            reason: format!("{reason} ({note})"),
        },
        other => other,
    }
}

/// Whether this hook runs inside `hitl run`'s boundary, and it holds: tested (the
/// spool on a read-only mount, the token out of sight), never taken from an
/// environment variable an agent could set.
fn inside_boundary(spool: Option<&Spool>) -> bool {
    spool.is_some_and(|s| crate::boundary::holds(s.project(), &Paths::from_env().config_dir))
}

/// A pattern in the settings that does not compile (the built-in rules decide).
#[derive(Debug, thiserror::Error)]
#[error("{0:#}")]
struct BrokenSettings(anyhow::Error);

/// [`prepare`] once the settings are known.
fn decide(
    event: HookEvent,
    input: &Value,
    settings: &HookSettings,
    fsync: bool,
    mut place: Place,
    spool: Option<Spool>,
    always_ask: bool,
) -> Result<Step> {
    let decided = |d| Ok(Step::Decided(d));
    let tool = input.get("tool_name").and_then(Value::as_str).unwrap_or("");
    let tool_input = input.get("tool_input").cloned().unwrap_or(Value::Null);
    let mode = PermissionMode::of(input);
    place.unasked = mode.runs_unasked(tool);
    // Tested only where it changes what passes (two system calls).
    place.contained = place.unasked && inside_boundary(spool.as_ref());
    // An MCP server's request for input: a form (or a page to open) for the human.
    let elicitation = match event {
        HookEvent::Elicitation if !settings.elicitations => return decided(Decision::NoOpinion),
        HookEvent::Elicitation => match Elicitation::read(input) {
            Ok(e) => Some(e),
            Err(why) => {
                eprintln!("hitl hook: the elicitation is left to Claude Code: {why}");
                return decided(Decision::NoOpinion);
            }
        },
        _ => None,
    };
    let found = match &elicitation {
        Some(e) => Ok(Some(Concern::Elicitation {
            server: e.server.clone(),
        })),
        None => policy::concern(settings, &place, tool, &tool_input),
    };
    let found = found.map_err(BrokenSettings)?;
    let concern = match (event, found) {
        (_, Some(c)) => c,
        (HookEvent::PermissionRequest, None) if always_ask || settings.permission_requests => {
            Concern::Permission
        }
        _ => return decided(Decision::NoOpinion),
    };
    // A call that needs several people's approval is asked whatever rule would let
    // it through: one person's "always" is not several people's approval.
    let people = settings.approvals_for(tool);
    let concern = match concern {
        Concern::Allowed { concern, .. } if people > 1 => *concern,
        c => c,
    };
    if let Concern::Allowed { rule, .. } = &concern {
        return decided(Decision::Allow {
            reason: format!("Allowed by the hitl rule {rule} ({})", concern.describe()),
            updated_input: None,
            updated_permissions: None,
        });
    }
    // AskUserQuestion is asked as what it is: its questions, answered in any hitl UI
    // and sent back as `answers`. Questions hitl cannot read are left to Claude Code.
    let form = if tool == "AskUserQuestion" {
        match form_of(&tool_input) {
            Ok(form) => Some(form),
            Err(e) => {
                eprintln!("hitl hook: AskUserQuestion left to Claude Code: {e}");
                return decided(Decision::NoOpinion);
            }
        }
    } else {
        None
    };
    let unanswered = match (concern.is_dangerous(), mode.runs_unasked(tool)) {
        (false, _) => settings.unanswered_other,
        // Claude Code would run it without asking anyone: its own prompt is no
        // fallback, so a call nobody answered is refused.
        (true, true) if settings.unanswered_dangerous == Unanswered::Ask => Unanswered::Deny,
        (true, _) => settings.unanswered_dangerous,
    };
    let Some(spool) = spool else {
        return decided(when_unanswered(
            unanswered,
            &concern,
            "no hitl project here (run `hitl init`)",
        ));
    };
    if let Err(why) = someone_answers(&spool) {
        return decided(when_unanswered(unanswered, &concern, why));
    }
    // Only now: working out who asks walks the process tree.
    let mut request = approval_request(event, tool, &tool_input, &concern, input, settings, &place);
    if let Some(form) = form {
        request.content = form_summary(&form);
        request.kind = Kind::Questions;
        request.questions = form;
    }
    if let Some(e) = &elicitation {
        request.content = e.summary();
        if e.url.is_none() {
            request.kind = Kind::Questions;
            request.questions = e.questions();
        }
    }
    Ok(Step::Ask(Box::new(Question {
        spool,
        fsync,
        request,
        concern,
        unanswered,
        tool: tool.to_string(),
        tool_input,
        suggestions: allowing_suggestions(input),
        elicitation,
    })))
}

/// The project and folder of a call: `CLAUDE_PROJECT_DIR` and the input's `cwd`.
fn place(input: &Value) -> Place {
    let cwd = input
        .get("cwd")
        .and_then(Value::as_str)
        .map(PathBuf::from)
        .or_else(|| std::env::current_dir().ok())
        .unwrap_or_else(|| PathBuf::from("/"));
    let project = std::env::var_os("CLAUDE_PROJECT_DIR")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| cwd.clone());
    Place {
        project,
        cwd,
        home: std::env::var_os("HOME").map(PathBuf::from),
        unasked: false,
        contained: false,
        reading: None,
    }
}

/// The file a tool call works on (Read, Write, Edit, MultiEdit, NotebookEdit).
fn file_of(tool_input: &Value) -> Option<&str> {
    ["file_path", "notebook_path", "path"]
        .iter()
        .find_map(|k| tool_input.get(*k).and_then(Value::as_str))
        .filter(|p| !p.is_empty())
}

/// `file` as the human reads it: from the project's root when inside it.
fn shown_path(file: &str, project: &Path) -> String {
    Path::new(file)
        .strip_prefix(project)
        .ok()
        .filter(|rest| !rest.as_os_str().is_empty())
        .map_or_else(|| file.to_string(), |rest| rest.display().to_string())
}

/// Claude Code's own "always allow" suggestions of a PermissionRequest, as one line
/// for the human (`Bash(npm test) in localSettings`); `None` when it offers none.
fn claude_suggestion(input: &Value) -> Option<String> {
    let mut said = Vec::new();
    for s in input.get("permission_suggestions")?.as_array()? {
        if s.get("type").and_then(Value::as_str) != Some("addRules")
            || s.get("behavior").and_then(Value::as_str) != Some("allow")
        {
            continue;
        }
        let rules: Vec<String> = s
            .get("rules")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|r| {
                let tool = r.get("toolName").and_then(Value::as_str)?;
                Some(match r.get("ruleContent").and_then(Value::as_str) {
                    Some(content) => format!("{tool}({content})"),
                    None => tool.to_string(),
                })
            })
            .collect();
        if rules.is_empty() {
            continue;
        }
        let place = s
            .get("destination")
            .and_then(Value::as_str)
            .unwrap_or("session");
        said.push(format!("{} in Claude Code's {place}", rules.join(", ")));
    }
    (!said.is_empty()).then(|| said.join("; "))
}

/// Claude Code's "always allow" suggestions to hand back, the allowing ones only.
fn allowing_suggestions(input: &Value) -> Option<Value> {
    let kept: Vec<Value> = input
        .get("permission_suggestions")?
        .as_array()?
        .iter()
        .filter(|s| {
            s.get("type").and_then(Value::as_str) == Some("addRules")
                && s.get("behavior").and_then(Value::as_str) == Some("allow")
        })
        .cloned()
        .collect();
    (!kept.is_empty()).then_some(Value::Array(kept))
}

/// AskUserQuestion's questions, if they can be asked.
fn form_of(tool_input: &Value) -> Result<Vec<FormQuestion>, String> {
    let questions = tool_input
        .get("questions")
        .cloned()
        .ok_or("its input has no \"questions\"")?;
    let form: Vec<FormQuestion> =
        serde_json::from_value(questions).map_err(|e| format!("its questions do not read: {e}"))?;
    form::check(&form)?;
    // Claude Code reads the answers by question text: one per text.
    for (i, q) in form.iter().enumerate() {
        if form[..i].iter().any(|o| o.question == q.question) {
            return Err(format!("question {:?} is asked twice", q.question));
        }
    }
    Ok(form)
}

/// The question's text for a form: what Claude asks, a line per question (each UI
/// shows the questions themselves with their options).
fn form_summary(form: &[FormQuestion]) -> String {
    match form {
        [one] => format!("Claude asks: {}", one.question),
        many => {
            let mut text = format!("Claude asks {} questions:", many.len());
            for q in many {
                text.push_str("\n- ");
                text.push_str(&q.question);
            }
            text
        }
    }
}

/// The approval asked of the human for a call.
fn approval_request(
    event: HookEvent,
    tool: &str,
    tool_input: &Value,
    concern: &Concern,
    input: &Value,
    settings: &HookSettings,
    place: &Place,
) -> Request {
    let session = input
        .get("session_id")
        .and_then(Value::as_str)
        .unwrap_or("unknown");
    let (agent_id, agent_name) = feed::session_agent(input, &place.project, HookAgent::Claude)
        .unwrap_or_else(|| {
            let who = crate::agents::identify();
            (who.id, who.name)
        });
    let what = match tool {
        "Bash" => format!(
            "run `{}`",
            tool_input
                .get("command")
                .and_then(Value::as_str)
                .unwrap_or("")
        ),
        "ExitPlanMode" => "carry out this plan".to_string(),
        policy::PATCH_TOOL => match concern {
            Concern::ProtectedPath { path, .. } => format!("patch {path}"),
            _ => "apply this patch".to_string(),
        },
        _ => match concern {
            Concern::ProtectedPath { path, .. } => format!("{tool} {path}"),
            _ => match file_of(tool_input) {
                Some(file) => format!("{tool} {}", shown_path(file, &place.project)),
                None => format!("use {tool}"),
            },
        },
    };
    let mut content = match concern {
        Concern::DecisionTool | Concern::Permission => format!("Allow Claude to {what}?"),
        c => format!("Allow Claude to {what}? ({})", c.describe()),
    };
    // The plan itself is what the human approves: in the question, where every UI
    // shows it line by line, not only in the context.
    // So is a patch (Codex's edits).
    let shown = match tool {
        "ExitPlanMode" => tool_input.get("plan"),
        policy::PATCH_TOOL => tool_input.get("command"),
        _ => None,
    };
    if let Some(text) = shown.and_then(Value::as_str) {
        content.push_str("\n\n");
        content.push_str(text.trim_end());
    }
    let people = settings.approvals_for(tool);
    let always_allow = match concern {
        _ if people > 1 => None,
        Concern::Permission => claude_suggestion(input),
        c => policy::offered_rule(c),
    };
    let mut context = json!({
        "tool_name": tool,
        "tool_input": tool_input,
        "hook_event": input.get("hook_event_name").cloned().unwrap_or(json!(null)),
        "session_id": session,
        "cwd": place.cwd,
        "why": concern.describe(),
    });
    if let Some(s) = input.get("permission_suggestions") {
        context["permission_suggestions"] = s.clone();
    }
    if let Some(rule) = always_allow {
        context["always_allow"] = json!(rule);
    }
    let kind = match settings.types.get(tool) {
        _ if event == HookEvent::PermissionRequest => Kind::Permission,
        Some(&k) if k.is_approval() => k,
        _ => Kind::Approval,
    };
    Request {
        working_dir: Some(place.cwd.display().to_string()),
        priority: if concern.is_dangerous() {
            Priority::High
        } else {
            Priority::Normal
        },
        timeout: Some(settings.timeout_for(tool)).filter(|&t| t > 0),
        // The session's own (`HITL_TAGS=frontend claude`).
        tags: Request::tags_with_env(&[]),
        approvals: u32::from(people),
        context,
        ..Request::new(agent_id, agent_name, kind, content)
    }
}

impl Question {
    /// Asks the human through the project's spool, as `hitl ask` does, and decides by
    /// the end: the listener answers the question file, and a restarted listener finds
    /// it still there. On SIGTERM or SIGINT (Claude Code giving up on the hook) the
    /// question is withdrawn.
    fn ask(&self) -> Decision {
        let me = crate::runtime::process::this_process();
        let mut request = self.request.clone();
        request.id = uuid::Uuid::now_v7().simple().to_string();
        request.origin = Origin::Hook;
        request.asker = Some(crate::protocol::Asker {
            pid: me.pid,
            start_time: Some(me.start_time),
        });
        let mut gone = "";
        let asked = spool::ask::ask(
            &self.spool,
            &request,
            self.fsync,
            // Claude Code stops a hook when its call is cancelled: nothing to keep.
            false,
            ASK_TICK,
            |_| match someone_answers(&self.spool) {
                Ok(()) => ControlFlow::Continue(()),
                Err(why) => {
                    gone = why;
                    ControlFlow::Break(())
                }
            },
        );
        match asked {
            Ok(Asked::Answered(answer)) => self.conclude(Ok(Some(*answer))),
            Ok(Asked::TimedOut) => {
                when_unanswered(self.unanswered, &self.concern, "no answer in time")
            }
            Ok(Asked::GaveUp) => when_unanswered(self.unanswered, &self.concern, gone),
            Ok(Asked::Interrupted(_) | Asked::Kept(_)) => self.conclude(Ok(None)),
            Err(e) => self.conclude(Err(e)),
        }
    }

    /// The decision the end of the question makes (`asked`: its answer, `None` when
    /// it was withdrawn, or why the listener could not be asked).
    pub(crate) fn conclude(&self, asked: Result<Option<Answer>>) -> Decision {
        let (concern, unanswered) = (&self.concern, self.unanswered);
        match asked {
            Ok(Some(answer)) => self.decision_for(&answer),
            Ok(None) => {
                when_unanswered(unanswered, concern, "the question was withdrawn unanswered")
            }
            Err(e) => {
                eprintln!("hitl: {e:#}");
                when_unanswered(unanswered, concern, "the hitl listener could not be asked")
            }
        }
    }

    /// The decision a human's answer makes.
    fn decision_for(&self, answer: &Answer) -> Decision {
        let (concern, unanswered) = (&self.concern, self.unanswered);
        if let Some(e) = &self.elicitation {
            return match answer.status {
                AnswerStatus::Timeout => when_unanswered(unanswered, concern, "no answer in time"),
                AnswerStatus::Cancelled => Decision::Elicit {
                    action: "decline",
                    content: None,
                },
                AnswerStatus::Answered => match &answer.answers {
                    Some(answers) => Decision::Elicit {
                        action: "accept",
                        content: Some(e.content(answers)),
                    },
                    None if answer.approved == Some(true) => Decision::Elicit {
                        action: "accept",
                        content: None,
                    },
                    None => Decision::Elicit {
                        action: "decline",
                        content: None,
                    },
                },
            };
        }
        let by = &answer.responded_by;
        let comment = answer
            .comment
            .as_deref()
            .filter(|c| !c.trim().is_empty())
            .map(|c| format!(": {c}"))
            .unwrap_or_default();
        match answer.status {
            AnswerStatus::Timeout => when_unanswered(unanswered, concern, "no answer in time"),
            AnswerStatus::Cancelled => Decision::Deny {
                reason: format!("Cancelled in hitl by {by}{comment}"),
            },
            // A form's answers go back as AskUserQuestion reads them: its whole input,
            // plus `answers` keyed by question text.
            AnswerStatus::Answered if answer.answers.is_some() => {
                let mut input = match &self.tool_input {
                    Value::Object(o) => o.clone(),
                    _ => Default::default(),
                };
                input.insert(
                    "answers".into(),
                    Value::Object(answer.answers.clone().unwrap_or_default()),
                );
                Decision::Allow {
                    reason: format!("Answered in hitl by {by}"),
                    updated_input: Some(Value::Object(input)),
                    updated_permissions: None,
                }
            }
            AnswerStatus::Answered if answer.approved == Some(true) => {
                let (remembered, updated_permissions) = match &answer.remember {
                    Some(rule) => self.remember(rule),
                    None => (String::new(), None),
                };
                Decision::Allow {
                    reason: format!("Approved in hitl by {by}{comment}{remembered}"),
                    // ExitPlanMode needs its input echoed to go ahead without a prompt.
                    updated_input: (self.tool == "ExitPlanMode").then(|| self.tool_input.clone()),
                    updated_permissions,
                }
            }
            AnswerStatus::Answered => Decision::Deny {
                reason: format!("Denied in hitl by {by}{comment}"),
            },
        }
    }

    /// Keeps the human's "always allow": Claude Code's own suggestions handed back
    /// for a permission request, else the rule added to the project's config. What
    /// to add to the reason, and the permissions for Claude Code.
    fn remember(&self, rule: &str) -> (String, Option<Value>) {
        if self.concern == Concern::Permission {
            return match &self.suggestions {
                Some(s) => (format!("; always allowed: {rule}"), Some(s.clone())),
                None => (String::new(), None),
            };
        }
        let added = rule
            .parse::<rules::Rule>()
            .and_then(|r| rules::add(&self.spool.config_file(), &r));
        match added {
            Ok(_) => (format!("; always allowed here from now on ({rule})"), None),
            Err(e) => {
                eprintln!("hitl hook: the rule {rule:?} was not kept: {e:#}");
                (format!("; the rule {rule} could not be kept: {e:#}"), None)
            }
        }
    }
}

/// Whether `message` is new to this Claude Code `session`, so worth showing: true
/// once per session and message (a mark is left in the user's data folder; marks
/// older than a week are cleared). True when no mark can be kept.
fn first_time_said(session: &str, message: &str) -> bool {
    use std::hash::{Hash, Hasher};
    let dir = Paths::from_env().data_dir.join("said");
    let mut hash = std::hash::DefaultHasher::new();
    (session, message).hash(&mut hash);
    let mark = dir.join(format!("{:016x}", hash.finish()));
    if mark.exists() {
        return false;
    }
    if std::fs::create_dir_all(&dir).is_ok()
        && let Ok(old) = std::fs::read_dir(&dir)
    {
        let week = std::time::Duration::from_secs(7 * 24 * 3600);
        for entry in old.flatten() {
            let stale = entry
                .metadata()
                .and_then(|m| m.modified())
                .is_ok_and(|t| t.elapsed().is_ok_and(|age| age > week));
            if stale {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }
    let _ = std::fs::write(&mark, b"");
    true
}

/// Whether a question asked in `spool` now would be answered by a person: its
/// listener runs and someone is at one of its UIs. If not, why not, in words for
/// the user.
fn someone_answers(spool: &Spool) -> Result<(), &'static str> {
    match ListenerInfo::running(spool) {
        None => Err("no hitl listener runs for this project"),
        Some(info) if !info.someone_answers() => Err(
            "nobody is at hitl to answer (no prompt, dashboard or other UI attached to its listener)",
        ),
        Some(_) => Ok(()),
    }
}

/// What the policy says when no human answered, and why not.
fn when_unanswered(unanswered: Unanswered, concern: &Concern, why: &str) -> Decision {
    let reason = format!("{why}; {}", concern.describe());
    match unanswered {
        Unanswered::Deny => Decision::Deny {
            reason: format!("Not approved in hitl ({reason})"),
        },
        Unanswered::Ask => Decision::Ask { reason },
        Unanswered::None => Decision::NoOpinion,
    }
}
