//! `--auto-answer TEXT`: answers everything at once, for demos, tests and benchmarks.
//! Text questions get TEXT, yes/no gets "yes", select the first option, approvals are
//! approved (see [`crate::protocol::Request::auto_reply`]).

use tokio::sync::broadcast::error::RecvError;

use crate::broker::{BrokerHandle, Change, PendingRequest};

/// Who auto answers are from, in history and answer files.
pub const RESPONDER: &str = "auto";

fn answer(handle: &BrokerHandle, p: &PendingRequest, text: &str) {
    // Detached: the broker writes answers on its blocking pool, so they overlap anyway,
    // and nobody here needs to hear how each went.
    handle.respond_detached(p.seq, p.request.auto_reply(text), RESPONDER);
}

/// Answers every pending and future request until the broker stops.
pub async fn run(handle: BrokerHandle, text: String) {
    // Subscribe first, then list, so nothing queued in between is missed; a request
    // seen twice is harmless (the second answer is refused).
    let mut changes = handle.subscribe();
    for p in handle.pending().await {
        answer(&handle, &p, &text);
    }
    loop {
        match changes.recv().await {
            Ok(Change::Queued(p)) => answer(&handle, &p, &text),
            Ok(Change::Finished(_)) => {}
            Err(RecvError::Lagged(_)) => {
                for p in handle.pending().await {
                    answer(&handle, &p, &text);
                }
            }
            Err(RecvError::Closed) => break,
        }
    }
}
