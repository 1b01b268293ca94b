//! Presence: hooks ask in hitl only when a person can answer now, and step aside at
//! once otherwise. The decision table of docs/claude-code.md is read and every row of it is run
//! against the real hook, as Claude Code runs it.

use std::{
    io::Write,
    process::Child,
    time::{Duration, Instant},
};

use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::{client::IntoClientRequest, http::HeaderValue};

use crate::support::{Listener, Project, checkout, eventually, wait_output};

/// The calls the table's columns stand for, with the column each belongs to.
fn calls(p: &Project) -> Vec<(usize, &'static str, &'static str, Value)> {
    let pre = |tool: &str, input: Value| {
        json!({
            "session_id": "presence1", "cwd": p.dir, "permission_mode": "default",
            "hook_event_name": "PreToolUse", "tool_name": tool, "tool_input": input,
            "tool_use_id": "toolu_01",
        })
    };
    let question = json!({ "questions": [{ "question": "Which database?", "header": "DB",
        "multiSelect": false, "options": [
            { "label": "PostgreSQL", "description": "" }, { "label": "SQLite", "description": "" }] }] });
    vec![
        (
            1,
            "dangerous Bash",
            "pre-tool-use",
            pre("Bash", json!({ "command": "git push --force origin main" })),
        ),
        (
            1,
            "protected Write",
            "pre-tool-use",
            pre(
                "Write",
                json!({ "file_path": p.dir.join(".env"), "content": "X=1" }),
            ),
        ),
        (
            2,
            "AskUserQuestion",
            "pre-tool-use",
            pre("AskUserQuestion", question),
        ),
        (
            2,
            "ExitPlanMode",
            "pre-tool-use",
            pre("ExitPlanMode", json!({ "plan": "1. Rename\n2. Test" })),
        ),
        (
            2,
            "PermissionRequest",
            "permission-request",
            json!({ "session_id": "presence1", "cwd": p.dir, "hook_event_name": "PermissionRequest",
                "tool_name": "Bash", "tool_input": { "command": "npm test" } }),
        ),
        (
            3,
            "Read",
            "pre-tool-use",
            pre("Read", json!({ "file_path": p.dir.join("README.md") })),
        ),
        (
            3,
            "harmless Bash",
            "pre-tool-use",
            pre("Bash", json!({ "command": "ls -la" })),
        ),
    ]
}

fn spawn_hook(p: &Project, event: &str, input: &Value) -> Child {
    crate::hook::spawn_hook_as(p, event, input, None)
}

/// What a hook's output says, in the table's words: `ask`, `deny`, `allow`, or
/// `none` (empty stdout: no opinion, or Claude Code's own dialog).
fn verdict(out: &std::process::Output) -> String {
    assert!(out.status.success(), "the hook failed: {out:?}");
    if out.stdout.is_empty() {
        return "none".into();
    }
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let o = &v["hookSpecificOutput"];
    o["permissionDecision"]
        .as_str()
        .or_else(|| o["decision"]["behavior"].as_str())
        .unwrap_or_else(|| panic!("no decision in {v}"))
        .to_string()
}

/// A cell of the table as the verdict the test expects.
fn expected(cell: &str) -> String {
    let cell = cell.trim().trim_end_matches(" within a second");
    match cell {
        "`ask`" => "ask".into(),
        "`deny`" => "deny".into(),
        "Claude Code's own dialog" | "no opinion" => "none".into(),
        "asked in hitl" => "asked in hitl".into(),
        other => panic!("a README table cell this test does not know: {other:?}"),
    }
}

/// The decision table of the hooks' page (`docs/claude-code.md`): its rows, each a
/// list of cells.
fn readme_table() -> Vec<Vec<String>> {
    let readme = std::fs::read_to_string(checkout().join("docs/claude-code.md")).unwrap();
    let start = readme
        .find("<!-- decision-table")
        .expect("docs/claude-code.md has the decision table");
    let end = readme[start..].find("<!-- /decision-table -->").unwrap() + start;
    readme[start..end]
        .lines()
        .filter(|l| l.starts_with('|') && !l.starts_with("|---") && !l.starts_with("| when"))
        .map(|l| {
            l.trim_matches('|')
                .split(" | ")
                .map(|c| c.trim().to_string())
                .collect()
        })
        .collect()
}

