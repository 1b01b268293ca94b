//! `hitl listen --ui dialog`: each request in a desktop dialog, as seeds 000 and 001
//! showed them: zenity, yad or kdialog on Linux (the first installed), osascript on
//! macOS. One dialog at a time, most urgent first; Cancel (or closing it) declines;
//! a request answered elsewhere meanwhile closes its dialog. Agent text is shown as
//! text (markup escaped, controls made visible). With no display or no dialog
//! program it says so, and the terminal prompt answers instead.

use std::process::{Command, Stdio};

use tokio::sync::broadcast::error::RecvError;

use super::ResponderContext;
use crate::{
    broker::{Change, PendingRequest, presence::Attendance},
    protocol::{AnswerShape, Kind, Reply, text::visible},
};

/// Who dialog answers are from.
pub const RESPONDER: &str = "dialog";

/// A dialog program.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Program {
    /// GNOME's zenity.
    Zenity,
    /// yad, zenity's fork (the same options for what is used here).
    Yad,
    /// KDE's kdialog.
    Kdialog,
    /// macOS's osascript (`display dialog`).
    Osascript,
}

impl Program {
    fn command(self) -> &'static str {
        match self {
            Program::Zenity => "zenity",
            Program::Yad => "yad",
            Program::Kdialog => "kdialog",
            Program::Osascript => "osascript",
        }
    }
}

fn installed(program: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path).any(|d| {
            let f = d.join(program);
            f.is_file()
                && std::fs::metadata(&f).is_ok_and(|m| {
                    std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o111 != 0
                })
        })
    })
}

/// The dialog program to use here, or why there is none.
pub fn find() -> Result<Program, String> {
    if cfg!(target_os = "macos") {
        return Ok(Program::Osascript);
    }
    let display = ["DISPLAY", "WAYLAND_DISPLAY"]
        .iter()
        .any(|v| std::env::var_os(v).is_some_and(|d| !d.is_empty()));
    if !display {
        return Err("no display (DISPLAY or WAYLAND_DISPLAY) for dialogs".into());
    }
    [Program::Zenity, Program::Yad, Program::Kdialog]
        .into_iter()
        .find(|p| installed(p.command()))
        .ok_or_else(|| "no dialog program (zenity, yad or kdialog) is installed".into())
}

