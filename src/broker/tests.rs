//! The broker's lifecycle in-process, with no other process started: a real spool in
//! a temp folder, a real SQLite store, and spool events sent by the test as the
//! watcher would send them.

use std::{path::PathBuf, sync::Arc, time::Duration};

use jiff::Timestamp;
use tokio::sync::{broadcast, mpsc, oneshot};

use super::*;
use crate::{
    protocol::{AnswerStatus, Asker, Kind, Priority, Reply},
    spool::questions,
    store::{HistoryQuery, NewEvent, Store, spawn_store_writer},
};

/// A broker running over one temp project.
struct Harness {
    _dir: tempfile::TempDir,
    spool: Spool,
    db: String,
    handle: BrokerHandle,
    events: mpsc::UnboundedSender<SpoolEvent>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
    writer: Option<tokio::task::JoinHandle<()>>,
    reader: Store,
}

impl Harness {
    async fn start() -> Harness {
        let dir = tempfile::tempdir().unwrap();
        let spool = Spool::new(dir.path().join("project"));
        spool.ensure_layout().unwrap();
        let db = format!("sqlite://{}", dir.path().join("history.db").display());
        Harness::start_in(dir, spool, db, None).await
    }

    /// A broker that answers everything at once with `text` (`--auto-answer`).
    async fn start_auto(text: &str) -> Harness {
        let dir = tempfile::tempdir().unwrap();
        let spool = Spool::new(dir.path().join("project"));
        spool.ensure_layout().unwrap();
        let db = format!("sqlite://{}", dir.path().join("history.db").display());
        Harness::start_in(dir, spool, db, Some(text.to_string())).await
    }

    async fn start_in(
        dir: tempfile::TempDir,
        spool: Spool,
        db: String,
        auto_answer: Option<String>,
    ) -> Harness {
        let store = Store::open(&db).await.unwrap();
        let reader = store.clone();
        let unfinished = Unfinished::read(&store).await.unwrap();
        let (store_tx, writer) = spawn_store_writer(store);
        let (broker, handle) = Broker::new(
            vec![spool.clone()],
            BrokerOptions {
                max_question_bytes: 1 << 20,
                durable: false,
                auto_answer,
                keep_when_stopped: Duration::from_secs(60),
            },
            store_tx,
            unfinished,
        );
        let (events, events_rx) = mpsc::unbounded_channel();
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(broker.run(events_rx, async {
            let _ = stopped.await;
        }));
        Harness {
            _dir: dir,
            spool,
            db,
            handle,
            events,
            stop: Some(stop),
            task: Some(task),
            writer: Some(writer),
            reader,
        }
    }

    /// Stops the broker and its writer (everything sent is written), then starts a
    /// new one over the same spool and store: a restart.
    async fn restart(mut self) -> Harness {
        self.stop_all().await;
        let Harness {
            _dir, spool, db, ..
        } = self;
        Harness::start_in(_dir, spool, db, None).await
    }

    async fn stop_all(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            task.await.unwrap();
        }
        // The broker's handle and our own are the writer's last senders.
        let handle = std::mem::replace(
            &mut self.handle,
            BrokerHandle::new(
                mpsc::unbounded_channel().0,
                broadcast::channel(1).0,
                crate::store::StoreSender::stopped(),
            ),
        );
        drop(handle);
        if let Some(writer) = self.writer.take() {
            tokio::time::timeout(Duration::from_secs(5), writer)
                .await
                .expect("the store writer flushes and stops")
                .unwrap();
        }
    }

    /// Writes a question file as `hitl ask` does and tells the broker.
    fn ask(&self, id: &str, kind: Kind, options: &[&str], tweak: impl FnOnce(&mut Request)) {
        let mut r = Request {
            id: id.to_string(),
            options: options.iter().map(|o| o.to_string()).collect(),
            ..Request::new("agent-1", "Agent 1", kind, format!("question {id}?"))
        };
        tweak(&mut r);
        let path = self.question_path(id);
        let bytes = serde_json::to_vec(&r).unwrap();
        crate::spool::write_atomic(&self.spool.tmp(), &path, &bytes, false).unwrap();
        self.events
            .send(SpoolEvent::Changed { path, closed: true })
            .unwrap();
    }

    fn question_path(&self, id: &str) -> PathBuf {
        self.spool.questions().join(format!("{id}.json"))
    }

    fn answer(&self, id: &str) -> Option<Answer> {
        questions::read_answer(&self.spool.answers().join(format!("{id}.json")))
    }

    /// How history has request `id`, once it has it as `status`.
    async fn history_status(&self, id: &str, status: &str) -> crate::store::HistoryEntry {
        let q = HistoryQuery {
            id: Some(id.to_string()),
            limit: 1,
            ..HistoryQuery::default()
        };
        for _ in 0..500 {
            if let Some(h) = self.reader.history(&q).await.unwrap().pop()
                && h.status.as_str() == status
            {
                return h;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("history never had {id} as {status}");
    }
}

/// The next change for which `pick` says something, within 10 s.
async fn next<T>(
    rx: &mut broadcast::Receiver<Change>,
    mut pick: impl FnMut(Change) -> Option<T>,
) -> T {
    tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            if let Some(t) = pick(rx.recv().await.unwrap()) {
                return t;
            }
        }
    })
    .await
    .expect("the broker said nothing in 10 s")
}

