//! Devices: `hitl pair` logs one browser in, once; a device reads and answers but
//! never makes a way in for anything else; `hitl devices revoke` ends it at once,
//! its open stream included; and none of it runs inside an agent's session.

use std::time::Duration;

use futures_util::StreamExt;
use reqwest::{StatusCode, blocking::Client};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::{Message, client::IntoClientRequest, http::HeaderValue};

use crate::support::{Project, spawn_ask, wait_output};

/// Opens `url` as a browser would, without following the page anywhere: the
/// response's status and the login cookie it set (`name=value`), if any.
fn open(url: &str) -> (StatusCode, Option<String>) {
    let r = Client::new().get(url).send().unwrap();
    let cookie = r
        .headers()
        .get("set-cookie")
        .map(|v| v.to_str().unwrap().split(';').next().unwrap().to_string());
    (r.status(), cookie)
}

#[test]
fn a_paired_device_logs_in_once_answers_cannot_make_a_way_in_and_is_revoked_at_once() {
    let p = Project::new();
    let _listener = p.listen(&["--ui", "none", "--http", "127.0.0.1:0"]);
    let base = p.http_url();

    // A pairing link, good once.
    let out = p.run(&["pair", "--name", "my phone", "--json"]);
    assert!(out.status.success(), "{out:?}");
    let pairing: Value = serde_json::from_slice(&out.stdout).unwrap();
    let url = pairing["url"].as_str().unwrap();
    assert!(url.starts_with(&format!("{base}/?code=")), "{pairing}");
    assert_eq!(pairing["name"], "my phone");
    assert_eq!(pairing["expires_in_seconds"], 600);
    let (status, cookie) = open(url);
    assert_eq!(status, StatusCode::OK);
    let cookie = cookie.expect("the link logs the device in");
    let (_, again) = open(url);
    assert_eq!(again, None, "a code logs in once, never twice");

    // The device reads and answers.
    let http = Client::new();
    let as_device = |method: reqwest::Method, path: &str| {
        http.request(method, format!("{base}{path}"))
            .header("cookie", &cookie)
    };
    let asker = spawn_ask(&p, &["--type", "approval", "Deploy from the phone?"]);
    let id = p.wait_pending(1, Duration::from_secs(10))[0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let r = as_device(reqwest::Method::GET, "/api/v1/requests")
        .send()
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let r = as_device(
        reqwest::Method::POST,
        &format!("/api/v1/requests/{id}/respond"),
    )
    .json(&json!({ "approved": true, "comment": "from the phone" }))
    .send()
    .unwrap();
    assert_eq!(r.status(), StatusCode::OK, "{:?}", r.text());
    let asked = wait_output(asker, Duration::from_secs(10));
    assert!(
        String::from_utf8_lossy(&asked.stdout).starts_with("approved"),
        "{asked:?}"
    );
    // Credited to the dashboard, the user and the device.
    let ended = &p.history()[0];
    let by = ended["responded_by"].as_str().unwrap_or_default();
    assert!(
        by.starts_with("dashboard:") && by.ends_with(" (my phone)"),
        "{ended}"
    );

    // It makes no way in: no login link, no pairing, no device management.
    for (method, path) in [
        (reqwest::Method::POST, "/api/v1/login-links"),
        (reqwest::Method::POST, "/api/v1/pairings"),
        (reqwest::Method::GET, "/api/v1/devices"),
        (reqwest::Method::DELETE, "/api/v1/devices/anything"),
    ] {
        let r = as_device(method.clone(), path)
            .json(&json!({}))
            .send()
            .unwrap();
        assert_eq!(r.status(), StatusCode::FORBIDDEN, "{method} {path}");
    }
    // The session id is no token either.
    let session = cookie.split_once('=').unwrap().1;
    let r = http
        .post(format!("{base}/api/v1/pairings"))
        .bearer_auth(session)
        .send()
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);

    // Listed, by name, how, and from where.
    let out = p.run(&["devices", "--json"]);
    assert!(out.status.success(), "{out:?}");
    let devices: Value = serde_json::from_slice(&out.stdout).unwrap();
    let devices = devices.as_array().unwrap();
    assert_eq!(devices.len(), 1, "{devices:?}");
    let device = &devices[0];
    assert_eq!(
        (&device["name"], &device["by"], &device["from"]),
        (&json!("my phone"), &json!("pair"), &json!("127.0.0.1")),
        "{device}"
    );
    let device_id = device["id"].as_str().unwrap().to_string();
    let listed = p.run(&["devices"]);
    assert!(
        String::from_utf8_lossy(&listed.stdout).contains("my phone"),
        "{listed:?}"
    );

    // Revoked: its stream closes and its next request is refused, at once.
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mut req = format!("{}/api/v1/stream", base.replace("http://", "ws://"))
        .into_client_request()
        .unwrap();
    req.headers_mut()
        .insert("cookie", HeaderValue::from_str(&cookie).unwrap());
    let (mut ws, _) = rt.block_on(tokio_tungstenite::connect_async(req)).unwrap();
    let first = rt
        .block_on(async { tokio::time::timeout(Duration::from_secs(5), ws.next()).await })
        .unwrap();
    assert!(matches!(first, Some(Ok(Message::Text(_)))), "{first:?}");
    let out = p.run(&["devices", "revoke", &device_id]);
    assert!(out.status.success(), "{out:?}");
    let closed = rt.block_on(async {
        tokio::time::timeout(Duration::from_secs(2), async {
            loop {
                match ws.next().await {
                    Some(Ok(Message::Close(frame))) => return Some(frame),
                    None | Some(Err(_)) => return None,
                    Some(Ok(_)) => {}
                }
            }
        })
        .await
    });
    let frame = closed
        .expect("the stream closes within 2 s of the revocation")
        .flatten();
    assert_eq!(frame.map(|f| u16::from(f.code)), Some(1008));
    let r = as_device(reqwest::Method::GET, "/api/v1/requests")
        .send()
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    let out = p.run(&["devices", "revoke", &device_id]);
    assert!(!out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no device"),
        "{out:?}"
    );
    let out = p.run(&["devices", "--json"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "[]");
}

#[test]
fn pairing_and_devices_refuse_inside_an_agents_session() {
    let p = Project::new();
    let _listener = p.listen(&["--ui", "none", "--http", "127.0.0.1:0"]);
    for args in [
        &["pair", "--json"][..],
        &["devices", "--json"],
        &["devices", "revoke", "0123456789ab"],
    ] {
        let out = p.hitl().args(args).env("CLAUDECODE", "1").output().unwrap();
        assert!(!out.status.success(), "{args:?}: {out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("is for a human"), "{args:?}: {err}");
    }
}

#[test]
fn a_pairing_link_names_the_public_url_a_project_cannot_choose() {
    let p = Project::new();
    p.user_config("[http]\npublic_url = \"https://box.tail1234.ts.net\"\n");
    // A project's settings (beside the agents) may not send the code elsewhere.
    p.project_config("[http]\npublic_url = \"https://attacker.example\"\n");
    let _listener = p.listen(&["--ui", "none", "--http", "127.0.0.1:0"]);
    let out = p.run(&["pair", "--json"]);
    assert!(out.status.success(), "{out:?}");
    let pairing: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        pairing["url"]
            .as_str()
            .unwrap()
            .starts_with("https://box.tail1234.ts.net/?code="),
        "{pairing}"
    );
}
