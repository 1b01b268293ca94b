//! WebSocket streams: `/stream` (seed 004's dashboard feed: the recent events, then
//! each new or changed one) and `/api/v1/stream` (the queue: a snapshot, then every
//! change). Browsers may only connect from the server's own origin or an allowed one.

use std::sync::Arc;

use axum::{
    extract::{
        State,
        ws::{Message, WebSocket, WebSocketUpgrade},
    },
    http::{HeaderMap, StatusCode, header},
    response::Response,
};
use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;

use super::{AppState, error::ApiError, respond};
use crate::broker::Change;

/// Refuses a browser page from another origin (a cross-site WebSocket would carry
/// the dashboard's cookie). Clients that send no Origin are not browsers.
fn check_origin(headers: &HeaderMap, state: &AppState) -> Result<(), ApiError> {
    let Some(origin) = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()) else {
        return Ok(());
    };
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let own = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"))
        .is_some_and(|o| o == host);
    if own || state.settings.allowed_origins.iter().any(|a| a == origin) {
        Ok(())
    } else {
        Err(ApiError::new(
            StatusCode::FORBIDDEN,
            format!("WebSocket from origin {origin} refused (see allowed_origins in [http])"),
        ))
    }
}

/// `GET /stream`.
pub async fn seed_stream(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    ws: WebSocketUpgrade,
) -> Result<Response, ApiError> {
    check_origin(&headers, &state)?;
    let mut events = state.deliverer.events.subscribe();
    let mut recent = state
        .store
        .recent_events(300)
        .await
        .map_err(ApiError::internal)?;
    recent.reverse();
    let initial: Vec<Value> = recent.iter().map(respond::event_json).collect();
    Ok(ws.on_upgrade(move |mut socket: WebSocket| async move {
        if send(&mut socket, json!({ "type": "initial", "data": initial })).await.is_err() {
            return;
        }
        loop {
            tokio::select! {
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

/// `GET /api/v1/stream`.
pub async fn changes_stream(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    ws: WebSocketUpgrade,
) -> Result<Response, ApiError> {
    check_origin(&headers, &state)?;
    let mut changes = state.broker.subscribe();
    let pending = state.broker.pending().await;
    Ok(ws.on_upgrade(move |mut socket: WebSocket| async move {
        let snapshot = json!({ "type": "snapshot", "pending": pending.iter().map(|p| json!(p)).collect::<Vec<_>>() });
        if send(&mut socket, snapshot).await.is_err() {
            return;
        }
        loop {
            tokio::select! {
                change = changes.recv() => {
                    let v = match change {
                        Ok(Change::Queued(p)) => json!({ "type": "queued", "request": p }),
                        Ok(Change::Finished(f)) => json!({
                            "type": "finished", "id": f.id(), "origin": f.pending.origin,
                            "status": f.status.as_str(), "responded_by": f.responded_by(),
                            "answer": f.answer, "reason": f.reason,
                        }),
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

async fn send(socket: &mut WebSocket, v: Value) -> Result<(), axum::Error> {
    socket.send(Message::text(v.to_string())).await
}
