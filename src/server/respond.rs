//! Answering and looking up a request by id, shared by the seed and native routes.
//!
//! Any pending request can be answered here, wherever it came from; the answer goes
//! back the way the request came, like every responder's (see [`super::deliver`]),
//! and the call reports how it was delivered. A request that has already ended is
//! refused with 409 (answered) or 410 (timed out, cancelled, withdrawn), saying why.

use std::sync::Arc;

use axum::http::StatusCode;

use super::{
    AppState,
    deliver::{self, Deliverer, DeliveryStatus},
    error::ApiError,
    seed004,
};
use crate::{
    api::RespondBody,
    broker::{PendingRequest, RespondError},
    protocol::{Answer, Status},
    store::StoredRequest,
};

/// A request answered over HTTP.
pub struct Responded {
    /// The request as it was pending.
    pub pending: Arc<PendingRequest>,
    /// The answer delivered.
    pub answer: Answer,
    /// Whether the agent has it already or will poll.
    pub delivery: DeliveryStatus,
}

/// Where a request stands, found by id.
pub enum Lookup {
    /// In the queue.
    Pending(Arc<PendingRequest>),
    /// Ended, as the store has it.
    Ended(Box<StoredRequest>),
}

/// Which requests an id may name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ids {
    /// Seed 004's `/events/{id}/…`: a number is an event id and names a request made
    /// over HTTP only; any other id may name a spool question (as the feed shows
    /// them).
    Events,
    /// Any request: one made over HTTP first, else a spool question with that id.
    Any,
}

/// Finds request `id` among `ids`: in the queue first, else in the store.
///
/// Requests made over HTTP always come first: a spool question's id is its asker's
/// choice, and one named `31` must never stand in for event 31.
pub async fn lookup(state: &AppState, id: &str, ids: Ids) -> Result<Option<Lookup>, ApiError> {
    // Ended lately: known without asking the broker or the store.
    if let Some(r) = state.deliverer.recently_ended(id) {
        return Ok(Some(Lookup::Ended(Box::new(r))));
    }
    if let Some(p) = state.broker.find_stored(id).await {
        return Ok(Some(Lookup::Pending(p)));
    }
    let stored = state
        .store
        .find_request(id)
        .await
        .map_err(ApiError::internal)?;
    // The store lists a request made over HTTP first when ids are shared.
    if let Some(r) = stored.as_ref().filter(|r| r.stored) {
        return Ok(Some(Lookup::Ended(Box::new(r.clone()))));
    }
    if ids == Ids::Events && id.bytes().all(|b| b.is_ascii_digit()) {
        return Ok(None);
    }
    if let Some(p) = state.broker.find(id).await {
        return Ok(Some(Lookup::Pending(p)));
    }
    Ok(stored.map(|r| Lookup::Ended(Box::new(r))))
}

/// A request the store has as pending that this broker does not hold: made by
/// another broker sharing the store and not queued here yet (its notice is on the
/// way, or that broker died). Queued here now, so it can be answered and waited for;
/// `None` when the store's row is not such a request.
pub async fn queue_here(state: &AppState, r: &StoredRequest) -> Option<Arc<PendingRequest>> {
    if r.status != Status::Pending || !r.stored {
        return None;
    }
    let event_id = r.event_id()?;
    // Commands are taken in order, so the lookup after the admission finds it.
    state.broker.admit_stored(r.request.clone(), event_id);
    state.broker.find_stored(&r.request.id).await
}

/// The refusal for answering a request that has ended.
pub fn ended_error(r: &StoredRequest) -> ApiError {
    let id = &r.request.id;
    match r.status {
        Status::Answered | Status::Cancelled => {
            let by = r
                .answer
                .as_ref()
                .map(|a| format!(" by {}", a.responded_by))
                .unwrap_or_default();
            ApiError::new(
                StatusCode::CONFLICT,
                format!("request {id} was already {}{by}", r.status),
            )
        }
        Status::Pending => ApiError::new(
            StatusCode::CONFLICT,
            format!("request {id} is pending on another broker that serves its project"),
        ),
        Status::Timeout => ApiError::new(
            StatusCode::GONE,
            format!("request {id} timed out: its asker is no longer waiting"),
        ),
        s => ApiError::new(
            StatusCode::GONE,
            format!(
                "request {id} was {s}{}: nobody is waiting for an answer",
                r.reason
                    .as_ref()
                    .map(|w| format!(" ({w})"))
                    .unwrap_or_default()
            ),
        ),
    }
}

/// Answers request `id` among `ids` with `body`, as `by`.
pub async fn respond(
    state: &AppState,
    id: &str,
    ids: Ids,
    body: &RespondBody,
    by: &str,
) -> Result<Responded, ApiError> {
    let pending = match lookup(state, id, ids).await? {
        Some(Lookup::Pending(p)) => p,
        Some(Lookup::Ended(r)) => match queue_here(state, &r).await {
            Some(p) => p,
            None => return Err(ended_error(&r)),
        },
        None => return Err(ApiError::not_found(format!("no request {id}"))),
    };
    let reply = seed004::reply_for(&pending.request, body).map_err(|e| {
        ApiError::bad_request(format!(
            "{e} (request {id} is a {} request)",
            seed004::seed_type(&pending.request)
        ))
    })?;
    let by = body.responded_by.clone().unwrap_or_else(|| by.to_string());
    // Only a push has an outcome to wait for: any other way back is known now.
    let pushed = deliver::push_url(&pending).is_some();
    let delivered = pushed.then(|| state.deliverer.expect(pending.seq));
    let answered = state.broker.respond(pending.seq, reply, &by).await;
    if answered.is_err() && pushed {
        state.deliverer.forget(pending.seq);
    }
    let answer = match answered {
        Ok(a) => a,
        Err(RespondError::NotFound(_)) => {
            // It ended between the lookup and the answer.
            return match state
                .store
                .find_request(id)
                .await
                .map_err(ApiError::internal)?
            {
                Some(r) => Err(ended_error(&r)),
                None => Err(ApiError::not_found(format!("no request {id}"))),
            };
        }
        Err(e @ RespondError::AlreadyAnswered(_)) => {
            return Err(ApiError::new(StatusCode::CONFLICT, e.to_string()));
        }
        Err(e @ RespondError::Gone) => return Err(ApiError::new(StatusCode::GONE, e.to_string())),
        Err(e @ RespondError::Invalid(_)) => return Err(ApiError::bad_request(e.to_string())),
        // Counted, not answered: 202, and the request stays pending.
        Err(e @ RespondError::Waiting { .. }) => {
            return Err(ApiError::new(StatusCode::ACCEPTED, e.to_string()));
        }
        Err(e) => return Err(ApiError::unavailable(e.to_string())),
    };
    let delivery = match delivered {
        Some(outcome) => Deliverer::outcome(outcome).await,
        None => deliver::unpushed(&pending),
    };
    Ok(Responded {
        pending,
        answer,
        delivery,
    })
}
