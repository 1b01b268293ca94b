//! The local web surface, tried as an attacker on the same machine would: a web page in
//! the user's browser (DNS rebinding, cross-site and cross-port requests, bodies with
//! no content type), another OS user replaying idempotency keys, and agents writing
//! escape sequences for the human's terminal.

use std::time::Duration;

use reqwest::{StatusCode, blocking::Client};
use serde_json::{Value, json};

use crate::{
    http::{Api, hitl_event, json_of},
    support::{Project, eventually},
};

/// Runs a Python snippet as the OS user `nobody` and returns its stdout: another user
/// on the same machine, talking to the server over loopback.
fn as_other_user(script: &str) -> String {
    assert!(
        nix::unistd::geteuid().is_root(),
        "these checks switch to another OS user and need root (CI runs as root)"
    );
    let out = std::process::Command::new("runuser")
        .args(["-u", "nobody", "--", "python3", "-c", script])
        .output()
        .expect("runuser (util-linux) runs a command as another user");
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn a_rebound_host_name_gets_nothing() {
    let api = Api::start(None);
    let (_, created) =
        json_of(api.post_open("/events", &hitl_event("question", "secret?", json!({}))));
    let id = created["id"].as_i64().unwrap();
    let respond = api.post(
        &format!("/events/{id}/respond"),
        &json!({ "response": "the answer" }),
    );
    assert_eq!(respond.status(), StatusCode::OK);

    let port = api.base.rsplit(':').next().unwrap().to_string();
    let http = Client::new();
    let with_host =
        |path: &str, host: &str| http.get(api.url(path)).header("host", host).send().unwrap();
    // A page at rebind.evil.example that now resolves to 127.0.0.1: refused, whatever
    // the route and whether or not it would need the token.
    for path in [
        format!("/events/{id}/response"),
        "/healthz".into(),
        "/events/recent".into(),
    ] {
        let r = with_host(&path, &format!("rebind.evil.example:{port}"));
        assert_eq!(r.status(), StatusCode::FORBIDDEN, "{path}");
        let (_, v) = json_of(r);
        assert!(
            v["error"].as_str().unwrap().contains("allowed_hosts"),
            "{v}"
        );
        assert!(!v.to_string().contains("the answer"));
    }
    // This server's own names still work.
    for host in [
        format!("127.0.0.1:{port}"),
        format!("localhost:{port}"),
        "localhost".into(),
    ] {
        let (status, v) = json_of(with_host(&format!("/events/{id}/response"), &host));
        assert_eq!(status, StatusCode::OK, "{host}");
        assert_eq!(v["data"]["response"], "the answer");
    }
    drop(api);

    // A configured name is answered too.
    let api = Api::start(Some("[http]\nallowed_hosts = [\"hitl.internal\"]\n"));
    let r = Client::new()
        .get(api.url("/healthz"))
        .header("host", "hitl.internal")
        .send()
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
}

#[test]
fn idempotency_keys_belong_to_their_caller() {
    let api = Api::start(None);
    let mine = json!({
        "source_app": "victim", "session_id": "s1", "hook_event_type": "PreToolUse",
        "payload": {},
        "humanInTheLoop": { "type": "question", "question": "the private question?" },
    });
    let post_with_key = || {
        let r = api
            .http
            .post(api.url("/events"))
            .header("idempotency-key", "toolu_01ABC")
            .json(&mine)
            .send()
            .unwrap();
        json_of(r)
    };
    let (status, first) = post_with_key();
    assert_eq!(status, StatusCode::CREATED);
    let id = first["id"].as_i64().unwrap();
    api.post(
        &format!("/events/{id}/respond"),
        &json!({ "response": "the private answer" }),
    );

    // The same user replaying the key gets the first event back.
    let (status, v) = post_with_key();
    assert_eq!(status, StatusCode::OK);
    assert_eq!(v["id"], first["id"]);

    // Another OS user replaying it gets a request of its own, and none of the victim's.
    let script = format!(
        "import json, urllib.request\n\
         body = json.dumps({{'source_app': 'x', 'session_id': 'y', 'hook_event_type': 'e', \
         'humanInTheLoop': {{'type': 'question', 'question': 'mine?'}}}}).encode()\n\
         req = urllib.request.Request('{}/events', data=body, headers={{\
         'Content-Type': 'application/json', 'Idempotency-Key': 'toolu_01ABC'}})\n\
         r = urllib.request.urlopen(req)\n\
         print(r.status, r.read().decode())",
        api.base
    );
    let out = as_other_user(&script);
    let (status, body) = out.split_once(' ').unwrap();
    assert_eq!(status, "201", "{out}");
    assert!(!body.contains("private"), "{body}");
    let theirs: Value = serde_json::from_str(body).unwrap();
    assert_ne!(theirs["id"], first["id"]);
}

#[test]
fn pages_from_other_origins_cannot_answer_create_or_stream() {
    let api = Api::start(None);
    let port = api.base.rsplit(':').next().unwrap().to_string();
    let (_, created) = json_of(api.post_open(
        "/events",
        &hitl_event("permission", "rm -rf build?", json!({})),
    ));
    let id = created["id"].as_i64().unwrap();

    // The dashboard's login cookie: named for this server's port.
    let r = api.get_open(&format!("/api/v1/requests?token={}", api.token));
    let cookie = r.headers()["set-cookie"].to_str().unwrap().to_string();
    assert!(
        cookie.starts_with(&format!("hitl_token_{port}=")),
        "{cookie}"
    );
    let cookie = cookie.split(';').next().unwrap().to_string();
    let http = Client::new();

    // A page on another loopback port (cookies ignore ports) approves with the cookie,
    // no content type, no preflight: refused for its origin.
    let r = http
        .post(api.url(&format!("/events/{id}/respond")))
        .header("cookie", &cookie)
        .header("origin", "http://127.0.0.1:8080")
        .header("sec-fetch-site", "same-site")
        .header("content-type", "")
        .body(r#"{"permission": true}"#)
        .send()
        .unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    // Without an Origin but marked by the browser as from another site: refused.
    let r = http
        .post(api.url(&format!("/api/v1/requests/{id}/cancel")))
        .header("cookie", &cookie)
        .header("sec-fetch-site", "cross-site")
        .send()
        .unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    // A body that is not labelled JSON is refused whoever sends it (415), on every
    // JSON route: creates, answers, cancels with a body.
    for (path, body) in [
        (
            "/events".to_string(),
            hitl_event("question", "fake urgent?", json!({})).to_string(),
        ),
        (
            format!("/events/{id}/respond"),
            r#"{"permission": true}"#.into(),
        ),
        (
            format!("/api/v1/requests/{id}/respond"),
            r#"{"approved": true}"#.into(),
        ),
        (
            format!("/api/v1/requests/{id}/cancel"),
            r#"{"reason": "x"}"#.into(),
        ),
        ("/api/v1/requests".into(), r#"{"content": "q?"}"#.into()),
    ] {
        for content_type in [
            None,
            Some("text/plain"),
            Some("application/x-www-form-urlencoded"),
        ] {
            let mut req = http
                .post(api.url(&path))
                .header("cookie", &cookie)
                .body(body.clone());
            if let Some(t) = content_type {
                req = req.header("content-type", t);
            }
            let r = req.send().unwrap();
            assert_eq!(
                r.status(),
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "{path} {content_type:?}"
            );
        }
    }
    // A create from a web page with the right type still needs a CORS preflight; a
    // direct one with a foreign Origin is refused.
    let r = http
        .post(api.url("/events"))
        .header("origin", "http://evil.example")
        .json(&hitl_event("question", "fake?", json!({})))
        .send()
        .unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    // The request is still pending, untouched.
    let (status, v) = json_of(api.get(&format!("/api/v1/requests/{id}")));
    assert_eq!(status, StatusCode::OK);
    assert_eq!(v["status"], "pending", "{v}");

    // WebSockets from another origin are refused before the upgrade.
    let ws = http
        .get(api.url("/api/v1/stream"))
        .header("cookie", &cookie)
        .header("origin", "http://127.0.0.1:8080")
        .header("connection", "upgrade")
        .header("upgrade", "websocket")
        .header("sec-websocket-version", "13")
        .header("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ==")
        .send()
        .unwrap();
    assert_eq!(ws.status(), StatusCode::FORBIDDEN);

    // The server's own page (same origin) may answer with the cookie, and any case of
    // the bearer scheme is the token.
    let r = http
        .post(api.url(&format!("/events/{id}/respond")))
        .header("cookie", &cookie)
        .header("origin", format!("http://localhost:{port}"))
        .header("sec-fetch-site", "same-origin")
        .json(&json!({ "permission": false }))
        .send()
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let r = http
        .get(api.url("/api/v1/requests"))
        .header("authorization", format!("bearer {}", api.token))
        .send()
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    // Query-string errors have the JSON error shape.
    let (status, v) = json_of(api.get("/api/v1/requests?limit=many"));
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(v["success"], false);
    assert!(v["error"].as_str().unwrap().contains("limit"), "{v}");
}

#[test]
fn a_wildcard_or_malformed_origin_is_refused_at_start() {
    for (setting, says) in [
        ("allowed_origins = [\"*\"]", "every web page"),
        ("allowed_origins = [\"localhost:5173\"]", "is not an origin"),
        ("allowed_hosts = [\"*.example\"]", "is not a host name"),
    ] {
        let p = Project::new();
        p.user_config(&format!("[http]\n{setting}\n"));
        let child = p
            .hitl()
            .args(["listen", "--ui", "none", "--http", "127.0.0.1:0"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let out = crate::support::wait_output(child, Duration::from_secs(20));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{setting}: {err}");
        assert!(err.contains(says), "{setting}: {err}");
        assert!(!err.contains("hitl: ready"), "{err}");
    }
}

#[test]
fn ids_of_http_requests_and_spool_questions_never_collide() {
    let api = Api::start(None);
    // An HTTP request, answered and ended.
    let (_, created) =
        json_of(api.post_open("/events", &hitl_event("question", "over http?", json!({}))));
    let id = created["id"].as_i64().unwrap();
    api.post(
        &format!("/events/{id}/respond"),
        &json!({ "response": "http answer" }),
    );
    // A spool question whose id is that event's number.
    let q = json!({
        "version": 1, "id": id.to_string(), "agent_id": "a", "agent_name": "A",
        "timestamp": "2026-01-01T00:00:00Z", "type": "text", "content": "from the spool?",
    });
    std::fs::write(
        api.project.helpers().join(format!("questions/{id}.json")),
        q.to_string(),
    )
    .unwrap();
    api.project.wait_pending(1, Duration::from_secs(10));
    // The event routes speak of the HTTP request only.
    let (status, v) = json_of(api.get_open(&format!("/events/{id}/response")));
    assert_eq!(status, StatusCode::OK);
    assert_eq!(v["data"]["response"], "http answer");
    let r = api.post(
        &format!("/events/{id}/respond"),
        &json!({ "response": "hijack" }),
    );
    assert_eq!(r.status(), StatusCode::CONFLICT);
    // The spool question is untouched, and answered the spool's way.
    assert!(
        !api.project
            .helpers()
            .join(format!("answers/{id}.json"))
            .exists()
    );
    assert_eq!(api.project.pending().len(), 1);
}

#[test]
fn an_absurd_timeout_is_refused_before_anything_is_written() {
    let p = Project::new();
    let out = p.run(&["ask", "--timeout", "18446744073709551615", "q?"]);
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("more than a week"));
    assert_eq!(
        std::fs::read_dir(p.helpers().join("questions"))
            .unwrap()
            .count(),
        0
    );

    let api = Api::start(None);
    let (status, v) = json_of(api.post(
        "/api/v1/requests",
        &json!({ "content": "q?", "timeout": 18446744073709551615u64 }),
    ));
    assert_eq!(status, StatusCode::BAD_REQUEST, "{v}");
    // Agent ids follow the id rule on the native API.
    let (status, v) = json_of(api.post(
        "/api/v1/requests",
        &json!({ "content": "q?", "agent_id": "../../etc/passwd" }),
    ));
    assert_eq!(status, StatusCode::BAD_REQUEST, "{v}");
    assert!(v["error"].as_str().unwrap().contains("agent_id"), "{v}");
    // On the seed route a session id becomes a safe agent id.
    let mut e = hitl_event("question", "q?", json!({}));
    e["session_id"] = json!("../../etc/passwd\u{1b}[2J");
    let (status, v) = json_of(api.post_open("/events", &e));
    assert_eq!(status, StatusCode::CREATED, "{v}");
    let (_, pending) = json_of(api.get("/api/v1/requests"));
    let agent = pending[0]["request"]["agent_id"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(hitl::protocol::is_valid_id(&agent), "{agent}");
}

#[test]
fn the_terminal_shows_escape_sequences_instead_of_running_them() {
    let p = Project::new();
    let listener = p.listen_with_stdin(&["--ui", "terminal", "--http", "off"]);
    let q = json!({
        "version": 1, "id": "esc1", "agent_id": "a", "agent_name": "Evil\u{1b}]0;title\u{7}",
        "timestamp": "2026-01-01T00:00:00Z", "type": "select",
        "content": "Allow ls?\u{1b}[1A\u{1b}[2K\rAllow rm -rf /?\u{202e}",
        "options": ["yes\u{1b}[31m", "no"],
        "context": { "note": "C1\u{9b}31m DEL\u{7f} sep\u{2028}\u{2029} alm\u{61c} iso\u{2066}" },
    });
    std::fs::write(p.helpers().join("questions/esc1.json"), q.to_string()).unwrap();
    listener.wait_stdout("(/cancel to decline)", Duration::from_secs(10));
    let shown = listener.stdout();
    assert!(
        !shown.contains('\u{1b}') && !shown.contains('\r') && !shown.contains('\u{202e}'),
        "{shown:?}"
    );
    for raw in [
        '\u{9b}', '\u{7f}', '\u{2028}', '\u{2029}', '\u{61c}', '\u{2066}',
    ] {
        assert!(!shown.contains(raw), "{raw:?} raw in {shown:?}");
    }
    for visible in [
        "C1\\u{9b}31m",
        "DEL\\u{7f}",
        "sep\\u{2028}\\u{2029}",
        "alm\\u{61c}",
        "\\u{1b}[1A\\u{1b}[2K\\u{d}Allow rm",
        "\\u{202e}",
        "yes\\u{1b}[31m",
        "Evil\\u{1b}]0;title\\u{7}",
    ] {
        assert!(shown.contains(visible), "{visible} in {shown:?}");
    }
    eventually("the question stays pending", Duration::from_secs(1), || {
        p.pending().len() == 1
    });
}

/// A raw TCP connection to the server that sends `bytes` and nothing more.
fn raw_connection(base: &str, bytes: &[u8]) -> std::net::TcpStream {
    use std::io::Write;
    let addr = base.trim_start_matches("http://");
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.write_all(bytes).unwrap();
    s
}

/// Whether the server has closed `s` (reads end or fail) within `within`.
fn closed_within(s: &mut std::net::TcpStream, within: Duration) -> bool {
    use std::io::Read;
    s.set_read_timeout(Some(within)).unwrap();
    let mut buf = [0u8; 256];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut =>
            {
                return false;
            }
            Err(_) => return true,
        }
    }
}

#[test]
fn connections_are_capped_and_idle_or_slow_ones_are_cut() {
    let p = Project::new();
    p.user_config("[http]\nmax_connections = 8\nheader_timeout = 2\n");
    let listener = p.listen(&[
        "--ui",
        "none",
        "--auto-answer",
        "ok",
        "--http",
        "127.0.0.1:0",
    ]);
    let api = Api::attach(p, listener);
    // Eight clients that connect and say nothing hold every slot...
    let mut idle: Vec<_> = (0..8).map(|_| raw_connection(&api.base, b"")).collect();
    std::thread::sleep(Duration::from_millis(200));
    // ...so a ninth is closed on arrival, and counted.
    let mut ninth = raw_connection(
        &api.base,
        b"GET /healthz HTTP/1.1\r\nhost: localhost\r\n\r\n",
    );
    assert!(closed_within(&mut ninth, Duration::from_secs(1)));
    // The spool does not depend on HTTP: its agents are answered meanwhile.
    let out = api.project.run(&["ask", "--timeout", "10", "still there?"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "ok\n", "{out:?}");
    // Idle clients are cut after header_timeout; then HTTP serves again.
    for s in &mut idle {
        assert!(
            closed_within(s, Duration::from_secs(5)),
            "an idle connection stayed open"
        );
    }
    let (status, _) = json_of(api.get("/api/v1/metrics"));
    assert_eq!(status, StatusCode::OK);
    let text = api.get("/metrics").text().unwrap();
    let refused: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("hitl_http_connections_refused_total "))
        .unwrap()
        .parse()
        .unwrap();
    assert!(refused >= 1, "{text}");

    // Slowloris: a header byte every 300 ms never finishes a request in time.
    use std::io::Write;
    let mut slow = raw_connection(&api.base, b"GET /healthz HTTP/1.1\r\n");
    let started = std::time::Instant::now();
    let mut cut = false;
    while started.elapsed() < Duration::from_secs(6) {
        if slow.write_all(b"x-slow: 1\r\n").is_err() {
            cut = true;
            break;
        }
        if closed_within(&mut slow, Duration::from_millis(300)) {
            cut = true;
            break;
        }
    }
    assert!(cut, "a dribbling client was never cut");
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[test]
fn descriptors_are_kept_for_the_spool_when_clients_take_the_rest() {
    use std::os::unix::process::CommandExt;
    let p = Project::new();
    let mut cmd = p.hitl();
    cmd.args([
        "listen",
        "--ui",
        "none",
        "--auto-answer",
        "ok",
        "--http",
        "127.0.0.1:0",
    ]);
    // A small open-file limit, as on many desktops (1024) but smaller, so the test
    // can reach it: the server must cap HTTP below it on its own.
    unsafe {
        cmd.pre_exec(|| {
            nix::sys::resource::setrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE, 400, 400)
                .map_err(std::io::Error::from)
        });
    }
    let listener = crate::support::Listener::start_command(cmd);
    assert!(
        listener.log().contains("serving at most"),
        "{}",
        listener.log()
    );
    let api = Api::attach(p, listener);
    // Far more clients than descriptors.
    let held: Vec<_> = (0..600)
        .filter_map(|_| std::net::TcpStream::connect(api.base.trim_start_matches("http://")).ok())
        .collect();
    assert!(held.len() > 400);
    // Questions in the spool are still read, answered and recorded.
    for i in 0..3 {
        let out = api
            .project
            .run(&["ask", "--timeout", "10", &format!("question {i}?")]);
        assert_eq!(String::from_utf8_lossy(&out.stdout), "ok\n", "{out:?}");
    }
    drop(held);
    eventually("HTTP serves again", Duration::from_secs(10), || {
        Client::new()
            .get(api.url("/healthz"))
            .send()
            .is_ok_and(|r| r.status() == StatusCode::OK)
    });
}

#[test]
fn creates_are_limited_per_user_and_one_users_flood_spares_another() {
    // One create a second, bursts of two: slow enough that no machine refills it
    // while the test floods.
    let api = Api::start(Some("[http]\ncreate_rate_limit = 1\n"));
    let create = || api.post_open("/events", &hitl_event("question", "flood?", json!({})));
    let started = std::time::Instant::now();
    let statuses: Vec<StatusCode> = (0..40).map(|_| create().status()).collect();
    let created = statuses
        .iter()
        .filter(|s| **s == StatusCode::CREATED)
        .count();
    // The shared loopback budget, then this user's own: two bursts of two, plus
    // what a second refills.
    let most = 4 + started.elapsed().as_secs() as usize + 1;
    assert!(
        (4..=most).contains(&created),
        "{created} created: {statuses:?}"
    );
    let refused = create();
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(refused.headers().contains_key("retry-after"));
    let (_, v) = json_of(refused);
    assert!(
        v["error"].as_str().unwrap().contains("create_rate_limit"),
        "{v}"
    );
    // The flooding user stays limited with the token too (its holder is the user).
    assert_eq!(
        api.post(
            "/events",
            &hitl_event("question", "with the token", json!({}))
        )
        .status(),
        StatusCode::TOO_MANY_REQUESTS
    );
    // Another OS user still has a budget of its own; reads are not creates.
    let script = format!(
        "import json, urllib.request\n\
         body = json.dumps({{'source_app': 'x', 'session_id': 'y', 'hook_event_type': 'e'}}).encode()\n\
         req = urllib.request.Request('{}/events', data=body, headers={{'Content-Type': 'application/json'}})\n\
         print(urllib.request.urlopen(req).status)",
        api.base
    );
    assert_eq!(as_other_user(&script), "201");
    assert_eq!(api.get("/api/v1/requests").status(), StatusCode::OK);
}

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap()
}

#[test]
fn feeds_and_filters_read_a_page_not_the_whole_history() {
    let api = Api::start(None);
    let blob = "z".repeat(900 * 1024);
    for i in 0..30 {
        let mut e = hitl_event("question", &format!("big {i}?"), json!({}));
        e["payload"] = json!({ "blob": blob });
        let r = api.post("/events", &e);
        assert_eq!(r.status(), StatusCode::CREATED);
    }
    let (_, first) = json_of(api.get("/api/v1/requests?limit=1"));
    let id = first[0]["id"].as_str().unwrap().to_string();
    api.post(
        &format!("/api/v1/requests/{id}/respond"),
        &json!({ "response": "done" }),
    );

    let pid = api.listener.pid();
    let before = rss_kib(pid);
    for _ in 0..3 {
        let (status, v) = json_of(api.get("/events/recent?limit=1000"));
        assert_eq!(status, StatusCode::OK);
        let n = v.as_array().unwrap().len();
        assert!(
            (1..=10).contains(&n),
            "a feed is bounded by its bytes, not only its count: {n}"
        );
    }
    let grown = rss_kib(pid).saturating_sub(before);
    eprintln!("feed reads grew RSS by {grown} KiB");
    assert!(grown < 96 * 1024, "reading the feed took {grown} KiB");

    // Filters run in the database, and still find what they ask for.
    let (status, v) = json_of(api.get("/api/v1/requests?status=answered&limit=5"));
    assert_eq!(status, StatusCode::OK);
    let rows = v.as_array().unwrap();
    assert_eq!(rows.len(), 1, "{v}");
    assert_eq!(rows[0]["id"], id.as_str());
    let (_, v) = json_of(api.get("/api/v1/requests?status=all&agent=sess-1&limit=7"));
    assert_eq!(v.as_array().unwrap().len(), 7);
}

#[test]
fn who_created_a_request_goes_with_it_whatever_app_it_names() {
    // Another OS user creates a request in the name of the user's own agent…
    let p = Project::new();
    let listener = p.listen_with_stdin(&["--ui", "terminal", "--http", "127.0.0.1:0"]);
    let base = listener.http_base();
    let script = format!(
        "import json, urllib.request\n\
         body = json.dumps({{'source_app': 'claude-code', 'session_id': 'the-users-session', \
         'hook_event_type': 'PreToolUse', 'created_by': 'user', \
         'humanInTheLoop': {{'type': 'approval', 'question': 'Deploy to prod?'}}}}).encode()\n\
         req = urllib.request.Request('{base}/events', data=body, headers={{\
         'Content-Type': 'application/json'}})\n\
         print(urllib.request.urlopen(req).status)"
    );
    assert_eq!(as_other_user(&script), "201");
    // …and the user's own agent asks over HTTP too.
    let r = reqwest::blocking::Client::new()
        .post(format!("{base}/events"))
        .json(&hitl_event("question", "Which branch?", json!({})))
        .send()
        .unwrap();
    assert_eq!(r.status(), StatusCode::CREATED);

    // The terminal says who asked, beside the name the request gives itself.
    listener.wait_stdout(
        "(asked by another OS user, uid 65534",
        Duration::from_secs(10),
    );
    // So do the CLI's views: the JSON has it, the table marks it.
    let pending = p.wait_pending(2, Duration::from_secs(10));
    let created_by = |q: &str| {
        pending
            .iter()
            .find(|v| v["content"] == q)
            .map(|v| v["created_by"].clone())
            .unwrap()
    };
    assert!(
        created_by("Deploy to prod?")
            .as_str()
            .is_some_and(|c| c.starts_with("uid 65534")),
        "{pending:?}"
    );
    assert_eq!(created_by("Which branch?"), "user");
    let table = String::from_utf8(p.run(&["pending"]).stdout).unwrap();
    let line = table.lines().find(|l| l.contains("Deploy")).unwrap();
    assert!(line.contains("[uid 65534"), "{table}");
    drop(listener);
}

/// A TCP server run by `nobody` that reports what it was sent: its port, and a
/// reader of its one report (`bytes N` or `no connection`).
fn nobodys_socket() -> (
    String,
    std::process::Child,
    std::io::Lines<std::io::BufReader<std::process::ChildStdout>>,
) {
    use std::io::BufRead;
    let server = "import socket, sys\n\
        s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(1)\n\
        print(s.getsockname()[1], flush=True)\n\
        s.settimeout(8)\n\
        try:\n    c, _ = s.accept()\nexcept socket.timeout:\n    print('no connection', flush=True); sys.exit(0)\n\
        c.settimeout(20); got = b''\n\
        while True:\n    b = c.recv(65536)\n    if not b: break\n    got += b\n\
        print('bytes', len(got), flush=True)\n";
    let mut child = std::process::Command::new("runuser")
        .args(["-u", "nobody", "--", "python3", "-c", server])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let port = lines.next().unwrap().unwrap();
    (port, child, lines)
}

#[test]
fn an_answer_is_never_pushed_to_another_users_socket() {
    assert!(
        nix::unistd::geteuid().is_root(),
        "this check runs a server as another OS user and needs root (CI runs as root)"
    );
    let p = Project::new();
    let listener = p.listen(&["--ui", "none", "--http", "127.0.0.1:0"]);
    let base = p.http_url();

    // nobody asks, naming its own socket as the way back: it may ask, never read.
    let (port, mut child, mut lines) = nobodys_socket();
    let script = format!(
        "import json, urllib.request\n\
         body = json.dumps({{'source_app': 'claude-code', 'session_id': 's', 'hook_event_type': 'PreToolUse', \
         'humanInTheLoop': {{'type': 'question', 'question': 'Token please?', \
         'responseWebSocketUrl': 'ws://127.0.0.1:{port}'}}}}).encode()\n\
         req = urllib.request.Request('{base}/events', data=body, headers={{'Content-Type': 'application/json'}})\n\
         print(urllib.request.urlopen(req).status)"
    );
    assert_eq!(as_other_user(&script), "201");
    let q = p.wait_pending(1, Duration::from_secs(10)).pop().unwrap();
    let out = p.run(&["answer", q["id"].as_str().unwrap(), "a secret"]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(lines.next().unwrap().unwrap(), "no connection");
    let _ = child.wait();
    eventually("the listener says why", Duration::from_secs(5), || {
        listener.log().contains("another OS user made it")
    });

    // The user's own request naming nobody's socket: the kernel says whose it is,
    // and nothing is sent.
    let (port, mut child, mut lines) = nobodys_socket();
    let r = Client::new()
        .post(format!("{base}/events"))
        .json(&hitl_event(
            "question",
            "Mine?",
            json!({ "responseWebSocketUrl": format!("ws://127.0.0.1:{port}") }),
        ))
        .send()
        .unwrap();
    assert_eq!(r.status(), StatusCode::CREATED);
    let q = p.wait_pending(1, Duration::from_secs(10)).pop().unwrap();
    let out = p.run(&["answer", q["id"].as_str().unwrap(), "also secret"]);
    assert!(out.status.success(), "{out:?}");
    let said = lines.next().unwrap().unwrap();
    assert!(said == "bytes 0" || said == "no connection", "{said}");
    let _ = child.wait();
    eventually("the listener says why", Duration::from_secs(5), || {
        listener.log().contains("not by the user who asked")
    });
}

/// The listener's resident memory, in MiB.
fn rss_mib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap();
    kb / 1024
}

#[test]
fn other_users_cannot_starve_or_fill_the_owners_listener() {
    use std::io::BufRead;
    assert!(
        nix::unistd::geteuid().is_root(),
        "this check runs clients as another OS user and needs root (CI runs as root)"
    );
    let p = Project::new();
    p.project_config("[http]\nbody_timeout = 3\n");
    let listener = p.listen(&["--ui", "none", "--http", "127.0.0.1:0"]);
    let base = p.http_url();
    let port = base.rsplit(':').next().unwrap().to_string();

    // nobody opens 600 connections, each promising a body it sends a byte a second.
    let slow = "import socket, sys, time\n\
        port = int(sys.argv[1]); socks = []\n\
        for i in range(600):\n\
        \x20   try:\n\
        \x20       s = socket.create_connection(('127.0.0.1', port), timeout=5)\n\
        \x20       s.sendall(b'POST /events HTTP/1.1\\r\\nHost: 127.0.0.1\\r\\nContent-Type: application/json\\r\\nContent-Length: 100000\\r\\n\\r\\n{')\n\
        \x20       socks.append(s)\n\
        \x20   except OSError:\n\
        \x20       pass\n\
        print('open', len(socks), flush=True)\n\
        end = time.time() + 8\n\
        while time.time() < end:\n\
        \x20   for s in socks:\n\
        \x20       try: s.sendall(b' ')\n\
        \x20       except OSError: pass\n\
        \x20   time.sleep(1)\n\
        closed = 0\n\
        for s in socks:\n\
        \x20   s.setblocking(False)\n\
        \x20   try:\n\
        \x20       s.recv(65536); closed += 1\n\
        \x20   except BlockingIOError: pass\n\
        \x20   except OSError: closed += 1\n\
        print('closed', closed, flush=True)\n";
    let mut holder = std::process::Command::new("runuser")
        .args(["-u", "nobody", "--", "python3", "-c", slow, &port])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut said = std::io::BufReader::new(holder.stdout.take().unwrap()).lines();
    assert_eq!(said.next().unwrap().unwrap(), "open 600");

    // Meanwhile the user's own clients are served.
    let http = Client::new();
    let r = http.get(format!("{base}/healthz")).send().unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let r = http
        .get(format!("{base}/?token={}", p.token()))
        .send()
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK, "the dashboard");
    let asker = p
        .hitl()
        .args(["ask", "--server", &base, "--timeout", "60", "Still there?"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let q = p.wait_pending(1, Duration::from_secs(10)).pop().unwrap();
    let out = p.run(&[
        "answer",
        &format!("http:{}", q["id"].as_str().unwrap()),
        "yes",
    ]);
    assert!(out.status.success(), "{out:?}");
    let out = crate::support::wait_output(asker, Duration::from_secs(20));
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "yes");

    // nobody's stalled bodies are cut, every one of its connections closed.
    assert_eq!(said.next().unwrap().unwrap(), "closed 600");
    let _ = holder.wait();

    // nobody sends 100 MB of requests that wait for ever: past its share, refused.
    let flood = format!(
        "import json, urllib.request, urllib.error\n\
         body = json.dumps({{'content': 'x' * 950000, 'timeout': 0}}).encode()\n\
         made = refused = 0\n\
         for i in range(105):\n\
         \x20   req = urllib.request.Request('{base}/api/v1/requests', data=body, headers={{'Content-Type': 'application/json'}})\n\
         \x20   try:\n\
         \x20       urllib.request.urlopen(req); made += 1\n\
         \x20   except urllib.error.HTTPError as e:\n\
         \x20       assert e.code == 429, e.code\n\
         \x20       refused += 1\n\
         print(made, refused)"
    );
    let counts = as_other_user(&flood);
    let (made, refused) = counts.split_once(' ').unwrap();
    let (made, refused): (usize, usize) = (made.parse().unwrap(), refused.parse().unwrap());
    assert!(made <= 9 && refused >= 96, "{counts}");
    let theirs: Vec<Value> = p
        .pending()
        .into_iter()
        .filter(|r| {
            r["created_by"]
                .as_str()
                .is_some_and(|c| c.starts_with("uid 65534"))
        })
        .collect();
    assert_eq!(theirs.len(), made);
    // Each waits a day at most, not for ever.
    assert!(
        theirs.iter().all(|r| r["timeout"] == 86_400),
        "{:?}",
        theirs[0]["timeout"]
    );
    let rss = rss_mib(listener.pid());
    eprintln!("listener RSS after the flood: {rss} MiB");
    assert!(rss < 150, "the listener holds {rss} MiB");
}

#[test]
fn an_agent_run_as_another_user_asks_and_hears_back_with_the_ask_only_token() {
    use std::io::BufRead;
    assert!(
        nix::unistd::geteuid().is_root(),
        "this check runs an agent as another OS user and needs root (CI runs as root)"
    );
    let p = Project::new();
    let _listener = p.listen(&["--ui", "none", "--http", "127.0.0.1:0"]);
    let base = p.http_url();
    let out = p.run(&["token", "--asker"]);
    assert!(out.status.success(), "{out:?}");
    let asker = String::from_utf8(out.stdout).unwrap().trim().to_string();
    assert_eq!(asker.len(), 64);
    assert_ne!(asker, p.token());
    // The agent, as nobody: asks, tries to answer itself and to list, then waits.
    let agent = format!(
        "import json, urllib.request, urllib.error\n\
         h = {{'Content-Type': 'application/json', 'Authorization': 'Bearer {asker}'}}\n\
         def call(method, path, body=None):\n\
         \x20   req = urllib.request.Request('{base}' + path, method=method, headers=h,\n\
         \x20       data=None if body is None else json.dumps(body).encode())\n\
         \x20   try:\n\
         \x20       with urllib.request.urlopen(req) as r: return r.status, json.load(r)\n\
         \x20   except urllib.error.HTTPError as e: return e.code, None\n\
         s, made = call('POST', '/api/v1/requests', {{'content': 'Deploy?', 'type': 'approval'}})\n\
         print(s, made['id'], flush=True)\n\
         print('respond', call('POST', '/api/v1/requests/' + made['id'] + '/respond', {{'approved': True}})[0], flush=True)\n\
         print('list', call('GET', '/api/v1/requests')[0], flush=True)\n\
         s, got = call('GET', '/api/v1/requests/' + made['id'] + '/wait?timeout=30')\n\
         print('wait', s, got['status'], flush=True)\n"
    );
    let mut child = std::process::Command::new("runuser")
        .args(["-u", "nobody", "--", "python3", "-c", &agent])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut said = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let first = said.next().unwrap().unwrap();
    let (status, id) = first.split_once(' ').unwrap();
    assert_eq!(status, "201", "{first}");
    assert_eq!(
        said.next().unwrap().unwrap(),
        "respond 401",
        "it cannot answer"
    );
    assert_eq!(said.next().unwrap().unwrap(), "list 401", "nor list");
    // The human answers; the agent hears it.
    let out = p.run(&["answer", &format!("http:{id}"), "--approve"]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(said.next().unwrap().unwrap(), "wait 200 answered");
    let _ = child.wait();
    // The master token is not for an agent's shell.
    let out = p
        .hitl()
        .args(["token"])
        .env("CLAUDECODE", "1")
        .output()
        .unwrap();
    assert!(!out.status.success(), "{out:?}");
}
