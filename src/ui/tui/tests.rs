//! The TUI drawn on ratatui's test backend (snapshots, `insta`: every request kind,
//! the empty inbox, a narrow terminal, the help screen, each view, answers being
//! typed), and what keys send.

use std::{sync::Arc, time::Instant};

use jiff::Timestamp;
use ratatui::{Terminal, backend::TestBackend};
use serde_json::json;

use super::{
    app::{Action, App, Effect, Mode, Table, View},
    draw::draw,
};
use crate::{
    broker::PendingRequest,
    protocol::{FormOption, FormQuestion, Kind, Origin, Priority, Reply, Request, Status},
};

/// When every snapshot is drawn.
fn now() -> Timestamp {
    "2026-11-27T10:00:00Z".parse().unwrap()
}

/// A pending request asked 90 s before [`now`].
fn pending(seq: u64, kind: Kind, agent: &str, question: &str) -> Request {
    let mut r = Request::new(format!("agent-{seq}"), agent, kind, question);
    r.id = format!("01jq{seq:08}aaaaaaaaaaaa");
    r.timestamp = now() - jiff::SignedDuration::from_secs(90 * seq as i64);
    r
}

fn queued(seq: u64, r: Request) -> Arc<PendingRequest> {
    Arc::new(PendingRequest::for_test(seq, r))
}

/// One request of each kind.
fn one_of_each() -> Vec<Arc<PendingRequest>> {
    let mut text = pending(1, Kind::Text, "claude-1a2b (app)", "Name the release?");
    text.priority = Priority::Urgent;
    text.tags = vec!["release".into()];
    let yesno = pending(2, Kind::Yesno, "ci-bot", "Retry the flaky job?");
    let mut select = pending(
        3,
        Kind::Select,
        "narrator",
        "Created commit plan with 3 commits",
    );
    select.options = vec!["Proceed with this plan".into(), "Cancel".into()];
    select.origin = Origin::Mailbox;
    let mut multi = pending(4, Kind::Multiselect, "reviewer", "Which checks?");
    multi.options = vec!["fmt".into(), "clippy".into(), "test".into()];
    let mut bash = pending(5, Kind::Permission, "claude-9f8e (app)", "Allow Bash?");
    bash.origin = Origin::Hook;
    bash.context = json!({
        "tool_name": "Bash",
        "tool_input": { "command": "rm -rf build/\nmake release" },
        "why": "a recursive delete",
        "always_allow": "Bash(make release:*)",
    });
    let mut edit = pending(6, Kind::Permission, "claude-9f8e (app)", "Allow Edit?");
    edit.origin = Origin::Hook;
    edit.context = json!({
        "tool_name": "Edit",
        "tool_input": {
            "file_path": "/work/app/src/db.rs",
            "old_string": "let pool = connect();",
            "new_string": "let pool = connect_with_retry(3);\nlog::info!(\"connected\");",
        },
    });
    let mut form = pending(7, Kind::Questions, "claude-1a2b (app)", "Two questions");
    form.questions = vec![
        FormQuestion {
            question: "Which database?".into(),
            header: "DB".into(),
            options: vec![
                FormOption {
                    label: "PostgreSQL".into(),
                    description: "the team's".into(),
                },
                FormOption {
                    label: "SQLite".into(),
                    description: String::new(),
                },
            ],
            multi_select: false,
            optional: false,
            value: None,
        },
        FormQuestion {
            question: "Port?".into(),
            header: String::new(),
            options: vec![],
            multi_select: false,
            optional: false,
            value: None,
        },
    ];
    let mut plan = pending(8, Kind::Approval, "claude-1a2b (app)", "Approve the plan?");
    plan.origin = Origin::Hook;
    plan.context = json!({
        "tool_name": "ExitPlanMode",
        "tool_input": { "plan": "# Plan\n\n- add a retry\n  - three times\n\n```\ncargo test\n```" },
    });
    let number = pending(9, Kind::Number, "sizer", "How many workers?");
    [text, yesno, select, multi, bash, edit, form, plan, number]
        .into_iter()
        .enumerate()
        .map(|(i, r)| queued(i as u64 + 1, r))
        .collect()
}

fn app_with(requests: Vec<Arc<PendingRequest>>) -> App {
    let mut app = App::new();
    app.set_requests(requests, Instant::now());
    app.flash = None;
    app
}

fn drawn(app: &App, width: u16, height: u16) -> String {
    let mut t = Terminal::new(TestBackend::new(width, height)).unwrap();
    t.draw(|f| draw(f, app, now())).unwrap();
    t.backend().to_string()
}

/// The app with request `id` selected.
fn select(app: &mut App, seq: u64) {
    let id = app
        .requests
        .iter()
        .find(|p| p.seq == seq)
        .unwrap()
        .request
        .id
        .clone();
    app.selected = Some(id);
}

