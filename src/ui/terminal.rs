//! The sequential terminal prompt, as in the seeds: one question at a time, most urgent
//! first, with the agent's name, the question, numbered options or y/n.
//!
//! Lines are read from stdin on a plain thread (stdin may be a pipe: tests and scripts
//! feed answers that way). When the question on screen is answered elsewhere the
//! prompt says so and moves on. When stdin ends, the prompt stops but the broker keeps
//! serving: answers can still come from `hitl answer` or other UIs.

use std::io::{BufRead, Write};

use tokio::sync::{broadcast::error::RecvError, mpsc};

use crate::{
    broker::{Activity, BrokerHandle, Change, PendingRequest, presence::Attendance},
    protocol::{
        AnswerShape, FormQuestion, Reply, Request,
        text::{visible, visible_line},
    },
};

/// Who terminal answers are from.
pub const RESPONDER: &str = "terminal";

const RULE: &str = "============================================================";

/// Lines typed, read on a thread of their own. The prompt counts as a human present
/// for as long as its input is open (`attendance` goes with the thread): a listener
/// started with its input closed, as a service is, has nobody at its prompt.
fn stdin_lines(attendance: Attendance) -> mpsc::UnboundedReceiver<String> {
    let (tx, rx) = mpsc::unbounded_channel();
    std::thread::Builder::new()
        .name("stdin".into())
        .spawn(move || {
            let _attendance = attendance;
            let stdin = std::io::stdin();
            let mut lock = stdin.lock();
            let mut buf = Vec::new();
            loop {
                buf.clear();
                match lock.read_until(b'\n', &mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        while buf.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
                            buf.pop();
                        }
                        if tx.send(String::from_utf8_lossy(&buf).into_owned()).is_err() {
                            break;
                        }
                    }
                }
            }
        })
        .expect("spawning the stdin reader");
    rx
}

/// How the prompt asks for a reply to `kind`.
/// Shows `p`, the first of the pending requests whose ids are `ids`.
fn show(out: &mut impl Write, p: &PendingRequest, ids: &[&str]) -> std::io::Result<()> {
    let r = &p.request;
    let waiting = ids.len();
    writeln!(out, "\n{RULE}")?;
    let more = if waiting > 1 {
        format!(", {} more waiting", waiting - 1)
    } else {
        String::new()
    };
    let labels = match p.labels.as_slice() {
        [] => String::new(),
        labels => format!(" ({})", visible_line(&labels.join(", "))),
    };
    // Everything the agent wrote is shown with its control characters visible: a
    // question must not be able to redraw the screen (see `protocol::text`).
    writeln!(
        out,
        "[{}]{labels} Question ({}{more}):",
        visible_line(&r.agent_name),
        r.kind
    )?;
    if let Some(who) = r.created_by_other() {
        writeln!(
            out,
            "  (asked by another OS user, {}: not necessarily one of your agents)",
            visible_line(who)
        )?;
    }
    for line in r.content.lines() {
        writeln!(out, "  {}", visible_line(line))?;
    }
    show_context(out, &r.context)?;
    let id = crate::protocol::short_id(&r.id, ids);
    writeln!(out, "  (id {id}: `hitl answer {id} …` from elsewhere)")?;
    show_kept(out, p)?;
    for (i, o) in r.options.iter().enumerate() {
        writeln!(out, "  {}) {}", i + 1, visible_line(o))?;
    }
    for (i, q) in r.questions.iter().enumerate() {
        show_form_question(out, i, q)?;
    }
    writeln!(out, "{RULE}")?;
    prompt(out, p, 0, "")
}

/// Asks for the reply, after `lead` (why the last line was not taken, or nothing):
/// drawn from the answer's shape, a form's next question (`answered` are done), else
/// the kind's hint.
fn prompt(
    out: &mut impl Write,
    p: &PendingRequest,
    answered: usize,
    lead: &str,
) -> std::io::Result<()> {
    let r = &p.request;
    write!(out, "{lead}")?;
    match (&p.answer_shape, r.questions.get(answered)) {
        (AnswerShape::Form { .. }, Some(q)) => ask_form_question(out, r, answered, q),
        (shape, _) => {
            write!(
                out,
                "{}{} (/cancel to decline): ",
                r.kind.prompt_hint(),
                always_hint(shape)
            )?;
            out.flush()
        }
    }
}

/// The most a context value shows on the prompt, in characters.
const CONTEXT_WIDTH: usize = 100;

/// `text` on one line, cut to `width` characters, its control characters visible.
fn cut(text: &str, width: usize) -> String {
    let line = visible_line(text).into_owned();
    if line.chars().count() <= width {
        return line;
    }
    let mut short: String = line.chars().take(width.saturating_sub(1)).collect();
    short.push('…');
    short
}

