//! `/api/v1/tasks` and `/api/v1/task-sessions`: the task runner over HTTP, for `hitl
//! task` and any orchestrating agent. Token only: a task is typed into a terminal
//! running an agent with the user's rights, and a session runs the command it names.

use std::{sync::Arc, time::Duration};

use axum::{
    extract::{Path, State},
    http::StatusCode,
    response::{IntoResponse, Response},
};
use serde::Deserialize;

use super::{
    AppState,
    error::{ApiError, JsonBody, QueryParams},
    json::Json,
};
use crate::tasks::{MoveSpec, SessionSpec, TaskError, TaskHandle, TaskSpec};

/// The runner, or 503 where none runs (`hitl serve`, or `hitl listen` without a
/// project).
fn runner(state: &AppState) -> Result<&TaskHandle, ApiError> {
    state.tasks.as_ref().ok_or_else(|| {
        ApiError::unavailable(
            "no task runner here: tasks run on the machine of their tmux sessions, under `hitl listen` in a project",
        )
    })
}

impl From<TaskError> for ApiError {
    fn from(e: TaskError) -> ApiError {
        let status = match e {
            TaskError::NotFound(_) => StatusCode::NOT_FOUND,
            TaskError::Invalid(_) => StatusCode::BAD_REQUEST,
            TaskError::Conflict(_) => StatusCode::CONFLICT,
            TaskError::Forbidden(_) => StatusCode::FORBIDDEN,
            TaskError::Stopped => StatusCode::SERVICE_UNAVAILABLE,
            TaskError::Failed(_) => StatusCode::INTERNAL_SERVER_ERROR,
        };
        ApiError::new(status, e.to_string())
    }
}

/// `POST /api/v1/task-sessions`.
pub async fn create_session(
    State(state): State<Arc<AppState>>,
    JsonBody(spec): JsonBody<SessionSpec>,
) -> Result<Response, ApiError> {
    let status = runner(&state)?.create_session(spec).await?;
    Ok((StatusCode::CREATED, Json(status)).into_response())
}

/// `GET /api/v1/task-sessions`.
pub async fn sessions(State(state): State<Arc<AppState>>) -> Result<Response, ApiError> {
    Ok(Json(runner(&state)?.sessions().await).into_response())
}

/// `DELETE /api/v1/task-sessions/{name}`.
pub async fn end_session(
    State(state): State<Arc<AppState>>,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    Ok(Json(runner(&state)?.end_session(&name).await?).into_response())
}

/// `POST /api/v1/tasks`.
pub async fn submit(
    State(state): State<Arc<AppState>>,
    JsonBody(spec): JsonBody<TaskSpec>,
) -> Result<Response, ApiError> {
    let submitted = runner(&state)?.submit(spec).await?;
    Ok((StatusCode::CREATED, Json(submitted)).into_response())
}

/// `GET /api/v1/tasks`.
pub async fn list(State(state): State<Arc<AppState>>) -> Result<Response, ApiError> {
    Ok(Json(runner(&state)?.list().await).into_response())
}

/// `GET /api/v1/tasks/{id}`.
pub async fn get(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    match runner(&state)?.get(&id).await {
        Some(v) => Ok(Json(v).into_response()),
        None => Err(ApiError::not_found(format!("no task {id}"))),
    }
}

/// `GET /api/v1/tasks/{id}/result`: RESULTS.json, once the task has ended with one.
pub async fn result(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let tasks = runner(&state)?;
    let Some(view) = tasks.get(&id).await else {
        return Err(ApiError::not_found(format!("no task {id}")));
    };
    match tasks.result(&id) {
        Some(r) => Ok(Json(r).into_response()),
        None if view.task.state.is_final() => Err(ApiError::not_found(format!(
            "task {id} ended {} without a result{}",
            view.task.state,
            view.task
                .reason
                .as_deref()
                .map(|r| format!(": {r}"))
                .unwrap_or_default()
        ))),
        None => Err(ApiError::new(
            StatusCode::CONFLICT,
            format!("task {id} is {}: no result yet", view.task.state),
        )),
    }
}

/// `POST /api/v1/tasks/{id}/cancel`.
pub async fn cancel(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    Ok(Json(runner(&state)?.cancel(&id).await?).into_response())
}

/// `POST /api/v1/tasks/{id}/move`: a waiting task to another place in its queue.
pub async fn move_to(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
    JsonBody(spec): JsonBody<MoveSpec>,
) -> Result<Response, ApiError> {
    Ok(Json(runner(&state)?.move_to(&id, spec.position).await?).into_response())
}

/// `POST /api/v1/tasks/{id}/retry`: the same task again, as a new one.
pub async fn retry(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let submitted = runner(&state)?.retry(&id).await?;
    Ok((StatusCode::CREATED, Json(submitted)).into_response())
}

/// The query of `GET /api/v1/tasks/{id}/wait`.
#[derive(Debug, Default, Deserialize)]
pub struct WaitQuery {
    /// Seconds to wait, at most 300 (default 30).
    pub timeout: Option<f64>,
}

/// `GET /api/v1/tasks/{id}/wait`: the task once it has ended (200), or as it stands
/// after `timeout` seconds (202).
pub async fn wait(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
    QueryParams(q): QueryParams<WaitQuery>,
) -> Result<Response, ApiError> {
    let secs = q.timeout.unwrap_or(30.0);
    if !secs.is_finite() || !(0.0..=300.0).contains(&secs) {
        return Err(ApiError::bad_request("timeout must be 0 to 300 seconds"));
    }
    let tasks = runner(&state)?;
    // Subscribed before looking: an end between the two is not missed.
    let mut changes = tasks.subscribe();
    let deadline = tokio::time::Instant::now() + Duration::from_secs_f64(secs);
    loop {
        let Some(view) = tasks.get(&id).await else {
            return Err(ApiError::not_found(format!("no task {id}")));
        };
        if view.task.state.is_final() {
            return Ok(Json(view).into_response());
        }
        loop {
            match tokio::time::timeout_at(deadline, changes.recv()).await {
                Err(_) => return Ok((StatusCode::ACCEPTED, Json(view)).into_response()),
                Ok(Ok(t)) if t.id != id => continue,
                // Its change, or some were missed: look again.
                Ok(_) => break,
            }
        }
    }
}
