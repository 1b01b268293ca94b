//! Telegram: a bot asks in one chat when nobody is at the desk, and a press or a
//! reply there answers.
//!
//! Outbound only: the bot long-polls the Bot API (`getUpdates`), so no public URL
//! or open port is needed. A request is sent (`sendMessage`) when the escalation
//! ladder says it reaches the chat (by default, once nobody is present to answer it
//! here: as it is queued, or when the last UI leaves while it waits), and to a
//! teammate's chat (`[escalation] teammate = ["telegram:CHAT_ID"]`) at that step, with buttons for the answers that fit one (Approve / Deny / Always for
//! approvals and permissions, one per option for yes/no and selects); a reply to
//! the message answers text questions, and denies an approval with the reply as its
//! reason. Presses and replies from any chat but `[telegram] chat_id` (where only
//! `users` may answer, when it is set) and the teammates' chats change nothing. Every press is acknowledged
//! (`answerCallbackQuery`), and when the request ends, wherever it was answered,
//! the message is edited to say how, by whom and when, its buttons gone.
//!
//! Configured in the user's settings only (a project's settings sit beside the
//! agents), and `api_url` must be https, or http to loopback.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use anyhow::{Context, Result, anyhow, bail};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;

use crate::{
    broker::{BrokerHandle, Change, Finished, PendingRequest},
    config::TelegramSettings,
    protocol::{AnswerShape, Reply, text::visible},
    store::TrailStep,
    ui::chat::{self, cut, escaped},
};

/// How long one `getUpdates` call holds, in seconds (Telegram allows up to 50).
const POLL_SECONDS: u64 = 25;

/// Most of a message's text Telegram takes is 4096 characters; the question is cut
/// well inside it.
const QUESTION_CHARS: usize = 2500;

/// Refuses settings the bot cannot use, saying which and why.
pub fn validate(settings: &TelegramSettings) -> Result<()> {
    let token = settings.bot_token.trim();
    let well_formed = token.split_once(':').is_some_and(|(id, secret)| {
        !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit()) && !secret.is_empty()
    }) && token
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b':' | b'_' | b'-'));
    if !well_formed {
        bail!("[telegram] bot_token is not a bot token (123456:ABC…, from @BotFather)");
    }
    let url = reqwest::Url::parse(&settings.api_url)
        .map_err(|e| anyhow!("[telegram] api_url {:?}: {e}", settings.api_url))?;
    let (_, loopback) = crate::runtime::tls::host_of(&url);
    match url.scheme() {
        "https" => Ok(()),
        "http" if loopback => Ok(()),
        _ => bail!(
            "[telegram] api_url {:?}: https, or http to loopback only (the bot's token travels in it)",
            settings.api_url
        ),
    }
}

/// The Bot API, as this bot calls it.
#[derive(Clone)]
struct Api {
    client: reqwest::Client,
    /// `{api_url}/bot{token}/`: holds the token, so never logged.
    base: String,
}

/// The Bot API's envelope: `{"ok": true, "result": …}` or `{"ok": false,
/// "error_code": …, "description": …}`.
#[derive(Deserialize)]
struct Envelope {
    ok: bool,
    #[serde(default)]
    result: Value,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    error_code: Option<u16>,
}

impl Api {
    async fn call(&self, method: &str, params: Value, timeout: Duration) -> Result<Value> {
        let r = self
            .client
            .post(format!("{}{method}", self.base))
            .timeout(timeout)
            .json(&params)
            .send()
            .await
            // Said without the URL, which holds the token.
            .map_err(|e| {
                anyhow!(
                    "{method}: {}",
                    crate::runtime::tls::error_chain(&e.without_url())
                )
            })?;
        let status = r.status();
        let body: Envelope = r
            .json()
            .await
            .map_err(|e| anyhow!("{method}: the Bot API answered {status} with no JSON: {e}"))?;
        if !body.ok {
            bail!(
                "{method}: the Bot API said {} {}",
                body.error_code.unwrap_or(status.as_u16()),
                body.description.unwrap_or_default()
            );
        }
        Ok(body.result)
    }
}

