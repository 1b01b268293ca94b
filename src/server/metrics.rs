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

use super::AppState;

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
