//! Seed 004's API: `POST /events` (the activity feed, and requests when an event
//! carries `humanInTheLoop`), answering and polling by event id, the recent events and
//! the dashboard's filter options. Field names and status codes are the seed's.

use std::sync::Arc;

use axum::{
    Extension,
    extract::{Path, State},
    http::{HeaderMap, StatusCode, header},
    response::{IntoResponse, Response},
};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::{
    AppState,
    auth::Caller,
    error::{ApiError, JsonBody, QueryParams},
    json::Json,
    respond::{self, Ids, Lookup},
    seed004::{self, EndedEvent, HitlSpec, HitlStatus, ResponseData},
};
use crate::{
    api::RespondBody,
    protocol::{Answer, Origin, Request, Status},
    store::{NewEvent, StoredRequest},
};

/// Longest idempotency key accepted.
const MAX_KEY: usize = 200;

/// The idempotency key as stored: the `Idempotency-Key` header, else `idempotencyKey`
/// in the body, within the caller's namespace ([`Caller::key_scope`]); no key when the
/// caller's namespace is unknown.
pub fn idempotency_key(
    headers: &HeaderMap,
    body: &mut Map<String, Value>,
    caller: &Caller,
    state: &AppState,
) -> Result<Option<String>, ApiError> {
    let from_body = body
        .remove("idempotencyKey")
        .or_else(|| body.remove("idempotency_key"));
    let key = match headers.get("idempotency-key") {
        Some(v) => Some(
            v.to_str()
                .map_err(|_| ApiError::bad_request("the Idempotency-Key header is not text"))?
                .to_string(),
        ),
        None => match from_body {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s),
            Some(_) => return Err(ApiError::bad_request("idempotencyKey must be a string")),
        },
    };
    match key {
        Some(k) if k.is_empty() || k.len() > MAX_KEY => Err(ApiError::bad_request(format!(
            "the idempotency key must be 1 to {MAX_KEY} characters"
        ))),
        Some(k) => Ok(caller.key_scope(state).map(|scope| format!("{scope}:{k}"))),
        None => Ok(None),
    }
}

/// Takes a string field out of an event body.
fn take_string(
    body: &mut Map<String, Value>,
    field: &str,
    default: &str,
) -> Result<String, ApiError> {
    match body.remove(field) {
        None | Some(Value::Null) => Ok(default.to_string()),
        Some(Value::String(s)) => Ok(s),
        Some(other) => Err(ApiError::bad_request(format!(
            "{field} must be a string, not {}",
            crate::protocol::json_type_name(&other)
        ))),
    }
}

