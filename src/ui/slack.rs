//! Slack: an app asks in one channel when nobody is at the desk, and its
//! approvers answer there with buttons or a form.
//!
//! Outbound only: Socket Mode (`apps.connections.open` with the app-level token,
//! then a WebSocket the app opens), so no public URL or open port is needed. A
//! request is posted (`chat.postMessage`, Block Kit) when the escalation ladder says
//! it reaches Slack (by default, once nobody is present), and to a teammate's
//! channel (`[escalation] teammate = ["slack:C…"]`) at that step: who asks, the
//! question, the command, and buttons for the answers that fit one (Approve / Deny /
//! Always for approvals and permissions, one per option for yes/no and selects),
//! with **Deny with reason…** or **Answer…** opening a form (`views.open`, a modal)
//! for a denial's reason or a text answer. Only the members `[slack] approvers`
//! lists may answer: anyone else's press is told so (`chat.postEphemeral`) and
//! changes nothing, as does a press in any channel but these. Every envelope is acknowledged, and when the request ends,
//! wherever it was answered, its messages are updated (`chat.update`) to say how, by
//! whom and when, their buttons gone.
//!
//! Configured in the user's settings only; `api_url` must be https, or http to
//! loopback, and so must the socket's URL (`wss://`, or `ws://` to loopback).

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use anyhow::{Context, Result, anyhow, bail};
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;
use tokio_tungstenite::tungstenite::Message;

use crate::{
    broker::{BrokerHandle, Change, Finished, PendingRequest},
    config::SlackSettings,
    protocol::{AnswerShape, Reply, text::visible},
    store::TrailStep,
    ui::chat::{self, cut, escaped},
};

/// The question is cut well inside a section's 3,000 characters.
const QUESTION_CHARS: usize = 2500;

/// A modal's `callback_id`: a form hitl opened.
const FORM: &str = "hitl-answer";

/// Refuses settings the app cannot use, saying which and why.
pub fn validate(s: &SlackSettings) -> Result<()> {
    let token = |t: &str, prefix: &str, what: &str| {
        let ok = t.starts_with(prefix)
            && t.len() > prefix.len()
            && t.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
        if ok {
            Ok(())
        } else {
            Err(anyhow!("[slack] {what} is not one ({prefix}…)"))
        }
    };
    token(s.app_token.trim(), "xapp-", "app_token: an app-level token")?;
    token(s.bot_token.trim(), "xoxb-", "bot_token: a bot token")?;
    let id = |v: &str| !v.is_empty() && v.bytes().all(|b| b.is_ascii_alphanumeric());
    if !id(&s.channel) {
        bail!(
            "[slack] channel {:?}: a channel's id (C0123456789)",
            s.channel
        );
    }
    if s.approvers.is_empty() {
        bail!(
            "[slack] approvers lists nobody: the members who may answer, by member id (U0123456789)"
        );
    }
    if let Some(bad) = s.approvers.iter().chain(&s.owner).find(|a| !id(a)) {
        bail!("[slack] {bad:?} is not a member id (U0123456789)");
    }
    let url = reqwest::Url::parse(&s.api_url)
        .map_err(|e| anyhow!("[slack] api_url {:?}: {e}", s.api_url))?;
    secure(&url, "https", "http").map_err(|e| anyhow!("[slack] api_url {:?}: {e}", s.api_url))
}

/// Whether `url` is `secure` (https, wss), or `plain` to loopback only.
fn secure(url: &reqwest::Url, secure: &str, plain: &str) -> Result<()> {
    let (_, loopback) = crate::runtime::tls::host_of(url);
    match url.scheme() {
        s if s == secure => Ok(()),
        s if s == plain && loopback => Ok(()),
        _ => bail!("{secure}, or {plain} to loopback only (the tokens travel in it)"),
    }
}

/// The Web API, with one token.
#[derive(Clone)]
struct Api {
    client: reqwest::Client,
    base: String,
    bot_token: String,
    app_token: String,
}