/// A request's message in a chat.
#[derive(Debug, Clone)]
struct Sent {
    chat_id: i64,
    message_id: i64,
    /// Its text as sent (HTML), to be edited with the end below it.
    text: String,
}

/// What the bot knows: each request's messages, and which request a message (by
/// chat and id) is.
#[derive(Default)]
struct State {
    by_request: HashMap<String, Vec<Sent>>,
    by_message: HashMap<(i64, i64), String>,
}

/// The chats the bot asks in: the user's own, and the teammates' the ladder names.
#[derive(Debug, Clone)]
pub struct Chats {
    /// `[telegram]`.
    settings: TelegramSettings,
    /// `[escalation] teammate`'s `telegram:CHAT_ID`s.
    teammates: Vec<i64>,
}

impl Chats {
    /// The user's chat from `settings`, and the teammates' chats every ladder of
    /// `escalation` names.
    pub fn new(
        settings: TelegramSettings,
        escalation: &crate::config::EscalationSettings,
    ) -> Chats {
        let teammates = escalation
            .teammates("telegram")
            .iter()
            .filter_map(|t| t.parse().ok())
            .collect();
        Chats {
            settings,
            teammates,
        }
    }

    /// Whether `user` in `chat` may answer: in the user's chat, anyone listed in
    /// `users` (anyone there when it is empty); in a teammate's chat, anyone there.
    fn allowed(&self, chat: Option<i64>, user: Option<i64>) -> bool {
        let s = &self.settings;
        let own = chat == Some(s.chat_id)
            && (s.users.is_empty() || user.is_some_and(|u| s.users.contains(&u)));
        own || chat.is_some_and(|c| self.teammates.contains(&c))
    }
}

type Shared = Arc<Mutex<State>>;

fn lock(s: &Shared) -> std::sync::MutexGuard<'_, State> {
    s.lock().unwrap_or_else(|p| p.into_inner())
}

/// Starts the bot: a task sending and editing messages as the broker's requests
/// come and go, and one long-polling for presses and replies.
pub fn start(broker: BrokerHandle, chats: Chats) -> tokio::task::JoinHandle<()> {
    let settings = &chats.settings;
    let https = settings.api_url.starts_with("https://");
    let client = crate::runtime::tls::http_client(https)
        .and_then(|b| {
            Ok(b.redirect(reqwest::redirect::Policy::none())
                .user_agent(concat!("hitl/", env!("CARGO_PKG_VERSION")))
                .build()?)
        })
        .unwrap_or_default();
    let api = Api {
        client,
        base: format!(
            "{}/bot{}/",
            settings.api_url.trim_end_matches('/'),
            settings.bot_token.trim()
        ),
    };
    let state: Shared = Arc::default();
    let chats = Arc::new(chats);
    let sender = tokio::spawn(send_loop(
        broker.clone(),
        api.clone(),
        chats.clone(),
        state.clone(),
    ));
    tokio::spawn(async move {
        poll_loop(broker, api, chats, state).await;
        sender.abort();
    })
}

/// Sends each request to the chats the escalation ladder says it reaches, and
/// edits its messages when it ends.
async fn send_loop(broker: BrokerHandle, api: Api, chats: Arc<Chats>, state: Shared) {
    let mut changes = broker.subscribe();
    loop {
        match changes.recv().await {
            Ok(Change::Reached(r)) => {
                if r.reaches("telegram") {
                    send(&broker, &api, chats.settings.chat_id, &state, &r.pending).await;
                }
                for &chat in &chats.teammates {
                    if r.reaches(&format!("telegram:{chat}")) {
                        send(&broker, &api, chat, &state, &r.pending).await;
                    }
                }
            }
            Ok(Change::Finished(f)) => ended(&api, &state, &f).await,
            Ok(_) => {}
            Err(RecvError::Lagged(n)) => {
                tracing::warn!("telegram: {n} changes of the queue went by untold");
            }
            Err(RecvError::Closed) => return,
        }
    }
}

