//! The native API under `/api/v1`: requests (create, list, get, respond, cancel,
//! long-poll wait), agents and events. `hitl ask --server` speaks this.

use std::{sync::Arc, time::Duration};

use axum::{
    Extension,
    extract::{Path, State},
    http::{HeaderMap, StatusCode},
    response::{IntoResponse, Response},
};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use tokio::sync::broadcast::error::RecvError;

use super::{
    AppState,
    auth::Caller,
    error::{ApiError, JsonBody, QueryParams},
    json::Json,
    respond::{self, Ids, Lookup},
    seed, seed004,
};
use crate::{
    api::{self, CreateRequest, RequestView, RespondBody},
    broker::{Change, PendingRequest},
    protocol::{Answer, Origin, Request, Status},
    store::{HistoryQuery, NewEvent, Search, StoredRequest},
};

/// How a request stands, as the native API shows it.
fn request_view(
    r: &Request,
    status: Status,
    answer: Option<&Answer>,
    reason: Option<&str>,
) -> RequestView {
    // Serialised straight into the response: through a `Value` first, each view was
    // built twice (a tenth of a create's CPU).
    RequestView {
        id: r.id.clone(),
        status,
        origin: r.origin,
        answer_shape: r.answer_shape(),
        labels: r.labels(),
        request: r.clone(),
        answer: answer.cloned(),
        reason: reason.map(str::to_string),
        project: None,
    }
}

fn stored_view(r: &StoredRequest) -> RequestView {
    request_view(&r.request, r.status, r.answer.as_ref(), r.reason.as_deref())
}

/// The query of `POST /api/v1/requests`.
#[derive(Debug, Default, Deserialize)]
pub struct CreateQuery {
    /// Seconds to hold the call open for the request's end (at most 300): an asker
    /// that will wait anyway saves a round trip, and a request answered at once (by a
    /// rule) comes back ended in the one call.
    pub wait: Option<f64>,
}

/// `POST /api/v1/requests`: 201 with the request once it is durable; 200 with the
/// first one for a repeated idempotency key; with `?wait=S`, 200 with its end if it
/// ends within S seconds.
pub async fn create(
    State(state): State<Arc<AppState>>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    QueryParams(q): QueryParams<CreateQuery>,
    JsonBody(body): JsonBody<Map<String, Value>>,
) -> Result<Response, ApiError> {
    let body = CreateRequest::from_json(body).map_err(ApiError::bad_request)?;
    let wait = q.wait.unwrap_or(0.0);
    if !wait.is_finite() || !(0.0..=300.0).contains(&wait) {
        return Err(ApiError::bad_request("wait must be 0 to 300 seconds"));
    }
    caller.take_create(&state)?;
    let creator = caller.who(&state);
    let origin = match body.origin {
        None => Origin::Http,
        // Only the user's own processes are hooks, MCP servers or tasks: another OS
        // user's request is shown as what it is, one made over HTTP.
        Some(_) if creator != crate::protocol::CREATED_BY_USER => Origin::Http,
        Some(Origin::Spool) => {
            return Err(ApiError::bad_request(
                "origin \"spool\" is for question files; over HTTP say http, hook, mcp, task or mailbox",
            ));
        }
        Some(o) => o,
    };
    let mut request = body.request;
    request.origin = origin;
    if request.content.trim().is_empty() {
        return Err(ApiError::bad_request("content (the question) is empty"));
    }
    let mut key_holder = Map::new();
    if let Some(k) = &body.idempotency_key {
        key_holder.insert("idempotencyKey".into(), json!(k));
    }
    let key = seed::idempotency_key(&headers, &mut key_holder, &caller, &state)?;
    if let Some(t) = request.timeout
        && t > crate::protocol::MAX_TIMEOUT_SECS
    {
        return Err(ApiError::bad_request(format!(
            "timeout {t} is more than a week ({} seconds); 0 waits for ever",
            crate::protocol::MAX_TIMEOUT_SECS
        )));
    }
    if request.agent_id.is_empty() {
        request.agent_id = "http".into();
    }
    crate::protocol::validate_id(&request.agent_id)
        .map_err(|e| ApiError::bad_request(format!("agent_id: {e}")))?;
    if request.agent_name.is_empty() {
        request.agent_name = request.agent_id.clone();
    }
    if request.agent_name.chars().count() > 128 || request.agent_name.chars().any(char::is_control)
    {
        return Err(ApiError::bad_request(
            "agent_name must be at most 128 characters, none of them control characters",
        ));
    }
    request.timestamp = jiff::Timestamp::now();
    // Absent waits the API's default; 0 waits for ever.
    request.timeout = Some(request.timeout.unwrap_or(300)).filter(|&t| t > 0);
    request.set_creator(creator);
    super::limits::other_users_share(&state.broker, &mut request).await?;
    let agent_id = request.agent_id.clone();
    let agent_name = request.agent_name.clone();
    if let Some(why) = request.shape_error() {
        return Err(ApiError::bad_request(why));
    }
    // A hook's question belongs to its Claude Code session, as its other events do.
    let session_id = match request.context.get("session_id").and_then(Value::as_str) {
        Some(s) if origin == Origin::Hook && !s.is_empty() => s.to_string(),
        _ => agent_id,
    };
    let event = NewEvent {
        source_app: agent_name,
        session_id,
        // A hook's question is the hook event it came with (`PreToolUse`…), as
        // seed 004's hooks post theirs.
        hook_event_type: match request.context.get("hook_event").and_then(Value::as_str) {
            Some(e) if origin == Origin::Hook && !e.is_empty() => e.to_string(),
            _ => "HumanInTheLoop".into(),
        },
        payload: json!({}),
        extra: Map::new(),
        timestamp_ms: request.timestamp.as_millisecond(),
        hitl: Some(json!({
            "type": seed004::seed_type(&request),
            "question": request.content,
            "choices": request.options,
            "timeout": request.timeout,
        })),
        idempotency_key: key,
    };
    // Subscribed before asking, so an end at once (a rule) is not missed.
    let mut changes = (wait > 0.0).then(|| state.broker.subscribe());
    let submitted = state
        .broker
        .ask(request, event)
        .await
        .map_err(|e| ApiError::unavailable(e.to_string()))?;
    if submitted.existing || submitted.pending.is_none() {
        let id = submitted.event_id.to_string();
        return match respond::lookup(&state, &id, Ids::Any).await? {
            Some(Lookup::Pending(p)) => {
                Ok((StatusCode::OK, Json(RequestView::of_pending(&p))).into_response())
            }
            Some(Lookup::Ended(r)) => Ok((StatusCode::OK, Json(stored_view(&r))).into_response()),
            None => Err(ApiError::internal("an accepted request could not be found")),
        };
    }
    let p = submitted.pending.expect("checked above");
    if let Some(changes) = &mut changes {
        let id = submitted.event_id.to_string();
        let deadline = tokio::time::Instant::now() + Duration::from_secs_f64(wait);
        if let Some(ended) = wait_for_end(&state, &id, &p, changes, deadline).await? {
            return Ok(ended);
        }
    }
    Ok((StatusCode::CREATED, Json(RequestView::of_pending(&p))).into_response())
}