/// Text for a dialog's label: markup characters escaped (zenity, yad and kdialog
/// read Pango or HTML markup there), controls made visible.
fn label(text: &str) -> String {
    visible(text)
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// What the dialog program is asked, for one step of answering `p`.
enum Step {
    /// Free text (a text or number question, or one question of a form).
    Entry(String),
    /// One of these.
    Pick(String, Vec<String>),
    /// Any of these.
    PickMany(String, Vec<String>),
    /// One of these buttons (yes/no, approve/deny).
    Buttons(String, Vec<String>),
}

/// The command line that shows `step` with `program`, titled `title`.
fn command_line(program: Program, title: &str, step: &Step) -> Vec<String> {
    let s = |x: &str| x.to_string();
    match (program, step) {
        (Program::Zenity | Program::Yad, Step::Entry(text)) => {
            vec![
                s("--entry"),
                s("--title"),
                s(title),
                s("--text"),
                label(text),
            ]
        }
        (Program::Zenity | Program::Yad, Step::Pick(text, options)) => {
            let mut v = vec![
                s("--list"),
                s("--title"),
                s(title),
                s("--text"),
                label(text),
                s("--column"),
                s("Option"),
                s("--hide-header"),
            ];
            v.extend(options.iter().map(|o| visible(o).into_owned()));
            v
        }
        (Program::Zenity | Program::Yad, Step::PickMany(text, options)) => {
            let mut v = vec![
                s("--list"),
                s("--checklist"),
                s("--title"),
                s(title),
                s("--text"),
                label(text),
                s("--column"),
                s(""),
                s("--column"),
                s("Option"),
                s("--separator"),
                s("\n"),
            ];
            for o in options {
                v.push(s("FALSE"));
                v.push(visible(o).into_owned());
            }
            v
        }
        (Program::Zenity | Program::Yad, Step::Buttons(text, buttons)) => {
            // --switch: only these buttons; closing the dialog is a cancel.
            let mut v = vec![
                s("--question"),
                s("--switch"),
                s("--title"),
                s(title),
                s("--text"),
                label(text),
            ];
            for b in buttons {
                v.push(s("--extra-button"));
                v.push(b.clone());
            }
            v
        }
        (Program::Kdialog, Step::Entry(text)) => {
            vec![s("--title"), s(title), s("--inputbox"), label(text)]
        }
        (Program::Kdialog, Step::Pick(text, options)) => {
            let mut v = vec![s("--title"), s(title), s("--radiolist"), label(text)];
            for (i, o) in options.iter().enumerate() {
                v.extend([(i + 1).to_string(), visible(o).into_owned(), s("off")]);
            }
            v
        }
        (Program::Kdialog, Step::PickMany(text, options)) => {
            let mut v = vec![
                s("--title"),
                s(title),
                s("--separate-output"),
                s("--checklist"),
                label(text),
            ];
            for (i, o) in options.iter().enumerate() {
                v.extend([(i + 1).to_string(), visible(o).into_owned(), s("off")]);
            }
            v
        }
        (Program::Kdialog, Step::Buttons(text, buttons)) => {
            let mut v = vec![s("--title"), s(title), s("--yesnocancel"), label(text)];
            v.extend([
                s("--yes-label"),
                buttons[0].clone(),
                s("--no-label"),
                buttons[1].clone(),
            ]);
            v
        }
        (Program::Osascript, step) => {
            let quote = |t: &str| {
                format!(
                    "\"{}\"",
                    visible(t).replace('\\', "\\\\").replace('"', "\\\"")
                )
            };
            let script = match step {
                Step::Entry(text) => format!(
                    "text returned of (display dialog {} with title {} default answer \"\")",
                    quote(text),
                    quote(title)
                ),
                Step::Pick(text, options) | Step::PickMany(text, options) => {
                    let list: Vec<String> = options.iter().map(|o| quote(o)).collect();
                    let many = matches!(step, Step::PickMany(..));
                    format!(
                        "set r to choose from list {{{}}} with title {} with prompt {}{}\n\
                         if r is false then error number -128\n\
                         set AppleScript's text item delimiters to linefeed\nr as text",
                        list.join(", "),
                        quote(title),
                        quote(text),
                        if many {
                            " with multiple selections allowed"
                        } else {
                            ""
                        }
                    )
                }
                Step::Buttons(text, buttons) => {
                    let list: Vec<String> = buttons.iter().map(|b| quote(b)).collect();
                    format!(
                        "button returned of (display dialog {} with title {} buttons {{\"Cancel\", {}}} cancel button \"Cancel\")",
                        quote(text),
                        quote(title),
                        list.join(", ")
                    )
                }
            };
            vec![s("-e"), script]
        }
    }
}

/// What a dialog said: the text it printed, or that it was cancelled.
fn run_step(
    program: Program,
    title: &str,
    step: &Step,
    child_slot: &std::sync::Mutex<Option<u32>>,
) -> Option<String> {
    let child = Command::new(program.command())
        .args(command_line(program, title, step))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn();
    let child = match child {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!("dialogs: {}: {e}", program.command());
            return None;
        }
    };
    *child_slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(child.id());
    let out = child.wait_with_output().ok()?;
    *child_slot.lock().unwrap_or_else(|e| e.into_inner()) = None;
    let text = String::from_utf8_lossy(&out.stdout)
        .trim_end_matches('\n')
        .to_string();
    match (program, step) {
        // --switch dialogs print the button pressed and exit 1; closing prints nothing.
        (Program::Zenity | Program::Yad, Step::Buttons(..)) => (!text.is_empty()).then_some(text),
        // kdialog's yes/no/cancel: 0 the first, 1 the second, 2 cancel.
        (Program::Kdialog, Step::Buttons(_, b)) => match out.status.code() {
            Some(0) => Some(b[0].clone()),
            Some(1) => Some(b[1].clone()),
            _ => None,
        },
        _ if out.status.success() => Some(text),
        _ => None,
    }
}

