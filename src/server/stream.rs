//! WebSocket streams: `/stream` (seed 004's dashboard feed: the recent events, then
//! each new or changed one) and `/api/v1/stream` (the queue: a snapshot, then every
//! change). Which pages may connect is the guard's to say (`guard.rs`).

use std::sync::Arc;

use axum::{
    extract::{
        Extension, Query, State,
        rejection::QueryRejection,
        ws::{Message, WebSocket, WebSocketUpgrade, rejection::WebSocketUpgradeRejection},
    },
    response::Response,
};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;

use super::{AppState, auth::Caller, error::ApiError, seed004};
use crate::broker::Change;

/// A request that is not a WebSocket upgrade gets the API's JSON error, not plain text.
fn upgrade(
    ws: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Result<WebSocketUpgrade, ApiError> {
    ws.map_err(|e| {
        ApiError::new(
            e.status(),
            format!(
                "this is a WebSocket: connect with an upgrade ({})",
                e.body_text()
            ),
        )
    })
}

/// Completes once the device session `session` is no longer live: revoked or
/// logged out here (told at once), or through another listener sharing the devices
/// file (looked at every few seconds). Never, for a caller that is no device.
async fn session_ended(state: Arc<AppState>, session: Option<String>) {
    let Some(session) = session else {
        return std::future::pending().await;
    };
    let mut told = state.devices.revocations();
    let mut telling = true;
    loop {
        tokio::select! {
            changed = told.changed(), if telling => telling = changed.is_ok(),
            () = tokio::time::sleep(std::time::Duration::from_secs(5)) => {}
        }
        if !state.devices.valid(&session) {
            return;
        }
    }
}

/// Closes a revoked device's socket, saying why (policy: 1008).
async fn close_revoked(socket: &mut WebSocket) {
    let frame = axum::extract::ws::CloseFrame {
        code: 1008,
        reason: "this device was logged out or revoked".into(),
    };
    let _ = socket.send(Message::Close(Some(frame))).await;
}

/// The session id of a caller that is a device.
fn device_session(caller: &Caller) -> Option<String> {
    caller.session.as_ref().map(|(session, _)| session.clone())
}

/// `GET /stream`.
pub async fn seed_stream(
    State(state): State<Arc<AppState>>,
    Extension(caller): Extension<Caller>,
    ws: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Result<Response, ApiError> {
    let ws = upgrade(ws)?;
    let mut events = state.deliverer.events.subscribe();
    let mut recent = state
        .store
        .recent_events(300, super::seed::FEED_BYTES)
        .await
        .map_err(ApiError::internal)?;
    recent.reverse();
    let initial: Vec<Value> = recent.iter().map(seed004::event_json).collect();
    let ended = session_ended(state.clone(), device_session(&caller));
    Ok(ws.on_upgrade(move |mut socket: WebSocket| async move {
        if send(&mut socket, json!({ "type": "initial", "data": initial })).await.is_err() {
            return;
        }
        tokio::pin!(ended);
        loop {
            tokio::select! {
                () = &mut ended => return close_revoked(&mut socket).await,
                ev = events.recv() => match ev {
                    Ok(v) => if send(&mut socket, json!({ "type": "event", "data": v })).await.is_err() { return },
                    Err(RecvError::Lagged(n)) => tracing::warn!("a /stream client missed {n} events"),
                    Err(RecvError::Closed) => return,
                },
                msg = socket.recv() => match msg {
                    Some(Ok(Message::Close(_))) | None | Some(Err(_)) => return,
                    Some(Ok(_)) => {}
                },
            }
        }
    }))
}

/// `GET /api/v1/stream`'s query.
#[derive(Debug, Deserialize)]
pub struct StreamQuery {
    /// The kind of UI a person answers in over this connection (`dashboard`): a
    /// human is present while it stays open (`broker::presence`).
    attend: Option<String>,
}

/// Whether `kind` names a kind of UI: short, lower case, no spaces.
fn is_kind_name(kind: &str) -> bool {
    kind.len() <= 32
        && kind.starts_with(|c: char| c.is_ascii_lowercase())
        && kind
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

/// `GET /api/v1/stream`.
pub async fn changes_stream(
    State(state): State<Arc<AppState>>,
    Extension(caller): Extension<Caller>,
    query: Result<Query<StreamQuery>, QueryRejection>,
    ws: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Result<Response, ApiError> {
    let Query(query) = query.map_err(|e| ApiError::bad_request(e.body_text()))?;
    if let Some(kind) = &query.attend
        && !is_kind_name(kind)
    {
        return Err(ApiError::bad_request(format!(
            "attend={kind:?} is not a kind of UI (lower-case letters, digits and -, up to 32)"
        )));
    }
    let ws = upgrade(ws)?;
    let mut changes = state.broker.subscribe();
    let pending = state.broker.pending().await;
    let broker = state.broker.clone();
    let ended = session_ended(state.clone(), device_session(&caller));
    Ok(ws.on_upgrade(move |mut socket: WebSocket| async move {
        // Held for as long as the page is connected.
        let _attendance = query.attend.as_deref().map(|kind| broker.attend(kind));
        let snapshot = snapshot(&pending);
        if send(&mut socket, snapshot).await.is_err() {
            return;
        }
        tokio::pin!(ended);
        loop {
            tokio::select! {
                () = &mut ended => return close_revoked(&mut socket).await,
                change = changes.recv() => {
                    let v = match change {
                        Ok(Change::Queued(p)) => json!({ "type": "queued", "request": p }),
                        Ok(Change::Updated(p)) => json!({ "type": "updated", "request": p }),
                        Ok(Change::Activity(a)) => json!({
                            "type": "activity", "event": super::seed004::event_json(&a.stored()),
                        }),
                        Ok(Change::Finished(f)) => json!({
                            "type": "finished", "id": f.id(), "origin": f.pending.origin,
                            "status": f.status.as_str(), "responded_by": f.responded_by(),
                            "answer": f.answer, "reason": f.reason,
                        }),
                        // The channels act on the ladder's steps; the page sees their trail.
                        Ok(Change::Reached(_)) => continue,
                        Err(RecvError::Lagged(n)) => json!({ "type": "lagged", "missed": n }),
                        Err(RecvError::Closed) => return,
                    };
                    if send(&mut socket, v).await.is_err() { return }
                }
                msg = socket.recv() => match msg {
                    Some(Ok(Message::Close(_))) | None | Some(Err(_)) => return,
                    Some(Ok(_)) => {}
                },
            }
        }
    }))
}

/// The most requests, and bytes of them, a snapshot holds.
const SNAPSHOT_MAX: usize = 1000;
const SNAPSHOT_MAX_BYTES: usize = 8 << 20;

/// The queue's first message: its first requests in answering order, at most
/// [`SNAPSHOT_MAX`] and [`SNAPSHOT_MAX_BYTES`] (a flood of requests must not make
/// one message a page cannot take), and how many more wait (`more`).
fn snapshot(pending: &[Arc<crate::broker::PendingRequest>]) -> Value {
    let mut shown = Vec::new();
    let mut bytes = 0;
    for p in pending {
        let v = json!(p);
        let size = v.to_string().len();
        if shown.len() >= SNAPSHOT_MAX || bytes + size > SNAPSHOT_MAX_BYTES {
            break;
        }
        bytes += size;
        shown.push(v);
    }
    let more = pending.len() - shown.len();
    json!({ "type": "snapshot", "pending": shown, "more": more })
}

async fn send(socket: &mut WebSocket, v: Value) -> Result<(), axum::Error> {
    socket.send(Message::text(v.to_string())).await
}
