//! The HTTP API against a real `hitl listen` / `hitl serve`: seed 004's routes, the
//! native API, auth, limits, bad input, WebSocket delivery and streams, and requests
//! crossing between the spool and HTTP.

use std::{process::Stdio, time::Duration};

use reqwest::{
    StatusCode,
    blocking::{Client, Response},
};
use serde_json::{Value, json};

use crate::support::{Listener, Project, eventually, spawn_ask, wait_output};

/// A listener serving HTTP on a free loopback port, and a client for it.
pub(crate) struct Api {
    pub(crate) project: Project,
    pub(crate) listener: Listener,
    pub(crate) base: String,
    pub(crate) token: String,
    pub(crate) http: Client,
}

impl Api {
    pub(crate) fn start(config: Option<&str>) -> Api {
        let project = Project::new();
        if let Some(c) = config {
            project.user_config(c);
        }
        let listener = project.listen(&["--ui", "none", "--http", "127.0.0.1:0"]);
        Api::attach(project, listener)
    }

    pub(crate) fn attach(project: Project, listener: Listener) -> Api {
        let base = project.http_url();
        let token = project.token();
        Api {
            project,
            listener,
            base,
            token,
            http: Client::builder()
                .timeout(Duration::from_secs(30))
                .build()
                .unwrap(),
        }
    }

