//! The way back: a request made over HTTP with a `responseWebSocketUrl` is pushed its
//! answer whoever gives it (`--auto-answer`, the terminal prompt, `hitl answer`, HTTP,
//! another replica), and its timeout and cancel too, as the bare response object seed
//! 004's hook client reads; `/stream` and `/api/v1/stream` show every change; and the
//! CLI's views list what the listener holds, with its origin.

use std::{io::Write, time::Duration};

use futures_util::StreamExt;
use reqwest::{StatusCode, blocking::Client};
use serde_json::{Value, json};
use tokio_tungstenite::{
    MaybeTlsStream, WebSocketStream,
    tungstenite::{client::IntoClientRequest, http::HeaderValue},
};

use crate::{
    http::{Api, agent_socket, hitl_event, json_of},
    store::pg_schema_url,
    support::{Listener, Project, eventually},
};

type Socket = WebSocketStream<MaybeTlsStream<tokio::net::TcpStream>>;

/// A request made over seed 004's `/events` whose answer goes to a fresh agent socket.
fn ask_with_socket(
    api: &Api,
    rt: &tokio::runtime::Runtime,
    kind: &str,
    question: &str,
    extra: Value,
) -> (i64, std::sync::mpsc::Receiver<String>) {
    let (port, received) = agent_socket(rt);
    let mut h = json!({ "responseWebSocketUrl": format!("ws://127.0.0.1:{port}") });
    if let Value::Object(m) = extra {
        for (k, v) in m {
            h[k] = v;
        }
    }
    let (s, c) = json_of(api.post_open("/events", &hitl_event(kind, question, h)));
    assert_eq!(s, StatusCode::CREATED, "{c}");
    (c["id"].as_i64().unwrap(), received)
}

/// The message the agent's socket received, as JSON.
fn pushed(received: &std::sync::mpsc::Receiver<String>, what: &str) -> Value {
    let text = received
        .recv_timeout(Duration::from_secs(10))
        .unwrap_or_else(|_| panic!("{what}: nothing was pushed to the agent's socket"));
    serde_json::from_str(&text).unwrap()
}

/// Both live streams of a server, connected with the token.
struct Streams {
    feed: Socket,
    queue: Socket,
}

impl Streams {
    fn open(rt: &tokio::runtime::Runtime, base: &str, token: &str) -> Streams {
        let connect = |path: &str| {
            let ws = base.replace("http://", "ws://");
            let mut req = format!("{ws}{path}").into_client_request().unwrap();
            req.headers_mut().insert(
                "authorization",
                HeaderValue::from_str(&format!("Bearer {token}")).unwrap(),
            );
            rt.block_on(tokio_tungstenite::connect_async(req))
                .unwrap()
                .0
        };
        let mut s = Streams {
            feed: connect("/stream"),
            queue: connect("/api/v1/stream"),
        };
        assert_eq!(next(rt, &mut s.feed)["type"], "initial");
        assert_eq!(next(rt, &mut s.queue)["type"], "snapshot");
        s
    }

    /// Waits until both streams have told how request `id` ended; returns the feed's
    /// event and the queue's change.
    fn ended(&mut self, rt: &tokio::runtime::Runtime, id: i64) -> (Value, Value) {
        let id_text = id.to_string();
        let feed = until(rt, &mut self.feed, |v| {
            v["data"]["id"].as_i64() == Some(id)
                && v["data"]["humanInTheLoopStatus"]["status"] != "pending"
        });
        let queue = until(rt, &mut self.queue, |v| {
            v["type"] == "finished" && v["id"] == id_text.as_str()
        });
        (feed, queue)
    }
}

fn next(rt: &tokio::runtime::Runtime, ws: &mut Socket) -> Value {
    let msg = rt
        .block_on(async { tokio::time::timeout(Duration::from_secs(10), ws.next()).await })
        .expect("the stream said nothing for 10 s")
        .unwrap()
        .unwrap();
    serde_json::from_str(msg.to_text().unwrap()).unwrap()
}

/// Reads a stream until a message matches.
fn until(rt: &tokio::runtime::Runtime, ws: &mut Socket, want: impl Fn(&Value) -> bool) -> Value {
    loop {
        let v = next(rt, ws);
        if want(&v) {
            return v;
        }
    }
}