/// Filters of `GET /api/v1/requests`.
#[derive(Debug, Deserialize)]
pub struct ListQuery {
    /// `pending` (the default: the queue, in answering order), `all`, or a status.
    pub status: Option<String>,
    /// Only this agent's.
    pub agent: Option<String>,
    /// At most this many (default 100, at most 1000).
    pub limit: Option<i64>,
    /// Only those whose question, answer or agent holds this text (any case).
    pub q: Option<String>,
    /// Only those asked before this instant (RFC 3339): the next page after one
    /// whose last request was asked then.
    pub before: Option<String>,
}

/// `GET /api/v1/requests`.
pub async fn list(
    State(state): State<Arc<AppState>>,
    QueryParams(q): QueryParams<ListQuery>,
) -> Result<Json<Vec<Value>>, ApiError> {
    let limit = q.limit.unwrap_or(100).clamp(1, 1000) as usize;
    let q = ListQuery {
        agent: q.agent.filter(|a| !a.is_empty()),
        ..q
    };
    let status = q
        .status
        .as_deref()
        .filter(|s| !s.is_empty())
        .unwrap_or("pending");
    if status != "all" && Status::parse(status).is_none() {
        return Err(ApiError::bad_request(format!(
            "status {status:?} is not pending, answered, cancelled, timeout, withdrawn, abandoned, rejected or all"
        )));
    }
    let before_ms = match q.before.as_deref() {
        None => None,
        Some(b) => Some(
            b.parse::<jiff::Timestamp>()
                .map_err(|e| {
                    ApiError::bad_request(format!("before {b:?} is not an RFC 3339 time: {e}"))
                })?
                .as_millisecond(),
        ),
    };
    let search = Search::parse(q.q.as_deref().unwrap_or_default());
    let agent_ok = |r: &Request| {
        q.agent
            .as_ref()
            .is_none_or(|a| &r.agent_id == a || &r.agent_name == a)
            && search.matches(r)
            && before_ms.is_none_or(|b| r.timestamp.as_millisecond() < b)
    };
    if status == "pending" {
        let pending = state.broker.pending().await;
        return Ok(Json(
            pending
                .iter()
                .filter(|p| agent_ok(&p.request))
                .take(limit)
                .map(|p| json!(RequestView::of_pending(p)))
                .collect(),
        ));
    }
    // Filtered and limited by the database: never the whole history for one page.
    let rows = state
        .store
        .history(&HistoryQuery {
            status: Status::parse(status),
            agent: q.agent.clone(),
            search,
            before_ms,
            limit: limit as i64,
            ..Default::default()
        })
        .await
        .map_err(ApiError::internal)?;
    Ok(Json(rows.into_iter().map(|h| json!(h)).collect()))
}