/// A request's context as a person reads it, never raw JSON: a tool call as its
/// command, or its file and how much it writes; anything else a short line per key.
/// (Every UI's API still has the whole context: `hitl pending --json`.)
/// Says that the request's asker was stopped and it is kept for its next ask.
fn show_kept(out: &mut impl Write, p: &PendingRequest) -> std::io::Result<()> {
    if let Some(until) = p.kept_until {
        let local = until.to_zoned(jiff::tz::TimeZone::system());
        writeln!(
            out,
            "  (asker gone, kept for when it asks again, until {})",
            local.strftime("%H:%M")
        )?;
    }
    Ok(())
}

fn show_context(out: &mut impl Write, context: &serde_json::Value) -> std::io::Result<()> {
    use serde_json::Value;
    let Some(fields) = context.as_object() else {
        if !context.is_null() {
            // serde_json escapes C0 controls in strings, not DEL, C1 or bidi controls.
            writeln!(
                out,
                "  context: {}",
                cut(&visible(&context.to_string()), CONTEXT_WIDTH)
            )?;
        }
        return Ok(());
    };
    let text = |v: &Value| match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    if let Some(tool) = fields.get("tool_name").and_then(Value::as_str) {
        let input = fields.get("tool_input").unwrap_or(&Value::Null);
        let file = ["file_path", "notebook_path", "path"]
            .iter()
            .find_map(|k| input.get(*k).and_then(Value::as_str));
        let lines = |k: &str| {
            input
                .get(k)
                .and_then(Value::as_str)
                .map(|s| s.lines().count())
        };
        match tool {
            "Bash" => {
                let command = input.get("command").and_then(Value::as_str).unwrap_or("");
                let all: Vec<&str> = command.lines().collect();
                for line in all.iter().take(8) {
                    writeln!(out, "  $ {}", cut(line, CONTEXT_WIDTH))?;
                }
                if all.len() > 8 {
                    writeln!(out, "  $ … ({} lines in all)", all.len())?;
                }
            }
            // The question and the form already say all there is.
            "AskUserQuestion" | "ExitPlanMode" => {}
            _ => {
                let size = match (lines("content"), lines("old_string"), lines("new_string")) {
                    (Some(n), _, _) => format!(" (writes {n} lines)"),
                    (_, Some(old), Some(new)) => format!(" (-{old} +{new} lines)"),
                    _ => String::new(),
                };
                match file {
                    Some(f) => writeln!(out, "  {tool}: {}{size}", cut(f, CONTEXT_WIDTH))?,
                    None => writeln!(out, "  tool: {}", cut(tool, CONTEXT_WIDTH))?,
                }
            }
        }
        if let Some(why) = fields.get("why").and_then(Value::as_str) {
            writeln!(out, "  why: {}", cut(why, CONTEXT_WIDTH))?;
        }
        return Ok(());
    }
    const KEYS: usize = 6;
    for (k, v) in fields.iter().take(KEYS) {
        writeln!(out, "  {}: {}", cut(k, 30), cut(&text(v), CONTEXT_WIDTH))?;
    }
    if fields.len() > KEYS {
        writeln!(
            out,
            "  (and {} more in its context: `hitl pending --json`)",
            fields.len() - KEYS
        )?;
    }
    Ok(())
}

/// Says an agent's notification (Claude Code wants the user: a permission it is
/// about to ask for, an idle prompt): a line, not a question. True if it said one.
fn attention(out: &mut impl Write, a: &Activity) -> bool {
    if a.event.hook_event_type != "Notification" {
        return false;
    }
    let who = a.extra("agent_name").unwrap_or("an agent");
    let message = a
        .event
        .payload
        .get("message")
        .and_then(serde_json::Value::as_str)
        .unwrap_or("needs your attention");
    let _ = writeln!(
        out,
        "\n(attention) [{}] {}",
        visible_line(who),
        visible_line(message)
    );
    true
}

/// How to approve and remember, for a request that offers a rule.
fn always_hint(shape: &AnswerShape) -> String {
    match shape {
        AnswerShape::Decision {
            always: Some(rule), ..
        } => format!(
            ", or \"always\" to approve and allow {} here from now on",
            visible_line(rule)
        ),
        _ => String::new(),
    }
}

/// One question of a form, with its options and what they mean.
fn show_form_question(out: &mut impl Write, i: usize, q: &FormQuestion) -> std::io::Result<()> {
    let header = if q.header.is_empty() {
        String::new()
    } else {
        format!("[{}] ", visible_line(&q.header))
    };
    let several = if q.multi_select { " (pick any)" } else { "" };
    writeln!(
        out,
        "  Q{}. {header}{}{several}",
        i + 1,
        visible_line(&q.question)
    )?;
    for (n, o) in q.options.iter().enumerate() {
        let what = if o.description.is_empty() {
            String::new()
        } else {
            format!(" - {}", visible_line(&o.description))
        };
        writeln!(out, "      {}) {}{what}", n + 1, visible_line(&o.label))?;
    }
    Ok(())
}