    /// Kills the listener with SIGKILL and starts another on the same project.
    pub(crate) fn killed_and_restarted(self) -> Api {
        let Api {
            project, listener, ..
        } = self;
        listener.signal(nix::sys::signal::Signal::SIGKILL);
        let listener = project.listen(&["--ui", "none", "--http", "127.0.0.1:0"]);
        Api::attach(project, listener)
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// POST JSON without the token (as seed clients do).
    pub(crate) fn post_open(&self, path: &str, body: &Value) -> Response {
        self.http.post(self.url(path)).json(body).send().unwrap()
    }

    pub(crate) fn post(&self, path: &str, body: &Value) -> Response {
        self.http
            .post(self.url(path))
            .bearer_auth(&self.token)
            .json(body)
            .send()
            .unwrap()
    }

    pub(crate) fn get_open(&self, path: &str) -> Response {
        self.http.get(self.url(path)).send().unwrap()
    }

    pub(crate) fn get(&self, path: &str) -> Response {
        self.http
            .get(self.url(path))
            .bearer_auth(&self.token)
            .send()
            .unwrap()
    }
}

pub(crate) fn json_of(r: Response) -> (StatusCode, Value) {
    let status = r.status();
    let text = r.text().unwrap();
    let v =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{status}: not JSON ({e}): {text}"));
    (status, v)
}

pub(crate) fn hitl_event(kind: &str, question: &str, extra: Value) -> Value {
    let mut h = json!({ "type": kind, "question": question, "responseWebSocketUrl": "" });
    if let Value::Object(m) = extra {
        for (k, v) in m {
            h[k] = v;
        }
    }
    json!({
        "source_app": "demo-app",
        "session_id": "sess-1",
        "hook_event_type": "PreToolUse",
        "payload": { "tool_name": "Bash" },
        "humanInTheLoop": h,
    })
}

#[test]
fn seed_routes_status_codes_bodies_and_headers() {
    let api = Api::start(None);

    // A plain event: stored for the feed, no request.
    let (s, plain) = json_of(api.post_open(
        "/events",
        &json!({ "source_app": "demo-app", "session_id": "sess-1", "hook_event_type": "Notification", "payload": {"m": 1} }),
    ));
    assert_eq!(s, StatusCode::CREATED, "{plain}");
    let plain_id = plain["id"].as_i64().unwrap();
    assert!(plain.get("humanInTheLoopStatus").is_none());

    // An approval request, idempotent by key.
    let event = hitl_event(
        "approval",
        "Run rm -rf build?",
        json!({ "context": { "command": "rm -rf build" } }),
    );
    let first = api
        .http
        .post(api.url("/events"))
        .header("Idempotency-Key", "key-1")
        .json(&event)
        .send()
        .unwrap();
    let (s, created) = json_of(first);
    assert_eq!(s, StatusCode::CREATED, "{created}");
    assert_eq!(created["humanInTheLoopStatus"]["status"], "pending");
    assert_eq!(created["source_app"], "demo-app");
    let id = created["id"].as_i64().unwrap();
    let again = api
        .http
        .post(api.url("/events"))
        .header("Idempotency-Key", "key-1")
        .json(&event)
        .send()
        .unwrap();
    let (s, repeat) = json_of(again);
    assert_eq!(s, StatusCode::OK);
    assert_eq!(
        repeat["id"].as_i64(),
        Some(id),
        "a repeat returns the first event"
    );
    let (_, pending) = json_of(api.get("/api/v1/requests"));
    assert_eq!(
        pending.as_array().unwrap().len(),
        1,
        "one request, not two: {pending}"
    );

    // Poll: 202 with Retry-After while pending.
    let r = api.get_open(&format!("/events/{id}/response"));
    assert_eq!(r.status(), StatusCode::ACCEPTED);
    assert_eq!(r.headers()["retry-after"], "2");
    let (_, body) = json_of(r);
    assert_eq!(
        body,
        json!({ "success": false, "error": "No response yet", "status": "pending" })
    );

    // Answering needs the token; the field must fit the type.
    let r = api.post_open(
        &format!("/events/{id}/respond"),
        &json!({ "approved": true }),
    );
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    let (s, e) = json_of(api.post(&format!("/events/{id}/respond"), &json!({ "choice": "a" })));
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert!(e["error"].as_str().unwrap().contains("\"approved\""), "{e}");

    let (s, done) = json_of(api.post(
        &format!("/events/{id}/respond"),
        &json!({ "approved": true, "comment": "fine", "respondedBy": "alice" }),
    ));
    assert_eq!(s, StatusCode::OK, "{done}");
    assert_eq!(done["success"], true);
    assert_eq!(done["deliveryStatus"], "no_websocket");
    assert_eq!(done["event"]["humanInTheLoopStatus"]["status"], "responded");
    let key = done["idempotencyKey"].as_str().unwrap().to_string();
    assert_eq!(key.len(), 36);

    // A second answer: 409, saying who answered.
    let (s, e) = json_of(api.post(
        &format!("/events/{id}/respond"),
        &json!({ "approved": false }),
    ));
    assert_eq!(s, StatusCode::CONFLICT);
    assert!(e["error"].as_str().unwrap().contains("alice"), "{e}");

    // The poll now has it, with the same idempotency key.
    let (s, got) = json_of(api.get_open(&format!("/events/{id}/response")));
    assert_eq!(s, StatusCode::OK);
    assert_eq!(got["success"], true);
    assert_eq!(got["data"]["approved"], true);
    assert_eq!(got["data"]["comment"], "fine");
    assert_eq!(got["data"]["respondedBy"], "alice");
    assert_eq!(got["data"]["idempotencyKey"], key.as_str());
    assert_eq!(got["data"]["eventId"].as_i64(), Some(id));

    // Unknown id 404; an event without a request 400.
    assert_eq!(
        api.get_open("/events/999999/response").status(),
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        api.post("/events/999999/respond", &json!({ "response": "x" }))
            .status(),
        StatusCode::NOT_FOUND
    );
    let (s, e) = json_of(api.get_open(&format!("/events/{plain_id}/response")));
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert!(
        e["error"]
            .as_str()
            .unwrap()
            .contains("not a human-in-the-loop"),
        "{e}"
    );

    // Recent events and filter options (token).
    assert_eq!(
        api.get_open("/events/recent").status(),
        StatusCode::UNAUTHORIZED
    );
    let (s, recent) = json_of(api.get("/events/recent?limit=10"));
    assert_eq!(s, StatusCode::OK);
    let recent = recent.as_array().unwrap();
    assert_eq!(recent.len(), 2);
    assert_eq!(recent[0]["id"].as_i64(), Some(id), "newest first");
    assert_eq!(recent[0]["humanInTheLoopStatus"]["status"], "responded");
    assert_eq!(
        recent[0]["humanInTheLoopStatus"]["response"]["approved"],
        true
    );
    let (_, opts) = json_of(api.get("/events/filter-options"));
    assert_eq!(opts["source_apps"], json!(["demo-app"]));
    assert_eq!(
        opts["hook_event_types"],
        json!(["Notification", "PreToolUse"])
    );

    // The choice type answers with "choice", which must be an option.
    let (_, c) = json_of(api.post_open(
        "/events",
        &hitl_event("choice", "Which?", json!({ "choices": ["red", "blue"] })),
    ));
    let cid = c["id"].as_i64().unwrap();
    let (s, _) = json_of(api.post(
        &format!("/events/{cid}/respond"),
        &json!({ "choice": "green" }),
    ));
    assert_eq!(s, StatusCode::BAD_REQUEST);
    let (s, _) = json_of(api.post(
        &format!("/events/{cid}/respond"),
        &json!({ "choice": "blue" }),
    ));
    assert_eq!(s, StatusCode::OK);
    let (_, got) = json_of(api.get_open(&format!("/events/{cid}/response")));
    assert_eq!(got["data"]["choice"], "blue");

    // Permission answers with "permission"; question with "response".
    let (_, p) = json_of(api.post_open(
        "/events",
        &hitl_event("permission", "Write /etc?", json!({})),
    ));
    let pid = p["id"].as_i64().unwrap();
    let (s, _) = json_of(api.post(
        &format!("/events/{pid}/respond"),
        &json!({ "permission": false }),
    ));
    assert_eq!(s, StatusCode::OK);
    let (_, got) = json_of(api.get_open(&format!("/events/{pid}/response")));
    assert_eq!(got["data"]["permission"], false);
    let (_, q) =
        json_of(api.post_open("/events", &hitl_event("question_input", "Name?", json!({}))));
    let qid = q["id"].as_i64().unwrap();
    let (s, _) = json_of(api.post(
        &format!("/events/{qid}/respond"),
        &json!({ "cancelled": true }),
    ));
    assert_eq!(s, StatusCode::OK);
    let (_, got) = json_of(api.get_open(&format!("/events/{qid}/response")));
    assert_eq!(got["data"]["cancelled"], true);
}

#[test]
fn a_request_past_its_timeout_is_timeout_and_a_late_answer_gets_410() {
    let api = Api::start(None);
    let (_, c) = json_of(api.post_open(
        "/events",
        &hitl_event("question", "Quick?", json!({ "timeout": 1 })),
    ));
    let id = c["id"].as_i64().unwrap();
    eventually("the request times out", Duration::from_secs(10), || {
        let r = api.get_open(&format!("/events/{id}/response"));
        let status = r.status();
        let (_, v) = json_of(r);
        status == StatusCode::ACCEPTED && v["status"] == "timeout"
    });
    let r = api.post(
        &format!("/events/{id}/respond"),
        &json!({ "response": "too late" }),
    );
    assert_eq!(r.status(), StatusCode::GONE);
    let (_, e) = json_of(r);
    assert!(e["error"].as_str().unwrap().contains("timed out"), "{e}");
    let (_, got) = json_of(api.get(&format!("/api/v1/requests/{id}")));
    assert_eq!(got["status"], "timeout");
}

#[test]
fn a_spool_question_is_answered_over_http() {
    let api = Api::start(None);
    let asker = spawn_ask(&api.project, &["--timeout", "30", "Favourite colour?"]);
    let pending = api.project.wait_pending(1, Duration::from_secs(10));
    let id = pending[0]["id"].as_str().unwrap().to_string();
    // It is in the one queue the API lists too.
    eventually("the API lists it", Duration::from_secs(5), || {
        let (_, list) = json_of(api.get("/api/v1/requests"));
        list.as_array()
            .unwrap()
            .iter()
            .any(|r| r["id"] == id.as_str() && r["origin"] == "spool")
    });
    let (s, done) = json_of(api.post(
        &format!("/events/{id}/respond"),
        &json!({ "response": "blue" }),
    ));
    assert_eq!(s, StatusCode::OK, "{done}");
    assert_eq!(done["deliveryStatus"], "delivered");
    let out = wait_output(asker, Duration::from_secs(10));
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "blue\n");
}