#[test]
fn every_responder_timeout_and_cancel_is_pushed_and_streamed() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let api = Api::start(None);
    let mut streams = Streams::open(&rt, &api.base, &api.token);

    // Over HTTP.
    let (id, got) = ask_with_socket(&api, &rt, "question", "Name?", json!({}));
    let (s, done) = json_of(api.post(
        &format!("/events/{id}/respond"),
        &json!({ "response": "Grace" }),
    ));
    assert_eq!(
        (s, done["deliveryStatus"].as_str()),
        (StatusCode::OK, Some("delivered"))
    );
    let msg = pushed(&got, "HTTP");
    assert_eq!(msg["response"], "Grace", "the bare response object: {msg}");
    assert_eq!(msg["eventId"].as_i64(), Some(id));
    assert_eq!(msg["respondedBy"], "http");
    assert_eq!(msg["idempotencyKey"], done["idempotencyKey"]);
    let (feed, queue) = streams.ended(&rt, id);
    assert_eq!(
        feed["data"]["humanInTheLoopStatus"]["response"]["response"],
        "Grace"
    );
    assert_eq!(
        (queue["status"].as_str(), queue["origin"].as_str()),
        (Some("answered"), Some("http"))
    );

    // By `hitl answer` from another terminal: a permission, as the seed names it.
    let (id, got) = ask_with_socket(&api, &rt, "permission", "rm -rf build?", json!({}));
    let out = api.project.run(&[
        "answer",
        &id.to_string(),
        "--approve",
        "--comment",
        "looks fine",
    ]);
    assert!(out.status.success(), "{out:?}");
    let msg = pushed(&got, "hitl answer");
    assert_eq!(msg["permission"], true, "{msg}");
    assert_eq!(msg["comment"], "looks fine", "{msg}");
    streams.ended(&rt, id);

    // A choice answered by `hitl answer` with the option's number.
    let (id, got) = ask_with_socket(
        &api,
        &rt,
        "choice",
        "Env?",
        json!({ "choices": ["dev", "prod"] }),
    );
    let out = api.project.run(&["answer", &id.to_string(), "1"]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(pushed(&got, "choice")["choice"], "dev");
    streams.ended(&rt, id);

    // Cancelled over the native API: the agent hears it was cancelled.
    let (id, got) = ask_with_socket(&api, &rt, "question", "Still?", json!({}));
    let (s, _) = json_of(api.post(
        &format!("/api/v1/requests/{id}/cancel"),
        &json!({ "reason": "not needed" }),
    ));
    assert_eq!(s, StatusCode::OK);
    let msg = pushed(&got, "cancel");
    assert_eq!(
        (msg["status"].as_str(), msg["cancelled"].as_bool()),
        (Some("cancelled"), Some(true)),
        "{msg}"
    );
    let (_, queue) = streams.ended(&rt, id);
    assert_eq!(queue["status"], "cancelled");

    // Timed out by the broker.
    let (id, got) = ask_with_socket(&api, &rt, "question", "Quick?", json!({ "timeout": 1 }));
    let msg = pushed(&got, "timeout");
    assert_eq!(msg["status"], "timeout", "{msg}");
    assert_eq!(msg["eventId"].as_i64(), Some(id));
    let (feed, queue) = streams.ended(&rt, id);
    assert_eq!(feed["data"]["humanInTheLoopStatus"]["status"], "timeout");
    assert_eq!(queue["status"], "timeout");

    // Counted once the push is done, which may be a moment after the agent has it.
    let mut m = Value::Null;
    eventually("five pushes counted", Duration::from_secs(5), || {
        m = json_of(api.get("/api/v1/metrics")).1;
        m["deliveredCount"] == 5
    });
    assert_eq!(m["failedDeliveryCount"], 0, "{m}");
}

#[test]
fn the_terminal_prompt_and_auto_answer_are_pushed() {
    let rt = tokio::runtime::Runtime::new().unwrap();

    // The terminal prompt of `hitl listen`, its answers typed on stdin.
    let project = Project::new();
    let mut listener = project.listen_with_stdin(&["--http", "127.0.0.1:0"]);
    let mut stdin = listener.child.stdin.take().unwrap();
    let api = Api::attach(project, listener);
    let mut streams = Streams::open(&rt, &api.base, &api.token);
    let (id, got) = ask_with_socket(&api, &rt, "question", "Colour?", json!({}));
    api.listener.wait_stdout("Colour?", Duration::from_secs(10));
    writeln!(stdin, "teal").unwrap();
    let msg = pushed(&got, "terminal");
    assert_eq!(
        (msg["response"].as_str(), msg["respondedBy"].as_str()),
        (Some("teal"), Some("terminal")),
        "{msg}"
    );
    streams.ended(&rt, id);
    drop(stdin);

    // `--auto-answer`: an approval and a choice.
    let project = Project::new();
    let listener = project.listen(&["--auto-answer", "ok", "--http", "127.0.0.1:0"]);
    let api = Api::attach(project, listener);
    let mut streams = Streams::open(&rt, &api.base, &api.token);
    let (id, got) = ask_with_socket(&api, &rt, "approval", "Deploy?", json!({}));
    let msg = pushed(&got, "auto approval");
    let (_, queue) = streams.ended(&rt, id);
    assert_eq!(queue["responded_by"], "auto");
    assert_eq!(
        (msg["approved"].as_bool(), msg["respondedBy"].as_str()),
        (Some(true), Some("auto")),
        "{msg}"
    );
    let (_, got) = ask_with_socket(
        &api,
        &rt,
        "choice",
        "Which?",
        json!({ "choices": ["a", "b"] }),
    );
    assert_eq!(pushed(&got, "auto choice")["choice"], "a");
}