#[test]
fn the_empty_inbox() {
    insta::assert_snapshot!(drawn(&App::new(), 80, 12));
}

#[test]
fn every_kind_is_drawn_for_what_it_is() {
    let mut app = app_with(one_of_each());
    for seq in 1..=9 {
        select(&mut app, seq);
        let kind = app.current().unwrap().request.kind;
        insta::assert_snapshot!(format!("kind_{seq}_{kind}"), drawn(&app, 120, 24));
    }
}

#[test]
fn a_narrow_terminal_stacks_the_list_over_the_detail() {
    let mut app = app_with(one_of_each());
    select(&mut app, 3);
    insta::assert_snapshot!(drawn(&app, 60, 15));
}

#[test]
fn the_help_screen() {
    let mut app = app_with(one_of_each());
    app.act(Action::Help);
    insta::assert_snapshot!(drawn(&app, 100, 24));
}

#[test]
fn w_shows_a_dashboard_login_link_until_any_key() {
    let mut app = app_with(one_of_each());
    // The key asks the TUI's loop for a link (it holds the server's minter).
    assert_eq!(app.act(Action::WebLink), Effect::ShowWebLink);
    app.mode = Mode::Web(Some(
        "http://127.0.0.1:4000/?code=0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0"
            .into(),
    ));
    insta::assert_snapshot!("web_link", drawn(&app, 100, 24));
    assert_eq!(
        super::keys::action(
            &app.mode,
            ratatui::crossterm::event::KeyEvent::new(
                ratatui::crossterm::event::KeyCode::Char('j'),
                ratatui::crossterm::event::KeyModifiers::NONE
            )
        ),
        Some(Action::Back)
    );
    app.act(Action::Back);
    assert_eq!(app.mode, Mode::Browse);
    // Without HTTP it says so.
    app.mode = Mode::Web(None);
    assert!(drawn(&app, 100, 24).contains("serves no HTTP"));
}

#[test]
fn each_view_is_a_table() {
    let mut app = app_with(one_of_each());
    let tables = [
        (
            View::Agents,
            vec!["agent", "status", "origin", "waiting", "where"],
            vec![
                vec!["narrator", "planning", "mailbox", "1", "run /tmp/run"],
                vec!["claude-9f8e (app)", "working", "spool", "2", "/work/app"],
            ],
        ),
        (
            View::Tasks,
            vec!["session", "state", "priority", "task"],
            vec![vec!["coder", "working", "high", "Add a --verbose flag"]],
        ),
        (
            View::History,
            vec!["ended", "agent", "kind", "question", "answer"],
            vec![vec!["answered", "ci-bot", "yesno", "Deploy?", "yes (tui)"]],
        ),
        (
            View::Activity,
            vec!["when", "agent", "event", "what"],
            vec![vec!["10:00:01", "claude-9f8e", "PreToolUse", "Bash"]],
        ),
    ];
    for (view, header, rows) in tables {
        app.set_table(
            view,
            Table {
                header: header.into_iter().map(String::from).collect(),
                rows: rows
                    .into_iter()
                    .map(|r| r.into_iter().map(String::from).collect())
                    .collect(),
                empty: String::new(),
            },
        );
        app.view = view;
        insta::assert_snapshot!(format!("view_{}", view.title()), drawn(&app, 100, 12));
    }
}

#[test]
fn answers_being_typed_are_drawn_with_their_keys() {
    let mut app = app_with(one_of_each());
    select(&mut app, 1);
    app.act(Action::Open);
    for c in "Aurora".chars() {
        app.act(Action::Type(c));
    }
    app.act(Action::NewLine);
    app.act(Action::Type('2'));
    insta::assert_snapshot!("typing_text", drawn(&app, 100, 20));
    app.act(Action::Back);
    select(&mut app, 4);
    app.act(Action::Quick('1'));
    app.act(Action::Move(2));
    app.act(Action::Toggle);
    insta::assert_snapshot!("ticking_options", drawn(&app, 100, 20));
    app.act(Action::Back);
    select(&mut app, 5);
    app.act(Action::Quick('d'));
    for c in "not now".chars() {
        app.act(Action::Type(c));
    }
    insta::assert_snapshot!("denying_with_a_comment", drawn(&app, 100, 24));
    app.act(Action::Back);
    select(&mut app, 9);
    app.act(Action::Open);
    app.act(Action::Type('x'));
    app.act(Action::Submit);
    insta::assert_snapshot!("refused_answer", drawn(&app, 100, 20));
}

fn sent(effect: Effect) -> (u64, Reply) {
    match effect {
        Effect::Respond { seq, reply, .. } => (seq, reply),
        other => panic!("nothing sent: {other:?}"),
    }
}

