//! Telegram: with nobody at the desk, a request reaches the chat through the Bot
//! API, and a press or a reply there answers it. The Bot API is a stand-in
//! (tests/it/telegram_api.py) written from Telegram's documentation, which checks
//! every parameter hitl sends against the documented ones and types, and plays the
//! user's presses and replies through getUpdates.

use std::{
    io::Write,
    process::{Child, Stdio},
    time::Duration,
};

use reqwest::blocking::Client;
use serde_json::{Value, json};

use crate::support::{Project, eventually, spawn_ask, stand_in, wait_output};

const TOKEN: &str = "123456:TEST-token_x";

struct BotApi {
    child: Child,
    base: String,
}

impl BotApi {
    fn start() -> BotApi {
        let (child, base, _) = stand_in("telegram_api.py", &[TOKEN]);
        BotApi { child, base }
    }

    /// Every call hitl made but getUpdates.
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

    /// Hands `update` to the bot's next getUpdates.
    fn update(&self, update: Value) {
        let r = Client::new()
            .post(format!("{}/test/update", self.base))
            .json(&update)
            .send()
            .unwrap();
        assert!(r.status().is_success());
    }

    fn press(&self, id: &str, chat: i64, user: i64, message_id: i64, data: &str) {
        self.update(json!({ "callback_query": {
            "id": id,
            "from": { "id": user, "is_bot": false, "first_name": "Ana", "username": format!("user{user}") },
            "message": { "message_id": message_id, "date": 0, "chat": { "id": chat, "type": "private" } },
            "chat_instance": "1",
            "data": data,
        }}));
    }

    fn reply(&self, chat: i64, user: i64, to: i64, text: &str) {
        self.update(json!({ "message": {
            "message_id": 9000 + to,
            "date": 0,
            "chat": { "id": chat, "type": "private" },
            "from": { "id": user, "is_bot": false, "first_name": "Ana", "username": format!("user{user}") },
            "text": text,
            "reply_to_message": { "message_id": to, "date": 0, "chat": { "id": chat, "type": "private" } },
        }}));
    }
}

impl Drop for BotApi {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn with_nobody_at_the_desk_a_permission_request_is_answered_in_the_chat() {
    let api = BotApi::start();
    let p = Project::new();
    p.user_config(&format!(
        "[telegram]\nbot_token = \"{TOKEN}\"\nchat_id = 42\nusers = [7]\napi_url = \"{}\"\n",
        api.base
    ));
    // Nobody at any UI of the listener: only the chat can answer.
    let _listener = p.listen(&["--ui", "none", "--http", "127.0.0.1:0"]);
    let info: Value =
        serde_json::from_slice(&std::fs::read(p.helpers().join(".listener.json")).unwrap())
            .unwrap();
    assert_eq!(info["present"], json!([]), "{info}");
    assert_eq!(info["reachable"], json!(["telegram"]), "{info}");

    // A real hook call, as Claude Code makes it: it waits for the chat instead of
    // stepping aside to Claude Code's prompt.
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
    let sent = api.wait_calls("sendMessage", 1).remove(0);
    assert_eq!(sent.get("error"), None, "the Bot API took it: {sent}");
    let params = &sent["params"];
    assert_eq!(params["chat_id"], 42);
    assert_eq!(params["parse_mode"], "HTML");
    let text = params["text"].as_str().unwrap();
    assert!(text.contains("rm -rf build/"), "{text}");
    let rows = params["reply_markup"]["inline_keyboard"]
        .as_array()
        .unwrap();
    let titles: Vec<&str> = rows
        .iter()
        .flat_map(|r| r.as_array().unwrap())
        .map(|b| b["text"].as_str().unwrap())
        .collect();
    assert_eq!(&titles[..2], ["Approve", "Deny"], "{params}");
    let approve = rows[0][0]["callback_data"].as_str().unwrap().to_string();
    // sendMessage's result, as the stand-in numbered it.
    let message_id = 1;

    // Presses from another chat, and from someone in the chat not listed: ignored,
    // each acknowledged.
    api.press("q1", 99, 7, message_id, &approve);
    api.press("q2", 42, 8, message_id, &approve);
    let acks = api.wait_calls("answerCallbackQuery", 2);
    for ack in &acks {
        assert_eq!(ack.get("error"), None, "{ack}");
        assert_eq!(ack["params"]["text"], "Not yours to answer.", "{ack}");
    }
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        p.pending().len() == 1,
        "still pending after the strangers' presses"
    );