impl Api {
    /// Calls `method` with `params` as JSON, with the bot token (or the app token for
    /// `apps.connections.open`); its result, or what Slack said was wrong.
    async fn call(&self, method: &str, params: Value) -> Result<Value> {
        let token = if method == "apps.connections.open" {
            &self.app_token
        } else {
            &self.bot_token
        };
        let r = self
            .client
            .post(format!("{}{method}", self.base))
            .timeout(Duration::from_secs(15))
            .bearer_auth(token)
            // Slack takes a JSON body without its charset with a warning.
            .header(
                reqwest::header::CONTENT_TYPE,
                "application/json; charset=utf-8",
            )
            .body(params.to_string())
            .send()
            .await
            .map_err(|e| anyhow!("{method}: {}", crate::runtime::tls::error_chain(&e)))?;
        let status = r.status();
        let body: Value = r
            .json()
            .await
            .map_err(|e| anyhow!("{method}: Slack answered {status} with no JSON: {e}"))?;
        if body["ok"] != true {
            bail!(
                "{method}: Slack said {}",
                body["error"].as_str().unwrap_or("an error")
            );
        }
        Ok(body)
    }
}

/// A request's message in a channel.
#[derive(Debug, Clone)]
struct Posted {
    channel: String,
    ts: String,
    /// Its blocks without the buttons, to be updated with the end below them.
    blocks: Vec<Value>,
    text: String,
}

#[derive(Default)]
struct State {
    by_request: HashMap<String, Vec<Posted>>,
}

type Shared = Arc<Mutex<State>>;

fn lock(s: &Shared) -> std::sync::MutexGuard<'_, State> {
    s.lock().unwrap_or_else(|p| p.into_inner())
}

/// The app's settings and the teammates' channels the ladder names.
pub struct Channels {
    settings: SlackSettings,
    teammates: Vec<String>,
}

impl Channels {
    /// `settings`' channel, and the teammates' channels `escalation` names.
    pub fn new(
        settings: SlackSettings,
        escalation: &crate::config::EscalationSettings,
    ) -> Channels {
        Channels {
            settings,
            teammates: escalation.teammates("slack"),
        }
    }

    /// Whether the app asks in `channel`: its own, or a teammate's.
    fn asks_in(&self, channel: &str) -> bool {
        self.settings.channel == channel || self.teammates.iter().any(|t| t == channel)
    }

    /// Whether member `user` may answer.
    fn approver(&self, user: &str) -> bool {
        self.settings.approvers.iter().any(|a| a == user)
    }

    /// Who the member is, for requests that need several people's approval.
    fn person(&self, user: &str) -> String {
        if self.settings.owner.as_deref() == Some(user) {
            crate::broker::LOCAL_APPROVER.to_string()
        } else {
            format!("slack:{user}")
        }
    }
}

/// Starts the app: a task posting and updating messages as the broker's requests
/// reach Slack and end, and one holding the Socket Mode connection for presses and
/// forms.
pub fn start(broker: BrokerHandle, channels: Channels) -> tokio::task::JoinHandle<()> {
    let s = &channels.settings;
    let client = crate::runtime::tls::http_client(s.api_url.starts_with("https://"))
        .and_then(|b| {
            Ok(b.redirect(reqwest::redirect::Policy::none())
                .user_agent(concat!("hitl/", env!("CARGO_PKG_VERSION")))
                .build()?)
        })
        .unwrap_or_default();
    let api = Api {
        client,
        base: format!("{}/", s.api_url.trim_end_matches('/')),
        bot_token: s.bot_token.trim().to_string(),
        app_token: s.app_token.trim().to_string(),
    };
    let state: Shared = Arc::default();
    let channels = Arc::new(channels);
    let poster = tokio::spawn(post_loop(
        broker.clone(),
        api.clone(),
        channels.clone(),
        state.clone(),
    ));
    tokio::spawn(async move {
        socket_loop(broker, api, channels).await;
        poster.abort();
    })
}

