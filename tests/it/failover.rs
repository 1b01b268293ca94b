//! `hitl ask --server` rides out what happens to servers: a restart of the one it
//! asked, and the death of one replica among several sharing a store. The question is
//! safe in the store once created, so the asker keeps waiting for the same request.

use std::{process::Stdio, time::Duration};

use reqwest::blocking::Client;
use serde_json::{Value, json};

use crate::{
    store::pg_schema_url,
    support::{Listener, Project, eventually, wait_output},
};

/// A loopback port nobody listens on now.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn serve(p: &Project, addr: &str, db: Option<&str>) -> Listener {
    let mut cmd = p.hitl();
    cmd.args(["serve", "--http", addr]);
    if let Some(db) = db {
        cmd.args(["--db", db]);
    }
    Listener::start_command(cmd)
}

/// The pending requests a server lists.
fn pending(base: &str, token: &str) -> Vec<Value> {
    Client::new()
        .get(format!("{base}/api/v1/requests"))
        .bearer_auth(token)
        .send()
        .ok()
        .and_then(|r| r.json::<Value>().ok())
        .and_then(|v| v.as_array().cloned())
        .unwrap_or_default()
}

fn answer(base: &str, token: &str, id: &str, text: &str) {
    let r = Client::new()
        .post(format!("{base}/api/v1/requests/{id}/respond"))
        .bearer_auth(token)
        .json(&json!({ "response": text }))
        .send()
        .unwrap();
    assert!(r.status().is_success(), "{:?}", r.text());
}

fn ask(p: &Project, servers: &str, question: &str) -> std::process::Child {
    p.hitl()
        .args(["ask", "--server", servers, "--timeout", "60", question])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn an_http_asker_rides_out_a_server_restart() {
    let p = Project::new();
    let addr = format!("127.0.0.1:{}", free_port());
    let base = format!("http://{addr}");
    let server = serve(&p, &addr, None);
    let token = p.token();
    let asker = ask(&p, &base, "still there after a restart?");
    eventually(
        "the server holds the question",
        Duration::from_secs(10),
        || pending(&base, &token).len() == 1,
    );
    let id = pending(&base, &token)[0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    // The server dies mid-wait and comes back a moment later on the same address.
    server.signal(nix::sys::signal::Signal::SIGKILL);
    std::thread::sleep(Duration::from_millis(700));
    let _server = serve(&p, &addr, None);
    eventually(
        "the question is queued again",
        Duration::from_secs(10),
        || pending(&base, &token).len() == 1,
    );
    answer(&base, &token, &id, "yes, still here");
    let out = wait_output(asker, Duration::from_secs(30));
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "yes, still here\n");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("trying again"),
        "{out:?}"
    );
}

#[test]
fn an_http_asker_fails_over_to_another_replica() {
    let (db, _guard) = pg_schema_url();
    let p = Project::new();
    let (a_addr, b_addr) = (
        format!("127.0.0.1:{}", free_port()),
        format!("127.0.0.1:{}", free_port()),
    );
    let (a, b) = (format!("http://{a_addr}"), format!("http://{b_addr}"));
    let server_a = serve(&p, &a_addr, Some(&db));
    let _server_b = serve(&p, &b_addr, Some(&db));
    let token = p.token();
    let asker = ask(&p, &format!("{a},{b}"), "which replica?");
    eventually("A holds the question", Duration::from_secs(10), || {
        pending(&a, &token).len() == 1
    });
    let id = pending(&a, &token)[0]["id"].as_str().unwrap().to_string();
    server_a.signal(nix::sys::signal::Signal::SIGKILL);
    // B answers; the asker, cut off from A, finds the answer there.
    eventually("B knows the question", Duration::from_secs(10), || {
        pending(&b, &token).iter().any(|r| r["id"] == id.as_str())
    });
    answer(&b, &token, &id, "B did");
    let out = wait_output(asker, Duration::from_secs(30));
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "B did\n");
}

#[test]
fn an_http_asker_with_no_server_at_all_cannot_ask() {
    let p = Project::new();
    let base = format!("http://127.0.0.1:{}", free_port());
    let started = std::time::Instant::now();
    let out = p.run(&["ask", "--server", &base, "--timeout", "2", "anyone?"]);
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    assert!(started.elapsed() < Duration::from_secs(40));
}
