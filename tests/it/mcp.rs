//! `hitl mcp`: driven by real MCP clients (the official Python SDK from PyPI, and
//! rmcp's own client) through initialize, tools/list and tools/call, with a human
//! answering each question with `hitl answer` from another process.

use std::{process::Command, sync::Arc, time::Duration};

use rmcp::{
    RoleClient, ServiceExt,
    model::{CallToolRequestParams, CallToolResult},
    service::RunningService,
    transport::TokioChildProcess,
};
use serde_json::{Value, json};

use crate::support::{Project, checkout, eventually, hitl_bin};

/// Whether the Python SDK can be imported; under CI=true it must be (tools/test-all
/// installs it), elsewhere the test says it skipped.
pub(crate) fn python_sdk() -> bool {
    let ok = Command::new("python3")
        .args(["-c", "import mcp"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "the MCP Python SDK is missing (pip install mcp): tools/test-all installs it"
        );
        eprintln!("skipped: the MCP Python SDK is not installed (pip install mcp)");
    }
    ok
}

#[test]
fn the_python_sdk_asks_through_every_tool_and_gets_each_answer() {
    if !python_sdk() {
        return;
    }
    let p = Project::new();
    let _listener = p.listen(&["--attended", "--http", "127.0.0.1:0"]);
    let out = Command::new("python3")
        .arg(checkout().join("tests/it/mcp_client.py"))
        .arg(hitl_bin())
        .arg(&p.dir)
        .env("HITL_HOME", &p.home)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["server"], "hitl");
    let tools = report["tools"].as_object().unwrap();
    let mut names: Vec<_> = tools.keys().map(String::as_str).collect();
    names.sort();
    assert_eq!(
        names,
        [
            "ask_human",
            "mailbox_ask",
            "mailbox_recv",
            "mailbox_reply",
            "mailbox_result",
            "mailbox_send",
            "mailbox_status",
            "permission_prompt",
            "request_approval"
        ]
    );
    assert_eq!(
        tools["permission_prompt"]["required"],
        json!(["tool_name"]),
        "{:#}",
        tools["permission_prompt"]
    );

    let calls = report["calls"].as_array().unwrap();
    for call in calls {
        assert_eq!(call["question"]["origin"], "mcp", "{call:#}");
        assert!(
            call["progress"].as_array().is_some_and(|p| !p.is_empty()),
            "no progress while waiting: {call:#}"
        );
    }
    let structured = |i: usize| &calls[i]["structured"];
    // select
    assert_eq!(calls[0]["question"]["type"], "select");
    assert_eq!(calls[0]["question"]["priority"], "high");
    assert_eq!(calls[0]["question"]["tags"], json!(["db"]));
    assert_eq!(structured(0)["status"], "answered");
    assert_eq!(structured(0)["answer"], "postgres");
    assert_eq!(calls[0]["is_error"], false);
    // the text block mirrors the structured content
    let mirrored: Value = serde_json::from_str(calls[0]["text"][0].as_str().unwrap()).unwrap();
    assert_eq!(&mirrored, structured(0));
    // multiselect
    assert_eq!(structured(1)["choices"], json!(["fmt", "test"]));
    // text, with its context kept for the human
    assert_eq!(structured(2)["answer"], "Aurora borealis");
    assert_eq!(calls[2]["question"]["context"]["branch"], "main");
    // approval denied, with the comment
    assert_eq!(calls[3]["question"]["type"], "approval");
    assert_eq!(structured(3)["approved"], false);
    assert_eq!(structured(3)["comment"], "not before Friday");
    // permission_prompt: one text block holding the JSON Claude Code reads
    assert_eq!(calls[4]["question"]["type"], "permission");
    assert!(
        calls[4]["question"]["content"]
            .as_str()
            .unwrap()
            .contains("make deploy"),
        "{:#}",
        calls[4]["question"]
    );
    let allowed: Value = serde_json::from_str(calls[4]["text"][0].as_str().unwrap()).unwrap();
    assert_eq!(
        allowed,
        json!({ "behavior": "allow",
                "updatedInput": { "command": "make deploy", "description": "Deploy" } })
    );
    let denied: Value = serde_json::from_str(calls[5]["text"][0].as_str().unwrap()).unwrap();
    assert_eq!(denied["behavior"], "deny");
    assert!(
        denied["message"]
            .as_str()
            .unwrap()
            .contains("write it elsewhere"),
        "{denied}"
    );
    assert!(
        calls[5]["question"]["content"]
            .as_str()
            .unwrap()
            .contains("notes.txt"),
        "{:#}",
        calls[5]["question"]
    );
}