/// The prompt for question `i` of a form.
fn ask_form_question(
    out: &mut impl Write,
    r: &Request,
    i: usize,
    q: &FormQuestion,
) -> std::io::Result<()> {
    write!(
        out,
        "Q{}/{}: {} (/cancel to decline): ",
        i + 1,
        r.questions.len(),
        q.prompt_hint()
    )?;
    out.flush()
}

/// What one typed line does to the question on screen: a reply to send, the next
/// question of a form (its answers so far in `form`), or why it was not understood.
fn read_line(
    line: &str,
    p: &PendingRequest,
    form: &mut Vec<String>,
) -> Result<Option<Reply>, String> {
    let r = &p.request;
    if let Some(reason) = line.trim().strip_prefix("/cancel") {
        let reason = reason.trim();
        return Ok(Some(Reply::Cancel {
            reason: (!reason.is_empty()).then(|| reason.to_string()),
        }));
    }
    if !matches!(p.answer_shape, AnswerShape::Form { .. }) {
        return r.interpret(line).map(Some);
    }
    let q = &r.questions[form.len()];
    form.push(q.interpret(line)?);
    Ok((form.len() == r.questions.len()).then(|| Reply::Answers(std::mem::take(form))))
}

/// Runs the prompt until the broker stops; `attendance` (the prompt's presence, taken
/// by the caller as it starts the prompt) lasts as long as the prompt's input.
pub async fn run(handle: BrokerHandle, attendance: Attendance) {
    let mut lines = stdin_lines(attendance);
    let mut changes = handle.subscribe();
    let mut out = std::io::stdout();
    let mut stdin_open = true;
    loop {
        let pending = handle.pending().await;
        let Some(head) = pending.first().cloned() else {
            // Nothing to ask: wait for the queue to change, saying what needs
            // attention meanwhile.
            loop {
                match changes.recv().await {
                    Err(RecvError::Closed) => return,
                    Ok(Change::Activity(a)) => {
                        let _ = attention(&mut out, &a);
                    }
                    _ => break,
                }
            }
            continue;
        };
        if !stdin_open {
            // Nothing to read answers from; follow changes so we stop with the broker.
            if let Err(RecvError::Closed) = changes.recv().await {
                return;
            }
            continue;
        }
        let ids: Vec<&str> = pending.iter().map(|p| p.request.id.as_str()).collect();
        let _ = show(&mut out, &head, &ids);
        let r = &head.request;
        // A form's answers so far, one per question.
        let mut form = Vec::new();
        loop {
            tokio::select! {
                line = lines.recv() => {
                    let Some(line) = line else {
                        let _ = writeln!(out, "\n(stdin closed: answer with `hitl answer ID TEXT` from another terminal)");
                        stdin_open = false;
                        break;
                    };
                    match read_line(&line, &head, &mut form) {
                        Err(msg) => {
                            let _ = prompt(&mut out, &head, form.len(), &format!("{msg}. "));
                        }
                        Ok(None) => {
                            let _ = prompt(&mut out, &head, form.len(), "");
                        }
                        Ok(Some(reply)) => {
                            match handle.respond(head.seq, reply, RESPONDER).await {
                                Ok(a) => {
                                    let _ = write!(out, "[{}] Answer:", visible_line(&r.agent_name));
                                    // A form's answer is a line per question.
                                    let indent = if a.content.contains('\n') { "\n  " } else { " " };
                                    for line in a.content.lines() {
                                        let _ = write!(out, "{indent}{}", visible_line(line));
                                    }
                                    let _ = writeln!(out);
                                }
                                Err(e) => {
                                    let _ = writeln!(out, "Not sent: {e}");
                                }
                            }
                            break;
                        }
                    }
                }
                change = changes.recv() => match change {
                    Ok(Change::Finished(f)) if f.seq() == head.seq => {
                        let by = f.responded_by().map(|b| format!(" by {}", visible_line(b))).unwrap_or_default();
                        let _ = writeln!(out, "\n({}{by}; next question)", f.status);
                        break;
                    }
                    Ok(Change::Updated(p)) if p.seq == head.seq => {
                        let _ = match p.kept_until {
                            Some(_) => show_kept(&mut out, &p),
                            None => writeln!(out, "  (its agent asks again and waits for the answer)"),
                        };
                        let _ = prompt(&mut out, &head, form.len(), "");
                    }
                    Ok(Change::Activity(a)) => {
                        if attention(&mut out, &a) {
                            let _ = prompt(&mut out, &head, form.len(), "");
                        }
                    }
                    Err(RecvError::Closed) => return,
                    Err(RecvError::Lagged(_)) => {
                        if !handle.pending().await.iter().any(|p| p.seq == head.seq) {
                            break;
                        }
                    }
                    Ok(_) => {}
                },
            }
        }
    }
}
