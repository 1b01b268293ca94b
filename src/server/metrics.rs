//! Health and metrics: `/healthz`, `/api/v1/metrics` (seed 004's HITLMetrics fields)
//! and `/metrics` in Prometheus' text format.

use std::{fmt::Write, sync::Arc, sync::atomic::Ordering};

use axum::{
    Json,
    extract::State,
    http::{StatusCode, header},
    response::IntoResponse,
};
use serde_json::{Value, json};

use serde::Deserialize;

use super::{
    AppState,
    error::{ApiError, QueryParams},
};
use crate::store::SeriesQuery;

/// `GET /healthz`: 200 while the broker and the store answer.
pub async fn healthz(State(state): State<Arc<AppState>>) -> impl IntoResponse {
    let store_ok = state.store.ping().await.is_ok();
    let status = if store_ok {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (
        status,
        Json(json!({
            "status": if store_ok { "ok" } else { "store unavailable" },
            "store": state.store.backend_name(),
            "uptime_seconds": state.started.elapsed().as_secs(),
            "version": env!("CARGO_PKG_VERSION"),
        })),
    )
}

async fn hitl_metrics(state: &AppState) -> Value {
    let s = state.broker.stats().await;
    let d = &state.deliverer.counters;
    let avg = if s.total_responses > 0 {
        s.response_time_ms_sum as f64 / s.total_responses as f64
    } else {
        0.0
    };
    json!({
        "totalRequests": s.total_requests,
        "totalResponses": s.total_responses,
        "totalTimeouts": s.total_timeouts,
        "totalErrors": s.total_errors,
        "totalWithdrawn": s.total_withdrawn,
        "avgResponseTimeMs": avg,
        "pendingRequests": s.pending,
        "deliveredCount": d.delivered.load(Ordering::Relaxed),
        "failedDeliveryCount": d.failed.load(Ordering::Relaxed),
        "pendingPollCount": d.pending_poll.load(Ordering::Relaxed),
    })
}

/// `GET /api/v1/metrics`.
pub async fn metrics_json(State(state): State<Arc<AppState>>) -> Json<Value> {
    Json(hitl_metrics(&state).await)
}

/// `?window=` of `GET /api/v1/metrics/series`.
#[derive(Debug, Deserialize)]
pub struct SeriesParams {
    /// `1h`, `6h`, `24h` (the default), `7d` or `30d`.
    pub window: Option<String>,
}

/// The windows a chart can show: name, interval length, intervals. Each makes
/// between 48 and 96 bars: enough to see a shape, few enough to read one.
const WINDOWS: [(&str, i64, i64); 5] = [
    ("1h", 60_000, 60),
    ("6h", 5 * 60_000, 72),
    ("24h", 15 * 60_000, 96),
    ("7d", 2 * 3_600_000, 84),
    ("30d", 12 * 3_600_000, 60),
];

/// `GET /api/v1/metrics/series`: the numbers behind the dashboard's charts.
pub async fn series(
    State(state): State<Arc<AppState>>,
    QueryParams(p): QueryParams<SeriesParams>,
) -> Result<Json<Value>, ApiError> {
    let name = p
        .window
        .as_deref()
        .filter(|w| !w.is_empty())
        .unwrap_or("24h");
    let Some(&(name, bucket_ms, buckets)) = WINDOWS.iter().find(|(w, ..)| *w == name) else {
        return Err(ApiError::bad_request(format!(
            "window {name:?} is not 1h, 6h, 24h, 7d or 30d"
        )));
    };
    let pending_now = state.broker.stats().await.pending as i64;
    let q = SeriesQuery {
        now_ms: jiff::Timestamp::now().as_millisecond(),
        bucket_ms,
        buckets,
        pending_now,
    };
    let s = state.store.series(&q).await.map_err(ApiError::internal)?;
    let at = |ms: i64| {
        jiff::Timestamp::from_millisecond(ms)
            .map(|t| t.to_string())
            .unwrap_or_default()
    };
    Ok(Json(json!({
        "window": name,
        "since": at(q.since_ms()),
        "bucket_seconds": bucket_ms / 1000,
        "pending": pending_now,
        "buckets": s.buckets.iter().map(|b| json!({
            "start": at(b.start_ms),
            "asked": b.asked,
            "answered": b.answered,
            "timed_out": b.timed_out,
            "other": b.other,
            "depth": b.depth,
        })).collect::<Vec<_>>(),
        "time_to_answer": s.time_to_answer,
        "agents": s.agents,
    })))
}

/// `GET /metrics`.
pub async fn prometheus(State(state): State<Arc<AppState>>) -> impl IntoResponse {
    let m = hitl_metrics(&state).await;
    let rows: [(&str, &str, &str, &str); 10] = [
        (
            "hitl_requests_total",
            "counter",
            "totalRequests",
            "Requests queued since start.",
        ),
        (
            "hitl_responses_total",
            "counter",
            "totalResponses",
            "Requests a human answered or cancelled.",
        ),
        (
            "hitl_timeouts_total",
            "counter",
            "totalTimeouts",
            "Requests that timed out.",
        ),
        (
            "hitl_errors_total",
            "counter",
            "totalErrors",
            "Questions refused as bad input.",
        ),
        (
            "hitl_withdrawn_total",
            "counter",
            "totalWithdrawn",
            "Requests withdrawn or abandoned by their asker.",
        ),
        (
            "hitl_response_time_avg_ms",
            "gauge",
            "avgResponseTimeMs",
            "Mean time from asking to a human's answer.",
        ),
        (
            "hitl_pending_requests",
            "gauge",
            "pendingRequests",
            "Requests waiting now.",
        ),
        (
            "hitl_deliveries_total",
            "counter",
            "deliveredCount",
            "Answers delivered to their agent.",
        ),
        (
            "hitl_failed_deliveries_total",
            "counter",
            "failedDeliveryCount",
            "Pushes to an agent's WebSocket that failed or were refused.",
        ),
        (
            "hitl_pending_poll_total",
            "counter",
            "pendingPollCount",
            "Answers left for their agent to poll.",
        ),
    ];
    let mut out = String::new();
    for (name, kind, field, help) in rows {
        let _ = writeln!(
            out,
            "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {}",
            m[field]
        );
    }
    let _ = writeln!(
        out,
        "# HELP hitl_uptime_seconds Seconds since the server started.\n# TYPE hitl_uptime_seconds gauge\nhitl_uptime_seconds {}",
        state.started.elapsed().as_secs()
    );
    let _ = writeln!(
        out,
        "# HELP hitl_http_connections_refused_total Connections closed on arrival at [http] max_connections.\n# TYPE hitl_http_connections_refused_total counter\nhitl_http_connections_refused_total {}",
        super::conn::REFUSED_AT_CAP.load(std::sync::atomic::Ordering::Relaxed)
    );
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], out)
}