#[test]
fn keys_send_the_reply_each_kind_takes() {
    let mut app = app_with(one_of_each());
    // An option by its number, at once.
    select(&mut app, 3);
    assert_eq!(
        sent(app.act(Action::Quick('2'))),
        (3, Reply::Text("Cancel".into()))
    );
    // Yes or no.
    select(&mut app, 2);
    assert_eq!(
        sent(app.act(Action::Quick('y'))),
        (2, Reply::Text("yes".into()))
    );
    // Several options ticked, then sent.
    select(&mut app, 4);
    assert_eq!(app.act(Action::Quick('1')), Effect::None);
    app.act(Action::Move(2));
    app.act(Action::Toggle);
    assert_eq!(
        sent(app.act(Action::Submit)),
        (4, Reply::Choices(vec!["fmt".into(), "test".into()]))
    );
    // A denial with a comment; an approval that remembers the rule offered.
    select(&mut app, 5);
    app.act(Action::Quick('d'));
    for c in "no".chars() {
        app.act(Action::Type(c));
    }
    assert_eq!(
        sent(app.act(Action::Submit)),
        (
            5,
            Reply::Approval {
                approved: false,
                comment: Some("no".into()),
                remember: None
            }
        )
    );
    select(&mut app, 5);
    app.act(Action::Quick('A'));
    assert_eq!(
        sent(app.act(Action::Submit)),
        (
            5,
            Reply::Approval {
                approved: true,
                comment: None,
                remember: Some("Bash(make release:*)".into())
            }
        )
    );
    // Multi-line text.
    select(&mut app, 1);
    app.act(Action::Open);
    app.act(Action::Type('a'));
    app.act(Action::NewLine);
    app.act(Action::Type('b'));
    assert_eq!(
        sent(app.act(Action::Submit)),
        (1, Reply::Text("a\nb".into()))
    );
    // A form, one question at a time.
    select(&mut app, 7);
    app.act(Action::Open);
    app.act(Action::Type('1'));
    assert_eq!(app.act(Action::Submit), Effect::None);
    for c in "5432".chars() {
        app.act(Action::Type(c));
    }
    assert_eq!(
        sent(app.act(Action::Submit)),
        (7, Reply::Answers(vec!["PostgreSQL".into(), "5432".into()]))
    );
    // A number out of shape is refused, and the editor stays.
    select(&mut app, 9);
    app.act(Action::Open);
    app.act(Action::Type('x'));
    assert_eq!(app.act(Action::Submit), Effect::None);
    assert!(matches!(&app.mode, Mode::Answer(a) if a.error.is_some()));
    // Declining, with a reason.
    app.act(Action::Back);
    app.act(Action::Decline);
    for c in "busy".chars() {
        app.act(Action::Type(c));
    }
    assert_eq!(
        sent(app.act(Action::Submit)),
        (
            9,
            Reply::Cancel {
                reason: Some("busy".into())
            }
        )
    );
}

#[test]
fn the_filter_narrows_the_inbox_and_leaving_requests_are_said() {
    let mut app = app_with(one_of_each());
    app.act(Action::Filter);
    for c in "mailbox".chars() {
        app.act(Action::Type(c));
    }
    app.act(Action::Submit);
    assert_eq!(app.visible().len(), 1);
    assert_eq!(app.current().unwrap().seq, 3);
    app.act(Action::Back);
    assert_eq!(app.visible().len(), 9);
    // The request being answered leaves (answered elsewhere): said, and let go.
    select(&mut app, 1);
    app.act(Action::Open);
    let rest: Vec<_> = app
        .requests
        .iter()
        .filter(|p| p.seq != 1)
        .cloned()
        .collect();
    app.left(
        "Name the release?",
        Status::Answered,
        Some("cli:root"),
        Instant::now(),
    );
    app.set_requests(rest, Instant::now());
    assert_eq!(app.mode, Mode::Browse);
    assert_eq!(
        app.notices.back().unwrap().text,
        "answered by cli:root: Name the release?"
    );
    // Quitting is asked first.
    app.act(Action::Quit);
    assert_eq!(app.mode, Mode::Quit);
    assert_eq!(app.act(Action::ConfirmQuit), Effect::Quit);
}

#[test]
fn the_help_lists_every_key_the_keymap_knows() {
    // Each single key of the browse keymap is on the help screen.
    for k in [
        "j", "Tab", "Enter", "1-9", "y n", "a d", "A", "x", "/", "?", "q", "Esc", "w",
    ] {
        assert!(
            super::keys::HELP.iter().any(|(keys, _)| keys.contains(k)),
            "{k} is not on the help screen"
        );
    }
}