/// `GET /api/v1/requests/:id`.
pub async fn get(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
) -> Result<Json<RequestView>, ApiError> {
    match respond::lookup(&state, &id, Ids::Any).await? {
        Some(Lookup::Pending(p)) => Ok(Json(RequestView::of_pending(&p))),
        Some(Lookup::Ended(r)) => Ok(Json(stored_view(&r))),
        None => Err(ApiError::not_found(format!("no request {id}"))),
    }
}

/// `GET /api/v1/requests/:id/trail`: what hitl did about a request besides asking
/// and answering it (each notification sent and how it went, each vote), oldest
/// first; empty for a request with none (or none known).
pub async fn trail(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
) -> Result<Json<Vec<crate::store::TrailStep>>, ApiError> {
    let steps = state.store.trail(&id).await.map_err(ApiError::internal)?;
    Ok(Json(steps))
}

/// `POST /api/v1/requests/:id/respond`.
pub async fn respond_request(
    State(state): State<Arc<AppState>>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
    JsonBody(body): JsonBody<RespondBody>,
) -> Result<Json<api::Responded>, ApiError> {
    let done = respond::respond(&state, &id, Ids::Any, &body, &caller.responder()).await?;
    Ok(Json(responded(id, done)))
}

/// The body of `POST /api/v1/requests/:id/cancel`.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
pub struct CancelBody {
    /// Why.
    #[serde(default)]
    pub reason: Option<String>,
    /// Who cancels.
    #[serde(default, alias = "respondedBy")]
    pub responded_by: Option<String>,
}

