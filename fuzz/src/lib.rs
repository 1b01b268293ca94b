//! Shared by the fuzz targets in `src/bin/`: each takes bytes from AFL++ and hands
//! them to one of hitl's parsers of outside input. A panic, an overflow or a broken
//! invariant is a crash AFL++ keeps.

use hitl::protocol::{Asker, Kind, Priority, Request};

/// A request of `kind` with two options, as a respond body is checked against.
pub fn request_of(kind: Kind) -> Request {
    Request {
        version: 1,
        id: "1".into(),
        agent_id: "a".into(),
        agent_name: "A".into(),
        working_dir: None,
        timestamp: hitl::protocol::now(),
        kind,
        content: "q?".into(),
        options: vec!["dev".into(), "prod".into()],
        questions: Vec::new(),
        priority: Priority::Normal,
        timeout: Some(30),
        context: serde_json::Value::Null,
        metadata: serde_json::Map::new(),
        asker: None::<Asker>,
        created_by: None,
        source: None,
    }
}