#[test]
fn an_http_request_is_answered_with_hitl_answer_and_the_terminal() {
    // hitl answer, from another terminal in the project.
    let api = Api::start(None);
    let (_, c) = json_of(api.post_open(
        "/events",
        &hitl_event(
            "choice",
            "Deploy where?",
            json!({ "choices": ["staging", "prod"] }),
        ),
    ));
    let id = c["id"].as_i64().unwrap().to_string();
    let out = api.project.run(&["answer", &id, "2"]);
    assert!(out.status.success(), "{out:?}");
    let (s, got) = json_of(api.get_open(&format!("/events/{id}/response")));
    assert_eq!(s, StatusCode::OK);
    assert_eq!(got["data"]["choice"], "prod");
    assert!(
        got["data"]["respondedBy"]
            .as_str()
            .unwrap()
            .starts_with("cli:")
    );
    let again = api.project.run(&["answer", &id, "1"]);
    assert!(!again.status.success());
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("already answered"),
        "{again:?}"
    );
    drop(api);

    // The terminal responder of the listener.
    let p = Project::new();
    let mut listener = p.listen_with_stdin(&["--http", "127.0.0.1:0"]);
    let mut stdin = listener.child.stdin.take().unwrap();
    let api = Api::attach(p, listener);
    let (_, c) =
        json_of(api.post_open("/events", &hitl_event("question", "Your name?", json!({}))));
    let id = c["id"].as_i64().unwrap();
    api.listener
        .wait_stdout("Your name?", Duration::from_secs(10));
    std::io::Write::write_all(&mut stdin, b"Ada\n").unwrap();
    eventually(
        "the terminal's answer arrives",
        Duration::from_secs(10),
        || api.get_open(&format!("/events/{id}/response")).status() == StatusCode::OK,
    );
    let (_, got) = json_of(api.get_open(&format!("/events/{id}/response")));
    assert_eq!(got["data"]["response"], "Ada");
    assert_eq!(got["data"]["respondedBy"], "terminal");
}

#[test]
fn native_api_and_ask_over_the_server() {
    let api = Api::start(None);
    // hitl ask --server: create + long-poll; answered over the native API.
    let mut ask = api.project.hitl();
    ask.args([
        "ask", "--server", &api.base, "--type", "select", "-o", "one", "-o", "two", "Pick",
    ])
    .env("HITL_TOKEN", &api.token)
    .current_dir(api.project.tmp.path())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let asker = ask.spawn().unwrap();
    let mut id = String::new();
    eventually(
        "the question reaches the server",
        Duration::from_secs(10),
        || {
            let (_, list) = json_of(api.get("/api/v1/requests"));
            match list.as_array().unwrap().first() {
                Some(r) => {
                    id = r["id"].as_str().unwrap().to_string();
                    true
                }
                None => false,
            }
        },
    );
    let (s, one) = json_of(api.get(&format!("/api/v1/requests/{id}")));
    assert_eq!(s, StatusCode::OK);
    assert_eq!(one["status"], "pending");
    assert_eq!(one["request"]["options"], json!(["one", "two"]));
    // A long poll that runs out: 202.
    let r = api.get(&format!("/api/v1/requests/{id}/wait?timeout=0.2"));
    assert_eq!(r.status(), StatusCode::ACCEPTED);
    let (s, done) = json_of(api.post(
        &format!("/api/v1/requests/{id}/respond"),
        &json!({ "choice": "two" }),
    ));
    assert_eq!(s, StatusCode::OK, "{done}");
    let out = wait_output(asker, Duration::from_secs(10));
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "two\n");
    let (s, ended) = json_of(api.get(&format!("/api/v1/requests/{id}/wait")));
    assert_eq!(s, StatusCode::OK);
    assert_eq!(ended["answer"]["content"], "two");

    // Create natively, cancel: the waiter sees it cancelled; history lists it.
    let (s, c) = json_of(api.post_open(
        "/api/v1/requests",
        &json!({ "content": "Approve?", "type": "approval", "agent_id": "bot-7" }),
    ));
    assert_eq!(s, StatusCode::CREATED, "{c}");
    let cid = c["id"].as_str().unwrap().to_string();
    let (s, _) = json_of(api.post(
        &format!("/api/v1/requests/{cid}/cancel"),
        &json!({ "reason": "not now" }),
    ));
    assert_eq!(s, StatusCode::OK);
    let (_, w) = json_of(api.get(&format!("/api/v1/requests/{cid}/wait")));
    assert_eq!(w["status"], "cancelled");
    let (_, hist) = json_of(api.get("/api/v1/requests?status=cancelled"));
    assert!(
        hist.as_array()
            .unwrap()
            .iter()
            .any(|h| h["id"] == cid.as_str()),
        "{hist}"
    );
    assert_eq!(
        api.get("/api/v1/requests?status=bogus").status(),
        StatusCode::BAD_REQUEST
    );

    // ask --server exit codes: denied 1, timeout 2, unreachable 3.
    let mut deny = api.project.hitl();
    deny.args([
        "ask", "--server", &api.base, "--type", "approval", "Deploy?",
    ])
    .env("HITL_TOKEN", &api.token)
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let asker = deny.spawn().unwrap();
    let mut did = String::new();
    eventually("the approval arrives", Duration::from_secs(10), || {
        let (_, list) = json_of(api.get("/api/v1/requests"));
        match list
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["request"]["content"] == "Deploy?")
        {
            Some(r) => {
                did = r["id"].as_str().unwrap().to_string();
                true
            }
            None => false,
        }
    });
    let out = api
        .project
        .run(&["answer", &did, "--deny", "--comment", "no"]);
    assert!(out.status.success(), "{out:?}");
    let out = wait_output(asker, Duration::from_secs(10));
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let out = api
        .project
        .hitl()
        .args(["ask", "--server", &api.base, "--timeout", "1", "Anyone?"])
        .env("HITL_TOKEN", &api.token)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let out = api
        .project
        .hitl()
        .args(["ask", "--server", "http://127.0.0.1:1", "Anyone?"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("cannot reach"),
        "{out:?}"
    );

    // Agents, events, metrics, health, OpenAPI.
    let (_, agents) = json_of(api.get("/api/v1/agents"));
    assert!(agents.as_array().is_some());
    let (_, events) = json_of(api.get("/api/v1/events"));
    assert!(events.as_array().unwrap().len() >= 3);
    let (s, m) = json_of(api.get("/api/v1/metrics"));
    assert_eq!(s, StatusCode::OK);
    for field in [
        "totalRequests",
        "totalResponses",
        "totalTimeouts",
        "totalErrors",
        "avgResponseTimeMs",
        "pendingRequests",
        "deliveredCount",
        "failedDeliveryCount",
        "pendingPollCount",
    ] {
        assert!(m.get(field).is_some(), "metrics lack {field}: {m}");
    }
    assert!(m["totalRequests"].as_u64().unwrap() >= 4, "{m}");
    assert!(m["totalTimeouts"].as_u64().unwrap() >= 1, "{m}");
    let prom = api.get("/metrics").text().unwrap();
    assert!(
        prom.contains("# TYPE hitl_requests_total counter"),
        "{prom}"
    );
    assert_eq!(api.get_open("/metrics").status(), StatusCode::UNAUTHORIZED);
    let (s, h) = json_of(api.get_open("/healthz"));
    assert_eq!((s, h["status"].as_str()), (StatusCode::OK, Some("ok")));
    let (_, doc) = json_of(api.get_open("/api/v1/openapi.json"));
    assert_eq!(doc["openapi"], "3.1.0");
    let paths = doc["paths"].as_object().unwrap();
    for (method, path) in [
        ("post", "/events"),
        ("post", "/events/{id}/respond"),
        ("get", "/events/{id}/response"),
        ("get", "/api/v1/requests/{id}/wait"),
        ("get", "/api/v1/stream"),
        ("get", "/healthz"),
    ] {
        assert!(
            paths[path].get(method).is_some(),
            "openapi lacks {method} {path}"
        );
    }
    // Every documented route is served: none answers 404 for its own path shape.
    for (path, ops) in paths {
        let concrete = path.replace("{id}", "1").replace("{name}", "n");
        for method in ops.as_object().unwrap().keys() {
            let r = match method.as_str() {
                "get" if concrete.ends_with("stream") => continue,
                "get" => api.get(&concrete),
                "delete" => api
                    .http
                    .delete(api.url(&concrete))
                    .bearer_auth(&api.token)
                    .send()
                    .unwrap(),
                _ => api.post(&concrete, &json!({})),
            };
            let body = r.text().unwrap();
            assert!(!body.is_empty(), "{method} {concrete}: empty body");
            assert!(!body.contains("\"no route\""), "{method} {concrete}");
        }
    }
}

