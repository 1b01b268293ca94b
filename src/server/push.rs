//! Web Push's routes: the key browsers subscribe with, and their subscriptions
//! (`crate::push` keeps them and pushes).

use std::sync::Arc;

use axum::{Extension, Json, extract::State};
use serde::Deserialize;

use super::{
    AppState,
    auth::Caller,
    error::{ApiError, JsonBody, QueryParams},
};
pub use crate::api::{PushSubscribed, PushSubscriptionBody, VapidKey};
use crate::push::{Subscription, shown_endpoint};

/// `GET /api/v1/push/vapid`: the VAPID public key (made the first time it is asked for).
pub async fn vapid(State(state): State<Arc<AppState>>) -> Result<Json<VapidKey>, ApiError> {
    let vapid = state.push.vapid().map_err(ApiError::internal)?;
    Ok(Json(VapidKey {
        public_key: vapid.public_key(),
    }))
}

/// `POST /api/v1/push/subscriptions`: keeps a browser's subscription, a device's
/// as that device's.
pub async fn subscribe(
    State(state): State<Arc<AppState>>,
    Extension(caller): Extension<Caller>,
    JsonBody(body): JsonBody<PushSubscriptionBody>,
) -> Result<(axum::http::StatusCode, Json<PushSubscribed>), ApiError> {
    let device = caller.session.map(|(_, device)| device);
    let push = &state.push;
    let sub = Subscription::new(
        &body.endpoint,
        &body.keys.p256dh,
        &body.keys.auth,
        device.clone(),
        |e| push.refusal(e),
    )
    .map_err(|e| ApiError::bad_request(format!("{e:#}")))?;
    // The key it will be pushed with exists before the first push needs it.
    push.vapid().map_err(ApiError::internal)?;
    push.subscriptions.add(sub).map_err(ApiError::internal)?;
    Ok((
        axum::http::StatusCode::CREATED,
        Json(PushSubscribed {
            service: shown_endpoint(&body.endpoint),
            device,
        }),
    ))
}

/// `DELETE /api/v1/push/subscriptions`'s query.
#[derive(Debug, Deserialize)]
pub struct Unsubscribe {
    endpoint: String,
}

/// `DELETE /api/v1/push/subscriptions?endpoint=URL`: ends a subscription; a device
/// may end only its own.
pub async fn unsubscribe(
    State(state): State<Arc<AppState>>,
    Extension(caller): Extension<Caller>,
    QueryParams(q): QueryParams<Unsubscribe>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let device = caller.session.map(|(_, device)| device);
    let removed = state
        .push
        .subscriptions
        .remove(|s| s.endpoint == q.endpoint && (device.is_none() || s.device == device))
        .map_err(ApiError::internal)?;
    if removed == 0 {
        return Err(ApiError::not_found(
            "no subscription with that endpoint (of this device)",
        ));
    }
    Ok(Json(serde_json::json!({ "removed": removed })))
}
