//! Slack: with nobody at the desk, a request reaches the channel through the Web
//! API (over TLS, its certificate from a CA the listener is given in `SSL_CERT_FILE`), and an approver's press or form there answers it over Socket Mode. Slack is
//! a stand-in (tests/it/slack_api.py) written from Slack's documentation, which
//! checks every call hitl makes (tokens, parameters, Block Kit's shapes and limits)
//! and plays members' presses and forms through the socket, in envelopes, reading
//! back each acknowledgement.

use std::{
    io::Write,
    process::{Child, Stdio},
    time::Duration,
};

use reqwest::blocking::Client;
use serde_json::{Value, json};

use crate::support::{Project, eventually, spawn_ask, stand_in, wait_output};

const APP_TOKEN: &str = "xapp-1-A1-1-abc";
const BOT_TOKEN: &str = "xoxb-1-2-abc";

struct SlackApi {
    child: Child,
    /// The test's control endpoints (`/test/…`), plain http.
    base: String,
    /// The Web API, over TLS.
    api: String,
}

impl SlackApi {
    /// Slack over TLS, as Slack serves it: its Web API at `https://` and its socket at
    /// `wss://`, under a certificate of `certs`' test CA (which the listener is given
    /// in `SSL_CERT_FILE`, as curl would be). The test's own calls go to a plain
    /// control port beside them.
    fn start(certs: &std::path::Path) -> SlackApi {
        let (cert, key) = (certs.join("trusted.pem"), certs.join("trusted.key"));
        let (cert, key) = (cert.display().to_string(), key.display().to_string());
        let (child, _, first) = stand_in("slack_api.py", &[APP_TOKEN, BOT_TOKEN, &cert, &key]);
        SlackApi {
            child,
            base: format!("http://127.0.0.1:{}", first["control"]),
            api: format!("https://127.0.0.1:{}", first["port"]),
        }
    }

    fn calls(&self) -> Vec<Value> {
        Client::new()
            .get(format!("{}/test/calls", self.base))
            .send()
            .unwrap()
            .json()
            .unwrap()
    }

    /// The calls of `method`, once there are at least `n`.
    fn wait_calls(&self, method: &str, n: usize) -> Vec<Value> {
        let mut found = Vec::new();
        eventually(
            &format!("{n} {method} calls"),
            Duration::from_secs(20),
            || {
                found = self
                    .calls()
                    .into_iter()
                    .filter(|c| c["method"] == method)
                    .collect();
                found.len() >= n
            },
        );
        found
    }

    fn connections(&self) -> u64 {
        Client::new()
            .get(format!("{}/test/connections", self.base))
            .send()
            .unwrap()
            .json::<Value>()
            .unwrap()["opened"]
            .as_u64()
            .unwrap()
    }

    /// Delivers `payload` in an envelope; the app's acknowledgement.
    fn interact(&self, payload: Value) -> Value {
        let r: Value = Client::new()
            .post(format!("{}/test/interactive", self.base))
            .json(&payload)
            .send()
            .unwrap()
            .json()
            .unwrap();
        assert_eq!(r["acknowledged"], true, "acknowledged within 3 s: {r}");
        r["ack"].clone()
    }

    /// A member's press of `value`, as Slack sends a `block_actions` payload.
    fn press(&self, user: &str, channel: &str, ts: &str, value: &str) -> Value {
        self.interact(json!({
            "type": "block_actions",
            "user": { "id": user, "username": format!("m{user}"), "name": format!("m{user}"), "team_id": "T1" },
            "api_app_id": "A1",
            "token": "verification-token",
            "container": { "type": "message", "message_ts": ts, "channel_id": channel, "is_ephemeral": false },
            "team": { "id": "T1", "domain": "team" },
            "channel": { "id": channel, "name": "hitl" },
            "response_url": "https://hooks.slack.com/actions/T1/1/x",
            "actions": [{
                "action_id": "hitl-x", "block_id": "hitl-actions", "type": "button", "value": value,
                "text": { "type": "plain_text", "text": "x", "emoji": true }, "action_ts": "1795860001.000100",
            }],
        }))
    }