#[test]
fn requests_made_over_http_survive_kill_9() {
    let api = Api::start(None);
    let mut ids = Vec::new();
    for i in 0..20 {
        let (s, c) = json_of(api.post_open(
            "/events",
            &hitl_event("question", &format!("q{i}"), json!({})),
        ));
        assert_eq!(s, StatusCode::CREATED);
        ids.push(c["id"].as_i64().unwrap());
    }
    let api = api.killed_and_restarted();
    let (_, list) = json_of(api.get("/api/v1/requests"));
    let queued: Vec<i64> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap().parse().unwrap())
        .collect();
    assert_eq!(
        queued, ids,
        "every acknowledged request is queued again, in order"
    );
    for id in &ids {
        let (s, _) = json_of(api.post(
            &format!("/events/{id}/respond"),
            &json!({ "response": format!("a{id}") }),
        ));
        assert_eq!(s, StatusCode::OK);
        let (_, got) = json_of(api.get_open(&format!("/events/{id}/response")));
        assert_eq!(got["data"]["response"], format!("a{id}"));
    }
}

/// Creates and answers from several clients at once, the listener killed in the
/// middle: every create and answer it acknowledged is there after the restart (the
/// SQLite writer gathers a commit's WAL frames into one write; acknowledged means
/// written).
#[test]
fn requests_acknowledged_under_load_survive_kill_9() {
    use std::sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    };
    let api = Arc::new(Api::start(Some("[http]\ncreate_rate_limit = 0\n")));
    let stop = Arc::new(AtomicBool::new(false));
    // (event id, whether its answer was acknowledged)
    let acked = Arc::new(Mutex::new(Vec::<(i64, bool)>::new()));
    let clients: Vec<_> = (0..4)
        .map(|c| {
            let (api, stop, acked) = (api.clone(), stop.clone(), acked.clone());
            std::thread::spawn(move || {
                let mut n = 0;
                while !stop.load(Ordering::Relaxed) {
                    let event = hitl_event("question", &format!("c{c} q{n}"), json!({}));
                    let Ok(r) = api.http.post(api.url("/events")).json(&event).send() else {
                        return;
                    };
                    let Ok(created) = r.json::<Value>() else {
                        return;
                    };
                    let Some(id) = created["id"].as_i64() else {
                        return;
                    };
                    n += 1;
                    // Every other one answered too.
                    let answered = n % 2 == 1
                        && api
                            .http
                            .post(api.url(&format!("/events/{id}/respond")))
                            .bearer_auth(&api.token)
                            .json(&json!({ "response": format!("a{id}") }))
                            .send()
                            .is_ok_and(|r| r.status() == StatusCode::OK);
                    acked.lock().unwrap().push((id, answered));
                }
            })
        })
        .collect();
    eventually("200 requests made", Duration::from_secs(20), || {
        acked.lock().unwrap().len() >= 200
    });
    let pid = nix::unistd::Pid::from_raw(api.listener.pid() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL).unwrap();
    stop.store(true, Ordering::Relaxed);
    for c in clients {
        c.join().unwrap();
    }
    let Ok(Api {
        project, listener, ..
    }) = Arc::try_unwrap(api)
    else {
        panic!("a client still holds the API")
    };
    drop(listener);
    let listener = project.listen(&["--ui", "none", "--http", "127.0.0.1:0"]);
    let api = Api::attach(project, listener);
    let acked = acked.lock().unwrap().clone();
    for (id, answered) in acked {
        let r = api.get_open(&format!("/events/{id}/response"));
        let status = r.status();
        let (_, got) = json_of(r);
        if answered {
            assert_eq!(status, StatusCode::OK, "answer to {id} lost: {got}");
            assert_eq!(got["data"]["response"], format!("a{id}"));
        } else {
            // Pending, or answered though the answer's acknowledgement was cut off.
            assert!(
                status == StatusCode::ACCEPTED || status == StatusCode::OK,
                "request {id} lost: {status} {got}"
            );
        }
    }
}

/// An agent-side WebSocket server, as seed 004's hook client runs: it takes one
/// connection and hands over the first text message.
pub(crate) fn agent_socket(
    rt: &tokio::runtime::Runtime,
) -> (u16, std::sync::mpsc::Receiver<String>) {
    use futures_util::StreamExt;
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let port = listener.local_addr().unwrap().port();
    let (tx, rx) = std::sync::mpsc::channel();
    rt.spawn(async move {
        let (stream, _) = listener.accept().await.unwrap();
        let mut ws = tokio_tungstenite::accept_async(stream).await.unwrap();
        while let Some(Ok(msg)) = ws.next().await {
            if let tokio_tungstenite::tungstenite::Message::Text(t) = msg {
                let _ = tx.send(t.to_string());
                break;
            }
        }
    });
    (port, rx)
}