fn queued(c: Change) -> Option<Arc<PendingRequest>> {
    match c {
        Change::Queued(p) => Some(p),
        Change::Finished(_) | Change::Activity(_) | Change::Updated(_) | Change::Reached(_) => None,
    }
}

fn finished(c: Change) -> Option<Arc<Finished>> {
    match c {
        Change::Finished(f) => Some(f),
        Change::Queued(_) | Change::Activity(_) | Change::Updated(_) | Change::Reached(_) => None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_auto_answer_rule_answers_each_question_as_it_is_queued() {
    let h = Harness::start_auto("ok").await;
    let mut changes = h.handle.subscribe();
    h.ask("a1", Kind::Text, &[], |_| {});
    h.ask("a2", Kind::Select, &["dev", "prod"], |_| {});
    // Followers still see each queued, then finished by the rule.
    let (mut seen_queued, mut seen_finished) = (Vec::new(), Vec::new());
    while seen_finished.len() < 2 {
        match next(&mut changes, Some).await {
            Change::Queued(p) => seen_queued.push(p.request.id.clone()),
            Change::Finished(f) => {
                assert!(seen_queued.contains(&f.pending.request.id));
                assert_eq!(f.status, Status::Answered);
                seen_finished.push(f.pending.request.id.clone());
            }
            Change::Activity(_) | Change::Updated(_) | Change::Reached(_) => {}
        }
    }
    let a1 = h.answer("a1").expect("a1's answer file");
    assert_eq!(
        (a1.content.as_str(), a1.responded_by.as_str()),
        ("ok", "auto")
    );
    assert_eq!(h.answer("a2").unwrap().content, "dev");
    h.history_status("a2", "answered").await;
    assert!(h.handle.pending().await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rule_answers_again_what_could_not_be_written() {
    let h = Harness::start_auto("ok").await;
    let mut changes = h.handle.subscribe();
    // No answers/ folder to write in (a file in its place): the answer fails.
    let answers = h.spool.answers();
    std::fs::rename(&answers, h.spool.root().join("answers.away")).unwrap();
    std::fs::write(&answers, b"not a folder").unwrap();
    h.ask("w1", Kind::Text, &[], |_| {});
    next(&mut changes, queued).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(h.handle.pending().await.len(), 1, "still pending");
    // The folder is back: the next tick's rule delivers it.
    std::fs::remove_file(&answers).unwrap();
    std::fs::rename(h.spool.root().join("answers.away"), &answers).unwrap();
    let f = next(&mut changes, finished).await;
    assert_eq!(
        (f.pending.request.id.as_str(), f.status),
        ("w1", Status::Answered)
    );
    assert_eq!(h.answer("w1").unwrap().content, "ok");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_is_queued_answered_delivered_and_recorded() {
    let h = Harness::start().await;
    let mut changes = h.handle.subscribe();
    h.ask("q1", Kind::Select, &["dev", "prod"], |_| {});
    let p = next(&mut changes, queued).await;
    assert_eq!((p.origin, p.request.id.as_str()), (Origin::Spool, "q1"));
    assert_eq!(h.handle.pending().await.len(), 1);

    // A reply that does not fit the kind is refused; the question stays pending.
    let wrong = h
        .handle
        .respond(p.seq, Reply::Text("staging".into()), "t")
        .await;
    assert!(matches!(wrong, Err(RespondError::Invalid(_))), "{wrong:?}");
    let yes = Reply::Approval {
        approved: true,
        comment: None,
        remember: None,
    };
    assert!(matches!(
        h.handle.respond(p.seq, yes, "t").await,
        Err(RespondError::Invalid(_))
    ));

    let a = h
        .handle
        .respond(p.seq, Reply::Text("prod".into()), "tester")
        .await
        .unwrap();
    assert_eq!(a.content, "prod");
    let f = next(&mut changes, finished).await;
    assert!(f.here);
    assert_eq!(
        (f.status, f.responded_by()),
        (Status::Answered, Some("tester"))
    );
    assert_eq!(h.answer("q1").unwrap().content, "prod");
    assert!(h.handle.pending().await.is_empty());
    let rec = h.history_status("q1", "answered").await;
    assert_eq!(rec.content, "question q1?");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_answer_wins() {
    let h = Harness::start().await;
    let mut changes = h.handle.subscribe();
    h.ask("race", Kind::Text, &[], |_| {});
    let p = next(&mut changes, queued).await;
    let (a, b) = tokio::join!(
        h.handle.respond(p.seq, Reply::Text("one".into()), "alice"),
        h.handle.respond(p.seq, Reply::Text("two".into()), "bob"),
    );
    let (won, lost) = match (a, b) {
        (Ok(w), Err(l)) | (Err(l), Ok(w)) => (w, l),
        other => panic!("exactly one answer must win: {other:?}"),
    };
    assert!(
        matches!(
            lost,
            RespondError::AlreadyAnswered(_) | RespondError::NotFound(_)
        ),
        "{lost:?}"
    );
    assert_eq!(h.answer("race").unwrap().content, won.content);

    // An answer file written by another responder (`hitl answer`) wins too: the
    // broker records it and refuses its own.
    h.ask("outside", Kind::Text, &[], |_| {});
    let p = next(&mut changes, queued).await;
    let theirs = Answer::from_reply(&p.request, Reply::Text("from the CLI".into()), "cli:me");
    let path = h.spool.answers().join("outside.json");
    crate::spool::create_exclusive(
        &h.spool.tmp(),
        &path,
        &serde_json::to_vec(&theirs).unwrap(),
        false,
    )
    .unwrap();
    h.events
        .send(SpoolEvent::Changed { path, closed: true })
        .unwrap();
    let f = next(&mut changes, finished).await;
    assert_eq!(f.responded_by(), Some("cli:me"));
    let late = h
        .handle
        .respond(p.seq, Reply::Text("late".into()), "t")
        .await;
    assert!(matches!(late, Err(RespondError::NotFound(_))), "{late:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeouts_cancels_and_withdrawals_end_requests() {
    let h = Harness::start().await;
    let mut changes = h.handle.subscribe();

    // Past its deadline (and the grace askers get): timed out at the next tick.
    h.ask("late", Kind::Approval, &[], |r| {
        r.timestamp = Timestamp::now() - jiff::SignedDuration::from_secs(30);
        r.timeout = Some(1);
    });
    let f = next(&mut changes, finished).await;
    assert_eq!((f.id(), f.status), ("late", Status::Timeout));
    let a = h.answer("late").unwrap();
    assert_eq!((a.status, a.approved), (AnswerStatus::Timeout, Some(false)));

    // Cancelled by a human.
    h.ask("cancel", Kind::Text, &[], |_| {});
    let p = next(&mut changes, queued).await;
    let cancel = Reply::Cancel {
        reason: Some("not now".into()),
    };
    h.handle.respond(p.seq, cancel, "t").await.unwrap();
    let f = next(&mut changes, finished).await;
    assert_eq!(f.status, Status::Cancelled);
    assert_eq!(h.answer("cancel").unwrap().status, AnswerStatus::Cancelled);

    // Withdrawn: the asker removed its question.
    h.ask("gone", Kind::Text, &[], |_| {});
    next(&mut changes, queued).await;
    let path = h.question_path("gone");
    std::fs::remove_file(&path).unwrap();
    h.events.send(SpoolEvent::Removed { path }).unwrap();
    let f = next(&mut changes, finished).await;
    assert_eq!((f.id(), f.status), ("gone", Status::Withdrawn));
    h.history_status("gone", "withdrawn").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_askers_question_is_abandoned() {
    let h = Harness::start().await;
    let mut changes = h.handle.subscribe();
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    h.ask("orphan", Kind::Text, &[], |r| {
        r.asker = Some(Asker {
            pid,
            start_time: Some(1),
        });
    });
    let f = next(&mut changes, finished).await;
    assert_eq!((f.id(), f.status), ("orphan", Status::Abandoned));
    assert!(
        !h.question_path("orphan").exists(),
        "nobody will read it: removed"
    );
    h.history_status("orphan", "abandoned").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_queues_again_and_delivers_what_was_chosen() {
    let mut h = Harness::start().await;
    let mut changes = h.handle.subscribe();
    h.ask("stays", Kind::Text, &[], |_| {});
    h.ask("withdrawn", Kind::Text, &[], |_| {});
    next(&mut changes, queued).await;
    next(&mut changes, queued).await;
    // The broker stops with both pending; one asker gives up while none runs.
    h.stop_all().await;
    std::fs::remove_file(h.question_path("withdrawn")).unwrap();
    // And an answer chosen just before a crash, never written to its file.
    let q = questions::load_question(&h.question_path("stays"), 1 << 20);
    let questions::Loaded::Question(q) = q else {
        panic!("{q:?}")
    };
    let chosen = Answer::from_reply(&q.request, Reply::Text("chosen before".into()), "alice");
    h.reader
        .apply(&[StoreOp::Delivering {
            project: h.spool.project().display().to_string(),
            request: Box::new(q.request.clone()),
            variant: q.variant,
            answer: Box::new(chosen),
        }])
        .await
        .unwrap();

    let h = h.restart().await;
    // Delivered, not asked again.
    for _ in 0..500 {
        if h.answer("stays").is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        h.answer("stays")
            .expect("delivered after the restart")
            .content,
        "chosen before"
    );
    h.history_status("stays", "answered").await;
    h.history_status("withdrawn", "withdrawn").await;
    assert!(h.handle.pending().await.is_empty());
}

/// An approval counted toward a request that needs two people's is kept across a
/// restart: the same person cannot count twice, and the next one's approval ends it
/// with both credited.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_of_two_needed_survives_a_restart() {
    let h = Harness::start().await;
    let mut changes = h.handle.subscribe();
    h.ask("deploy", Kind::Approval, &[], |r| r.approvals = 2);
    let p = next(&mut changes, queued).await;
    let approve = Reply::Approval {
        approved: true,
        comment: None,
        remember: None,
    };
    let first = h
        .handle
        .respond_as(p.seq, approve.clone(), "telegram:@ana", "telegram:1")
        .await;
    assert_eq!(first, Err(RespondError::Waiting { have: 1, needed: 2 }));

    let h = h.restart().await;
    let p = h
        .handle
        .pending()
        .await
        .into_iter()
        .find(|p| p.request.id == "deploy")
        .expect("still pending after the restart");
    assert_eq!(p.votes.len(), 1, "{:?}", p.votes);
    assert_eq!(
        (p.votes[0].by.as_str(), p.votes[0].approver.as_str()),
        ("telegram:@ana", "telegram:1")
    );
    // The same person again: refused, still one of two.
    let again = h
        .handle
        .respond_as(p.seq, approve.clone(), "telegram:@ana", "telegram:1")
        .await;
    assert!(
        matches!(&again, Err(RespondError::Invalid(why)) if why.contains("approved this already")),
        "{again:?}"
    );
    // Another: answered, both credited.
    let done = h.handle.respond(p.seq, approve, "terminal").await.unwrap();
    assert_eq!(done.responded_by, "telegram:@ana + terminal");
    assert!(h.answer("deploy").is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stored_request_is_asked_answered_and_requeued_after_a_restart() {
    let h = Harness::start().await;
    let mut changes = h.handle.subscribe();
    let request = |content: &str, origin| Request {
        priority: Priority::High,
        timeout: Some(600),
        origin,
        ..Request::new("web", "Web", Kind::Yesno, content)
    };
    let event = || NewEvent {
        source_app: "web".into(),
        session_id: "s".into(),
        hook_event_type: "HumanInTheLoop".into(),
        payload: serde_json::json!({}),
        extra: serde_json::Map::new(),
        timestamp_ms: 0,
        hitl: None,
        idempotency_key: None,
    };
    // Spool questions are asked with files, not through the handle.
    let spool_ask = h.handle.ask(request("no", Origin::Spool), event()).await;
    assert_eq!(spool_ask.unwrap_err(), AskError::NotStored);

    let asked = h
        .handle
        .ask(request("Ship?", Origin::Http), event())
        .await
        .unwrap();
    let p = asked.pending.unwrap();
    assert_eq!(
        (p.origin, p.stored, p.event_id),
        (Origin::Http, true, Some(asked.event_id))
    );
    assert_eq!(next(&mut changes, queued).await.seq, p.seq);
    h.handle
        .respond(p.seq, Reply::Text("yes".into()), "t")
        .await
        .unwrap();
    let f = next(&mut changes, finished).await;
    assert!(f.here && f.status == Status::Answered);
    let stored = h.reader.find_request(&p.request.id).await.unwrap().unwrap();
    assert_eq!(
        (stored.status, stored.answer.unwrap().content.as_str()),
        (Status::Answered, "yes")
    );

    // One left pending is queued again by the next broker, with its event id and
    // who asked.
    let left = h
        .handle
        .ask(request("Later?", Origin::Mcp), event())
        .await
        .unwrap();
    let h = h.restart().await;
    let again = h
        .handle
        .find(&left.event_id.to_string())
        .await
        .expect("queued again");
    assert_eq!(
        (again.origin, again.stored, again.event_id),
        (Origin::Mcp, true, Some(left.event_id))
    );
    assert_eq!(again.request.content, "Later?");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hook_notes_become_stored_activity_and_say_what_their_agent_does() {
    let mut h = Harness::start().await;
    let mut changes = h.handle.subscribe();
    let note = |event: &str, ms: i64| crate::protocol::activity::ActivityNote {
        source_app: "project".into(),
        session_id: "s1".into(),
        hook_event_type: event.into(),
        payload: serde_json::json!({ "cwd": "/work/p" }),
        timestamp_ms: ms,
        agent_id: "claude-s1".into(),
        agent_name: "Claude s1".into(),
        decision: (event == "PreToolUse").then(|| "none".into()),
        reason: None,
    };
    for (i, event) in ["UserPromptSubmit", "PreToolUse", "Stop"]
        .iter()
        .enumerate()
    {
        let path = crate::spool::activity::drop_note(&h.spool, &note(event, i as i64)).unwrap();
        h.events
            .send(SpoolEvent::Changed { path, closed: true })
            .unwrap();
        let a = next(&mut changes, |c| match c {
            Change::Activity(a) => Some(a),
            _ => None,
        })
        .await;
        assert_eq!(a.event.hook_event_type, *event);
        assert_eq!(a.extra("agent_id"), Some("claude-s1"));
        assert!(a.event_id > 0);
    }
    // A bad note is dropped, and the broker goes on.
    let bad = h.spool.activity().join("0-1.json");
    std::fs::write(&bad, b"{ not json").unwrap();
    h.events
        .send(SpoolEvent::Changed {
            path: bad.clone(),
            closed: true,
        })
        .unwrap();
    // Every note is taken from the folder.
    for _ in 0..100 {
        if std::fs::read_dir(h.spool.activity()).unwrap().count() == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(std::fs::read_dir(h.spool.activity()).unwrap().count(), 0);
    let stored = h.reader.recent_events(10, 1 << 20).await.unwrap();
    assert_eq!(stored.len(), 3);
    assert_eq!(stored[1].event.extra["decision"], "none");
    // The registry hears, within a tick: the agent's turn is over.
    let mut status = None;
    for _ in 0..100 {
        status = crate::agents::list_agents(&h.spool, &Default::default())
            .into_iter()
            .find(|a| a.agent_id == "claude-s1")
            .map(|a| a.status);
        if status == Some(crate::agents::AgentStatus::Idle) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(status, Some(crate::agents::AgentStatus::Idle));
    h.stop_all().await;
}

/// The escalation ladder over a real broker and store, on a scripted clock moved a
/// second at a time: each step at its time, the desk's presence holding the away
/// step back, the safe default a moment before the deadline, and every step in the
/// request's trail.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ladder_reaches_each_step_at_its_time_and_denies_at_the_deadline() {
    let h = Harness::start().await;
    let settings: crate::config::EscalationSettings = toml::from_str(
        r#"
        away_after = 60
        at_once = ["push"]
        teammate_after = 300
        teammate = ["telegram:-5"]
        at_deadline = "deny"
        "#,
    )
    .unwrap();
    let mut changes = h.handle.subscribe();
    // Someone is at the desk when the text question is asked.
    let attendance = h.handle.attend("dashboard");
    let (clock, scripted) = ladder::Clock::scripted();
    let _ladder = ladder::start(
        &h.handle,
        settings,
        vec!["push".into(), "telegram".into()],
        scripted,
    );
    let event = || NewEvent {
        source_app: "web".into(),
        session_id: "s".into(),
        hook_event_type: "HumanInTheLoop".into(),
        payload: serde_json::json!({}),
        extra: serde_json::Map::new(),
        timestamp_ms: 0,
        hitl: None,
        idempotency_key: None,
    };
    let ask = |kind, content: &str, timeout| Request {
        timeout,
        origin: Origin::Http,
        ..Request::new("web", "Web", kind, content)
    };
    let text = h
        .handle
        .ask(ask(Kind::Text, "Name?", None), event())
        .await
        .unwrap();
    let text_id = text.pending.unwrap().request.id.clone();
    let approval = h
        .handle
        .ask(ask(Kind::Approval, "Deploy?", Some(600)), event())
        .await
        .unwrap();
    let id = approval.pending.unwrap().request.id.clone();
    let mut seen: Vec<(&str, &str, u64)> = Vec::new();
    let mut attendance = Some(attendance);
    let mut ended = None;
    for second in 0..=600u64 {
        clock.send(Duration::from_secs(second)).unwrap();
        if second == 30 {
            // The desk is left: the away step is 60 s after that.
            drop(attendance.take());
            while !h.handle.presence().now().is_empty() {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        // What the ladder does at this second, told before the next one.
        tokio::time::sleep(Duration::from_millis(3)).await;
        while let Ok(change) = changes.try_recv() {
            match change {
                Change::Reached(r) => {
                    let who = if r.pending.request.id == id {
                        "approval"
                    } else {
                        "text"
                    };
                    seen.push((who, r.step.as_str(), second));
                }
                Change::Finished(f) if f.id() == id => ended = Some((f, second)),
                _ => {}
            }
        }
        if ended.is_some() {
            break;
        }
    }
    // Of one second, in no particular order.
    seen.sort_by_key(|&(who, _, second)| (second, who));
    assert_eq!(
        seen,
        [
            ("approval", "at once", 0),
            ("text", "at once", 0),
            ("approval", "away", 90),
            ("text", "away", 90),
            ("approval", "teammate", 300),
            ("text", "teammate", 300),
        ]
    );
    let (f, at) = ended.expect("the approval was decided");
    let answer = f.answer.clone().unwrap();
    assert_eq!(
        (answer.approved, answer.responded_by.as_str()),
        (Some(false), ladder::LADDER_RESPONDER)
    );
    assert!(answer.comment.unwrap().contains("deadline"));
    assert_eq!(at, 599, "denied a moment before the asker's deadline");
    assert!(
        h.handle.find(&text_id).await.is_some(),
        "a text question has no safe default"
    );
    // The trail has every step.
    let mut steps = Vec::new();
    for _ in 0..100 {
        steps = h.reader.trail(&id).await.unwrap();
        if steps.len() >= 4 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let steps: Vec<String> = steps
        .iter()
        .map(|s| {
            format!(
                "{} {}",
                s.step,
                s.detail["step"].as_str().unwrap_or_default()
            )
        })
        .collect();
    assert_eq!(
        steps,
        [
            "escalated at once",
            "escalated away",
            "escalated teammate",
            "escalated deadline"
        ]
    );
}