    // The user's press: allowed.
    api.press("q3", 42, 7, message_id, &approve);
    let out = wait_output(hook, Duration::from_secs(20));
    assert!(out.status.success(), "{out:?}");
    let decided: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        decided,
        json!({ "hookSpecificOutput": { "hookEventName": "PermissionRequest",
            "decision": { "behavior": "allow" } } })
    );
    let acks = api.wait_calls("answerCallbackQuery", 3);
    assert_eq!(acks[2]["params"]["callback_query_id"], "q3");
    assert_eq!(acks[2]["params"]["text"], "Approved.");
    assert_eq!(p.history()[0]["responded_by"], "telegram:@user7");
    // The message says who answered, its buttons gone.
    let edit = api.wait_calls("editMessageText", 1).remove(0);
    assert_eq!(edit.get("error"), None, "{edit}");
    assert_eq!(edit["params"]["message_id"], message_id);
    let edited = edit["params"]["text"].as_str().unwrap();
    assert!(
        edited.contains("Approved</b> by telegram:@user7"),
        "{edited}"
    );
    assert!(edit["params"].get("reply_markup").is_none(), "{edit}");

    // The decision's record: sent to the chat, delivered; approved there, by whom.
    let id = p.history()[0]["id"].as_str().unwrap().to_string();
    let mut record = Value::Null;
    eventually("the trail recorded", Duration::from_secs(10), || {
        let out = p.run(&["history", "--id", &id, "--json"]);
        record = serde_json::from_slice::<Value>(&out.stdout).unwrap()[0].clone();
        record["trail"].as_array().is_some_and(|t| t.len() >= 2)
    });
    // Nobody at the desk: the ladder's away step, then the message it sent.
    assert_eq!(record["trail"][0]["detail"]["step"], "away", "{record}");
    let step = &record["trail"][1];
    assert_eq!(step["step"], "notified", "{record}");
    assert_eq!(step["surface"], "telegram", "{record}");
    assert_eq!(step["detail"]["to"], "chat 42", "{record}");
    assert_eq!(step["detail"]["delivered"], true, "{record}");
    let shown = p.run(&["history", "--id", &id]);
    let shown = String::from_utf8_lossy(&shown.stdout);
    assert!(
        shown.contains("notified telegram  chat 42 delivered"),
        "{shown}"
    );
    assert!(shown.contains("answered by telegram:@user7"), "{shown}");

    // A text question: answered by a reply to its message.
    let asker = spawn_ask(&p, &["--timeout", "60", "Which branch do I release from?"]);
    let sent = api.wait_calls("sendMessage", 2).remove(1);
    assert_eq!(sent.get("error"), None, "{sent}");
    assert!(sent["params"].get("reply_markup").is_none(), "{sent}");
    api.reply(99, 7, 2, "not from here");
    api.reply(42, 7, 2, "release/2.0");
    let asked = wait_output(asker, Duration::from_secs(20));
    assert_eq!(String::from_utf8_lossy(&asked.stdout).trim(), "release/2.0");
    let edit = api.wait_calls("editMessageText", 2).remove(1);
    assert!(
        edit["params"]["text"]
            .as_str()
            .unwrap()
            .contains("Answered: release/2.0"),
        "{edit}"
    );

    // An approval denied with a reason, by a reply.
    let asker = spawn_ask(&p, &["--type", "approval", "--timeout", "60", "Deploy?"]);
    api.wait_calls("sendMessage", 3);
    api.reply(42, 7, 3, "wait for the changelog");
    let asked = wait_output(asker, Duration::from_secs(20));
    assert_eq!(
        String::from_utf8_lossy(&asked.stdout).trim(),
        "denied: wait for the changelog"
    );

    // Every call hitl made was one the Bot API's documentation allows.
    let refused: Vec<Value> = api
        .calls()
        .into_iter()
        .filter(|c| c.get("error").is_some())
        .collect();
    assert!(refused.is_empty(), "{refused:#?}");
}

#[test]
fn a_request_answered_at_the_desk_never_reaches_the_chat() {
    let api = BotApi::start();
    let p = Project::new();
    p.user_config(&format!(
        "[telegram]\nbot_token = \"{TOKEN}\"\nchat_id = 42\napi_url = \"{}\"\n",
        api.base
    ));
    // Someone at the desk (`--attended`): the chat is not bothered.
    let _listener = p.listen(&["--attended", "--ui", "none", "--http", "127.0.0.1:0"]);
    let asker = spawn_ask(&p, &["--timeout", "60", "Tabs or spaces?"]);
    let q = p.wait_pending(1, Duration::from_secs(10)).remove(0);
    let out = p.run(&["answer", q["id"].as_str().unwrap(), "tabs"]);
    assert!(out.status.success(), "{out:?}");
    let _ = wait_output(asker, Duration::from_secs(10));
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        api.calls().is_empty(),
        "nothing sent while someone is present: {:?}",
        api.calls()
    );
}