#[test]
fn answers_are_pushed_to_the_agents_websocket_only_where_allowed() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let api = Api::start(None);

    // Delivered to the agent's own socket on loopback.
    let (port, received) = agent_socket(&rt);
    let url = format!("ws://127.0.0.1:{port}");
    let (_, c) = json_of(api.post_open(
        "/events",
        &hitl_event("question", "Name?", json!({ "responseWebSocketUrl": url })),
    ));
    let id = c["id"].as_i64().unwrap();
    let (s, done) = json_of(api.post(
        &format!("/events/{id}/respond"),
        &json!({ "response": "Grace" }),
    ));
    assert_eq!(s, StatusCode::OK);
    assert_eq!(done["deliveryStatus"], "delivered");
    let msg: Value =
        serde_json::from_str(&received.recv_timeout(Duration::from_secs(5)).unwrap()).unwrap();
    assert_eq!(msg["eventId"].as_i64(), Some(id));
    assert_eq!(msg["response"], "Grace", "the bare response object: {msg}");
    assert_eq!(msg["idempotencyKey"], done["idempotencyKey"]);

    // A host that is neither loopback nor allowed: not contacted; the agent polls.
    let (_, c) = json_of(api.post_open(
        "/events",
        &hitl_event(
            "question",
            "Far?",
            json!({ "responseWebSocketUrl": "ws://192.0.2.1:9/x" }),
        ),
    ));
    let id = c["id"].as_i64().unwrap();
    let (_, done) = json_of(api.post(
        &format!("/events/{id}/respond"),
        &json!({ "response": "here" }),
    ));
    assert_eq!(done["deliveryStatus"], "pending_poll");
    let (s, got) = json_of(api.get_open(&format!("/events/{id}/response")));
    assert_eq!(
        (s, got["data"]["response"].as_str()),
        (StatusCode::OK, Some("here"))
    );

    // The agent's socket is gone: polling still gets the answer.
    let gone = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let gone_port = gone.local_addr().unwrap().port();
    drop(gone);
    let (_, c) = json_of(api.post_open(
        "/events",
        &hitl_event(
            "approval",
            "Ok?",
            json!({ "responseWebSocketUrl": format!("ws://localhost:{gone_port}") }),
        ),
    ));
    let id = c["id"].as_i64().unwrap();
    let (_, done) = json_of(api.post(
        &format!("/events/{id}/respond"),
        &json!({ "approved": true }),
    ));
    assert_eq!(done["deliveryStatus"], "pending_poll");
    let (_, got) = json_of(api.get_open(&format!("/events/{id}/response")));
    assert_eq!(got["data"]["approved"], true);

    let (_, m) = json_of(api.get("/api/v1/metrics"));
    assert_eq!(m["deliveredCount"], 1, "{m}");
    assert_eq!(m["failedDeliveryCount"], 2, "{m}");
    assert_eq!(m["pendingPollCount"], 2, "{m}");
}

#[test]
fn streams_send_the_feed_and_the_queue_and_check_the_origin() {
    use futures_util::StreamExt;
    use tokio_tungstenite::tungstenite::{client::IntoClientRequest, http::HeaderValue};
    let rt = tokio::runtime::Runtime::new().unwrap();
    let api = Api::start(None);
    json_of(api.post_open(
        "/events",
        &json!({ "source_app": "a", "session_id": "s", "hook_event_type": "Start", "payload": {} }),
    ));
    let ws_url = api.base.replace("http://", "ws://");
    let connect = |path: &str, token: Option<&str>, origin: Option<&str>| {
        let mut req = format!("{ws_url}{path}").into_client_request().unwrap();
        if let Some(t) = token {
            req.headers_mut().insert(
                "authorization",
                HeaderValue::from_str(&format!("Bearer {t}")).unwrap(),
            );
        }
        if let Some(o) = origin {
            req.headers_mut()
                .insert("origin", HeaderValue::from_str(o).unwrap());
        }
        rt.block_on(tokio_tungstenite::connect_async(req))
    };
    let next = |ws: &mut tokio_tungstenite::WebSocketStream<
        tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>,
    >|
     -> Value {
        let msg = rt
            .block_on(async { tokio::time::timeout(Duration::from_secs(5), ws.next()).await })
            .unwrap()
            .unwrap()
            .unwrap();
        serde_json::from_str(msg.to_text().unwrap()).unwrap()
    };

    // No token: refused. Another site's page: refused.
    assert!(connect("/stream", None, None).is_err());
    assert!(connect("/stream", Some(&api.token), Some("http://evil.example")).is_err());

    let (mut feed, _) = connect("/stream", Some(&api.token), None).unwrap();
    let initial = next(&mut feed);
    assert_eq!(initial["type"], "initial");
    assert_eq!(initial["data"][0]["hook_event_type"], "Start");
    let (mut queue, _) = connect("/api/v1/stream", Some(&api.token), None).unwrap();
    assert_eq!(next(&mut queue)["type"], "snapshot");

    let (_, c) = json_of(api.post_open("/events", &hitl_event("question", "Live?", json!({}))));
    let id = c["id"].as_i64().unwrap();
    let ev = next(&mut feed);
    assert_eq!(
        (ev["type"].as_str(), ev["data"]["id"].as_i64()),
        (Some("event"), Some(id))
    );
    let q = next(&mut queue);
    assert_eq!(q["type"], "queued");
    assert_eq!(q["request"]["request"]["content"], "Live?");
    json_of(api.post(
        &format!("/events/{id}/respond"),
        &json!({ "response": "yes" }),
    ));
    let f = next(&mut queue);
    assert_eq!(
        (f["type"].as_str(), f["status"].as_str()),
        (Some("finished"), Some("answered"))
    );
    let ev = next(&mut feed);
    assert_eq!(ev["data"]["humanInTheLoopStatus"]["status"], "responded");
}

