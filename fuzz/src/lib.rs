//! Shared by the fuzz targets in `src/bin/`: each takes bytes from AFL++ and hands
//! them to one of hitl's parsers of outside input. A panic, an overflow or a broken
//! invariant is a crash AFL++ keeps.

use hitl::protocol::{Kind, Request};

/// A request of `kind` with two options, as a respond body is checked against.
pub fn request_of(kind: Kind) -> Request {
    Request {
        id: "1".into(),
        options: vec!["dev".into(), "prod".into()],
        timeout: Some(30),
        ..Request::new("a", "A", kind, "q?")
    }
}