/// Posts each request to the channels the ladder says it reaches, and updates its
/// messages when it ends.
async fn post_loop(broker: BrokerHandle, api: Api, channels: Arc<Channels>, state: Shared) {
    let mut changes = broker.subscribe();
    loop {
        match changes.recv().await {
            Ok(Change::Reached(r)) => {
                if r.reaches("slack") {
                    post(
                        &broker,
                        &api,
                        &channels.settings.channel,
                        &state,
                        &r.pending,
                    )
                    .await;
                }
                for channel in &channels.teammates {
                    if r.reaches(&format!("slack:{channel}")) {
                        post(&broker, &api, channel, &state, &r.pending).await;
                    }
                }
            }
            Ok(Change::Finished(f)) => ended(&api, &state, &f).await,
            Ok(_) => {}
            Err(RecvError::Lagged(n)) => {
                tracing::warn!("slack: {n} changes of the queue went by untold");
            }
            Err(RecvError::Closed) => return,
        }
    }
}

fn plain(text: &str, max: usize) -> Value {
    json!({ "type": "plain_text", "text": cut(&visible(text), max), "emoji": true })
}

/// A button whose value is `h:{id}:{choice}`.
fn button(p: &PendingRequest, title: &str, choice: &str, style: Option<&str>) -> Value {
    let mut b = json!({
        "type": "button",
        "text": plain(title, 75),
        "action_id": format!("hitl-{choice}"),
        "value": chat::button_data(&p.request.id, choice),
    });
    if let Some(style) = style {
        b["style"] = style.into();
    }
    b
}

/// The buttons for `p`, in one actions block.
fn actions(p: &PendingRequest) -> Value {
    let elements: Vec<Value> = match &p.answer_shape {
        AnswerShape::Decision { always, .. } => {
            let mut b = vec![
                button(p, "Approve", "a", Some("primary")),
                button(p, "Deny", "d", Some("danger")),
                button(p, "Deny with reason…", "r", None),
            ];
            if let Some(rule) = always {
                b.push(button(p, &format!("Always allow {rule}"), "A", None));
            }
            b
        }
        AnswerShape::Choice {
            options,
            many: false,
            ..
        } => {
            let mut b: Vec<Value> = options
                .iter()
                .take(20)
                .enumerate()
                .map(|(i, o)| button(p, o, &i.to_string(), None))
                .collect();
            b.push(button(p, "Answer…", "r", None));
            b
        }
        _ => vec![button(p, "Answer…", "r", None)],
    };
    json!({ "type": "actions", "block_id": "hitl-actions", "elements": elements })
}

/// The message's blocks for `p`, without its buttons, and its text (what
/// notifications and screen readers show).
fn message(p: &PendingRequest) -> (Vec<Value>, String) {
    let r = &p.request;
    let text = format!(
        "{} asks ({}): {}",
        visible(&r.agent_name),
        r.kind.as_str(),
        cut(&visible(&r.content), 300)
    );
    let mut blocks = vec![json!({
        "type": "section",
        "text": { "type": "mrkdwn", "text": format!(
            "*{}* asks ({}):\n{}",
            escaped(&r.agent_name),
            r.kind.as_str(),
            escaped(&cut(&r.content, QUESTION_CHARS))
        ) },
    })];
    if let Some(command) = r
        .context
        .get("tool_input")
        .and_then(|i| i.get("command"))
        .and_then(Value::as_str)
    {
        blocks.push(json!({
            "type": "section",
            "text": { "type": "mrkdwn", "text": format!("```{}```", escaped(&cut(command, 1000))) },
        }));
    }
    (blocks, text)
}

/// Posts `p` in `channel`, once; how it went goes into its trail.
async fn post(broker: &BrokerHandle, api: &Api, channel: &str, state: &Shared, p: &PendingRequest) {
    let id = &p.request.id;
    let there = lock(state)
        .by_request
        .get(id)
        .is_some_and(|m| m.iter().any(|m| m.channel == channel));
    if there {
        return;
    }
    let (blocks, text) = message(p);
    let mut with_buttons = blocks.clone();
    with_buttons.push(actions(p));
    let params = json!({
        "channel": channel,
        "text": text,
        "blocks": with_buttons,
        "unfurl_links": false,
        "unfurl_media": false,
    });
    let to = format!("channel {channel}");
    let posted = api.call("chat.postMessage", params).await.and_then(|r| {
        r["ts"]
            .as_str()
            .map(str::to_string)
            .context("chat.postMessage gave no ts")
    });
    let step = match posted {
        Ok(ts) => {
            lock(state)
                .by_request
                .entry(id.clone())
                .or_default()
                .push(Posted {
                    channel: channel.to_string(),
                    ts: ts.clone(),
                    blocks,
                    text,
                });
            TrailStep::notified(id, "slack", &to, Ok(()), json!({ "ts": ts }))
        }
        Err(e) => {
            tracing::warn!("slack: {e:#}");
            TrailStep::notified(id, "slack", &to, Err(&format!("{e:#}")), Value::Null)
        }
    };
    broker.note_trail(step);
}