/// Runs every call at once, then `during` (which may stop the listener, or leave),
/// and returns each call's column, name, verdict and how long after `during` it took.
fn run_all(p: &Project, during: impl FnOnce()) -> Vec<(usize, &'static str, String, Duration)> {
    let calls = calls(p);
    let children: Vec<_> = calls
        .iter()
        .map(|(_, _, event, input)| spawn_hook(p, event, input))
        .collect();
    during();
    let from = Instant::now();
    children
        .into_iter()
        .zip(calls)
        .map(|(child, (col, name, _, _))| {
            let out = wait_output(child, Duration::from_secs(60));
            (col, name, verdict(&out), from.elapsed())
        })
        .collect()
}

/// Waits until the hook's questions (the first two columns' calls) are pending.
fn wait_asked(p: &Project) -> Vec<Value> {
    let n = calls(p).iter().filter(|c| c.0 < 3).count();
    p.wait_pending(n, Duration::from_secs(20))
}

/// Answers every pending hook question as a person would: approve, or the first
/// option of a form.
fn answer_all(p: &Project) {
    for q in wait_asked(p) {
        let id = q["id"].as_str().unwrap();
        let args: &[&str] = if q["type"] == "questions" {
            &["answer", id, "1"]
        } else {
            &["answer", id, "--approve"]
        };
        let out = p.run(args);
        assert!(out.status.success(), "{out:?}");
    }
}

/// A dashboard page's connection: `/api/v1/stream?attend=dashboard`, open until
/// dropped.
struct Dashboard {
    rt: tokio::runtime::Runtime,
    ws: Option<
        tokio_tungstenite::WebSocketStream<
            tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>,
        >,
    >,
}

impl Dashboard {
    fn open(p: &Project) -> Dashboard {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let url = p.http_url().replace("http://", "ws://") + "/api/v1/stream?attend=dashboard";
        let mut req = url.into_client_request().unwrap();
        req.headers_mut().insert(
            "authorization",
            HeaderValue::from_str(&format!("Bearer {}", p.token())).unwrap(),
        );
        let (ws, _) = rt.block_on(tokio_tungstenite::connect_async(req)).unwrap();
        Dashboard { rt, ws: Some(ws) }
    }

    fn close(&mut self) {
        if let Some(mut ws) = self.ws.take() {
            let _ = self.rt.block_on(ws.close(None));
        }
    }
}