#[test]
fn the_token_guards_what_it_must_and_the_dashboard_logs_in_by_cookie() {
    let api = Api::start(None);
    for path in [
        "/api/v1/requests",
        "/api/v1/agents",
        "/api/v1/events",
        "/api/v1/metrics",
        "/events/recent",
        "/events/filter-options",
        "/metrics",
        "/api/v1/requests/1",
    ] {
        assert_eq!(
            api.get_open(path).status(),
            StatusCode::UNAUTHORIZED,
            "{path}"
        );
        let wrong = api
            .http
            .get(api.url(path))
            .bearer_auth("not-the-token")
            .send()
            .unwrap();
        assert_eq!(wrong.status(), StatusCode::UNAUTHORIZED, "{path}");
    }
    for path in [
        "/events/1/respond",
        "/api/v1/requests/1/respond",
        "/api/v1/requests/1/cancel",
    ] {
        assert_eq!(
            api.post_open(path, &json!({})).status(),
            StatusCode::UNAUTHORIZED,
            "{path}"
        );
    }
    // ?token= logs in: an HttpOnly, SameSite=Strict cookie, which then suffices.
    let r = api.get_open(&format!("/api/v1/requests?token={}", api.token));
    assert_eq!(r.status(), StatusCode::OK);
    let cookie = r.headers()["set-cookie"].to_str().unwrap().to_string();
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
        "{cookie}"
    );
    let pair = cookie.split(';').next().unwrap();
    // It carries a session, not the token: a leaked cookie is not the API key.
    assert!(!cookie.contains(&api.token), "{cookie}");
    assert!(cookie.contains("Max-Age="), "{cookie}");
    let session = pair.split_once('=').unwrap().1;
    let r = api
        .http
        .get(api.url("/api/v1/requests"))
        .bearer_auth(session)
        .send()
        .unwrap();
    assert_eq!(
        r.status(),
        StatusCode::UNAUTHORIZED,
        "a session id is no token"
    );
    let r = api
        .http
        .get(api.url("/events/recent"))
        .header("cookie", pair)
        .send()
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    // Logging out ends it, and says so to the browser.
    let r = api
        .http
        .post(api.url("/api/v1/logout"))
        .header("cookie", pair)
        .send()
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert!(
        r.headers()["set-cookie"]
            .to_str()
            .unwrap()
            .contains("Max-Age=0")
    );
    let r = api
        .http
        .get(api.url("/events/recent"))
        .header("cookie", pair)
        .send()
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED, "ended");
    // A one-time code: minted with the token only; spent by the dashboard's page
    // alone (an API route neither takes nor spends it), and only once.
    assert_eq!(
        api.post_open("/api/v1/login-links", &json!({})).status(),
        StatusCode::UNAUTHORIZED
    );
    let (s, link) = json_of(api.post("/api/v1/login-links", &json!({})));
    assert_eq!(s, StatusCode::CREATED, "{link}");
    let code = link["url"]
        .as_str()
        .unwrap()
        .split("?code=")
        .nth(1)
        .unwrap()
        .to_string();
    let r = api.get_open(&format!("/api/v1/requests?code={code}"));
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    let r = api.get_open(&format!("/?code={code}"));
    assert_eq!(r.status(), StatusCode::OK);
    assert!(r.headers().contains_key("set-cookie"), "the code logs in");
    let r = api.get_open(&format!("/?code={code}"));
    assert!(!r.headers().contains_key("set-cookie"), "spent");
    // Reading answers without the token: the server's own OS user only. Another user
    // on the machine (here `nobody`) is refused, even from loopback.
    let (_, c) = json_of(api.post_open("/events", &hitl_event("question", "secret?", json!({}))));
    let id = c["id"].as_i64().unwrap();
    assert_eq!(
        api.get_open(&format!("/events/{id}/response")).status(),
        StatusCode::ACCEPTED
    );
    let is_root = nix::unistd::geteuid().is_root();
    if is_root {
        let script = format!(
            "import urllib.request, urllib.error\n\
             try:\n    print(urllib.request.urlopen('{}/events/{id}/response').status)\n\
             except urllib.error.HTTPError as e:\n    print(e.code)",
            api.base
        );
        let out = std::process::Command::new("runuser")
            .args(["-u", "nobody", "--", "python3", "-c", &script])
            .output()
            .expect("runuser (util-linux) runs a command as another user");
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            "401",
            "{out:?}"
        );
    } else {
        eprintln!("not root: the other-user check needs runuser as root");
    }
    // The token file is private.
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(api.project.home.join("token"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    drop(api);

    // open_loopback = false: even creating needs the token.
    let api = Api::start(Some("[http]\nopen_loopback = false\n"));
    let r = api.post_open("/events", &hitl_event("question", "q", json!({})));
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(
        api.post("/events", &hitl_event("question", "q", json!({})))
            .status(),
        StatusCode::CREATED
    );
    drop(api);

    // Bound beyond loopback: every route but /healthz needs the token.
    // HITL_TOKEN overrides the token file.
    let p = Project::new();
    let mut cmd = p.hitl();
    cmd.args(["serve", "--http", "0.0.0.0:0"])
        .env("HITL_TOKEN", "fixed-token-for-test");
    let server = crate::support::Listener::start_command(cmd);
    let base = server.http_base();
    let http = Client::new();
    assert_eq!(
        http.get(format!("{base}/healthz")).send().unwrap().status(),
        StatusCode::OK
    );
    let r = http
        .post(format!("{base}/events"))
        .json(&hitl_event("question", "q", json!({})))
        .send()
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    let r = http
        .get(format!("{base}/events/1/response"))
        .send()
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    let r = http
        .post(format!("{base}/events"))
        .bearer_auth("fixed-token-for-test")
        .json(&hitl_event("question", "q", json!({})))
        .send()
        .unwrap();
    assert_eq!(r.status(), StatusCode::CREATED);
    // Its document describes what it does: no task routes without a task runner;
    // those answer 503, saying where tasks run.
    let doc: Value = http
        .get(format!("{base}/api/v1/openapi.json"))
        .bearer_auth("fixed-token-for-test")
        .send()
        .unwrap()
        .json()
        .unwrap();
    let paths: Vec<&String> = doc["paths"].as_object().unwrap().keys().collect();
    assert!(paths.iter().any(|p| *p == "/api/v1/requests"), "{paths:?}");
    assert!(
        paths.iter().all(|p| !p.starts_with("/api/v1/task")),
        "{paths:?}"
    );
    let r = http
        .get(format!("{base}/api/v1/tasks"))
        .bearer_auth("fixed-token-for-test")
        .send()
        .unwrap();
    assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(r.text().unwrap().contains("no task runner here"));
}

#[test]
fn bad_input_gets_a_clear_error_and_the_server_keeps_serving() {
    let api = Api::start(Some("[http]\nmax_body_bytes = 4096\nrate_limit = 0\n"));
    let raw = |path: &str, body: &str| {
        api.http
            .post(api.url(path))
            .bearer_auth(&api.token)
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .unwrap()
    };
    let (s, e) = json_of(raw("/events", "{\"source_app\": \"a\", "));
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert!(e["error"].as_str().unwrap().contains("line 1"), "{e}");
    let (s, e) = json_of(raw("/events", "{not json}"));
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert!(
        e["error"].as_str().unwrap().contains("malformed JSON"),
        "{e}"
    );
    let (s, e) = json_of(raw("/events", ""));
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert!(e["error"].as_str().unwrap().contains("empty"), "{e}");
    let (s, e) = json_of(raw("/events", "[1, 2]"));
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert!(e["error"].as_str().unwrap().contains("object"), "{e}");
    let (s, e) = json_of(raw(
        "/events",
        r#"{"hook_event_type": "X", "humanInTheLoop": {"type": "poll", "question": "q"}}"#,
    ));
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert!(e["error"].as_str().unwrap().contains("poll"), "{e}");
    let (s, e) = json_of(raw(
        "/events",
        r#"{"hook_event_type": "X", "humanInTheLoop": {"type": "choice", "question": "q"}}"#,
    ));
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert!(e["error"].as_str().unwrap().contains("choices"), "{e}");
    let (s, e) = json_of(raw(
        "/events",
        r#"{"hook_event_type": "X", "humanInTheLoop": {"type": "question", "question": "q", "timeout": "soon"}}"#,
    ));
    assert_eq!(s, StatusCode::BAD_REQUEST, "{e}");
    let (s, e) = json_of(raw(
        "/api/v1/requests",
        r#"{"content": "q", "colour": "red"}"#,
    ));
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert!(e["error"].as_str().unwrap().contains("colour"), "{e}");
    let big = format!(
        "{{\"hook_event_type\": \"X\", \"payload\": \"{}\"}}",
        "x".repeat(10_000)
    );
    let (s, e) = json_of(raw("/events", &big));
    assert_eq!(s, StatusCode::PAYLOAD_TOO_LARGE, "{e}");
    let r = api
        .http
        .post(api.url("/events"))
        .header("content-type", "text/plain")
        .body("hi")
        .send()
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert_eq!(
        api.get("/api/v1/requests/nope").status(),
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        api.get("/api/v1/requests/1/wait?timeout=-1").status(),
        StatusCode::BAD_REQUEST
    );
    // Still serving.
    let (s, _) = json_of(api.post_open(
        "/events",
        &hitl_event("question", "still there?", json!({})),
    ));
    assert_eq!(s, StatusCode::CREATED);
    drop(api);

    // Over the rate: 429 with Retry-After; other work goes on after the wait.
    let api = Api::start(Some("[http]\nrate_limit = 5\nrate_limit_loopback = true\n"));
    let mut limited = None;
    for _ in 0..30 {
        let r = api.get_open("/healthz");
        if r.status() == StatusCode::TOO_MANY_REQUESTS {
            limited = Some(r);
            break;
        }
    }
    let r = limited.expect("a burst over twice the rate is limited");
    let wait: u64 = r.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=2).contains(&wait), "{wait}");
    std::thread::sleep(Duration::from_secs(wait));
    assert_eq!(api.get_open("/healthz").status(), StatusCode::OK);
}

