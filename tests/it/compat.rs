//! Backward compatibility: files and databases written by v1 stay readable for ever.
//! The fixtures in `tests/fixtures/v1/` are frozen; never edit them, add new ones.

use hitl::{
    protocol::{AnswerStatus, Kind, Priority, Status, Variant, parse_question},
    store::{HistoryQuery, Store},
};

fn fixture(name: &str) -> std::path::PathBuf {
    crate::support::checkout()
        .join("tests/fixtures/v1")
        .join(name)
}

#[test]
fn v1_question_file() {
    let bytes = std::fs::read(fixture("question.json")).unwrap();
    let q = parse_question(&bytes, "01a2032be786770c899490715574e74b").unwrap();
    assert_eq!(q.variant, Variant::Canonical);
    let r = q.request;
    assert_eq!(r.kind, Kind::Multiselect);
    assert_eq!(r.priority, Priority::High);
    assert_eq!(r.content, "Which checks?\n\t\"all\" of them? Привет 🎉");
    assert_eq!(r.options, ["lint", "test", "bench"]);
    assert_eq!(r.timeout, Some(300));
    assert_eq!(r.context["file"], "src/main.rs");
    assert_eq!(r.metadata["source"], "fixture");
    assert_eq!(r.asker.unwrap().pid, 41240);
}

#[test]
fn v1_answer_file() {
    let bytes = std::fs::read(fixture("answer.json")).unwrap();
    let a: hitl::protocol::Answer = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(a.status, AnswerStatus::Answered);
    assert_eq!(
        a.choices.as_deref(),
        Some(&["lint".to_string(), "test".to_string()][..])
    );
    assert_eq!(a.exit_code(), 0);
}

#[test]
fn v1_history_database() {
    // A copy: opening migrates it forward, and the fixture must stay as it was.
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("hitl.db");
    std::fs::copy(fixture("history.db"), &db).unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let rows = rt.block_on(async {
        let store = Store::open(db.to_str().unwrap()).await.unwrap();
        store.history(&HistoryQuery::default()).await.unwrap()
    });
    assert_eq!(rows.len(), 2);
    assert!(
        rows.iter()
            .any(|h| h.content == "Which colour? Привет 🎉" && h.answer.as_deref() == Some("Red"))
    );
    assert!(
        rows.iter()
            .any(|h| h.kind == Kind::Approval && h.status == Status::Answered)
    );
}