#[test]
fn two_people_must_approve_and_one_denial_ends_it() {
    let api = BotApi::start();
    let p = Project::new();
    // A team's group: the owner (7) and a teammate (8).
    p.user_config(&format!(
        "[telegram]\nbot_token = \"{TOKEN}\"\nchat_id = -100\nusers = [7, 8]\nowner = 7\napi_url = \"{}\"\n",
        api.base
    ));
    // Someone at the desk: the request goes to the group all the same, since it
    // needs a second person.
    let _listener = p.listen(&["--attended", "--ui", "none", "--http", "127.0.0.1:0"]);
    let asker = spawn_ask(
        &p,
        &[
            "--type",
            "approval",
            "--approvals",
            "2",
            "--timeout",
            "60",
            "Drop the old table?",
        ],
    );
    let q = p.wait_pending(1, Duration::from_secs(10)).remove(0);
    let id = q["id"].as_str().unwrap().to_string();
    let sent = api.wait_calls("sendMessage", 1).remove(0);
    assert_eq!(sent["params"]["chat_id"], -100, "{sent}");
    let approve = sent["params"]["reply_markup"]["inline_keyboard"][0][0]["callback_data"]
        .as_str()
        .unwrap()
        .to_string();

    // The user approves at the desk: counted, and it waits.
    let out = p.run(&["answer", &id, "--approve"]);
    assert!(out.status.success(), "{out:?}");
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("approval 1 of 2 recorded"), "{said}");
    assert_eq!(p.pending().len(), 1, "still waiting for a second person");
    // Not twice, from any surface of theirs: again at the desk, or as the group's owner.
    let out = p.run(&["answer", &id, "--approve"]);
    assert!(!out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("approved this already"),
        "{out:?}"
    );
    api.press("v1", -100, 7, 1, &approve);
    let acks = api.wait_calls("answerCallbackQuery", 1);
    assert!(
        acks[0]["params"]["text"]
            .as_str()
            .unwrap()
            .contains("approved this already"),
        "{acks:?}"
    );
    assert_eq!(p.pending().len(), 1);

    // The teammate's approval is the second: approved, credited to both.
    api.press("v2", -100, 8, 1, &approve);
    let asked = wait_output(asker, Duration::from_secs(20));
    assert_eq!(String::from_utf8_lossy(&asked.stdout).trim(), "approved");
    // History follows the answer by a moment (it is written once the spool is quiet).
    let mut history = Vec::new();
    crate::support::eventually("its end in history", Duration::from_secs(10), || {
        history = p.history();
        history
            .first()
            .is_some_and(|h| h["responded_by"].is_string())
    });
    let ended = &history[0];
    let by = ended["responded_by"].as_str().unwrap();
    assert!(
        by.starts_with("cli:") && by.ends_with(" + telegram:@user8"),
        "{ended}"
    );
    // Each vote in the record.
    let mut record = Value::Null;
    eventually("both votes recorded", Duration::from_secs(10), || {
        let out = p.run(&["history", "--id", &id, "--json"]);
        record = serde_json::from_slice::<Value>(&out.stdout).unwrap()[0].clone();
        record["trail"]
            .as_array()
            .is_some_and(|t| t.iter().filter(|s| s["step"] == "vote").count() == 2)
    });

    // One denial ends another at once, whoever approved before.
    let asker = spawn_ask(
        &p,
        &[
            "--type",
            "approval",
            "--approvals",
            "2",
            "--timeout",
            "60",
            "Rotate the keys?",
        ],
    );
    let q = p.wait_pending(1, Duration::from_secs(10)).remove(0);
    let out = p.run(&["answer", q["id"].as_str().unwrap(), "--approve"]);
    assert!(out.status.success(), "{out:?}");
    let sent = api.wait_calls("sendMessage", 2).remove(1);
    let deny = sent["params"]["reply_markup"]["inline_keyboard"][0][1]["callback_data"]
        .as_str()
        .unwrap()
        .to_string();
    api.press("v3", -100, 8, 2, &deny);
    let asked = wait_output(asker, Duration::from_secs(20));
    assert_eq!(String::from_utf8_lossy(&asked.stdout).trim(), "denied");
}