/// Random JSON (and random bytes) posted to every route that takes a body: each gets
/// an answer below 500, and the server serves normally afterwards.
#[test]
fn random_bodies_to_every_decoder_never_break_the_server() {
    use proptest::{
        prelude::*,
        test_runner::{Config, TestRunner},
    };
    let api = Api::start(None);
    // Some real requests to aim at, of each kind.
    let mut ids = vec!["999999".to_string(), "no-such".to_string()];
    for kind in [
        "question",
        "approval",
        "permission",
        "choice",
        "question_input",
    ] {
        let (_, c) = json_of(api.post_open(
            "/events",
            &hitl_event(kind, "q", json!({ "choices": ["a", "b"] })),
        ));
        ids.push(c["id"].as_i64().unwrap().to_string());
    }
    let key = prop_oneof![
        Just("humanInTheLoop".to_string()),
        Just("hook_event_type".to_string()),
        Just("source_app".to_string()),
        Just("type".to_string()),
        Just("question".to_string()),
        Just("content".to_string()),
        Just("choices".to_string()),
        Just("options".to_string()),
        Just("timeout".to_string()),
        Just("response".to_string()),
        Just("choice".to_string()),
        Just("approved".to_string()),
        Just("cancelled".to_string()),
        Just("idempotencyKey".to_string()),
        "[a-z_]{1,8}",
    ];
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        prop_oneof![
            Just("question".to_string()),
            Just("choice".to_string()),
            Just("a".to_string()),
            ".{0,16}"
        ]
        .prop_map(Value::from),
    ];
    let any_json = leaf.prop_recursive(3, 48, 6, move |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            proptest::collection::btree_map(key.clone(), inner, 0..8)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    });
    let body = prop_oneof![
        4 => any_json.prop_map(|v| v.to_string().into_bytes()),
        1 => proptest::collection::vec(any::<u8>(), 0..64),
    ];
    let routes = [
        "/events",
        "/events/{id}/respond",
        "/api/v1/requests",
        "/api/v1/requests/{id}/respond",
        "/api/v1/requests/{id}/cancel",
    ];
    let mut runner = TestRunner::new(Config {
        cases: 300,
        failure_persistence: None,
        ..Config::default()
    });
    runner
        .run(
            &(0..routes.len(), 0..ids.len(), body),
            |(route, id, body)| {
                let path = routes[route].replace("{id}", &ids[id]);
                let r = api
                    .http
                    .post(api.url(&path))
                    .bearer_auth(&api.token)
                    .header("content-type", "application/json")
                    .body(body.clone())
                    .send()
                    .unwrap();
                let status = r.status();
                let text = r.text().unwrap();
                prop_assert!(
                    status.as_u16() < 500,
                    "{path} {:?} -> {status} {text}",
                    String::from_utf8_lossy(&body)
                );
                prop_assert!(
                    serde_json::from_str::<Value>(&text).is_ok(),
                    "{path} -> {status}: not JSON: {text}"
                );
                Ok(())
            },
        )
        .unwrap();
    let (s, h) = json_of(api.get_open("/healthz"));
    assert_eq!((s, h["status"].as_str()), (StatusCode::OK, Some("ok")));
    let (s, _) =
        json_of(api.post_open("/events", &hitl_event("question", "still fine?", json!({}))));
    assert_eq!(s, StatusCode::CREATED);
}