/// `POST /events`.
pub async fn create_event(
    State(state): State<Arc<AppState>>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    JsonBody(body): JsonBody<Value>,
) -> Result<Response, ApiError> {
    let Value::Object(mut body) = body else {
        return Err(ApiError::bad_request(format!(
            "the body must be a JSON object (an event), not {}",
            crate::protocol::json_type_name(&body)
        )));
    };
    caller.take_create(&state)?;
    let key = idempotency_key(&headers, &mut body, &caller, &state)?;
    let source_app = take_string(&mut body, "source_app", "unknown")?;
    let session_id = take_string(&mut body, "session_id", "unknown")?;
    let hook_event_type = match take_string(&mut body, "hook_event_type", "")? {
        t if t.is_empty() => return Err(ApiError::bad_request("hook_event_type is required")),
        t => t,
    };
    let payload = body.remove("payload").unwrap_or_else(|| json!({}));
    let timestamp_ms = match body.remove("timestamp") {
        Some(Value::Number(n)) => n.as_i64().unwrap_or_else(now_ms),
        _ => now_ms(),
    };
    body.remove("id");
    body.remove("humanInTheLoopStatus");
    let hitl_value = body.remove("humanInTheLoop").filter(|v| !v.is_null());
    let event = NewEvent {
        source_app,
        session_id,
        hook_event_type,
        payload,
        extra: body,
        timestamp_ms,
        hitl: hitl_value,
        idempotency_key: key,
    };
    // The event as the response shows it is made before the event moves to the
    // broker (no copy of it); only its id is to come.
    let Some(hitl_value) = &event.hitl else {
        let mut v = seed004::new_event_json(0, &event, None);
        let id = state
            .broker
            .record_event(event)
            .await
            .map_err(|e| ApiError::unavailable(e.to_string()))?;
        v["id"] = json!(id);
        state.deliverer.announce(&v);
        return Ok((StatusCode::CREATED, Json(v)).into_response());
    };
    let spec = HitlSpec::deserialize(hitl_value)
        .map_err(|e| ApiError::bad_request(format!("humanInTheLoop: {e}")))?;
    let mut request = seed004::request_from_spec(&spec, &event.source_app, &event.session_id)
        .map_err(ApiError::bad_request)?;
    request.origin = Origin::Http;
    // Any caller may name any app and session: who really asked goes with it.
    request.set_creator(caller.who(&state));
    super::limits::other_users_share(&state.broker, &mut request).await?;
    let pending = HitlStatus::new(Status::Pending, None, None);
    let mut v = seed004::new_event_json(0, &event, Some(&pending));
    let submitted = state
        .broker
        .ask(request, event)
        .await
        .map_err(|e| ApiError::unavailable(e.to_string()))?;
    match (&submitted.pending, submitted.existing) {
        // Just made and queued: what was stored is what we hold; no read back.
        (Some(_), false) => v["id"] = json!(submitted.event_id),
        // A repeated key names the first event; or it ended at once: the store says.
        _ => match state
            .store
            .event(submitted.event_id)
            .await
            .map_err(ApiError::internal)?
        {
            Some(s) => v = seed004::event_json(&s),
            None => return Err(ApiError::internal("a stored event could not be read back")),
        },
    }
    if submitted.existing {
        return Ok((StatusCode::OK, Json(v)).into_response());
    }
    // One event for the response and the held copy; `/stream` gets a copy when followed.
    let v = Arc::new(v);
    if submitted.pending.is_some() {
        state.deliverer.hold_event(submitted.event_id, v.clone());
    }
    state.deliverer.announce(&v);
    Ok((StatusCode::CREATED, Json(&*v)).into_response())
}

fn now_ms() -> i64 {
    jiff::Timestamp::now().as_millisecond()
}

/// `POST /events/:id/respond`.
pub async fn respond_event(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
    JsonBody(body): JsonBody<RespondBody>,
) -> Result<Response, ApiError> {
    let done = match respond::respond(&state, &id, Ids::Events, &body, "http").await {
        Err(e) if e.status == StatusCode::NOT_FOUND => return Err(no_request(&state, &id).await),
        done => done?,
    };
    let p = &done.pending;
    let status: Status = done.answer.status.into();
    let ended = state
        .deliverer
        .ended_event(&state.store, p, status, Some(&done.answer), None)
        .await
        .map_err(ApiError::internal)?;
    // A request no event carried (asked another way, answered here) is shown as one.
    let event = ended.unwrap_or_else(|| EndedEvent {
        event: Arc::new(json!({
            "id": id,
            "source_app": p.request.agent_name,
            "session_id": p.request.agent_id,
            "hook_event_type": "HumanInTheLoop",
            "payload": {},
        })),
        status: HitlStatus::new(status, Some(&done.answer), None),
    });
    let idempotency_key = match &event.status.response {
        Some(data) => data.idempotency_key.clone(),
        None => seed004::idempotency_key(&p.request.id, &done.answer),
    };
    Ok(Json(Responded {
        success: true,
        event,
        idempotency_key,
        delivery_status: done.delivery.as_str(),
        message: match done.delivery {
            super::DeliveryStatus::Delivered => "Response delivered to the agent",
            super::DeliveryStatus::PendingPoll => {
                "Response stored; the agent's WebSocket did not take it, so it will poll"
            }
            super::DeliveryStatus::NoWebsocket => "Response stored; the agent will poll for it",
        },
    })
    .into_response())
}

/// The reply to `POST /events/:id/respond`, in seed 004's field order.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Responded<'a> {
    success: bool,
    event: EndedEvent<'a>,
    idempotency_key: String,
    delivery_status: &'static str,
    message: &'static str,
}

/// The 202 of a request with no answer yet.
fn no_response_yet(status: &str) -> Response {
    let mut r = (
        StatusCode::ACCEPTED,
        Json(json!({ "success": false, "error": "No response yet", "status": status })),
    )
        .into_response();
    r.headers_mut()
        .insert(header::RETRY_AFTER, header::HeaderValue::from_static("2"));
    r
}

