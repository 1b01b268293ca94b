//! Answering away from the desk, against a real `hitl listen` with nobody at it:
//!
//! - created → push: from a request's create (`POST /api/v1/requests`) until its
//!   Web Push (encrypted and signed) reaches a push service;
//! - created → sendMessage: until the Telegram bot's `sendMessage` reaches the Bot
//!   API;
//! - press → asker: from an Approve press handed to the bot's waiting `getUpdates`
//!   until the asker's long poll (`?wait=`) returns the answer.
//!
//! The push service and the Bot API are stand-ins in this process (axum on
//! loopback) that answer at once, so the figures are hitl's own work and two
//! loopback hops. `cargo bench --bench channels` runs 300 requests; `-- --quick`
//! (what CI runs) 100. Targets (p99 ≤ 50 ms each) are printed as MET or MISSED,
//! never asserted; a request not pushed, sent or answered fails the run.

use std::{
    collections::VecDeque,
    process::{Child, Command},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use axum::{
    Json, Router,
    extract::{Path, State},
    routing::post,
};
use serde_json::{Value, json};
use tokio::sync::{Notify, mpsc};

mod common;

use common::{hitl, met, row, stats};

const TOKEN: &str = "123456:bench";

struct Listener(Child);

impl Drop for Listener {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// What the stand-ins saw, as it happened.
enum Seen {
    /// A push arrived.
    Push(Instant),
    /// A request's message arrived at the Bot API.
    Sent(Instant, String),
}

#[derive(Clone)]
struct Stand {
    seen: mpsc::UnboundedSender<Seen>,
    updates: Arc<Mutex<VecDeque<Value>>>,
    more: Arc<Notify>,
    next_update: Arc<Mutex<i64>>,
}

async fn push(State(s): State<Stand>, headers: axum::http::HeaderMap) -> axum::http::StatusCode {
    // A request's push, not an end's (which the service may keep an hour: its TTL).
    if headers.get("ttl").is_some_and(|t| t != "3600") {
        let _ = s.seen.send(Seen::Push(Instant::now()));
    }
    axum::http::StatusCode::CREATED
}

async fn bot(
    State(s): State<Stand>,
    Path((token, method)): Path<(String, String)>,
    Json(params): Json<Value>,
) -> Json<Value> {
    assert_eq!(token, format!("bot{TOKEN}"));
    match method.as_str() {
        "sendMessage" => {
            let data = params["reply_markup"]["inline_keyboard"][0][0]["callback_data"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let _ = s.seen.send(Seen::Sent(Instant::now(), data));
            Json(json!({ "ok": true, "result": { "message_id": 1, "date": 0,
                "chat": { "id": 42, "type": "private" } } }))
        }
        "getUpdates" => {
            let offset = params["offset"].as_i64().unwrap_or(0);
            let deadline =
                Instant::now() + Duration::from_secs(params["timeout"].as_u64().unwrap_or(0));
            loop {
                let notified = s.more.notified();
                let ready: Vec<Value> = s
                    .updates
                    .lock()
                    .unwrap()
                    .iter()
                    .filter(|u| u["update_id"].as_i64().unwrap_or(0) >= offset)
                    .cloned()
                    .collect();
                if !ready.is_empty() || Instant::now() >= deadline {
                    return Json(json!({ "ok": true, "result": ready }));
                }
                let _ = tokio::time::timeout(deadline - Instant::now(), notified).await;
            }
        }
        _ => Json(json!({ "ok": true, "result": true })),
    }
}

impl Stand {
    /// Hands a press of `data` to the bot's waiting `getUpdates`.
    fn press(&self, data: &str) {
        let id = {
            let mut n = self.next_update.lock().unwrap();
            *n += 1;
            *n
        };
        let mut updates = self.updates.lock().unwrap();
        // What the bot has taken is dropped: it asks with a higher offset next.
        while updates.len() > 4 {
            updates.pop_front();
        }
        updates.push_back(json!({ "update_id": id, "callback_query": {
            "id": format!("q{id}"),
            "from": { "id": 7, "is_bot": false, "first_name": "Bench" },
            "message": { "message_id": 1, "date": 0, "chat": { "id": 42, "type": "private" } },
            "chat_instance": "1",
            "data": data,
        }}));
        drop(updates);
        self.more.notify_waiters();
    }
}

fn main() {
    hitl::runtime::tls::install_default_provider();
    let args: Vec<String> = std::env::args().collect();
    if !args.iter().any(|a| a == "--bench") {
        println!("channel benchmarks: run them with `cargo bench --bench channels [-- --quick]`");
        return;
    }
    println!("the hitl under test: {}", hitl());
    let quick = args.iter().any(|a| a == "--quick");
    let n = if quick { 100 } else { 300 };
    println!(
        "hitl channel benchmarks ({} mode): {n} requests with nobody at the desk, each pushed and sent to Telegram, answered by a press\n",
        if quick { "short" } else { "full" }
    );

    let rt = tokio::runtime::Runtime::new().unwrap();
    let (seen_tx, mut seen) = mpsc::unbounded_channel();
    let stand = Stand {
        seen: seen_tx,
        updates: Arc::default(),
        more: Arc::default(),
        next_update: Arc::new(Mutex::new(100)),
    };
    let app = Router::new()
        .route("/push/bench", post(push))
        .route("/{token}/{method}", post(bot))
        .with_state(stand.clone());
    let server = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let stand_url = format!("http://{}", server.local_addr().unwrap());
    rt.spawn(async move { axum::serve(server, app).await });

    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("project");
    let home = tmp.path().join("home");
    for d in [&project, &home] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::write(
        home.join("config.toml"),
        format!(
            "[http]\ncreate_rate_limit = 0\ndelivery_hosts = [\"127.0.0.1\"]\n\n\
             [telegram]\nbot_token = \"{TOKEN}\"\nchat_id = 42\nusers = [7]\napi_url = \"{stand_url}\"\n"
        ),
    )
    .unwrap();
    let out = Command::new(hitl())
        .arg("init")
        .env("HITL_HOME", &home)
        .current_dir(&project)
        .output()
        .unwrap();
    assert!(out.status.success(), "hitl init: {out:?}");
    let (child, base) = common::start_listener(
        Command::new(hitl())
            .args([
                "listen",
                "--ui",
                "none",
                "--no-notify",
                "--http",
                "127.0.0.1:0",
            ])
            .env("HITL_HOME", &home)
            .env("HITL_LOG", "error")
            .current_dir(&project),
    );
    let _listener = Listener(child);
    let token = std::fs::read_to_string(home.join("token"))
        .unwrap()
        .trim()
        .to_string();

    // A browser's subscription: a P-256 key and an auth secret, as one makes them.
    let rng = ring::rand::SystemRandom::new();
    let key =
        ring::agreement::EphemeralPrivateKey::generate(&ring::agreement::ECDH_P256, &rng).unwrap();
    let p256dh = hitl::push::crypto::b64(key.compute_public_key().unwrap().as_ref());
    let http = reqwest::blocking::Client::new();
    let r = http
        .post(format!("{base}/api/v1/push/subscriptions"))
        .bearer_auth(&token)
        .json(&json!({
            "endpoint": format!("{stand_url}/push/bench"),
            "keys": { "p256dh": p256dh, "auth": hitl::push::crypto::b64(&[7; 16]) },
        }))
        .send()
        .unwrap();
    assert_eq!(r.status(), 201, "subscribe: {:?}", r.text());

    let (mut to_push, mut to_message, mut to_asker) = (Vec::new(), Vec::new(), Vec::new());
    let asking = reqwest::blocking::Client::new();
    for i in 0..n {
        let created = Instant::now();
        // The asker: a create that waits for its answer.
        let asker = {
            let (base, token, asking) = (base.clone(), token.clone(), asking.clone());
            std::thread::spawn(move || {
                let r = asking
                    .post(format!("{base}/api/v1/requests?wait=30"))
                    .bearer_auth(&token)
                    .json(&json!({ "type": "approval", "content": format!("Deploy build {i}?"), "agent_id": "bench" }))
                    .timeout(Duration::from_secs(40))
                    .send()
                    .unwrap();
                let answered = Instant::now();
                let body: Value = r.json().unwrap();
                (answered, body)
            })
        };
        let (mut pushed, mut sent) = (None, None);
        while pushed.is_none() || sent.is_none() {
            let got = rt
                .block_on(async {
                    tokio::time::timeout(Duration::from_secs(30), seen.recv()).await
                })
                .expect("pushed and sent within 30 s")
                .unwrap();
            match got {
                Seen::Push(at) => pushed = pushed.or(Some(at)),
                Seen::Sent(at, data) => sent = Some((at, data)),
            }
        }
        let (sent_at, approve) = sent.unwrap();
        to_push.push((pushed.unwrap() - created).as_secs_f64() * 1e3);
        to_message.push((sent_at - created).as_secs_f64() * 1e3);
        let pressed = Instant::now();
        stand.press(&approve);
        let (answered, body) = asker.join().unwrap();
        assert_eq!(body["status"], "answered", "request {i}: {body}");
        to_asker.push((answered - pressed).as_secs_f64() * 1e3);
    }
    for (name, v) in [
        ("created → push at the push service", &to_push),
        ("created → Telegram sendMessage", &to_message),
        ("Telegram press → the asker answered", &to_asker),
    ] {
        let s = stats(v);
        row(
            name,
            &s,
            &format!("target p99 ≤ 50 ms {}", met(s.p99 <= 50.0)),
        );
    }
}