#[test]
fn listen_without_http_serves_none_and_says_so() {
    let p = Project::new();
    let _l = p.listen(&["--ui", "none", "--no-http"]);
    let info: Value =
        serde_json::from_slice(&std::fs::read(p.helpers().join(".listener.json")).unwrap())
            .unwrap();
    assert_eq!(info["http"], Value::Null);
    let out = p.run(&["listen", "--no-http", "--http", "127.0.0.1:0"]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "--http and --no-http conflict: {out:?}"
    );
}

#[test]
fn a_create_can_wait_for_the_end_in_the_same_call() {
    // Answered at once (a rule): the one call brings the answer back.
    let p = Project::new();
    let listener = p.listen(&[
        "--ui",
        "none",
        "--auto-answer",
        "ok",
        "--http",
        "127.0.0.1:0",
    ]);
    let api = Api::attach(p, listener);
    let body = json!({ "content": "Deploy?", "type": "approval" });
    let (s, v) = json_of(api.post("/api/v1/requests?wait=5", &body));
    assert_eq!(
        (s, v["status"].as_str()),
        (StatusCode::OK, Some("answered")),
        "{v}"
    );
    assert_eq!(v["answer"]["approved"], true, "{v}");

    // Nobody answers within the wait: 201, pending, as without it.
    let api = Api::start(None);
    let started = std::time::Instant::now();
    let (s, v) = json_of(api.post("/api/v1/requests?wait=0.3", &body));
    assert_eq!(
        (s, v["status"].as_str()),
        (StatusCode::CREATED, Some("pending")),
        "{v}"
    );
    assert!(started.elapsed() >= Duration::from_millis(300));
    let (s, v) = json_of(api.post("/api/v1/requests?wait=301", &body));
    assert_eq!(s, StatusCode::BAD_REQUEST, "{v}");
}

/// A `number` request over the API: its answer shape says a number from its minimum
/// to its maximum, and a reply outside them, or not a number, is refused; one inside
/// is the asker's answer.
#[test]
fn a_number_request_takes_only_a_number_in_its_range() {
    let api = Api::start(None);
    let (s, c) = json_of(api.post_open(
        "/api/v1/requests",
        &json!({ "content": "How many replicas?", "type": "number", "minimum": 1, "maximum": 5 }),
    ));
    assert_eq!(s, StatusCode::CREATED, "{c}");
    assert_eq!(
        c["answer_shape"],
        json!({ "input": "text", "field": "response",
                "value": { "type": "number", "minimum": 1, "maximum": 5 } })
    );
    let id = c["id"].as_str().unwrap().to_string();
    let respond = |v: Value| json_of(api.post(&format!("/api/v1/requests/{id}/respond"), &v));
    for (bad, why) in [
        ("9", "more than 5"),
        ("0.5", "less than 1"),
        ("many", "not a number"),
    ] {
        let (s, e) = respond(json!({ "response": bad }));
        assert_eq!(s, StatusCode::BAD_REQUEST, "{bad}: {e}");
        assert!(e["error"].as_str().unwrap().contains(why), "{bad}: {e}");
    }
    let (s, done) = respond(json!({ "response": "2.5" }));
    assert_eq!(s, StatusCode::OK, "{done}");
    let (_, ended) = json_of(api.get(&format!("/api/v1/requests/{id}/wait")));
    assert_eq!(ended["answer"]["content"], "2.5");
}

#[test]
fn tags_over_the_api_are_kept_cleaned_and_shown_as_labels() {
    let api = Api::start(None);
    let (s, c) = json_of(api.post_open(
        "/api/v1/requests",
        &json!({ "content": "Ship?", "priority": "high",
                 "tags": [" ci ", "", "deploy", "ci", "x".repeat(100)] }),
    ));
    assert_eq!(s, StatusCode::CREATED, "{c}");
    let long = "x".repeat(64);
    assert_eq!(c["request"]["tags"], json!(["ci", "deploy", long]));
    assert_eq!(
        c["labels"],
        json!(["high", "#ci", "#deploy", format!("#{long}")])
    );
    // The queue is searched by tag as history is.
    for (q, want) in [("tag:CI", 1), ("tag:ci%20ship", 1), ("tag:release", 0)] {
        let (_, found) = json_of(api.get(&format!("/api/v1/requests?q={q}")));
        assert_eq!(found.as_array().unwrap().len(), want, "{q}: {found}");
    }
    let (s, e) = json_of(api.post_open(
        "/api/v1/requests",
        &json!({ "content": "Ship?", "tags": "ci" }),
    ));
    assert_eq!(s, StatusCode::BAD_REQUEST, "{e}");
    assert!(e["error"].as_str().unwrap().starts_with("tags"), "{e}");
}

/// Who asked is one thing, the request's origin: the create body names it, every view
/// shows it (the request's `source` too), and it outlives a `kill -9` and the answer.
/// Nobody's body chooses it by `source`.
#[test]
fn who_asked_is_kept_through_a_restart_and_into_history() {
    let api = Api::start(None);
    let (s, c) = json_of(api.post_open(
        "/api/v1/requests",
        &json!({ "content": "Merge?", "origin": "task" }),
    ));
    assert_eq!(s, StatusCode::CREATED, "{c}");
    assert_eq!(
        (&c["origin"], &c["request"]["source"]),
        (&json!("task"), &json!("task"))
    );
    let id = c["id"].as_str().unwrap().to_string();
    let (s, e) = json_of(api.post_open(
        "/api/v1/requests",
        &json!({ "content": "Merge?", "source": "hook" }),
    ));
    assert_eq!(s, StatusCode::BAD_REQUEST, "{e}");
    assert!(e["error"].as_str().unwrap().contains("source"), "{e}");

    let api = api.killed_and_restarted();
    let (_, list) = json_of(api.get("/api/v1/requests"));
    assert_eq!(list[0]["origin"], "task", "{list}");
    let (s, _) = json_of(api.post(
        &format!("/api/v1/requests/{id}/respond"),
        &json!({ "answer": "yes" }),
    ));
    assert_eq!(s, StatusCode::OK);
    let (_, ended) = json_of(api.get(&format!("/api/v1/requests/{id}")));
    assert_eq!(
        (&ended["status"], &ended["origin"]),
        (&json!("answered"), &json!("task"))
    );
    let history = api
        .project
        .hitl()
        .args(["history", "--json"])
        .output()
        .unwrap();
    let rows: serde_json::Value = serde_json::from_slice(&history.stdout).unwrap();
    assert_eq!(rows[0]["origin"], "task", "{rows}");
}