/// Who `hitl status --json` says is present.
fn present(p: &Project) -> Value {
    let out = p.run(&["status", "--json"]);
    assert!(out.status.success(), "{out:?}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    v["listener"]["present"].clone()
}

fn wait_present(p: &Project, yes: bool) {
    eventually("presence as expected", Duration::from_secs(10), || {
        present(p).as_array().is_some_and(|a| a.is_empty() != yes)
    });
}

/// One row of the table, run: each call's verdict (`asked in hitl` for a call that
/// was asked and took the answer given), and how long each took.
fn run_row(row: &str) -> Vec<(usize, &'static str, String, Duration)> {
    let p = Project::new();
    std::fs::write(p.dir.join("README.md"), "hello\n").unwrap();
    std::fs::write(p.dir.join(".env"), "X=0\n").unwrap();
    let attended = || p.listen(&["--attended", "--no-http"]);
    match row {
        "hitl is not set up in the project" => {
            std::fs::remove_dir_all(p.helpers()).unwrap();
            run_all(&p, || {})
        }
        "no listener runs" => run_all(&p, || {}),
        "a listener runs, nobody is at it" => {
            let _listener = p.listen(&["--ui", "none", "--http", "127.0.0.1:0"]);
            wait_present(&p, false);
            run_all(&p, || {})
        }
        "someone is at a prompt, a dashboard, or `--attended`" => {
            let got = {
                let _listener = attended();
                run_all(&p, || answer_all(&p))
            };
            // The other two ways of being there: a prompt with its input open, and a
            // connected dashboard page; a dangerous call is asked in each.
            let mut prompt = p.listen_with_stdin(&["--no-http"]);
            wait_present(&p, true);
            let child = spawn_hook(&p, calls(&p)[0].2, &calls(&p)[0].3);
            let q = &p.wait_pending(1, Duration::from_secs(20))[0];
            prompt.wait_stdout("(/cancel to decline)", Duration::from_secs(20));
            let mut stdin = prompt.child.stdin.take().unwrap();
            writeln!(stdin, "y").unwrap();
            let out = wait_output(child, Duration::from_secs(30));
            assert_eq!(verdict(&out), "allow", "answered at the prompt: {q}");
            drop(stdin);
            drop(prompt);
            let _listener = p.listen(&["--ui", "none", "--http", "127.0.0.1:0"]);
            let _page = Dashboard::open(&p);
            wait_present(&p, true);
            let child = spawn_hook(&p, calls(&p)[0].2, &calls(&p)[0].3);
            let q = p.wait_pending(1, Duration::from_secs(20)).remove(0);
            assert!(
                p.run(&["answer", q["id"].as_str().unwrap(), "--approve"])
                    .status
                    .success()
            );
            let out = wait_output(child, Duration::from_secs(30));
            assert_eq!(verdict(&out), "allow", "answered with a dashboard open");
            got.into_iter()
                .map(|(col, name, v, t)| {
                    let v = if v == "allow" {
                        "asked in hitl".into()
                    } else {
                        v
                    };
                    (col, name, v, t)
                })
                .collect()
        }
        "asked, and no answer within the timeout" => {
            p.project_config("[hook]\ntimeout = 1\ntimeouts = { AskUserQuestion = 1 }\n");
            let _listener = attended();
            run_all(&p, || {
                wait_asked(&p);
            })
        }
        "asked, and the listener stops while the hook waits" => {
            // Stopped (SIGTERM) and killed (SIGKILL): the same either way.
            let mut all = Vec::new();
            for sig in [
                nix::sys::signal::Signal::SIGTERM,
                nix::sys::signal::Signal::SIGKILL,
            ] {
                let listener: Listener = attended();
                all.extend(run_all(&p, || {
                    wait_asked(&p);
                    listener.signal(sig);
                }));
            }
            all
        }
        "asked, and the last person leaves while the hook waits" => {
            let _listener = p.listen(&["--ui", "none", "--http", "127.0.0.1:0"]);
            let mut page = Dashboard::open(&p);
            wait_present(&p, true);
            run_all(&p, || {
                wait_asked(&p);
                page.close();
            })
        }
        "`unanswered_dangerous = \"deny\"`, nobody answers" => {
            p.project_config("[hook]\nunanswered_dangerous = \"deny\"\n");
            let _listener = p.listen(&["--ui", "none", "--no-http"]);
            run_all(&p, || {})
        }
        other => panic!("a README row this test does not know: {other:?}"),
    }
}

#[test]
fn the_readme_decision_table_holds_row_by_row() {
    let table = readme_table();
    assert!(table.len() >= 8, "{table:?}");
    let mut wrong = Vec::new();
    for row in &table {
        assert_eq!(row.len(), 4, "{row:?}");
        let situation = &row[0];
        for (col, name, got, took) in run_row(situation) {
            let want = expected(&row[col]);
            if got != want {
                wrong.push(format!(
                    "{situation}: {name} got {got}, docs/claude-code.md says {want}"
                ));
            }
            // "At once" and "within a second": timed from the moment the hook was
            // started (or the listener stopped, or the page closed).
            let bound = if row[col].contains("within a second") || situation.starts_with("asked") {
                Duration::from_secs(if situation.contains("timeout") { 3 } else { 1 })
            } else {
                Duration::from_secs(1)
            };
            if want != "asked in hitl" && took > bound {
                wrong.push(format!(
                    "{situation}: {name} took {took:?} (over {bound:?})"
                ));
            }
            eprintln!("{situation}: {name}: {got} after {took:?}");
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn status_says_who_is_present() {
    let p = Project::new();
    let _listener = p.listen(&["--ui", "none", "--http", "127.0.0.1:0"]);
    let out = p.run(&["status"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("present:  nobody"), "{text}");
    let mut page = Dashboard::open(&p);
    wait_present(&p, true);
    let out = p.run(&["status"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("present:  dashboard"), "{text}");
    assert_eq!(present(&p), json!([["dashboard", 1]]));
    page.close();
    wait_present(&p, false);
    // A name that is not a kind of UI is refused.
    let url = p.http_url() + "/api/v1/stream?attend=Not%20a%20UI";
    let res = reqwest::blocking::Client::new()
        .get(url)
        .bearer_auth(p.token())
        .send()
        .unwrap();
    assert_eq!(res.status(), 400);
}