    /// A member's form sent, as Slack sends a `view_submission` payload.
    fn submit(&self, user: &str, view: &Value, text: &str) -> Value {
        self.interact(json!({
            "type": "view_submission",
            "team": { "id": "T1", "domain": "team" },
            "user": { "id": user, "username": format!("m{user}"), "name": format!("m{user}"), "team_id": "T1" },
            "api_app_id": "A1",
            "view": {
                "id": "V1", "type": "modal", "team_id": "T1",
                "callback_id": view["callback_id"], "private_metadata": view["private_metadata"],
                "state": { "values": { "answer": { "text": { "type": "plain_text_input", "value": text } } } },
            },
        }))
    }

    fn disconnect(&self) {
        Client::new()
            .post(format!("{}/test/disconnect", self.base))
            .send()
            .unwrap();
    }
}

impl Drop for SlackApi {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A project with Slack set up over TLS: the stand-in started under a test CA's
/// certificate, the user's `[slack]` settings (`extra` lines besides), and the
/// listener (`args`) trusting that CA through `SSL_CERT_FILE` alone.
fn slack_project(extra: &str, args: &[&str]) -> (Project, SlackApi, crate::support::Listener) {
    let p = Project::new();
    let certs = p.home.join("tls");
    std::fs::create_dir_all(&certs).unwrap();
    crate::support::make_certificates(&certs);
    let api = SlackApi::start(&certs);
    p.user_config(&format!(
        "[slack]\napp_token = \"{APP_TOKEN}\"\nbot_token = \"{BOT_TOKEN}\"\nchannel = \"C42\"\n\
         api_url = \"{}/api/\"\n{extra}",
        api.api
    ));
    let mut listen = p.hitl();
    listen
        .env("SSL_CERT_FILE", certs.join("ca.pem"))
        .arg("listen")
        .args(args)
        .stderr(Stdio::piped())
        .stdout(Stdio::piped());
    let listener = crate::support::Listener::start(listen);
    (p, api, listener)
}

/// The buttons of a posted message: (title, value).
fn buttons(call: &Value) -> Vec<(String, String)> {
    call["params"]["blocks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["type"] == "actions")
        .flat_map(|b| b["elements"].as_array().unwrap().clone())
        .map(|e| {
            (
                e["text"]["text"].as_str().unwrap().to_string(),
                e["value"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn value_of(call: &Value, title: &str) -> String {
    buttons(call)
        .into_iter()
        .find(|(t, _)| t == title)
        .unwrap_or_else(|| panic!("no {title} button: {call}"))
        .1
}

#[test]
fn with_nobody_at_the_desk_slacks_approvers_answer_by_button_and_form() {
    let (p, api, _listener) = slack_project(
        "approvers = [\"U7\"]\n",
        &["--ui", "none", "--http", "127.0.0.1:0"],
    );
    let info: Value =
        serde_json::from_slice(&std::fs::read(p.helpers().join(".listener.json")).unwrap())
            .unwrap();
    assert_eq!(info["reachable"], json!(["slack"]), "{info}");
    eventually("the socket open", Duration::from_secs(20), || {
        api.connections() >= 1
    });

    // A real hook call waits for the channel instead of stepping aside.
    let input = json!({
        "session_id": "abc123", "cwd": p.dir, "hook_event_name": "PermissionRequest",
        "tool_name": "Bash", "tool_input": { "command": "rm -rf build/" },
    });
    let mut hook = p
        .hitl()
        .args(["hook", "permission-request"])
        .env("CLAUDE_PROJECT_DIR", &p.dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    hook.stdin
        .take()
        .unwrap()
        .write_all(input.to_string().as_bytes())
        .unwrap();
    let posted = api.wait_calls("chat.postMessage", 1).remove(0);
    assert_eq!(posted.get("error"), None, "Slack took it: {posted}");
    assert_eq!(posted["params"]["channel"], "C42");
    assert!(
        posted["params"]["blocks"]
            .to_string()
            .contains("rm -rf build/"),
        "{posted}"
    );
    let titles: Vec<String> = buttons(&posted).into_iter().map(|(t, _)| t).collect();
    assert_eq!(
        &titles[..3],
        ["Approve", "Deny", "Deny with reason…"],
        "{posted}"
    );
    let approve = value_of(&posted, "Approve");
    let ts = "1795860000.000001";

    // A press in another channel: acknowledged, nothing changes.
    api.press("U7", "C99", ts, &approve);
    // A member who is not an approver: acknowledged, told so, nothing changes.
    api.press("U8", "C42", ts, &approve);
    let told = api.wait_calls("chat.postEphemeral", 1).remove(0);
    assert_eq!(told.get("error"), None, "{told}");
    assert_eq!(told["params"]["user"], "U8");
    assert!(
        told["params"]["text"]
            .as_str()
            .unwrap()
            .contains("Not yours"),
        "{told}"
    );
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        p.pending().len(),
        1,
        "still pending after a stranger's press"
    );

    // The approver's press answers the hook.
    api.press("U7", "C42", ts, &approve);
    let out = wait_output(hook, Duration::from_secs(20));
    assert!(out.status.success(), "{out:?}");
    let decided: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        decided,
        json!({ "hookSpecificOutput": { "hookEventName": "PermissionRequest",
            "decision": { "behavior": "allow" } } })
    );
    assert_eq!(p.history()[0]["responded_by"], "slack:@mU7");
    // The message is updated: how it ended, by whom; its buttons gone.
    let update = api.wait_calls("chat.update", 1).remove(0);
    assert_eq!(update.get("error"), None, "{update}");
    assert_eq!(update["params"]["ts"], ts);
    assert!(buttons(&update).is_empty(), "{update}");
    assert!(
        update["params"]["blocks"]
            .to_string()
            .contains("Approved* by slack:@mU7"),
        "{update}"
    );
    let id = p.history()[0]["id"].as_str().unwrap().to_string();
    let shown = p.run(&["history", "--id", &id]);
    let shown = String::from_utf8_lossy(&shown.stdout);
    assert!(
        shown.contains("notified slack     channel C42 delivered"),
        "{shown}"
    );

    // A text question: its Answer… button opens a form, whose answer answers it.
    let asker = spawn_ask(&p, &["--timeout", "60", "Which branch do I release from?"]);
    let posted = api.wait_calls("chat.postMessage", 2).remove(1);
    api.press(
        "U7",
        "C42",
        "1795860000.000002",
        &value_of(&posted, "Answer…"),
    );
    let opened = api.wait_calls("views.open", 1).remove(0);
    assert_eq!(opened.get("error"), None, "{opened}");
    let view = &opened["params"]["view"];
    // A stranger's form is refused in the form itself.
    let ack = api.submit("U8", view, "main");
    assert_eq!(ack["payload"]["response_action"], "errors", "{ack}");
    let ack = api.submit("U7", view, "release/2.0");
    assert_eq!(ack.get("payload"), None, "the form closes: {ack}");
    let asked = wait_output(asker, Duration::from_secs(20));
    assert_eq!(String::from_utf8_lossy(&asked.stdout).trim(), "release/2.0");

    // An approval denied with a reason, through its form.
    let asker = spawn_ask(&p, &["--type", "approval", "--timeout", "60", "Deploy?"]);
    let posted = api.wait_calls("chat.postMessage", 3).remove(2);
    api.press(
        "U7",
        "C42",
        "1795860000.000003",
        &value_of(&posted, "Deny with reason…"),
    );
    let opened = api.wait_calls("views.open", 2).remove(1);
    assert_eq!(opened.get("error"), None, "{opened}");
    api.submit("U7", &opened["params"]["view"], "wait for the changelog");
    let asked = wait_output(asker, Duration::from_secs(20));
    assert_eq!(
        String::from_utf8_lossy(&asked.stdout).trim(),
        "denied: wait for the changelog"
    );

    // Slack asks for a new connection: the app opens one, and presses still answer.
    api.disconnect();
    eventually("a second socket", Duration::from_secs(20), || {
        api.connections() >= 2
    });
    let asker = spawn_ask(
        &p,
        &["--type", "yesno", "--timeout", "60", "Retry the job?"],
    );
    let posted = api.wait_calls("chat.postMessage", 4).remove(3);
    api.press("U7", "C42", "1795860000.000004", &value_of(&posted, "yes"));
    let asked = wait_output(asker, Duration::from_secs(20));
    assert_eq!(String::from_utf8_lossy(&asked.stdout).trim(), "yes");

    assert_eq!(p.history().len(), 4);
    // A second apps.connections.open after the refresh, and every message updated.
    api.wait_calls("apps.connections.open", 2);
    api.wait_calls("chat.update", 4);

    // Every call hitl made was one Slack's documentation allows.
    let refused: Vec<Value> = api
        .calls()
        .into_iter()
        .filter(|c| c.get("error").is_some())
        .collect();
    assert!(refused.is_empty(), "{refused:#?}");
}

/// `[hook] approvals = { Bash = 2 }`: a dangerous command is asked whatever "always
/// allow" rule covers it, offers no rule, and waits for a second person: the user's
/// approval at the desk is one, a Slack approver's the other.
#[test]
fn a_tool_that_needs_two_people_is_asked_past_its_rule_and_waits_for_a_second() {
    let (p, api, _listener) = slack_project(
        "approvers = [\"U7\", \"U9\"]\nowner = \"U9\"\n",
        &["--attended", "--ui", "none", "--http", "127.0.0.1:0"],
    );
    // Read by the hook at each call.
    p.project_config("[hook]\napprovals = { Bash = 2 }\nallow = [\"Bash(git push --force:*)\"]\n");
    eventually("the socket open", Duration::from_secs(20), || {
        api.connections() >= 1
    });
    let input = json!({
        "session_id": "abc123", "cwd": p.dir, "hook_event_name": "PreToolUse",
        "tool_name": "Bash", "tool_input": { "command": "git push --force origin main" },
    });
    let mut hook = p
        .hitl()
        .args(["hook", "pre-tool-use"])
        .env("CLAUDE_PROJECT_DIR", &p.dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    hook.stdin
        .take()
        .unwrap()
        .write_all(input.to_string().as_bytes())
        .unwrap();
    // Asked, though the rule covers it: two people's, and no rule offered.
    let q = p.wait_pending(1, Duration::from_secs(10)).remove(0);
    assert_eq!(q["approvals"], 2, "{q}");
    assert!(q["context"].get("always_allow").is_none(), "{q}");
    // Someone is at the desk, and it still goes to Slack: the desk is one person.
    let posted = api.wait_calls("chat.postMessage", 1).remove(0);
    assert!(
        !buttons(&posted)
            .iter()
            .any(|(t, _)| t.starts_with("Always")),
        "{posted}"
    );
    let id = q["id"].as_str().unwrap().to_string();
    let out = p.run(&["answer", &id, "--approve"]);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("approval 1 of 2"),
        "{out:?}"
    );
    // The owner's press in Slack is the same person: refused.
    let approve = value_of(&posted, "Approve");
    api.press("U9", "C42", "1795860000.000001", &approve);
    let told = api.wait_calls("chat.postEphemeral", 1).remove(0);
    assert!(
        told["params"]["text"]
            .as_str()
            .unwrap()
            .contains("approved this already"),
        "{told}"
    );
    // Another approver's press is the second person's: allowed.
    api.press("U7", "C42", "1795860000.000001", &approve);
    let out = wait_output(hook, Duration::from_secs(20));
    let decided: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        decided["hookSpecificOutput"]["permissionDecision"], "allow",
        "{decided}"
    );
    // History follows the answer by a moment (it is written once the spool is quiet).
    let mut by = String::new();
    crate::support::eventually("its end in history", Duration::from_secs(10), || {
        by = p
            .history()
            .first()
            .and_then(|h| h["responded_by"].as_str())
            .unwrap_or_default()
            .to_string();
        !by.is_empty()
    });
    assert!(by.contains(" + slack:@mU7"), "{by}");
}