/// Updates `f`'s messages, if it was posted, to say how it ended; buttons gone.
async fn ended(api: &Api, state: &Shared, f: &Finished) {
    let Some(messages) = lock(state).by_request.remove(f.id()) else {
        return;
    };
    let end = chat::outcome(f, |what| format!("*{what}*"));
    for m in messages {
        let mut blocks = m.blocks.clone();
        blocks.push(json!({ "type": "context", "elements": [{ "type": "mrkdwn", "text": end }] }));
        let params = json!({
            "channel": m.channel,
            "ts": m.ts,
            "text": m.text,
            "blocks": blocks,
        });
        if let Err(e) = api.call("chat.update", params).await {
            tracing::warn!("slack: {e:#}");
        }
    }
}

/// A byte stream a WebSocket runs over: TLS, or plain TCP to loopback.
trait Io: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send> Io for T {}

/// Opens the socket Slack gave: `wss://` through the TLS every client uses, or
/// `ws://` to loopback.
async fn connect(url: &str) -> Result<tokio_tungstenite::WebSocketStream<Box<dyn Io>>> {
    let parsed = reqwest::Url::parse(url).map_err(|e| anyhow!("the socket's URL: {e}"))?;
    secure(&parsed, "wss", "ws")?;
    let host = parsed
        .host_str()
        .context("the socket's URL has no host")?
        .to_string();
    let port = parsed.port_or_known_default().unwrap_or(443);
    let host_port = (
        host.trim_start_matches('[')
            .trim_end_matches(']')
            .to_string(),
        port,
    );
    let tcp = tokio::net::TcpStream::connect(host_port)
        .await
        .with_context(|| format!("connecting to {host}:{port}"))?;
    let _ = tcp.set_nodelay(true);
    let stream: Box<dyn Io> = if parsed.scheme() == "wss" {
        let config = Arc::new(crate::runtime::tls::client_config()?);
        let name = rustls::pki_types::ServerName::try_from(host.clone())
            .map_err(|e| anyhow!("{host}: {e}"))?;
        let tls = tokio_rustls::TlsConnector::from(config)
            .connect(name, tcp)
            .await
            .with_context(|| format!("TLS with {host}"))?;
        Box::new(tls)
    } else {
        Box::new(tcp)
    };
    let (ws, _) = tokio_tungstenite::client_async(url, stream)
        .await
        .map_err(|e| anyhow!("opening the socket at {host}: {e}"))?;
    Ok(ws)
}

/// Holds a Socket Mode connection: opened, followed until Slack says to reconnect
/// or it drops, opened again (with a growing wait after failures).
async fn socket_loop(broker: BrokerHandle, api: Api, channels: Arc<Channels>) {
    let mut wait = Duration::from_secs(1);
    loop {
        let opened = async {
            let r = api.call("apps.connections.open", json!({})).await?;
            let url = r["url"]
                .as_str()
                .context("apps.connections.open gave no url")?;
            connect(url).await
        };
        match opened.await {
            Ok(ws) => {
                wait = Duration::from_secs(1);
                follow(&broker, &api, &channels, ws).await;
            }
            Err(e) => {
                tracing::warn!("slack: {e:#}; trying again in {}s", wait.as_secs());
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(Duration::from_secs(60));
            }
        }
    }
}