/// `POST /api/v1/requests/:id/cancel` (the body is optional; one that is there is
/// JSON, labelled so).
pub async fn cancel(
    State(state): State<Arc<AppState>>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Result<Json<api::Responded>, ApiError> {
    let body: CancelBody = if body.is_empty() {
        CancelBody::default()
    } else {
        super::error::require_json_type(&headers)?;
        super::error::decode(&body)?
    };
    let respond_body = RespondBody {
        cancelled: Some(true),
        comment: body.reason,
        responded_by: body.responded_by,
        ..RespondBody::default()
    };
    let done = respond::respond(&state, &id, Ids::Any, &respond_body, &caller.responder()).await?;
    Ok(Json(responded(id, done)))
}

fn responded(id: String, done: respond::Responded) -> api::Responded {
    api::Responded {
        success: true,
        id,
        answer: done.answer,
        delivery_status: done.delivery.as_str().to_string(),
    }
}

/// `?timeout=` of the long poll.
#[derive(Debug, Deserialize)]
pub struct WaitQuery {
    /// Seconds to hold the call open (default 30, at most 300).
    pub timeout: Option<f64>,
}

/// `GET /api/v1/requests/:id/wait`: holds the call until the request ends (200 with
/// how) or the wait runs out (202, still pending: call again). No busy polling: the
/// broker's broadcast wakes it.
pub async fn wait(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
    QueryParams(q): QueryParams<WaitQuery>,
) -> Result<Response, ApiError> {
    let secs = q.timeout.unwrap_or(30.0);
    if !secs.is_finite() || !(0.0..=300.0).contains(&secs) {
        return Err(ApiError::bad_request("timeout must be 0 to 300 seconds"));
    }
    // Subscribe before looking, so an end between the two is not missed.
    let mut changes = state.broker.subscribe();
    let pending = match respond::lookup(&state, &id, Ids::Any).await? {
        Some(Lookup::Pending(p)) => p,
        // Pending in the store but not here: another replica's (its asker may have
        // moved here when that one went away). Wait for it here.
        Some(Lookup::Ended(r)) => match respond::queue_here(&state, &r).await {
            Some(p) => p,
            None => return Ok(Json(stored_view(&r)).into_response()),
        },
        None => return Err(ApiError::not_found(format!("no request {id}"))),
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs_f64(secs);
    match wait_for_end(&state, &id, &pending, &mut changes, deadline).await? {
        Some(ended) => Ok(ended),
        None => {
            let mut r = (
                StatusCode::ACCEPTED,
                Json(RequestView::of_pending(&pending)),
            )
                .into_response();
            r.headers_mut().insert(
                axum::http::header::RETRY_AFTER,
                axum::http::HeaderValue::from_static("0"),
            );
            Ok(r)
        }
    }
}

/// Follows `changes` until `pending` ends (its view, as `/wait` returns it) or
/// `deadline` passes (`None`).
async fn wait_for_end(
    state: &AppState,
    id: &str,
    pending: &PendingRequest,
    changes: &mut tokio::sync::broadcast::Receiver<Change>,
    deadline: tokio::time::Instant,
) -> Result<Option<Response>, ApiError> {
    loop {
        match tokio::time::timeout_at(deadline, changes.recv()).await {
            Err(_) => return Ok(None),
            Ok(Ok(Change::Finished(f))) if f.seq() == pending.seq => {
                let (status, reason) = (f.status, f.reason.clone());
                if let Some(a) = &f.answer {
                    return Ok(Some(
                        Json(request_view(
                            &pending.request,
                            status,
                            Some(a),
                            reason.as_deref(),
                        ))
                        .into_response(),
                    ));
                }
                // Ended without an answer here (another replica's): the store has it.
                return match state
                    .store
                    .find_request(id)
                    .await
                    .map_err(ApiError::internal)?
                {
                    Some(r) => Ok(Some(Json(stored_view(&r)).into_response())),
                    None => Ok(Some(
                        Json(request_view(
                            &pending.request,
                            status,
                            None,
                            reason.as_deref(),
                        ))
                        .into_response(),
                    )),
                };
            }
            Ok(Ok(_)) => {}
            Ok(Err(RecvError::Lagged(_))) => {
                // Missed some changes: look again.
                if state.broker.find(id).await.is_none() {
                    return match state
                        .store
                        .find_request(id)
                        .await
                        .map_err(ApiError::internal)?
                    {
                        Some(r) => Ok(Some(Json(stored_view(&r)).into_response())),
                        None => Err(ApiError::not_found(format!("no request {id}"))),
                    };
                }
            }
            Ok(Err(RecvError::Closed)) => {
                return Err(ApiError::unavailable("the broker is stopping; ask again"));
            }
        }
    }
}

/// `GET /api/v1/agents`: the agents of every project served, and those asking over HTTP.
pub async fn agents(State(state): State<Arc<AppState>>) -> Result<Json<Value>, ApiError> {
    let pending = state.broker.pending().await;
    let waiting: std::collections::HashSet<String> =
        pending.iter().map(|p| p.request.agent_id.clone()).collect();
    let spools = state.spools.clone();
    let waiting_spool = waiting.clone();
    let mut out: Vec<Value> = tokio::task::spawn_blocking(move || {
        spools
            .iter()
            .flat_map(|s| {
                let registry = crate::agents::list_agents(s, &waiting_spool)
                    .into_iter()
                    .map(|a| {
                        let mut v = json!(a);
                        v["project"] = json!(s.project());
                        v
                    });
                // Mailbox agents (seed 003), with the status each reported and its run.
                let mailboxes = crate::mailbox::roster::agents(s).into_iter().map(|a| {
                    let waiting = waiting_spool.contains(&a.agent_id);
                    let mut v = json!(a);
                    v["origin"] = json!(Origin::Mailbox);
                    v["project"] = json!(s.project());
                    if waiting {
                        v["status"] = json!("waiting");
                    }
                    v
                });
                registry.chain(mailboxes).collect::<Vec<_>>()
            })
            .collect()
    })
    .await
    .map_err(ApiError::internal)?;
    let mut remote: Vec<(&str, &str, Origin, usize)> = Vec::new();
    for p in pending.iter().filter(|p| p.stored) {
        match remote
            .iter_mut()
            .find(|r| r.0 == p.request.agent_id && r.2 == p.origin)
        {
            Some(r) => r.3 += 1,
            None => remote.push((&p.request.agent_id, &p.request.agent_name, p.origin, 1)),
        }
    }
    for (id, name, origin, n) in remote {
        out.push(
            json!({ "id": id, "name": name, "status": "waiting", "pending": n, "origin": origin }),
        );
    }
    Ok(Json(json!(out)))
}

/// `GET /api/v1/events`.
pub async fn events(
    State(state): State<Arc<AppState>>,
    QueryParams(q): QueryParams<seed::Limit>,
) -> Result<Json<Vec<Value>>, ApiError> {
    seed::recent(State(state), QueryParams(q)).await
}
