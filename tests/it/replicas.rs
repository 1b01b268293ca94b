//! Several `hitl serve` replicas on one PostgreSQL behave as one broker: a request
//! made on one is answered on another and delivered to the waiter on the first, never
//! twice; killing a replica loses nothing it accepted.

use std::{
    process::Command,
    sync::{
        Arc, Mutex,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use reqwest::{StatusCode, blocking::Client};
use serde_json::{Value, json};

use crate::{
    store::pg_schema_url,
    support::{Listener, Project, eventually},
};

/// A `hitl serve` replica of `p`'s on the PostgreSQL at `db`, and its URL.
pub(crate) fn serve(p: &Project, db: &str) -> (Listener, String) {
    let mut cmd: Command = p.hitl();
    cmd.args(["serve", "--http", "127.0.0.1:0", "--db", db]);
    let l = Listener::start_command(cmd);
    let base = l.http_base();
    (l, base)
}

#[test]
fn a_request_made_on_one_replica_is_answered_on_another() {
    let (db, _guard) = pg_schema_url();
    let p = Project::new();
    let (_a, a) = serve(&p, &db);
    let (_b, b) = serve(&p, &db);
    let token = p.token();
    let http = Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap();

    let created: Value = http
        .post(format!("{a}/api/v1/requests"))
        .json(&json!({ "content": "Ship it?", "type": "approval" }))
        .send()
        .unwrap()
        .json()
        .unwrap();
    let id = created["id"].as_str().unwrap().to_string();
    // B learns of it (LISTEN/NOTIFY).
    eventually("replica B queues it", Duration::from_secs(5), || {
        let list: Value = http
            .get(format!("{b}/api/v1/requests"))
            .bearer_auth(&token)
            .send()
            .unwrap()
            .json()
            .unwrap();
        list.as_array()
            .unwrap()
            .iter()
            .any(|r| r["id"] == id.as_str())
    });
    // The asker waits on A; the human answers on B.
    let waiter = {
        let (http, a, id) = (http.clone(), a.clone(), id.clone());
        std::thread::spawn(move || -> Value {
            http.get(format!("{a}/api/v1/requests/{id}/wait?timeout=20"))
                .send()
                .unwrap()
                .json()
                .unwrap()
        })
    };
    // Whether the waiter is already waiting or asks after the answer, it gets it.
    let r = http
        .post(format!("{b}/api/v1/requests/{id}/respond"))
        .bearer_auth(&token)
        .json(&json!({ "approved": true, "comment": "go" }))
        .send()
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let got = waiter.join().unwrap();
    assert_eq!(got["status"], "answered", "{got}");
    assert_eq!(got["answer"]["approved"], true);
    assert_eq!(got["answer"]["comment"], "go");
    // No second answer, on either replica.
    for base in [&a, &b] {
        let r = http
            .post(format!("{base}/api/v1/requests/{id}/respond"))
            .bearer_auth(&token)
            .json(&json!({ "approved": false }))
            .send()
            .unwrap();
        assert_eq!(r.status(), StatusCode::CONFLICT, "{base}");
    }
    // Seed polling on A sees B's answer.
    let polled: Value = http
        .get(format!("{a}/events/{id}/response"))
        .send()
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(polled["data"]["approved"], true);
}

#[test]
fn killing_a_replica_under_load_loses_nothing() {
    let (db, _guard) = pg_schema_url();
    let p = Project::new();
    let (_a, a) = serve(&p, &db);
    let (b_proc, b) = serve(&p, &db);
    let token = p.token();
    let accepted = Arc::new(Mutex::new(Vec::<String>::new()));
    // Requests B took and refused, counted to kill it mid-load and to see it died.
    let (b_took, b_refused) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let workers: Vec<_> = (0..4)
        .map(|w| {
            let (a, b, accepted) = (a.clone(), b.clone(), accepted.clone());
            let (b_took, b_refused) = (b_took.clone(), b_refused.clone());
            std::thread::spawn(move || {
                let http = Client::builder()
                    .timeout(Duration::from_secs(10))
                    .build()
                    .unwrap();
                for i in 0..150 {
                    let base = if (w + i) % 2 == 0 { &a } else { &b };
                    let r = http
                        .post(format!("{base}/api/v1/requests"))
                        .json(&json!({ "content": format!("w{w} q{i}") }))
                        .send();
                    // Only a 201 is an acceptance; a refused connection is not.
                    let to_b = base == &b;
                    if let Ok(r) = r
                        && r.status() == StatusCode::CREATED
                        && let Ok(v) = r.json::<Value>()
                    {
                        accepted
                            .lock()
                            .unwrap()
                            .push(v["id"].as_str().unwrap().to_string());
                        if to_b {
                            b_took.fetch_add(1, Ordering::SeqCst);
                        }
                    } else if to_b {
                        b_refused.fetch_add(1, Ordering::SeqCst);
                    }
                }
            })
        })
        .collect();
    // Killed mid-load: once B has taken 40 of its 300, with the rest still coming.
    eventually("B takes requests", Duration::from_secs(30), || {
        b_took.load(Ordering::SeqCst) >= 40
    });
    b_proc.signal(nix::sys::signal::Signal::SIGKILL);
    for w in workers {
        w.join().unwrap();
    }
    let accepted = accepted.lock().unwrap().clone();
    assert!(
        accepted.len() >= 300,
        "A alone accepts its half: {}",
        accepted.len()
    );
    assert!(
        b_refused.load(Ordering::SeqCst) > 0,
        "B was killed while the load ran"
    );

    // Every accepted request, wherever it was made, is answerable on A, exactly once.
    let http = Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    for id in &accepted {
        let mut status = StatusCode::NOT_FOUND;
        eventually(
            &format!("A can answer {id}"),
            Duration::from_secs(10),
            || {
                status = http
                    .post(format!("{a}/api/v1/requests/{id}/respond"))
                    .bearer_auth(&token)
                    .json(&json!({ "response": format!("answer {id}") }))
                    .send()
                    .unwrap()
                    .status();
                status != StatusCode::NOT_FOUND && status != StatusCode::CONFLICT
            },
        );
        assert_eq!(status, StatusCode::OK, "{id}");
        let got: Value = http
            .get(format!("{a}/api/v1/requests/{id}"))
            .bearer_auth(&token)
            .send()
            .unwrap()
            .json()
            .unwrap();
        assert_eq!(got["answer"]["content"], format!("answer {id}"));
    }
    let left: Value = http
        .get(format!("{a}/api/v1/requests"))
        .bearer_auth(&token)
        .send()
        .unwrap()
        .json()
        .unwrap();
    // What is left was committed by B but never acknowledged (B died before its 201):
    // kept, not lost, and never one of the accepted.
    for r in left.as_array().unwrap() {
        assert!(
            !accepted.contains(&r["id"].as_str().unwrap().to_string()),
            "{r}"
        );
    }
}

/// PostgreSQL refuses some text (NUL characters) and may refuse a row (here a trigger
/// the test installs): the first is stored anyway, and a refused request fails alone,
/// never taking down the others written in the same batch.
#[test]
fn a_request_postgresql_refuses_fails_alone() {
    let (db, _guard) = pg_schema_url();
    let p = Project::new();
    let (server, a) = serve(&p, &db);
    let token = p.token();
    tokio::runtime::Runtime::new().unwrap().block_on(async {
        use sqlx::{Connection, Executor};
        let mut c = sqlx::PgConnection::connect(&db).await.unwrap();
        c.execute(
            "CREATE FUNCTION refuse_poison() RETURNS trigger AS $$
             BEGIN
                 -- The text lives in request_json (stored once).
                 IF position('\"content\":\"poison\"' in NEW.request_json) > 0 THEN
                     RAISE EXCEPTION 'refused by the test';
                 END IF;
                 IF position('\"content\":\"slow\"' in NEW.request_json) > 0 THEN
                     PERFORM pg_sleep(0.5);
                 END IF;
                 RETURN NEW;
             END $$ LANGUAGE plpgsql;
             CREATE TRIGGER refuse_poison BEFORE INSERT ON requests
                 FOR EACH ROW EXECUTE FUNCTION refuse_poison();",
        )
        .await
        .unwrap();
    });
    let http = Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap();

    // NUL in the text and in the event's fields: stored, answered, delivered.
    let r = http
        .post(format!("{a}/api/v1/requests"))
        .json(&json!({ "content": "a\u{0}b", "agent_id": "nul" }))
        .send()
        .unwrap();
    assert_eq!(r.status(), StatusCode::CREATED);
    let id = r.json::<Value>().unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let r = http
        .post(format!("{a}/events"))
        .json(
            &json!({ "source_app": "a\u{0}", "session_id": "s", "hook_event_type": "Stop",
                       "payload": { "k": "\u{0}" } }),
        )
        .send()
        .unwrap();
    assert!(r.status().is_success(), "{r:?}");
    let r = http
        .post(format!("{a}/api/v1/requests/{id}/respond"))
        .bearer_auth(&token)
        .json(&json!({ "response": "x\u{0}y" }))
        .send()
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK, "{:?}", r.text());

    // Forty at once, one of them refused by the database. A slow one first holds the
    // writer, so the forty pile up behind it and go in one batch.
    let slow = {
        let (http, a) = (http.clone(), a.clone());
        std::thread::spawn(move || {
            http.post(format!("{a}/api/v1/requests"))
                .json(&json!({ "content": "slow" }))
                .send()
                .unwrap()
                .status()
        })
    };
    // The slow one holds the writer (its trigger sleeps in PostgreSQL) before the
    // forty are sent.
    let rt = tokio::runtime::Runtime::new().unwrap();
    eventually(
        "the slow insert holds the writer",
        Duration::from_secs(10),
        || {
            rt.block_on(async {
                use sqlx::Connection;
                let mut c = sqlx::PgConnection::connect(&db).await.unwrap();
                sqlx::query_scalar::<_, i64>(
                    "SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'PgSleep'",
                )
                .fetch_one(&mut c)
                .await
                .unwrap()
                    > 0
            })
        },
    );
    let barrier = Arc::new(std::sync::Barrier::new(41));
    let askers: Vec<_> = (0..41)
        .map(|i| {
            let (http, a, barrier) = (http.clone(), a.clone(), barrier.clone());
            std::thread::spawn(move || {
                let content = if i == 20 {
                    "poison".to_string()
                } else {
                    format!("fine {i}")
                };
                barrier.wait();
                let r = http
                    .post(format!("{a}/api/v1/requests"))
                    .json(&json!({ "content": content }))
                    .send()
                    .unwrap();
                (content, r.status())
            })
        })
        .collect();
    for asker in askers {
        let (content, status) = asker.join().unwrap();
        if content == "poison" {
            assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{content}");
        } else {
            assert_eq!(status, StatusCode::CREATED, "{content}");
        }
    }
    assert_eq!(slow.join().unwrap(), StatusCode::CREATED);
    assert!(
        server.log().contains("one at a time"),
        "the refused request was not in a batch with others: {}",
        server.log()
    );
    let pending: Value = http
        .get(format!("{a}/api/v1/requests?status=pending"))
        .bearer_auth(&token)
        .send()
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(pending.as_array().unwrap().len(), 41, "{pending}");
}