/// The poll answer for an ended request.
pub fn ended_response(r: &StoredRequest, event_id: Option<i64>) -> Response {
    poll_reply(
        &r.request,
        r.status,
        r.answer.as_ref(),
        r.reason.as_deref(),
        event_id,
    )
}

/// The poll answer for request `r` in `status`, answered by `answer` or ended for
/// `reason`.
fn poll_reply(
    r: &Request,
    status: Status,
    answer: Option<&Answer>,
    reason: Option<&str>,
    event_id: Option<i64>,
) -> Response {
    /// `{"success": true, "data": …}`.
    #[derive(Serialize)]
    struct Answered<'a> {
        success: bool,
        data: ResponseData<'a>,
    }
    match (status, answer) {
        (Status::Answered | Status::Cancelled, Some(a)) => (
            StatusCode::OK,
            Json(Answered {
                success: true,
                data: ResponseData::new(r, event_id, a),
            }),
        )
            .into_response(),
        (Status::Pending, _) => no_response_yet("pending"),
        (Status::Timeout, _) => no_response_yet("timeout"),
        (s, _) => ApiError::new(
            StatusCode::GONE,
            format!(
                "request {} was {s}{}",
                r.id,
                reason.map(|w| format!(" ({w})")).unwrap_or_default()
            ),
        )
        .into_response(),
    }
}

/// `GET /events/:id/response`.
pub async fn event_response(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    // Ended lately, as an agent polling right after its answer finds it: no copy.
    if let Some(f) = state.deliverer.recently_finished(&id) {
        let p = &f.pending;
        // As the store's row would say (`StoredRequest::event_id`).
        let event_id = p.stored.then(|| p.request.id.parse().ok()).flatten();
        return Ok(poll_reply(
            &p.request,
            f.status,
            f.answer.as_ref(),
            f.reason.as_deref(),
            event_id,
        ));
    }
    match respond::lookup(&state, &id, Ids::Events).await? {
        Some(Lookup::Pending(_)) => Ok(no_response_yet("pending")),
        Some(Lookup::Ended(r)) => Ok(ended_response(&r, r.event_id())),
        None => Err(no_request(&state, &id).await),
    }
}

/// The refusal for an id that names no request: 400 when it names an event that
/// asked nothing (there is nothing to answer or poll), else 404.
async fn no_request(state: &AppState, id: &str) -> ApiError {
    let event = match id.parse::<i64>() {
        Ok(n) => state.store.event(n).await,
        Err(_) => Ok(None),
    };
    match event {
        Ok(Some(_)) => {
            ApiError::bad_request(format!("event {id} is not a human-in-the-loop request"))
        }
        Ok(None) => ApiError::not_found(format!("no event or request {id}")),
        Err(e) => ApiError::internal(e),
    }
}

/// `?limit=` of the listing routes.
#[derive(Debug, Deserialize)]
pub struct Limit {
    /// At most this many (default 100, at most 1000).
    pub limit: Option<i64>,
}

/// How much event text one feed read (`/events/recent`, `/stream`'s first message)
/// carries at most: events can be a megabyte each, and a thousand of them would be
/// a gigabyte held for one client.
pub const FEED_BYTES: usize = 2 << 20;

/// `GET /events/recent`: newest first, as the seed's dashboard loads them, up to
/// [`FEED_BYTES`] of text.
pub async fn recent(
    State(state): State<Arc<AppState>>,
    QueryParams(q): QueryParams<Limit>,
) -> Result<Json<Vec<Value>>, ApiError> {
    let limit = q.limit.unwrap_or(100).clamp(1, 1000);
    let events = state
        .store
        .recent_events(limit, FEED_BYTES)
        .await
        .map_err(ApiError::internal)?;
    Ok(Json(events.iter().map(seed004::event_json).collect()))
}

/// `GET /events/filter-options`.
pub async fn filter_options(
    State(state): State<Arc<AppState>>,
) -> Result<Json<crate::store::FilterOptions>, ApiError> {
    Ok(Json(
        state
            .store
            .filter_options()
            .await
            .map_err(ApiError::internal)?,
    ))
}