/// Reads envelopes until the socket ends: each acknowledged, presses and forms
/// answered.
async fn follow(
    broker: &BrokerHandle,
    api: &Api,
    channels: &Channels,
    mut ws: tokio_tungstenite::WebSocketStream<Box<dyn Io>>,
) {
    while let Some(message) = ws.next().await {
        let text = match message {
            Ok(Message::Text(t)) => t,
            Ok(Message::Ping(p)) => {
                let _ = ws.send(Message::Pong(p)).await;
                continue;
            }
            Ok(Message::Close(_)) | Err(_) => return,
            Ok(_) => continue,
        };
        let Ok(envelope) = serde_json::from_str::<Value>(&text) else {
            tracing::warn!("slack: an envelope that is not JSON");
            continue;
        };
        match envelope["type"].as_str() {
            Some("disconnect") => return,
            Some("interactive") => {
                let payload = &envelope["payload"];
                let ack = match payload["type"].as_str() {
                    // A form's answer is taken before the acknowledgement, which
                    // carries its refusal back into the form.
                    Some("view_submission") => submitted(broker, channels, payload).await,
                    _ => None,
                };
                let mut reply = json!({ "envelope_id": envelope["envelope_id"] });
                if let Some(errors) = ack {
                    reply["payload"] = errors;
                }
                if ws.send(Message::text(reply.to_string())).await.is_err() {
                    return;
                }
                if payload["type"] == "block_actions" {
                    pressed(broker, api, channels, payload).await;
                }
            }
            Some("hello") => tracing::info!("slack: connected"),
            _ => {
                // Events and commands hitl did not ask for: acknowledged, nothing more.
                if let Some(id) = envelope.get("envelope_id") {
                    let _ = ws
                        .send(Message::text(json!({ "envelope_id": id }).to_string()))
                        .await;
                }
            }
        }
    }
}

/// Who answered, as history credits it: `slack:@name` or `slack:ID`.
fn responder(user: &Value) -> String {
    match user["username"].as_str().or(user["name"].as_str()) {
        Some(name) => format!("slack:@{name}"),
        None => format!("slack:{}", user["id"].as_str().unwrap_or_default()),
    }
}

/// A button pressed: answered if the member may, a form opened for a reason or a
/// text answer, or the member told it is not theirs.
async fn pressed(broker: &BrokerHandle, api: &Api, channels: &Channels, payload: &Value) {
    let user = payload["user"]["id"].as_str().unwrap_or_default();
    let channel = payload["channel"]["id"]
        .as_str()
        .or(payload["container"]["channel_id"].as_str())
        .unwrap_or_default();
    let Some(value) = payload["actions"][0]["value"].as_str() else {
        return;
    };
    if !channels.asks_in(channel) {
        tracing::warn!("slack: a press in channel {channel:?}, where hitl does not ask, ignored");
        return;
    }
    let said = if !channels.approver(user) {
        tracing::warn!("slack: a press by {user:?}, who is not an approver, ignored");
        Some("Not yours to answer: you are not one of this app's approvers.".to_string())
    } else {
        match press_reply(broker, value).await {
            Ok(Pressed::Reply(seq, reply)) => {
                let who = channels.person(user);
                match broker
                    .respond_as(seq, reply, &responder(&payload["user"]), &who)
                    .await
                {
                    Ok(_) => None,
                    Err(e) => Some(e.to_string()),
                }
            }
            Ok(Pressed::Form(p)) => {
                let trigger = payload["trigger_id"].as_str().unwrap_or_default();
                match api
                    .call(
                        "views.open",
                        json!({ "trigger_id": trigger, "view": form(&p) }),
                    )
                    .await
                {
                    Ok(_) => None,
                    Err(e) => {
                        tracing::warn!("slack: {e:#}");
                        Some("The form could not be opened; try again.".into())
                    }
                }
            }
            Err(e) => Some(e),
        }
    };
    if let Some(text) = said
        && !channel.is_empty()
    {
        let params = json!({ "channel": channel, "user": user, "text": text });
        if let Err(e) = api.call("chat.postEphemeral", params).await {
            tracing::warn!("slack: {e:#}");
        }
    }
}

/// What a press does.
enum Pressed {
    /// Answers request `seq`.
    Reply(u64, Reply),
    /// Opens the form for this request.
    Form(Arc<PendingRequest>),
}

/// What a button's data does, for the request still pending: `r` opens its form.
async fn press_reply(broker: &BrokerHandle, value: &str) -> Result<Pressed, String> {
    let (p, choice) = chat::pressed_request(broker, value).await?;
    if choice == "r" {
        return Ok(Pressed::Form(p));
    }
    let (reply, _) = chat::reply_for(&p, choice)?;
    Ok(Pressed::Reply(p.seq, reply))
}