/// The buttons for `p`: each with its `callback_data`, `h:{id}:{choice}` (at most
/// 64 bytes, as Telegram takes).
fn keyboard(p: &PendingRequest) -> Option<Value> {
    let id = &p.request.id;
    let button = |title: &str, choice: &str| json!({ "text": cut(&visible(title), 60), "callback_data": chat::button_data(id, choice) });
    let rows: Vec<Vec<Value>> = match &p.answer_shape {
        AnswerShape::Decision { always, .. } => {
            let mut rows = vec![vec![button("Approve", "a"), button("Deny", "d")]];
            if let Some(rule) = always {
                rows.push(vec![button(&format!("Always allow {rule}"), "A")]);
            }
            rows
        }
        AnswerShape::Choice {
            options,
            many: false,
            ..
        } => options
            .iter()
            .take(20)
            .enumerate()
            .map(|(i, o)| vec![button(o, &i.to_string())])
            .collect(),
        _ => return None,
    };
    (format!("h:{id}:A").len() <= 64).then(|| json!({ "inline_keyboard": rows }))
}

/// The message for `p`: who asks, the question, what the call does, how to answer.
fn message_text(p: &PendingRequest) -> String {
    let r = &p.request;
    let mut text = format!(
        "<b>{}</b> asks ({}):\n{}",
        escaped(&r.agent_name),
        r.kind.as_str(),
        escaped(&cut(&r.content, QUESTION_CHARS))
    );
    if let Some(command) = r
        .context
        .get("tool_input")
        .and_then(|i| i.get("command"))
        .and_then(Value::as_str)
    {
        text.push_str(&format!("\n<pre>{}</pre>", escaped(&cut(command, 1000))));
    }
    let hint = match &p.answer_shape {
        AnswerShape::Decision { .. } => "Reply to this message to deny with a reason.",
        AnswerShape::Choice { many: false, .. } => "Press one, or reply with your answer.",
        _ => "Reply to this message with your answer.",
    };
    text.push_str(&format!("\n\n<i>{hint}</i>"));
    text
}

/// Sends `p` to `chat_id`, once; how it went goes into its trail.
async fn send(broker: &BrokerHandle, api: &Api, chat_id: i64, state: &Shared, p: &PendingRequest) {
    let sent_there = |s: &State| {
        s.by_request
            .get(&p.request.id)
            .is_some_and(|m| m.iter().any(|m| m.chat_id == chat_id))
    };
    if sent_there(&lock(state)) {
        return;
    }
    let text = message_text(p);
    let mut params = json!({
        "chat_id": chat_id,
        "text": text,
        "parse_mode": "HTML",
        "link_preview_options": { "is_disabled": true },
    });
    if let Some(k) = keyboard(p) {
        params["reply_markup"] = k;
    }
    let to = format!("chat {chat_id}");
    let sent = api
        .call("sendMessage", params, Duration::from_secs(15))
        .await
        .and_then(|m| {
            m["message_id"]
                .as_i64()
                .context("sendMessage gave no message_id")
        });
    let id = &p.request.id;
    let step = match sent {
        Ok(message_id) => {
            let mut s = lock(state);
            s.by_message.insert((chat_id, message_id), id.clone());
            s.by_request.entry(id.clone()).or_default().push(Sent {
                chat_id,
                message_id,
                text,
            });
            TrailStep::notified(
                id,
                "telegram",
                &to,
                Ok(()),
                json!({ "message_id": message_id }),
            )
        }
        Err(e) => {
            tracing::warn!("telegram: {e:#}");
            TrailStep::notified(id, "telegram", &to, Err(&format!("{e:#}")), Value::Null)
        }
    };
    broker.note_trail(step);
}