/// Asks `p` in dialogs; the reply, or `None` when the person cancelled.
fn ask(
    program: Program,
    p: &PendingRequest,
    child: &std::sync::Mutex<Option<u32>>,
) -> Option<Reply> {
    let r = &p.request;
    let title = format!("hitl: {}", visible(&r.agent_name));
    let mut text = r.content.clone();
    if let Some(rule) = r.always_allow() {
        text.push_str(&format!("\n\n(\"Always allow\" adds the rule {rule})"));
    }
    let mut error: Option<String> = None;
    loop {
        let shown = match &error {
            Some(e) => format!("{text}\n\n({e})"),
            None => text.clone(),
        };
        let typed = match (&p.answer_shape, r.kind) {
            (AnswerShape::Choice { .. }, Kind::Yesno) => run_step(
                program,
                &title,
                &Step::Buttons(shown, vec!["Yes".into(), "No".into()]),
                child,
            )?
            .to_lowercase(),
            (
                AnswerShape::Choice {
                    options,
                    many: false,
                    ..
                },
                _,
            ) => run_step(program, &title, &Step::Pick(shown, options.clone()), child)?,
            (
                AnswerShape::Choice {
                    options,
                    many: true,
                    ..
                },
                _,
            ) => {
                let picked = run_step(
                    program,
                    &title,
                    &Step::PickMany(shown, options.clone()),
                    child,
                )?;
                let chosen: Vec<String> = picked
                    .lines()
                    .filter(|l| !l.is_empty())
                    .map(|l| {
                        // kdialog prints the options' numbers; the others their text.
                        match (program, l.parse::<usize>()) {
                            (Program::Kdialog, Ok(n)) => {
                                options.get(n - 1).cloned().unwrap_or_default()
                            }
                            _ => l.to_string(),
                        }
                    })
                    .collect();
                return Some(Reply::Choices(chosen));
            }
            (AnswerShape::Decision { always, .. }, _) => {
                let mut buttons = vec!["Approve".to_string(), "Deny".to_string()];
                if always.is_some() && program != Program::Kdialog {
                    buttons.push("Always allow".into());
                }
                match run_step(program, &title, &Step::Buttons(shown, buttons), child)?.as_str() {
                    "Approve" => "approve".into(),
                    "Always allow" => "always".into(),
                    _ => "deny".into(),
                }
            }
            (AnswerShape::Form { .. }, _) => {
                let mut answers = Vec::new();
                for q in &r.questions {
                    let step = if q.options.is_empty() {
                        Step::Entry(format!("{text}\n\n{}", q.question))
                    } else {
                        Step::Pick(
                            format!("{text}\n\n{}", q.question),
                            q.options.iter().map(|o| o.label.clone()).collect(),
                        )
                    };
                    let typed = run_step(program, &title, &step, child)?;
                    match q.interpret(&typed) {
                        Ok(a) => answers.push(a),
                        Err(e) => {
                            error = Some(e);
                            break;
                        }
                    }
                }
                if answers.len() == r.questions.len() {
                    return Some(Reply::Answers(answers));
                }
                continue;
            }
            (AnswerShape::Text { .. }, _) => run_step(program, &title, &Step::Entry(shown), child)?,
        };
        match r.interpret(&typed) {
            Ok(reply) => return Some(reply),
            Err(e) => error = Some(e),
        }
    }
}

/// Runs the dialogs until the broker stops.
pub async fn run(context: ResponderContext, program: Program, attendance: Attendance) {
    let _attendance = attendance;
    let broker = context.broker;
    let mut changes = broker.subscribe();
    loop {
        let Some(head) = broker.pending().await.first().cloned() else {
            loop {
                match changes.recv().await {
                    Err(RecvError::Closed) => return,
                    Ok(Change::Queued(_)) | Err(RecvError::Lagged(_)) => break,
                    Ok(_) => {}
                }
            }
            continue;
        };
        let child = std::sync::Arc::new(std::sync::Mutex::new(None::<u32>));
        let shown = head.clone();
        let slot = child.clone();
        let mut dialog = tokio::task::spawn_blocking(move || ask(program, &shown, &slot));
        let reply = loop {
            tokio::select! {
                done = &mut dialog => break done.ok(),
                change = changes.recv() => match change {
                    Ok(Change::Finished(f)) if f.seq() == head.seq => {
                        // Answered elsewhere: its dialog goes.
                        if let Some(pid) = *child.lock().unwrap_or_else(|e| e.into_inner()) {
                            let _ = nix::sys::signal::kill(
                                nix::unistd::Pid::from_raw(pid as i32),
                                nix::sys::signal::Signal::SIGTERM,
                            );
                        }
                        let _ = (&mut dialog).await;
                        break None;
                    }
                    Err(RecvError::Closed) => return,
                    _ => {}
                },
            }
        };
        let Some(reply) = reply else { continue };
        let reply = reply.unwrap_or(Reply::Cancel {
            reason: Some("cancelled in the dialog".into()),
        });
        if let Err(e) = broker.respond(head.seq, reply, RESPONDER).await {
            tracing::info!("dialogs: not sent: {e}");
        }
    }
}