/// `hitl mcp` in `p`, driven by rmcp's client.
async fn rmcp_client(p: &Project) -> RunningService<RoleClient, ()> {
    rmcp_client_named(p, Some("mcp-rmcp")).await
}

/// The same, as the agent `agent` names (`HITL_AGENT_ID`), or unnamed.
async fn rmcp_client_named(p: &Project, agent: Option<&str>) -> RunningService<RoleClient, ()> {
    let mut cmd = tokio::process::Command::new(hitl_bin());
    cmd.arg("mcp")
        .current_dir(&p.dir)
        .env("HITL_HOME", &p.home)
        .env("CLAUDE_PROJECT_DIR", &p.dir)
        .env_remove("HITL_AGENT_ID")
        .env_remove("HITL_AGENT_NAME");
    if let Some(agent) = agent {
        cmd.env("HITL_AGENT_ID", agent);
    }
    ().serve(TokioChildProcess::new(cmd).unwrap())
        .await
        .expect("an MCP session with hitl mcp")
}

fn call(tool: &str, arguments: Value) -> CallToolRequestParams {
    let Value::Object(arguments) = arguments else {
        panic!("arguments are an object")
    };
    CallToolRequestParams::new(tool.to_string()).with_arguments(arguments)
}

fn text_of(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect()
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn rmcp_client_asks_and_a_human_answers() {
    let p = Arc::new(Project::new());
    let _listener = p.listen(&["--attended", "--http", "127.0.0.1:0"]);
    runtime().block_on(async {
        let client = rmcp_client(&p).await;
        let info = client.peer_info().expect("the server's info");
        assert_eq!(info.server_info.as_ref().unwrap().name, "hitl");
        let tools = client.list_all_tools().await.unwrap();
        assert_eq!(tools.len(), 9, "{tools:?}");

        let asking = client.call_tool(call(
            "request_approval",
            json!({ "action": "tag v1.0", "priority": "urgent" }),
        ));
        let human = async {
            let q = tokio::task::spawn_blocking({
                let p = p.clone();
                move || p.wait_pending(1, Duration::from_secs(20)).remove(0)
            })
            .await
            .unwrap();
            assert_eq!(q["origin"], "mcp", "{q:#}");
            assert_eq!(q["priority"], "urgent", "{q:#}");
            assert_eq!(q["agent_id"], "mcp-rmcp", "{q:#}");
            let id = q["id"].as_str().unwrap().to_string();
            let out = tokio::task::spawn_blocking({
                let p = p.clone();
                move || p.run(&["answer", &id, "--approve", "--comment", "go"])
            })
            .await
            .unwrap();
            assert!(out.status.success(), "{out:?}");
        };
        let (result, ()) = tokio::join!(asking, human);
        let result = result.unwrap();
        assert_eq!(result.is_error, Some(false), "{result:?}");
        let got = result.structured_content.unwrap();
        assert_eq!(got["approved"], true);
        assert_eq!(got["comment"], "go");
        client.cancel().await.unwrap();
    });
}

#[test]
fn a_call_the_client_abandons_and_a_session_that_ends_are_withdrawn() {
    let p = Arc::new(Project::new());
    let _listener = p.listen(&["--attended", "--http", "127.0.0.1:0"]);
    runtime().block_on(async {
        let client = rmcp_client(&p).await;
        // Abandoned: the client drops the call (and tells the server it cancelled).
        let abandoned = tokio::time::timeout(
            Duration::from_secs(2),
            client.call_tool(call("ask_human", json!({ "question": "Left hanging?" }))),
        )
        .await;
        assert!(abandoned.is_err(), "nobody answered, yet: {abandoned:?}");
        let p2 = p.clone();
        tokio::task::spawn_blocking(move || p2.wait_pending(0, Duration::from_secs(20)))
            .await
            .unwrap();

        // Ended: the client closes the session while a call waits.
        let waiting = client.call_tool(call("ask_human", json!({ "question": "Still there?" })));
        let closing = async {
            let p = p.clone();
            tokio::task::spawn_blocking(move || p.wait_pending(1, Duration::from_secs(20)))
                .await
                .unwrap();
        };
        tokio::select! {
            r = waiting => panic!("answered though nobody did: {r:?}"),
            () = closing => {}
        }
        client.cancel().await.unwrap();
    });
    p.wait_pending(0, Duration::from_secs(20));
    eventually(
        "both in history as cancelled",
        Duration::from_secs(10),
        || {
            let history = p.history();
            history.len() == 2
                && history
                    .iter()
                    .all(|h| h["status"] == "cancelled" && h["origin"] == "mcp")
        },
    );
}

#[test]
fn without_a_listener_the_agent_is_told_and_permission_is_denied() {
    let p = Project::new();
    runtime().block_on(async {
        let client = rmcp_client(&p).await;
        let asked = client
            .call_tool(call("ask_human", json!({ "question": "Anyone?" })))
            .await
            .unwrap();
        assert_eq!(asked.is_error, Some(true), "{asked:?}");
        assert!(text_of(&asked).contains("hitl listen"), "{asked:?}");

        let input = json!({ "command": "ls" });
        let prompt = client
            .call_tool(call(
                "permission_prompt",
                json!({ "tool_name": "Bash", "input": input }),
            ))
            .await
            .unwrap();
        let verdict: Value = serde_json::from_str(&text_of(&prompt)).unwrap();
        assert_eq!(verdict["behavior"], "deny", "{verdict}");
        assert!(
            verdict["message"].as_str().unwrap().contains("hitl listen"),
            "{verdict}"
        );

        // A select without options is the caller's mistake: a protocol error.
        let bad = client
            .call_tool(call(
                "ask_human",
                json!({ "question": "Which?", "type": "select" }),
            ))
            .await;
        assert!(
            format!("{bad:?}").contains("two or more options"),
            "{bad:?}"
        );
        client.cancel().await.unwrap();
    });
}

#[test]
fn with_nobody_at_hitl_the_agent_is_told_at_once_and_when_the_last_person_leaves() {
    let p = Arc::new(Project::new());
    // A listener nobody is at: the agent hears so at once, and asks the user itself.
    let listener = p.listen(&["--ui", "none", "--http", "127.0.0.1:0"]);
    runtime().block_on(async {
        let client = rmcp_client(&p).await;
        let started = std::time::Instant::now();
        let asked = client
            .call_tool(call("ask_human", json!({ "question": "Anyone there?" })))
            .await
            .unwrap();
        assert_eq!(asked.is_error, Some(true), "{asked:?}");
        assert!(
            text_of(&asked).contains("ask the user here in the conversation"),
            "{asked:?}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{:?}",
            started.elapsed()
        );
        client.cancel().await.unwrap();
    });
    assert!(p.pending().is_empty(), "nothing was asked");
    drop(listener);

    // Someone at the terminal prompt: asked; the prompt closes: handed back.
    let mut listener = p.listen_with_stdin(&["--http", "127.0.0.1:0"]);
    runtime().block_on(async {
        // Unnamed: the agent is named by the MCP client's own name, not its process.
        let client = rmcp_client_named(&p, None).await;
        let asking = client.call_tool(call("ask_human", json!({ "question": "Still there?" })));
        let leaving = async {
            let q = tokio::task::spawn_blocking({
                let p = p.clone();
                move || p.wait_pending(1, Duration::from_secs(20)).remove(0)
            })
            .await
            .unwrap();
            assert!(
                q["agent_name"].as_str().unwrap().starts_with("rmcp-"),
                "{q:#}"
            );
            assert!(
                q["agent_id"].as_str().unwrap().starts_with("mcp-rmcp-"),
                "{q:#}"
            );
            drop(listener.child.stdin.take());
            std::time::Instant::now()
        };
        let (result, left_at) = tokio::join!(asking, leaving);
        let result = result.unwrap();
        assert!(
            left_at.elapsed() < Duration::from_secs(10),
            "{:?}",
            left_at.elapsed()
        );
        assert_eq!(result.is_error, Some(true), "{result:?}");
        assert!(text_of(&result).contains("nobody is at hitl"), "{result:?}");
        client.cancel().await.unwrap();
    });
    p.wait_pending(0, Duration::from_secs(10));
}