/// Edits `f`'s messages, if it was sent, to say how it ended; their buttons go.
async fn ended(api: &Api, state: &Shared, f: &Finished) {
    let Some(messages) = lock(state).by_request.remove(f.id()) else {
        return;
    };
    let end = chat::outcome(f, |what| format!("<b>{what}</b>"));
    for sent in messages {
        let text = format!(
            "{}\n\n{end}",
            sent.text
                .rsplit_once("\n\n<i>")
                .map_or(sent.text.as_str(), |(q, _)| q),
        );
        let params = json!({
            "chat_id": sent.chat_id,
            "message_id": sent.message_id,
            "text": text,
            "parse_mode": "HTML",
            "link_preview_options": { "is_disabled": true },
        });
        if let Err(e) = api
            .call("editMessageText", params, Duration::from_secs(15))
            .await
        {
            tracing::warn!("telegram: {e:#}");
        }
        // Replies to it are no longer answers; a late press finds nothing pending.
        lock(state)
            .by_message
            .remove(&(sent.chat_id, sent.message_id));
    }
}

/// Long-polls for presses and replies, and answers with them.
async fn poll_loop(broker: BrokerHandle, api: Api, chats: Arc<Chats>, state: Shared) {
    let mut offset: i64 = 0;
    let mut wait = Duration::from_secs(1);
    loop {
        let params = json!({
            "offset": offset,
            "timeout": POLL_SECONDS,
            "allowed_updates": ["message", "callback_query"],
        });
        let updates = match api
            .call("getUpdates", params, Duration::from_secs(POLL_SECONDS + 10))
            .await
        {
            Ok(u) => {
                wait = Duration::from_secs(1);
                u
            }
            Err(e) => {
                tracing::warn!("telegram: {e:#}; trying again in {}s", wait.as_secs());
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(Duration::from_secs(60));
                continue;
            }
        };
        for update in updates.as_array().into_iter().flatten() {
            if let Some(id) = update["update_id"].as_i64() {
                offset = offset.max(id + 1);
            }
            if let Some(press) = update.get("callback_query") {
                pressed(&broker, &api, &chats, press).await;
            } else if let Some(message) = update.get("message") {
                replied(&broker, &chats, &state, message).await;
            }
        }
    }
}

/// Who the person is, for requests that need several people's approval: this
/// machine's user in their own chat with the bot (or as `owner`), else the
/// Telegram user.
fn approver(settings: &TelegramSettings, from: &Value) -> String {
    let id = from["id"].as_i64();
    if id == Some(settings.chat_id) || (id.is_some() && id == settings.owner) {
        crate::broker::LOCAL_APPROVER.to_string()
    } else {
        format!("telegram:{}", id.unwrap_or_default())
    }
}

/// Who answered, as history credits it: `telegram:@name` or `telegram:ID`.
fn responder(from: &Value) -> String {
    match from["username"].as_str() {
        Some(name) => format!("telegram:@{name}"),
        None => format!("telegram:{}", from["id"].as_i64().unwrap_or_default()),
    }
}

/// A button pressed: answered if it may be, acknowledged whatever happens.
async fn pressed(broker: &BrokerHandle, api: &Api, chats: &Chats, press: &Value) {
    let chat = press["message"]["chat"]["id"].as_i64();
    let user = press["from"]["id"].as_i64();
    let said = if !chats.allowed(chat, user) {
        tracing::warn!("telegram: a press from chat {chat:?}, user {user:?} ignored");
        "Not yours to answer.".to_string()
    } else {
        match press_reply(broker, press["data"].as_str().unwrap_or_default()).await {
            Ok((seq, reply, done)) => {
                let who = approver(&chats.settings, &press["from"]);
                match broker
                    .respond_as(seq, reply, &responder(&press["from"]), &who)
                    .await
                {
                    Ok(_) => done,
                    Err(e) => e.to_string(),
                }
            }
            Err(e) => e,
        }
    };
    let params = json!({
        "callback_query_id": press["id"].as_str().unwrap_or_default(),
        "text": cut(&said, 190),
    });
    if let Err(e) = api
        .call("answerCallbackQuery", params, Duration::from_secs(15))
        .await
    {
        tracing::warn!("telegram: {e:#}");
    }
}

