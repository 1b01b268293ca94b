//! The HTTP API against a real `hitl listen` / `hitl serve`: seed 004's routes, the
//! native API, auth, limits, bad input, WebSocket delivery and streams, and requests
//! crossing between the spool and HTTP.

use std::{
    process::{Child, Stdio},
    time::Duration,
};

use reqwest::{
    StatusCode,
    blocking::{Client, Response},
};
use serde_json::{Value, json};

use crate::support::{Listener, Project, eventually, wait_output};

/// A listener serving HTTP on a free loopback port, and a client for it.
struct Api {
    project: Project,
    listener: Listener,
    base: String,
    token: String,
    http: Client,
}

impl Api {
    fn start(config: Option<&str>) -> Api {
        let project = Project::new();
        if let Some(c) = config {
            project.user_config(c);
        }
        let listener = project.listen(&["--ui", "none", "--http", "127.0.0.1:0"]);
        Api::attach(project, listener)
    }

    fn attach(project: Project, listener: Listener) -> Api {
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

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// POST JSON without the token (as seed clients do).
    fn post_open(&self, path: &str, body: &Value) -> Response {
        self.http.post(self.url(path)).json(body).send().unwrap()
    }

    fn post(&self, path: &str, body: &Value) -> Response {
        self.http
            .post(self.url(path))
            .bearer_auth(&self.token)
            .json(body)
            .send()
            .unwrap()
    }

    fn get_open(&self, path: &str) -> Response {
        self.http.get(self.url(path)).send().unwrap()
    }

    fn get(&self, path: &str) -> Response {
        self.http
            .get(self.url(path))
            .bearer_auth(&self.token)
            .send()
            .unwrap()
    }
}

fn json_of(r: Response) -> (StatusCode, Value) {
    let status = r.status();
    let text = r.text().unwrap();
    let v =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{status}: not JSON ({e}): {text}"));
    (status, v)
}

fn hitl_event(kind: &str, question: &str, extra: Value) -> Value {
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

fn spawn_ask(p: &Project, args: &[&str]) -> Child {
    p.hitl()
        .arg("ask")
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
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
        let concrete = path.replace("{id}", "1");
        for method in ops.as_object().unwrap().keys() {
            let r = match method.as_str() {
                "get" if concrete.ends_with("stream") => continue,
                "get" => api.get(&concrete),
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
    let Api {
        project, listener, ..
    } = api;
    listener.signal(nix::sys::signal::Signal::SIGKILL);
    let listener = project.listen(&["--ui", "none", "--http", "127.0.0.1:0"]);
    let api = Api::attach(project, listener);
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