/// The escalation ladder with the real binary: nobody at the desk, a permission
/// request reaches the user's chat after `away_after`, a teammate's chat after
/// `teammate_after`, and unanswered it is denied at its deadline, both messages
/// told; `hitl history --id` lists every step. A teammate's press answers.
#[test]
fn the_ladder_reaches_the_chat_then_a_teammate_then_denies_at_the_deadline() {
    let api = BotApi::start();
    let p = Project::new();
    p.user_config(&format!(
        "[telegram]\nbot_token = \"{TOKEN}\"\nchat_id = 42\nusers = [7]\napi_url = \"{}\"\n\
         [escalation]\naway_after = 1\nteammate_after = 3\nteammate = [\"telegram:-100\"]\n\
         at_deadline = \"deny\"\n[hook]\ntimeout = 6\n",
        api.base
    ));
    let _listener = p.listen(&["--ui", "none", "--http", "127.0.0.1:0"]);
    let input = json!({
        "session_id": "abc123", "cwd": p.dir, "hook_event_name": "PermissionRequest",
        "tool_name": "Bash", "tool_input": { "command": "rm -rf build/" },
    });
    let asked = std::time::Instant::now();
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
    // The user's chat once nobody has been at the desk for a second; the teammate's
    // at three.
    let sent = api.wait_calls("sendMessage", 1).remove(0);
    assert!(
        asked.elapsed() >= Duration::from_secs(1),
        "{:?}",
        asked.elapsed()
    );
    assert_eq!(sent["params"]["chat_id"], 42, "{sent}");
    let sent = api.wait_calls("sendMessage", 2).remove(1);
    assert!(
        asked.elapsed() >= Duration::from_secs(3),
        "{:?}",
        asked.elapsed()
    );
    assert_eq!(sent["params"]["chat_id"], -100, "{sent}");
    // Nobody answers: a moment before the hook's own deadline, the ladder denies.
    let out = wait_output(hook, Duration::from_secs(20));
    assert!(out.status.success(), "{out:?}");
    let decided: Value = serde_json::from_slice(&out.stdout).unwrap();
    let decision = &decided["hookSpecificOutput"]["decision"];
    assert_eq!(decision["behavior"], "deny", "{decided}");
    assert!(
        decision["message"]
            .as_str()
            .is_some_and(|m| m.contains("escalation") && m.contains("deadline")),
        "{decided}"
    );
    let edits = api.wait_calls("editMessageText", 2);
    let chats: Vec<i64> = edits
        .iter()
        .map(|e| e["params"]["chat_id"].as_i64().unwrap())
        .collect();
    assert_eq!(chats.len(), 2);
    assert!(chats.contains(&42) && chats.contains(&-100), "{chats:?}");
    for e in &edits {
        let text = e["params"]["text"].as_str().unwrap();
        assert!(text.contains("Denied</b> by escalation"), "{text}");
    }
    // The record lists every step, in order.
    let id = p.history()[0]["id"].as_str().unwrap().to_string();
    let mut steps = Vec::new();
    eventually("the whole trail", Duration::from_secs(10), || {
        let out = p.run(&["history", "--id", &id, "--json"]);
        let record = serde_json::from_slice::<Value>(&out.stdout).unwrap()[0].clone();
        steps = record["trail"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|s| {
                let d = &s["detail"];
                let what = d["step"].as_str().or(d["to"].as_str()).unwrap_or_default();
                format!("{} {what}", s["step"].as_str().unwrap())
            })
            .collect();
        steps.len() >= 5
    });
    assert_eq!(
        steps,
        [
            "escalated away",
            "notified chat 42",
            "escalated teammate",
            "notified chat -100",
            "escalated deadline",
        ]
    );
    let shown = p.run(&["history", "--id", &id]);
    let shown = String::from_utf8_lossy(&shown.stdout);
    assert!(
        shown.contains("escalated ladder    teammate -> telegram:-100"),
        "{shown}"
    );
    assert!(
        shown.contains("escalated ladder    deadline denied"),
        "{shown}"
    );
    assert!(shown.contains("answered by escalation"), "{shown}");

    // Anyone in the teammate's chat may answer: their press approves.
    let asker = spawn_ask(&p, &["--type", "approval", "--timeout", "60", "Deploy?"]);
    let sent = api.wait_calls("sendMessage", 4).remove(3);
    assert_eq!(sent["params"]["chat_id"], -100, "{sent}");
    let approve = sent["params"]["reply_markup"]["inline_keyboard"][0][0]["callback_data"]
        .as_str()
        .unwrap()
        .to_string();
    api.press("t1", -100, 55, 4, &approve);
    let out = wait_output(asker, Duration::from_secs(20));
    assert!(
        String::from_utf8_lossy(&out.stdout).starts_with("approved"),
        "{out:?}"
    );
    assert_eq!(p.history()[0]["responded_by"], "telegram:@user55");
    let refused: Vec<Value> = api
        .calls()
        .into_iter()
        .filter(|c| c.get("error").is_some())
        .collect();
    assert!(refused.is_empty(), "{refused:#?}");
}