/// The form for `p`: a denial's reason for an approval, else its answer as text.
fn form(p: &PendingRequest) -> Value {
    let deny = matches!(p.answer_shape, AnswerShape::Decision { .. });
    let (title, label, submit) = if deny {
        ("Deny", "Why (the agent reads this)", "Deny")
    } else {
        ("Answer", "Your answer", "Send")
    };
    json!({
        "type": "modal",
        "callback_id": FORM,
        "private_metadata": p.request.id,
        "title": plain(title, 24),
        "submit": plain(submit, 24),
        "close": plain("Cancel", 24),
        "blocks": [
            {
                "type": "section",
                "text": { "type": "mrkdwn", "text": escaped(&cut(&p.request.content, QUESTION_CHARS)) },
            },
            {
                "type": "input",
                "block_id": "answer",
                "label": plain(label, 2000),
                "element": { "type": "plain_text_input", "action_id": "text", "multiline": deny },
            },
        ],
    })
}

/// A form sent: answers its request; `Some(errors)` to show in the form when the
/// answer is refused.
async fn submitted(broker: &BrokerHandle, channels: &Channels, payload: &Value) -> Option<Value> {
    let view = &payload["view"];
    if view["callback_id"] != FORM {
        return None;
    }
    let refuse =
        |why: &str| Some(json!({ "response_action": "errors", "errors": { "answer": why } }));
    let user = payload["user"]["id"].as_str().unwrap_or_default();
    if !channels.approver(user) {
        return refuse("Not yours to answer: you are not one of this app's approvers.");
    }
    let id = view["private_metadata"].as_str().unwrap_or_default();
    let text = view["state"]["values"]["answer"]["text"]["value"]
        .as_str()
        .unwrap_or_default();
    let Some(p) = broker.find(id).await else {
        return refuse("That request has ended.");
    };
    let reply = match &p.answer_shape {
        AnswerShape::Decision { .. } => Reply::Approval {
            approved: false,
            comment: Some(text.to_string()).filter(|t| !t.trim().is_empty()),
            remember: None,
        },
        _ => match p.request.interpret(text) {
            Ok(r) => r,
            Err(e) => return refuse(&e),
        },
    };
    match broker
        .respond_as(
            p.seq,
            reply,
            &responder(&payload["user"]),
            &channels.person(user),
        )
        .await
    {
        Ok(_) => None,
        Err(e) => refuse(&e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> SlackSettings {
        SlackSettings {
            app_token: "xapp-1-A1-2-ab".into(),
            bot_token: "xoxb-1-2-ab".into(),
            channel: "C42".into(),
            approvers: vec!["U7".into()],
            owner: None,
            api_url: "https://slack.com/api/".into(),
        }
    }

    #[test]
    fn settings_are_checked() {
        validate(&settings()).unwrap();
        let with = |f: fn(&mut SlackSettings)| {
            let mut s = settings();
            f(&mut s);
            validate(&s).unwrap_err().to_string()
        };
        assert!(with(|s| s.app_token = "xoxb-1".into()).contains("app_token"));
        assert!(with(|s| s.bot_token = "xapp-1".into()).contains("bot_token"));
        assert!(with(|s| s.approvers.clear()).contains("approvers"));
        assert!(with(|s| s.channel = "#general".into()).contains("channel"));
        assert!(with(|s| s.api_url = "http://slack.example/api/".into()).contains("loopback"));
        let mut s = settings();
        s.api_url = "http://127.0.0.1:9/api/".into();
        validate(&s).unwrap();
    }

    #[test]
    fn only_approvers_answer_and_the_owner_is_the_user() {
        let mut s = settings();
        s.owner = Some("U7".into());
        let c = Channels::new(s, &Default::default());
        assert!(c.approver("U7") && !c.approver("U8"));
        assert_eq!(c.person("U7"), crate::broker::LOCAL_APPROVER);
        assert_eq!(c.person("U9"), "slack:U9");
    }

    #[test]
    fn text_is_escaped_for_escaped() {
        assert_eq!(escaped("<!channel> & *x*"), "&lt;!channel&gt; &amp; *x*");
    }
}
