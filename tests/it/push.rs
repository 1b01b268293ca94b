//! Web Push: a subscribed browser is pushed each new request and each end, through
//! a push service, encrypted for it and signed as the server's. The push service
//! here is a stand-in (tests/it/push_service.py) that also plays the browser: it
//! decrypts each body with http_ece and checks each VAPID JWT with cryptography,
//! code hitl does not share.

use std::{
    io::{BufRead, BufReader},
    process::{Child, Command, Stdio},
    sync::mpsc,
    time::Duration,
};

use reqwest::{StatusCode, blocking::Client};
use serde_json::{Value, json};

use crate::support::{Project, checkout, spawn_ask, wait_output};

/// The stand-in push service, and what it prints: first its port and the
/// browser's keys, then a line per push.
struct Service {
    child: Child,
    lines: mpsc::Receiver<Value>,
    port: u16,
    p256dh: String,
    auth: String,
}

impl Service {
    fn start() -> Service {
        let mut child = Command::new("python3")
            .arg(checkout().join("tests/it/push_service.py"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3 runs the stand-in push service (tools/test-all installs http_ece)");
        let out = BufReader::new(child.stdout.take().unwrap());
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in out.lines().map_while(Result::ok) {
                let _ = tx.send(serde_json::from_str(&line).unwrap_or(json!({ "bad": line })));
            }
        });
        let first = lines
            .recv_timeout(Duration::from_secs(30))
            .expect("the push service starts");
        Service {
            child,
            lines,
            port: first["port"].as_u64().unwrap() as u16,
            p256dh: first["p256dh"].as_str().unwrap().to_string(),
            auth: first["auth"].as_str().unwrap().to_string(),
        }
    }