#[test]
fn an_answer_given_on_another_replica_is_pushed_once() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (db, _guard) = pg_schema_url();
    let p = Project::new();
    let serve = |p: &Project| {
        let mut cmd = p.hitl();
        cmd.args(["serve", "--http", "127.0.0.1:0", "--db", &db]);
        let l = Listener::start_command(cmd);
        let base = l.http_base();
        (l, base)
    };
    let (_a, a) = serve(&p);
    let (_b, b) = serve(&p);
    let token = p.token();
    let http = Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    let mut on_a = Streams::open(&rt, &a, &token);

    // A socket that counts every push, to see there is exactly one.
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let port = listener.local_addr().unwrap().port();
    let (tx, pushes) = std::sync::mpsc::channel::<String>();
    rt.spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let tx = tx.clone();
            tokio::spawn(async move {
                let Ok(mut ws) = tokio_tungstenite::accept_async(stream).await else {
                    return;
                };
                while let Some(Ok(m)) = ws.next().await {
                    if let tokio_tungstenite::tungstenite::Message::Text(t) = m {
                        let _ = tx.send(t.to_string());
                    }
                }
            });
        }
    });
    let mut event = hitl_event("question", "Region?", json!({}));
    event["humanInTheLoop"]["responseWebSocketUrl"] = json!(format!("ws://127.0.0.1:{port}"));
    let created: Value = http
        .post(format!("{a}/events"))
        .json(&event)
        .send()
        .unwrap()
        .json()
        .unwrap();
    let id = created["id"].as_i64().unwrap();
    eventually("replica B queues it", Duration::from_secs(10), || {
        http.get(format!("{b}/api/v1/requests/{id}"))
            .bearer_auth(&token)
            .send()
            .unwrap()
            .json::<Value>()
            .unwrap()["status"]
            == "pending"
    });
    let r = http
        .post(format!("{b}/events/{id}/respond"))
        .json(&json!({ "response": "eu-west" }))
        .bearer_auth(&token)
        .send()
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let msg: Value =
        serde_json::from_str(&pushes.recv_timeout(Duration::from_secs(10)).unwrap()).unwrap();
    assert_eq!(msg["response"], "eu-west", "{msg}");
    // Replica A hears of it and streams it; nobody pushes a second time.
    let (feed, queue) = on_a.ended(&rt, id);
    assert_eq!(feed["data"]["humanInTheLoopStatus"]["status"], "responded");
    assert_eq!(queue["status"], "answered");
    assert!(
        pushes.recv_timeout(Duration::from_millis(500)).is_err(),
        "the answer was pushed twice"
    );
}

#[test]
fn pending_status_and_agents_list_what_the_listener_holds() {
    let api = Api::start(None);
    let (s, c) = json_of(api.post_open(
        "/events",
        &hitl_event("question", "From the web?", json!({})),
    ));
    assert_eq!(s, StatusCode::CREATED);
    let id = c["id"].as_i64().unwrap().to_string();
    let mut asker = crate::support::spawn_ask(&api.project, &["--timeout", "30", "From a file?"]);
    let pending = api.project.wait_pending(2, Duration::from_secs(10));
    let origin_of = |content: &str| {
        pending
            .iter()
            .find(|p| p["content"] == content)
            .unwrap_or_else(|| panic!("{content} is not listed: {pending:#?}"))["origin"]
            .clone()
    };
    assert_eq!(origin_of("From the web?"), "http");
    assert_eq!(origin_of("From a file?"), "spool");
    assert!(pending.iter().any(|p| p["id"] == id.as_str()));

    let out = api.project.run(&["pending"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("From the web?") && text.contains("http"),
        "{text}"
    );

    let out = api.project.run(&["status", "--json"]);
    let status: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(status["pending"], 2, "{status}");
    assert_eq!(status["pending_by_origin"]["http"], 1, "{status}");
    assert_eq!(status["pending_by_origin"]["spool"], 1, "{status}");

    let out = api.project.run(&["agents", "--json"]);
    let agents: Value = serde_json::from_slice(&out.stdout).unwrap();
    let http_agent = agents
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["origin"] == "http")
        .unwrap_or_else(|| panic!("no agent asking over HTTP: {agents:#}"));
    assert_eq!(http_agent["status"], "waiting", "{http_agent}");
    let out = api.project.run(&["agents"]);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("demo-app"),
        "{out:?}"
    );

    let _ = asker.kill();
    let _ = asker.wait();
}