/// The reply a button's data gives, for the request still pending, and what to tell
/// the presser.
async fn press_reply(broker: &BrokerHandle, data: &str) -> Result<(u64, Reply, String), String> {
    let (p, choice) = chat::pressed_request(broker, data).await?;
    let (reply, done) = chat::reply_for(&p, choice)?;
    Ok((p.seq, reply, done))
}

/// A message in the chat: a reply to one of the bot's answers its request (text
/// for a question, the reason of a denial for an approval).
async fn replied(broker: &BrokerHandle, chats: &Chats, state: &Shared, message: &Value) {
    let Some(to) = message["reply_to_message"]["message_id"].as_i64() else {
        return;
    };
    let chat = message["chat"]["id"].as_i64();
    let Some(id) = lock(state)
        .by_message
        .get(&(chat.unwrap_or_default(), to))
        .cloned()
    else {
        return;
    };
    let user = message["from"]["id"].as_i64();
    if !chats.allowed(chat, user) {
        tracing::warn!("telegram: a reply from chat {chat:?}, user {user:?} ignored");
        return;
    }
    let Some(text) = message["text"].as_str() else {
        return;
    };
    let Some(p) = broker.find(&id).await else {
        return;
    };
    let reply = match &p.answer_shape {
        AnswerShape::Decision { .. } => Reply::Approval {
            approved: false,
            comment: Some(text.to_string()),
            remember: None,
        },
        _ => match p.request.interpret(text) {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!("telegram: a reply that does not answer {id}: {e}");
                return;
            }
        },
    };
    let who = approver(&chats.settings, &message["from"]);
    if let Err(e) = broker
        .respond_as(p.seq, reply, &responder(&message["from"]), &who)
        .await
    {
        tracing::warn!("telegram: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(token: &str, url: &str) -> TelegramSettings {
        TelegramSettings {
            bot_token: token.into(),
            chat_id: 42,
            users: vec![7],
            owner: None,
            api_url: url.into(),
        }
    }

    #[test]
    fn settings_are_checked() {
        validate(&settings("123:ABC-def_9", "https://api.telegram.org")).unwrap();
        validate(&settings("123:ABC", "http://127.0.0.1:8081")).unwrap();
        assert!(validate(&settings("nonsense", "https://api.telegram.org")).is_err());
        assert!(validate(&settings("123:a/b", "https://api.telegram.org")).is_err());
        let e = validate(&settings("123:ABC", "http://bot.example")).unwrap_err();
        assert!(e.to_string().contains("loopback"), "{e}");
    }

    #[test]
    fn only_the_chat_and_its_listed_users_and_the_teammates_chats_answer() {
        let s = settings("1:a", "https://api.telegram.org");
        let escalation: crate::config::EscalationSettings =
            toml::from_str("teammate = [\"telegram:-5\"]\n[urgent]\nteammate = [\"telegram:77\"]")
                .unwrap();
        let chats = Chats::new(s.clone(), &escalation);
        assert_eq!(chats.teammates, [-5, 77]);
        assert!(chats.allowed(Some(42), Some(7)));
        assert!(!chats.allowed(Some(42), Some(8)));
        assert!(!chats.allowed(Some(99), Some(7)));
        assert!(chats.allowed(Some(-5), Some(8)));
        assert!(chats.allowed(Some(77), Some(77)));
        let anyone = Chats::new(TelegramSettings { users: vec![], ..s }, &Default::default());
        assert!(anyone.allowed(Some(42), Some(8)));
        assert!(!anyone.allowed(None, Some(8)));
        assert!(!anyone.allowed(Some(-5), Some(8)));
    }

    #[test]
    fn text_is_escaped_for_telegrams_escaped() {
        assert_eq!(escaped("<b>&x\u{1b}"), "&lt;b&gt;&amp;x\\u{1b}");
    }
}