    fn endpoint(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// The next push it took.
    fn next(&self) -> Value {
        self.lines
            .recv_timeout(Duration::from_secs(20))
            .expect("a push within 20 s")
    }

    /// No push within `wait`.
    fn quiet(&self, wait: Duration) {
        if let Ok(p) = self.lines.recv_timeout(wait) {
            panic!("an unexpected push: {p}");
        }
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_subscribed_browser_is_pushed_each_request_encrypted_and_signed_and_answers_from_it() {
    let service = Service::start();
    let p = Project::new();
    // The stand-in is on loopback over plain http: named in delivery_hosts, as any
    // push service but the browsers' own must be.
    p.user_config("[http]\ndelivery_hosts = [\"127.0.0.1\"]\n");
    let _listener = p.listen(&["--ui", "none", "--http", "127.0.0.1:0"]);
    let base = p.http_url();
    let http = Client::new();
    let token = p.token();
    let call = |method: reqwest::Method, path: &str| {
        http.request(method, format!("{base}{path}"))
            .bearer_auth(&token)
    };

    let vapid: Value = call(reqwest::Method::GET, "/api/v1/push/vapid")
        .send()
        .unwrap()
        .json()
        .unwrap();
    let server_key = vapid["public_key"].as_str().unwrap().to_string();
    assert_eq!(server_key.len(), 87, "{vapid}"); // 65 bytes, base64url
    let again: Value = call(reqwest::Method::GET, "/api/v1/push/vapid")
        .send()
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(again, vapid, "one key pair, kept");

    // What a browser's PushSubscription.toJSON() gives.
    let subscribe = |endpoint: &str, p256dh: &str| {
        call(reqwest::Method::POST, "/api/v1/push/subscriptions")
            .json(&json!({
                "endpoint": endpoint,
                "expirationTime": null,
                "keys": { "p256dh": p256dh, "auth": service.auth },
            }))
            .send()
            .unwrap()
    };
    let r = subscribe(&service.endpoint("/push/desk"), &service.p256dh);
    assert_eq!(r.status(), StatusCode::CREATED, "{:?}", r.text());
    // Never an arbitrary URL, nor keys that are not a browser's.
    for (endpoint, key, why) in [
        (
            "https://evil.example/x",
            service.p256dh.as_str(),
            "push service",
        ),
        ("http://10.0.0.1/x", service.p256dh.as_str(), "loopback"),
        (&service.endpoint("/push/x"), "AAAA", "p256dh"),
    ] {
        let r = subscribe(endpoint, key);
        assert_eq!(r.status(), StatusCode::BAD_REQUEST, "{endpoint}");
        let said = r.text().unwrap();
        assert!(said.contains(why), "{endpoint}: {said}");
    }

    // A new request is pushed.
    let asker = spawn_ask(
        &p,
        &[
            "--type",
            "approval",
            "--timeout",
            "60",
            "--priority",
            "high",
            "Deploy to production?",
        ],
    );
    let pushed = service.next();
    assert_eq!(pushed["path"], "/push/desk", "{pushed}");
    assert_eq!(pushed["content_encoding"], "aes128gcm", "{pushed}");
    assert_eq!(
        pushed["content_type"], "application/octet-stream",
        "{pushed}"
    );
    assert_eq!(pushed["urgency"], "high", "{pushed}");
    let ttl: u64 = pushed["ttl"].as_str().unwrap().parse().unwrap();
    assert!(
        (50..=60).contains(&ttl),
        "the request's time left: {pushed}"
    );
    let v = &pushed["vapid"];
    assert_eq!(
        v["verified"], true,
        "the VAPID signature verifies: {pushed}"
    );
    assert_eq!(
        v["header"],
        json!({ "typ": "JWT", "alg": "ES256" }),
        "{pushed}"
    );
    assert_eq!(
        v["aud_ok"], true,
        "aud is the push service's origin: {pushed}"
    );
    assert_eq!(v["exp_ok"], true, "exp within 24 h: {pushed}");
    assert_eq!(v["sub_ok"], true, "sub a mailto: or https: URL: {pushed}");
    assert_eq!(v["k"], server_key.as_str(), "{pushed}");
    let m = &pushed["message"];
    assert_eq!(m["type"], "request", "decrypted by http_ece: {pushed}");
    let id = m["id"].as_str().unwrap().to_string();
    assert_eq!(m["question"], "Deploy to production?");
    assert_eq!(m["kind"], "approval");
    assert_eq!(m["url"], format!("/#request={id}"));
    assert_eq!(pushed["topic"].as_str().unwrap().len(), 32, "{pushed}");
    let actions = m["actions"].as_array().unwrap();
    assert_eq!(actions.len(), 2, "{m}");
    assert_eq!(actions[0]["title"], "Approve");
    assert_eq!(actions[1]["answer"], json!({ "approved": false }));

    // The Approve button's body, posted as the service worker posts it, answers.
    let r = call(
        reqwest::Method::POST,
        &format!("/api/v1/requests/{id}/respond"),
    )
    .json(&actions[0]["answer"])
    .send()
    .unwrap();
    assert_eq!(r.status(), StatusCode::OK, "{:?}", r.text());
    let asked = wait_output(asker, Duration::from_secs(10));
    assert!(
        String::from_utf8_lossy(&asked.stdout).starts_with("approved"),
        "{asked:?}"
    );
    // The push is in the request's trail: where it went, delivered.
    let mut trail = Value::Null;
    crate::support::eventually("the push in the trail", Duration::from_secs(10), || {
        trail = call(
            reqwest::Method::GET,
            &format!("/api/v1/requests/{id}/trail"),
        )
        .send()
        .unwrap()
        .json()
        .unwrap();
        trail.as_array().is_some_and(|t| t.len() >= 2)
    });
    // Nobody at the desk: the ladder's away step, then the push it made.
    assert_eq!(trail[0]["step"], "escalated", "{trail}");
    assert_eq!(trail[0]["detail"]["step"], "away", "{trail}");
    assert_eq!(trail[1]["step"], "notified", "{trail}");
    assert_eq!(trail[1]["surface"], "push", "{trail}");
    assert_eq!(
        trail[1]["detail"]["to"],
        format!("http://127.0.0.1:{}", service.port),
        "{trail}"
    );
    assert_eq!(trail[1]["detail"]["delivered"], true, "{trail}");

    // Its end is pushed too, under the same topic, so the notification goes away.
    let ended = service.next();
    assert_eq!(ended["message"]["type"], "ended", "{ended}");
    assert_eq!(ended["message"]["id"], id.as_str());
    assert_eq!(ended["message"]["status"], "answered");
    assert_eq!(ended["topic"], pushed["topic"]);

    // A subscription its service says is gone (410) is forgotten.
    let r = subscribe(&service.endpoint("/gone/old-phone"), &service.p256dh);
    assert_eq!(r.status(), StatusCode::CREATED);
    let asker = spawn_ask(&p, &["--type", "text", "--timeout", "2", "Which branch?"]);
    let mut paths: Vec<String> = (0..2)
        .map(|_| service.next()["path"].as_str().unwrap().to_string())
        .collect();
    paths.sort();
    assert_eq!(paths, ["/gone/old-phone", "/push/desk"]);
    let kept = p.home.join("push-subscriptions");
    crate::support::eventually(
        "the gone subscription forgotten",
        Duration::from_secs(10),
        || !std::fs::read_to_string(&kept).unwrap().contains("/gone/"),
    );
    let _ = wait_output(asker, Duration::from_secs(10));
    // Its end (the asker withdrew it at its own deadline) is pushed to the one left.
    let ended = service.next();
    assert_eq!(ended["path"], "/push/desk");
    assert_eq!(ended["message"]["status"], "withdrawn", "{ended}");

    // Unsubscribed: nothing more.
    let r = call(
        reqwest::Method::DELETE,
        &format!(
            "/api/v1/push/subscriptions?endpoint={}",
            service
                .endpoint("/push/desk")
                .replace(':', "%3A")
                .replace('/', "%2F")
        ),
    )
    .send()
    .unwrap();
    assert_eq!(r.status(), StatusCode::OK, "{:?}", r.text());
    let asker = spawn_ask(&p, &["--type", "text", "--timeout", "1", "Anyone?"]);
    service.quiet(Duration::from_secs(2));
    let _ = wait_output(asker, Duration::from_secs(10));
}

#[test]
fn a_devices_subscription_ends_with_the_device() {
    let service = Service::start();
    let p = Project::new();
    p.user_config("[http]\ndelivery_hosts = [\"127.0.0.1\"]\n");
    let _listener = p.listen(&["--ui", "none", "--http", "127.0.0.1:0"]);
    let base = p.http_url();
    let out = p.run(&["pair", "--name", "phone", "--json"]);
    let pairing: Value = serde_json::from_slice(&out.stdout).unwrap();
    let r = Client::new()
        .get(pairing["url"].as_str().unwrap())
        .send()
        .unwrap();
    let cookie = r.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_string();
    let http = Client::new();
    let r = http
        .post(format!("{base}/api/v1/push/subscriptions"))
        .header("cookie", &cookie)
        .header("origin", &base)
        .json(&json!({
            "endpoint": service.endpoint("/push/phone"),
            "keys": { "p256dh": service.p256dh, "auth": service.auth },
        }))
        .send()
        .unwrap();
    assert_eq!(r.status(), StatusCode::CREATED, "{:?}", r.text());
    let subscribed: Value = r.json().unwrap();
    let device = subscribed["device"].as_str().unwrap().to_string();

    let asker = spawn_ask(&p, &["--type", "yesno", "--timeout", "1", "Ship it?"]);
    let pushed = service.next();
    assert_eq!(pushed["path"], "/push/phone");
    let options: Vec<&Value> = pushed["message"]["actions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| &a["answer"])
        .collect();
    assert_eq!(
        options,
        [&json!({ "response": "yes" }), &json!({ "response": "no" })]
    );
    let _ = wait_output(asker, Duration::from_secs(10));
    assert_eq!(service.next()["message"]["type"], "ended");

    // Revoked: its subscription goes with it, at once.
    let out = p.run(&["devices", "revoke", &device]);
    assert!(out.status.success(), "{out:?}");
    let asker = spawn_ask(&p, &["--type", "yesno", "--timeout", "1", "Ship it now?"]);
    service.quiet(Duration::from_secs(2));
    let _ = wait_output(asker, Duration::from_secs(10));
    assert!(
        !std::fs::read_to_string(p.home.join("push-subscriptions"))
            .unwrap_or_default()
            .contains("/push/phone")
    );
}

/// Chromium, headless, driven over the DevTools protocol (what WebDriver cannot
/// reach: a service worker's context, its push events, its notifications).
struct Chromium {
    child: Child,
    _profile: tempfile::TempDir,
    ws: tokio_tungstenite::WebSocketStream<
        tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>,
    >,
    next_id: u64,
    events: Vec<Value>,
}

impl Chromium {
    async fn start() -> Chromium {
        let profile = tempfile::tempdir().unwrap();
        let mut child = Command::new("/usr/bin/chromium")
            .args([
                "--headless=new",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--no-first-run",
                "--remote-debugging-port=0",
            ])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg("about:blank")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("/usr/bin/chromium (tools/test-all installs it)");
        // "DevTools listening on ws://127.0.0.1:PORT/devtools/browser/ID"
        let stderr = BufReader::new(child.stderr.take().unwrap());
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in stderr.lines().map_while(Result::ok) {
                if let Some(url) = line.strip_prefix("DevTools listening on ") {
                    let _ = tx.send(url.trim().to_string());
                }
            }
        });
        let url = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("Chromium says where its DevTools listen");
        let (ws, _) = tokio_tungstenite::connect_async(url.as_str())
            .await
            .unwrap();
        Chromium {
            child,
            _profile: profile,
            ws,
            next_id: 0,
            events: Vec::new(),
        }
    }

    /// Calls `method` (in `session`, an attached target, or the browser's own).
    async fn call(&mut self, session: Option<&str>, method: &str, params: Value) -> Value {
        use futures_util::{SinkExt as _, StreamExt as _};
        use tokio_tungstenite::tungstenite::Message;
        self.next_id += 1;
        let id = self.next_id;
        let mut msg = json!({ "id": id, "method": method, "params": params });
        if let Some(s) = session {
            msg["sessionId"] = json!(s);
        }
        self.ws.send(Message::text(msg.to_string())).await.unwrap();
        loop {
            let next = tokio::time::timeout(Duration::from_secs(30), self.ws.next())
                .await
                .unwrap_or_else(|_| panic!("no answer to {method} in 30 s"))
                .unwrap()
                .unwrap();
            let Message::Text(text) = next else { continue };
            let v: Value = serde_json::from_str(&text).unwrap();
            if v["id"] == id {
                assert!(v.get("error").is_none(), "{method}: {v}");
                return v["result"].clone();
            }
            self.events.push(v);
        }
    }

    /// Evaluates `js` in `session` and waits for its promise: its value.
    async fn eval(&mut self, session: &str, js: &str) -> Value {
        let r = self
            .call(
                Some(session),
                "Runtime.evaluate",
                json!({ "expression": js, "awaitPromise": true, "returnByValue": true }),
            )
            .await;
        assert!(r.get("exceptionDetails").is_none(), "{js}: {r}");
        r["result"]["value"].clone()
    }

    /// Evaluates `js` in `session` every 100 ms until its value passes `done` (10 s
    /// at most); the last value.
    async fn eval_until(
        &mut self,
        session: &str,
        js: &str,
        done: impl Fn(&Value) -> bool,
    ) -> Value {
        let mut value = Value::Null;
        for _ in 0..100 {
            value = self.eval(session, js).await;
            if done(&value) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        value
    }

    /// Attaches to the first target of `kind` whose URL ends with `suffix`.
    async fn attach(&mut self, kind: &str, suffix: &str) -> String {
        for _ in 0..100 {
            let targets = self.call(None, "Target.getTargets", json!({})).await;
            let found = targets["targetInfos"].as_array().unwrap().iter().find(|t| {
                t["type"] == kind && t["url"].as_str().unwrap_or_default().ends_with(suffix)
            });
            if let Some(t) = found {
                let id = t["targetId"].clone();
                let r = self
                    .call(
                        None,
                        "Target.attachToTarget",
                        json!({ "targetId": id, "flatten": true }),
                    )
                    .await;
                return r["sessionId"].as_str().unwrap().to_string();
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("no {kind} target at …{suffix}");
    }
}

impl Drop for Chromium {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_chromium_a_pushed_requests_approve_button_answers_it() {
    if !std::path::Path::new("/usr/bin/chromium").exists() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI must have chromium (tools/test-all installs it)"
        );
        eprintln!("SKIPPED: no /usr/bin/chromium");
        return;
    }
    let service = Service::start();
    let p = Project::new();
    // The phone's own dashboard is open, so someone is present: pushed at once.
    p.user_config("[http]\ndelivery_hosts = [\"127.0.0.1\"]\n[escalation]\nat_once = [\"push\"]\n");
    let _listener = p.listen(&["--ui", "none", "--http", "127.0.0.1:0"]);
    let base = p.http_url();
    let out = p.run(&["pair", "--name", "phone", "--json"]);
    let pairing: Value = serde_json::from_slice(&out.stdout).unwrap();
    let link = pairing["url"].as_str().unwrap().to_string();

    // The phone opens the pairing link; its dashboard registers the service worker.
    let mut chromium = Chromium::start().await;
    chromium
        .call(
            None,
            "Browser.grantPermissions",
            json!({ "origin": base, "permissions": ["notifications"] }),
        )
        .await;
    let page = chromium
        .call(None, "Target.createTarget", json!({ "url": link }))
        .await;
    let page = chromium
        .call(
            None,
            "Target.attachToTarget",
            json!({ "targetId": page["targetId"], "flatten": true }),
        )
        .await["sessionId"]
        .as_str()
        .unwrap()
        .to_string();
    let ready = chromium
        .eval_until(
            &page,
            "location.pathname === '/' && document.readyState === 'complete' && \
                 'serviceWorker' in navigator ? navigator.serviceWorker.ready.then((r) => r.active.state) : null",
            |v| *v == "activated",
        )
        .await;
    assert_eq!(ready, "activated", "the dashboard's service worker runs");
    chromium
        .call(Some(&page), "ServiceWorker.enable", json!({}))
        .await;
    let mut registration = None;
    for _ in 0..50 {
        registration = chromium.events.iter().find_map(|e| {
            (e["method"] == "ServiceWorker.workerRegistrationUpdated")
                .then(|| e["params"]["registrations"].as_array())
                .flatten()
                .and_then(|rs| {
                    rs.iter()
                        .find(|r| r["scopeURL"].as_str().is_some_and(|s| s.starts_with(&base)))
                })
                .map(|r| r["registrationId"].clone())
        });
        if registration.is_some() {
            break;
        }
        chromium.call(None, "Target.getTargets", json!({})).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let registration = registration.expect("the worker's registration is told");
    let worker = chromium.attach("service_worker", "/sw.js").await;

    // The request's push, as hitl sent it through the push service and the stand-in
    // browser decrypted it, delivered to the worker as Chromium delivers a push.
    let status = tokio::task::block_in_place(|| {
        Client::new()
            .post(format!("{base}/api/v1/push/subscriptions"))
            .bearer_auth(p.token())
            .json(&json!({
                "endpoint": service.endpoint("/push/phone"),
                "keys": { "p256dh": service.p256dh, "auth": service.auth },
            }))
            .send()
            .unwrap()
            .status()
    });
    assert_eq!(status, StatusCode::CREATED);
    let asker = spawn_ask(
        &p,
        &[
            "--type",
            "approval",
            "--timeout",
            "60",
            "Merge the release branch?",
        ],
    );
    let pushed = service.next();
    let deliver = |message: &Value| json!({ "origin": base, "registrationId": registration, "data": message.to_string() });
    chromium
        .call(
            Some(&page),
            "ServiceWorker.deliverPushMessage",
            deliver(&pushed["message"]),
        )
        .await;
    let shown = chromium
        .eval_until(
            &worker,
            "self.registration.getNotifications().then((ns) => ns.map((n) => \
             ({ tag: n.tag, title: n.title, body: n.body, actions: n.actions.map((a) => a.title) })))",
            |v| v.as_array().is_some_and(|a| !a.is_empty()),
        )
        .await;
    let shown = &shown[0];
    assert_eq!(shown["tag"], pushed["message"]["id"], "{shown}");
    assert!(
        shown["title"].as_str().unwrap().ends_with(" asks"),
        "{shown}"
    );
    assert_eq!(shown["body"], "Merge the release branch?", "{shown}");
    assert_eq!(shown["actions"], json!(["Approve", "Deny"]), "{shown}");

    // Its Approve button, as the worker's notificationclick handler takes it.
    chromium
        .eval(
            &worker,
            "self.registration.getNotifications().then((ns) => onNotificationClick(ns[0], 'a0')).then(() => true)",
        )
        .await;
    let asked = wait_output(asker, Duration::from_secs(10));
    assert!(
        String::from_utf8_lossy(&asked.stdout).starts_with("approved"),
        "{asked:?}"
    );
    let by = p.history()[0]["responded_by"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        by.starts_with("dashboard:") && by.ends_with(" (phone)"),
        "{by}"
    );

    // The end's push takes the notification away.
    let ended = service.next();
    assert_eq!(ended["message"]["type"], "ended");
    chromium
        .call(
            Some(&page),
            "ServiceWorker.deliverPushMessage",
            deliver(&ended["message"]),
        )
        .await;
    let left = chromium
        .eval_until(
            &worker,
            "self.registration.getNotifications().then((ns) => ns.length)",
            |v| *v == 0,
        )
        .await;
    assert_eq!(left, 0, "the notification is closed on the request's end");

    // The dashboard's history shows the decision's trail: pushed, then approved
    // from the phone.
    chromium
        .eval(
            &page,
            "document.querySelector('[data-view=history]').click(), true",
        )
        .await;
    let trail = chromium
        .eval_until(
            &page,
            "(() => { const b = document.querySelector('.history-row .trail-toggle'); \
                 const t = document.querySelector('.history-row .trail'); \
                 if (t && t.children.length) return t.innerText; if (b && !t) b.click(); return null; })()",
            Value::is_string,
        )
        .await;
    let trail = trail.as_str().expect("the trail shown");
    assert!(
        trail.contains("notified · push · http://127.0.0.1:"),
        "{trail}"
    );
    assert!(trail.contains("delivered"), "{trail}");
    assert!(trail.contains("answered by dashboard:"), "{trail}");
}

/// Replicas of `hitl serve` that share a store and the user's subscriptions push
/// each request once (the first to claim it), and the one that ends it takes the
/// notification away, whichever pushed it.
#[test]
fn replicas_sharing_the_subscriptions_push_each_request_once() {
    let service = Service::start();
    let (db, _guard) = crate::store::pg_schema_url();
    let p = Project::new();
    p.user_config("[http]\ndelivery_hosts = [\"127.0.0.1\"]\n[escalation]\nat_once = [\"push\"]\n");
    let (_a, a) = crate::replicas::serve(&p, &db);
    let (_b, b) = crate::replicas::serve(&p, &db);
    let http = Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    let token = p.token();
    let r = http
        .post(format!("{a}/api/v1/push/subscriptions"))
        .bearer_auth(&token)
        .json(&json!({
            "endpoint": service.endpoint("/push/desk"),
            "keys": { "p256dh": service.p256dh, "auth": service.auth },
        }))
        .send()
        .unwrap();
    assert_eq!(r.status(), StatusCode::CREATED, "{:?}", r.text());

    for (asked_on, answered_on) in [(&a, &b), (&b, &a)] {
        let created: Value = http
            .post(format!("{asked_on}/api/v1/requests"))
            .bearer_auth(&token)
            .json(&json!({ "content": "Ship it?", "type": "approval" }))
            .send()
            .unwrap()
            .json()
            .unwrap();
        let id = created["id"].as_str().unwrap().to_string();
        let pushed = service.next();
        assert_eq!(pushed["message"]["type"], "request", "{pushed}");
        assert_eq!(pushed["message"]["id"], id.as_str(), "{pushed}");
        // The other replica queues it too (at once, by LISTEN/NOTIFY, and at its
        // resync, every 2 s): it does not push it again.
        service.quiet(Duration::from_secs(3));
        let r = http
            .post(format!("{answered_on}/api/v1/requests/{id}/respond"))
            .bearer_auth(&token)
            .json(&json!({ "approved": true }))
            .send()
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK, "{:?}", r.text());
        let ended = service.next();
        assert_eq!(ended["message"]["type"], "ended", "{ended}");
        assert_eq!(ended["message"]["id"], id.as_str(), "{ended}");
        service.quiet(Duration::from_secs(2));
    }
}
