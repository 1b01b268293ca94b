//! The route table: every route with its method, access rule and summary. The router
//! and `/api/v1/openapi.json` are both built from it, so the document cannot list a
//! route that is not served, nor miss one that is, nor misstate who may call it.

use std::{
    convert::Infallible,
    future::{Ready, ready},
    sync::Arc,
    task::{Context, Poll},
};

use axum::{
    Json, Router,
    extract::{DefaultBodyLimit, Request, State},
    http::{HeaderValue, Method},
    middleware,
    response::{IntoResponse, Response},
    routing::{MethodRouter, delete, get, post},
};
use futures_util::future::Either;
use serde_json::{Map, Value, json};
use tower_http::cors::{AllowOrigin, CorsLayer};

use super::{
    AppState,
    auth::{self, Access, Caller},
    devices, login, metrics, native, push,
    schema::{self, Detail},
    seed, stream, tasks,
};

/// One route.
pub struct Route {
    /// GET or POST.
    pub method: Method,
    /// The path, with `{id}` for parameters (axum's syntax is OpenAPI's).
    pub path: &'static str,
    /// Who may call it.
    pub access: Access,
    /// What it does.
    pub summary: &'static str,
    handler: MethodRouter<Arc<AppState>>,
    /// What the document says of it beyond that: bodies, statuses, links.
    pub detail: Detail,
}

fn route(
    method: Method,
    path: &'static str,
    access: Access,
    summary: &'static str,
    handler: MethodRouter<Arc<AppState>>,
    detail: Detail,
) -> Route {
    Route {
        method,
        path,
        access,
        summary,
        handler,
        detail,
    }
}

/// Every route the server has.
pub fn table() -> Vec<Route> {
    use crate::api::{CreateRequest, RequestView, RespondBody, Responded};
    use Access::*;
    use Method as M;
    use schema::{BY_EVENT_ID, BY_REQUEST_ID, BY_TASK_ID, Body, LIMIT, of, ok};
    vec![
        route(
            M::GET,
            "/healthz",
            Public,
            "Health: 200 while the broker and its store answer.",
            get(metrics::healthz),
            ok(200, None),
        ),
        route(
            M::GET,
            "/metrics",
            Token,
            "Metrics in Prometheus' text format.",
            get(metrics::prometheus),
            ok(200, None),
        ),
        route(
            M::POST,
            "/events",
            Agent,
            "Store an agent event; with `humanInTheLoop`, create a request (seed 004). Idempotent by `Idempotency-Key`.",
            post(seed::create_event),
            Detail {
                body: Some((Body::Named("Event"), true)),
                also_ok: &[200],
                links: Some((BY_EVENT_ID, "/id")),
                errors: &[400, 413, 415],
                ..ok(201, Some(Body::Named("EventView")))
            },
        ),
        route(
            M::GET,
            "/events/recent",
            Token,
            "The newest events, with how their requests stand.",
            get(seed::recent),
            Detail {
                errors: &[400],
                query: LIMIT,
                ..ok(200, None)
            },
        ),
        route(
            M::GET,
            "/events/filter-options",
            Token,
            "The apps, sessions and event types seen.",
            get(seed::filter_options),
            ok(200, None),
        ),
        route(
            M::POST,
            "/events/{id}/respond",
            Token,
            "Answer a request: response, choice, permission, approved + comment, or cancelled. An approval of one that needs several people's is counted (202) until there are enough.",
            post(seed::respond_event),
            Detail {
                body: Some((of::<RespondBody>(), true)),
                errors: &[202, 400, 404, 409, 410, 413, 415],
                ..ok(200, None)
            },
        ),
        route(
            M::GET,
            "/events/{id}/response",
            Poll,
            "Poll for the answer: 200 with it, 202 + Retry-After while pending or after a timeout.",
            get(seed::event_response),
            Detail {
                errors: &[400, 404],
                also_ok: &[202],
                ..ok(200, None)
            },
        ),
        route(
            M::GET,
            "/stream",
            Token,
            "WebSocket: the recent events, then each new or changed one.",
            get(stream::seed_stream),
            Detail {
                errors: &[400, 405, 426],
                ..ok(101, None)
            },
        ),
        route(
            M::POST,
            "/api/v1/requests",
            Agent,
            "Create a request; 201 once it is durable.",
            post(native::create),
            Detail {
                body: Some((of::<CreateRequest>(), true)),
                also_ok: &[200],
                query: &[(
                    "wait",
                    r#"{"type": "number", "minimum": 0, "maximum": 300, "description": "Seconds to hold the call for the request's end: 200 with it if it ends in time."}"#,
                )],
                links: Some((BY_REQUEST_ID, "/id")),
                errors: &[400, 413, 415],
                ..ok(201, Some(of::<RequestView>()))
            },
        ),
        route(
            M::GET,
            "/api/v1/requests",
            Token,
            "List requests: the queue (status=pending), or history by status.",
            get(native::list),
            Detail {
                errors: &[400],
                query: &[
                    (
                        "status",
                        r#"{"enum": ["", "pending", "all", "answered", "cancelled", "timeout", "withdrawn", "abandoned", "rejected"], "description": "Empty: pending, the default."}"#,
                    ),
                    ("agent", r#"{"type": "string"}"#),
                    (
                        "q",
                        r#"{"type": "string", "description": "Only those whose question, answer or agent holds this text (any case), and with `tag:NAME` only those tagged NAME."}"#,
                    ),
                    (
                        "before",
                        r#"{"type": "string", "format": "date-time", "description": "Only those asked before this time: the next page."}"#,
                    ),
                    (
                        "limit",
                        r#"{"type": "integer", "format": "int64", "minimum": -9223372036854775808, "maximum": 9223372036854775807, "description": "At most this many (1 to 1000; beyond, the nearest)."}"#,
                    ),
                ],
                ..ok(200, None)
            },
        ),
        route(
            M::POST,
            "/api/v1/task-sessions",
            Token,
            "Start (or adopt) a task session: an agent in a tmux session of hitl's.",
            post(tasks::create_session),
            Detail {
                body: Some((of::<crate::tasks::SessionSpec>(), true)),
                errors: &[400, 403, 404, 409, 413, 415, 503],
                ..ok(201, Some(of::<crate::tasks::SessionStatus>()))
            },
        ),
        route(
            M::GET,
            "/api/v1/task-sessions",
            Token,
            "The task sessions, each with its queue.",
            get(tasks::sessions),
            Detail {
                errors: &[503],
                ..ok(200, Some(of::<Vec<crate::tasks::SessionStatus>>()))
            },
        ),
        route(
            M::DELETE,
            "/api/v1/task-sessions/{name}",
            Token,
            "End a task session: its agent stopped, the session forgotten (its tasks stay on record, a worktree stays). Refused while a task of it runs or waits.",
            delete(tasks::end_session),
            Detail {
                errors: &[404, 409, 503],
                ..ok(200, Some(of::<crate::tasks::SessionStatus>()))
            },
        ),
        route(
            M::POST,
            "/api/v1/tasks",
            Token,
            "Submit a task to a session's queue.",
            post(tasks::submit),
            Detail {
                body: Some((of::<crate::tasks::TaskSpec>(), true)),
                links: Some((BY_TASK_ID, "/task/id")),
                errors: &[400, 404, 413, 415, 503],
                ..ok(201, Some(of::<crate::tasks::Submitted>()))
            },
        ),
        route(
            M::GET,
            "/api/v1/tasks",
            Token,
            "Every task, in submission order.",
            get(tasks::list),
            Detail {
                errors: &[503],
                ..ok(200, Some(of::<Vec<crate::tasks::TaskView>>()))
            },
        ),
        route(
            M::GET,
            "/api/v1/tasks/{id}",
            Token,
            "One task and how it stands.",
            get(tasks::get),
            Detail {
                errors: &[404, 503],
                ..ok(200, Some(of::<crate::tasks::TaskView>()))
            },
        ),
        route(
            M::GET,
            "/api/v1/tasks/{id}/result",
            Token,
            "A task's RESULTS.json: its summary read, and its artifacts.",
            get(tasks::result),
            Detail {
                errors: &[404, 409, 503],
                ..ok(200, Some(of::<crate::tasks::TaskResult>()))
            },
        ),
        route(
            M::POST,
            "/api/v1/tasks/{id}/cancel",
            Token,
            "Cancel a task: a waiting one is taken out, a running one interrupted.",
            post(tasks::cancel),
            Detail {
                errors: &[404, 409, 503],
                ..ok(200, Some(of::<crate::tasks::Task>()))
            },
        ),
        route(
            M::POST,
            "/api/v1/tasks/{id}/move",
            Token,
            "Move a waiting task to another place in its session's queue (it takes the priority of the task it goes before).",
            post(tasks::move_to),
            Detail {
                body: Some((of::<crate::tasks::MoveSpec>(), true)),
                errors: &[400, 404, 409, 413, 415, 503],
                ..ok(200, Some(of::<crate::tasks::TaskView>()))
            },
        ),
        route(
            M::POST,
            "/api/v1/tasks/{id}/retry",
            Token,
            "Submit an ended task again, as a new task.",
            post(tasks::retry),
            Detail {
                errors: &[404, 409, 503],
                ..ok(201, Some(of::<crate::tasks::Submitted>()))
            },
        ),
        route(
            M::GET,
            "/api/v1/tasks/{id}/wait",
            Token,
            "Long poll: returns when the task ends (200) or after `timeout` seconds (202).",
            get(tasks::wait),
            Detail {
                errors: &[400, 404, 503],
                also_ok: &[202],
                query: &[(
                    "timeout",
                    r#"{"type": "number", "minimum": 0, "maximum": 300}"#,
                )],
                ..ok(200, Some(of::<crate::tasks::TaskView>()))
            },
        ),
        route(
            M::GET,
            "/api/v1/requests/{id}",
            Token,
            "One request and how it stands.",
            get(native::get),
            Detail {
                errors: &[404],
                ..ok(200, Some(of::<RequestView>()))
            },
        ),
        route(
            M::GET,
            "/api/v1/requests/{id}/trail",
            Token,
            "What hitl did about a request besides asking and answering it: each notification sent (surface, to whom, delivered or the error) and each vote, oldest first.",
            get(native::trail),
            ok(200, Some(of::<Vec<crate::store::TrailStep>>())),
        ),
        route(
            M::POST,
            "/api/v1/requests/{id}/respond",
            Token,
            "Answer a request. An approval of one that needs several people's is counted (202) until there are enough.",
            post(native::respond_request),
            Detail {
                body: Some((of::<RespondBody>(), true)),
                errors: &[202, 400, 404, 409, 410, 413, 415],
                ..ok(200, Some(of::<Responded>()))
            },
        ),
        route(
            M::POST,
            "/api/v1/requests/{id}/cancel",
            Token,
            "Cancel a request: its asker stops waiting.",
            post(native::cancel),
            Detail {
                body: Some((of::<native::CancelBody>(), false)),
                errors: &[400, 404, 409, 410, 413, 415],
                ..ok(200, Some(of::<Responded>()))
            },
        ),
        route(
            M::GET,
            "/api/v1/requests/{id}/wait",
            Poll,
            "Long poll: returns when the request ends (200) or after `timeout` seconds (202).",
            get(native::wait),
            Detail {
                errors: &[400, 404],
                also_ok: &[202],
                query: &[(
                    "timeout",
                    r#"{"type": "number", "minimum": 0, "maximum": 300}"#,
                )],
                ..ok(200, Some(of::<RequestView>()))
            },
        ),
        route(
            M::GET,
            "/api/v1/agents",
            Token,
            "The agents that have asked.",
            get(native::agents),
            ok(200, None),
        ),
        route(
            M::GET,
            "/api/v1/events",
            Token,
            "The newest events.",
            get(native::events),
            Detail {
                errors: &[400],
                query: LIMIT,
                ..ok(200, None)
            },
        ),
        route(
            M::GET,
            "/api/v1/metrics",
            Token,
            "Counters (seed 004's HITLMetrics fields).",
            get(metrics::metrics_json),
            ok(200, None),
        ),
        route(
            M::GET,
            "/api/v1/metrics/series",
            Token,
            "Requests asked and ended over time, the queue's depth, time to answer and the busiest agents, for charts.",
            get(metrics::series),
            Detail {
                errors: &[400],
                query: &[(
                    "window",
                    r#"{"enum": ["", "1h", "6h", "24h", "7d", "30d"], "description": "How far back: the last hour, 6 hours, day (the default), week or 30 days."}"#,
                )],
                ..ok(200, None)
            },
        ),
        route(
            M::POST,
            "/api/v1/login-links",
            Owner,
            "A one-time link that logs a browser into the dashboard (good for ten minutes).",
            post(login::create),
            ok(201, None),
        ),
        route(
            M::POST,
            "/api/v1/pairings",
            Owner,
            "A single-use link that logs one device in, by `[http] public_url` (good for ten minutes).",
            post(devices::pair),
            Detail {
                body: Some((of::<devices::PairBody>(), true)),
                errors: &[400, 413, 415],
                ..ok(201, Some(of::<devices::Pairing>()))
            },
        ),
        route(
            M::GET,
            "/api/v1/devices",
            Owner,
            "The devices logged in to the dashboard: name, how, since, last seen and from where.",
            get(devices::list),
            ok(200, Some(of::<Vec<devices::Device>>())),
        ),
        route(
            M::DELETE,
            "/api/v1/devices/{id}",
            Owner,
            "Ends a device's session at once: its next request is refused, its streams close.",
            delete(devices::revoke),
            Detail {
                errors: &[404],
                ..ok(200, None)
            },
        ),
        route(
            M::GET,
            "/api/v1/push/vapid",
            Token,
            "This server's VAPID public key, which a browser subscribes to Web Push with.",
            get(push::vapid),
            ok(200, Some(of::<push::VapidKey>())),
        ),
        route(
            M::POST,
            "/api/v1/push/subscriptions",
            Token,
            "Pushes each new request to this browser: its `PushSubscription` (to a browser's own push service, or a host in `[http] delivery_hosts`); a device's ends with the device.",
            post(push::subscribe),
            Detail {
                body: Some((of::<push::PushSubscriptionBody>(), true)),
                errors: &[400, 413, 415],
                ..ok(201, Some(of::<push::PushSubscribed>()))
            },
        ),
        route(
            M::DELETE,
            "/api/v1/push/subscriptions",
            Token,
            "Stops pushing to the browser with this endpoint (a device: only to itself).",
            delete(push::unsubscribe),
            Detail {
                errors: &[400, 404],
                query: &[(
                    "endpoint",
                    r#"{"type": "string", "x-required": true, "description": "The subscription's endpoint, as subscribed."}"#,
                )],
                ..ok(200, None)
            },
        ),
        route(
            M::POST,
            "/api/v1/logout",
            Token,
            "Ends the dashboard session of the calling browser and clears its cookie.",
            post(login::logout),
            ok(200, None),
        ),
        route(
            M::GET,
            "/api/v1/stream",
            Token,
            "WebSocket: the queue, then every change to it.",
            get(stream::changes_stream),
            Detail {
                errors: &[400, 405, 426],
                query: &[(
                    "attend",
                    r#"{"type": "string", "pattern": "^[a-z][a-z0-9-]{0,31}$", "description": "This connection is a UI a person answers in (the dashboard says attend=dashboard): while it is open a human counts as present, and hooks wait for answers instead of leaving calls to Claude Code."}"#,
                )],
                ..ok(101, None)
            },
        ),
        route(
            M::GET,
            "/api/v1/openapi.json",
            Public,
            "This document.",
            get(openapi_json),
            ok(200, None),
        ),
    ]
}

/// The document of what this server does: without a task runner (`hitl serve`),
/// without the task routes, which answer 503 there saying where tasks run.
async fn openapi_json(State(state): State<Arc<AppState>>) -> Json<Value> {
    Json(openapi(state.tasks.is_some()))
}

/// Whether `path` is one of the task runner's routes (`/api/v1/tasks…`,
/// `/api/v1/task-sessions…`).
fn is_task_route(path: &str) -> bool {
    path.starts_with("/api/v1/task")
}

/// Refuses a caller that may not use its route: the [`Access`] rule of one route, as
/// a layer on it. A service of its own rather than `middleware::from_fn`, which
/// copies the route and boxes a future for every request.
#[derive(Clone)]
struct Require<S> {
    inner: S,
    access: Access,
    state: Arc<AppState>,
}

impl<S> tower::Service<Request> for Require<S>
where
    S: tower::Service<Request, Response = Response, Error = Infallible>,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Either<Ready<Result<Response, Infallible>>, S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request) -> Self::Future {
        let allowed = req
            .extensions()
            .get::<Caller>()
            .map(|caller| caller.require(self.access, &self.state));
        let refusal = match allowed {
            Some(Ok(())) => return Either::Right(self.inner.call(req)),
            Some(Err(e)) => e,
            None => super::error::ApiError::internal("the auth layer did not run"),
        };
        Either::Left(ready(Ok(refusal.into_response())))
    }
}

/// The router over `state`.
pub fn router(state: Arc<AppState>) -> Router {
    let mut by_path: Vec<(&'static str, MethodRouter<Arc<AppState>>)> = Vec::new();
    for r in table() {
        let access = r.access;
        let s = state.clone();
        let handler = r
            .handler
            .route_layer(tower::layer::layer_fn(move |inner| Require {
                inner,
                access,
                state: s.clone(),
            }));
        match by_path.iter_mut().find(|(p, _)| *p == r.path) {
            Some((_, existing)) => {
                let merged = std::mem::take(existing).merge(handler);
                *existing = merged;
            }
            None => by_path.push((r.path, handler)),
        }
    }
    // The dashboard's page and files: not API routes (the document leaves them
    // out), open to anyone (they hold no data), behind the same guard and login.
    let mut router = Router::new()
        .route("/", get(super::dashboard::index))
        .route("/ui/{name}", get(super::dashboard::asset))
        .route("/favicon.ico", get(super::dashboard::favicon))
        .route("/sw.js", get(super::dashboard::service_worker))
        .route("/manifest.webmanifest", get(super::dashboard::manifest));
    for (path, handler) in by_path {
        router = router.route(path, handler);
    }
    let mut router = router
        .layer(DefaultBodyLimit::max(state.settings.max_body_bytes))
        .layer(middleware::from_fn_with_state(state.clone(), auth::admit));
    if !state.settings.allowed_origins.is_empty() {
        let origins: Vec<HeaderValue> = state
            .settings
            .allowed_origins
            .iter()
            .filter_map(|o| crate::config::normalise_origin(o))
            .filter_map(|o| HeaderValue::from_str(&o).ok())
            .collect();
        router = router.layer(
            CorsLayer::new()
                .allow_origin(AllowOrigin::list(origins))
                .allow_methods([Method::GET, Method::POST])
                .allow_headers([
                    axum::http::header::CONTENT_TYPE,
                    axum::http::header::AUTHORIZATION,
                ]),
        );
    }
    router.with_state(state)
}

/// The OpenAPI 3.1 document of [`table`], with the bodies, responses and links of
/// [`schema`]; the task routes only `with_tasks` (where a task runner runs).
pub fn openapi(with_tasks: bool) -> Value {
    let mut paths = Map::new();
    let mut generator = schema::generator();
    for r in table()
        .into_iter()
        .filter(|r| with_tasks || !is_task_route(r.path))
    {
        let entry = paths.entry(r.path.to_string()).or_insert_with(|| json!({}));
        let operation_id = format!("{} {}", r.method, r.path);
        let detail = r.detail;
        let mut ok = json!({ "description": "Done." });
        if let Some(body) = detail.ok_schema {
            let schema = body.schema(&mut generator);
            ok["content"] = json!({ "application/json": { "schema": schema } });
        }
        if let Some((ops, at)) = detail.links {
            ok["links"] = schema::links_to(ops, at);
        }
        let mut responses = Map::new();
        for also in detail.also_ok {
            let mut same = ok.clone();
            if let Some(o) = same.as_object_mut() {
                o.remove("links");
            }
            responses.insert(also.to_string(), same);
        }
        responses.insert(detail.ok.to_string(), ok);
        let error = json!({
            "description": "Refused; the body says why.",
            "content": { "application/json": { "schema": schema::of::<super::error::ErrorBody>().schema(&mut generator) } },
        });
        for status in detail.errors.iter().chain(&[401, 403, 429]) {
            responses.insert(status.to_string(), error.clone());
        }
        let mut op = json!({
            "summary": r.summary,
            "operationId": operation_id,
            "responses": responses,
        });
        if let Some((body, required)) = detail.body {
            op["requestBody"] = json!({
                "required": required,
                "content": { "application/json": { "schema": body.schema(&mut generator) } },
            });
        }
        let mut params: Vec<Value> = r
            .path
            .split('/')
            .filter_map(|seg| seg.strip_prefix('{')?.strip_suffix('}'))
            .map(|name| json!({ "name": name, "in": "path", "required": true, "schema": { "type": "string" } }))
            .collect();
        for (name, schema) in detail.query {
            let mut schema: Value = serde_json::from_str(schema).unwrap_or_else(|_| json!({}));
            // `"x-required": true` in a parameter's schema: it must be given.
            let required = schema
                .as_object_mut()
                .and_then(|s| s.remove("x-required"))
                .is_some_and(|r| r == true);
            params.push(
                json!({ "name": name, "in": "query", "required": required, "schema": schema }),
            );
        }
        if !params.is_empty() {
            op["parameters"] = json!(params);
        }
        match r.access {
            Access::Public => op["security"] = json!([]),
            Access::Agent => {
                op["security"] = json!([{ "token": [] }, {}]);
                op["description"] =
                    json!("Loopback clients may call this without the token (open_loopback).");
            }
            Access::Poll => {
                op["security"] = json!([{ "token": [] }, {}]);
                op["description"] = json!(
                    "Loopback clients running as the server's OS user may call this without the token (open_loopback)."
                );
            }
            Access::Token => op["security"] = json!([{ "token": [] }]),
            Access::Owner => {
                op["security"] = json!([{ "token": [] }]);
                op["description"] = json!(
                    "The token itself: a device logged in to the dashboard is refused (403)."
                );
            }
        }
        entry[r.method.as_str().to_ascii_lowercase()] = op;
    }
    json!({
        "openapi": "3.1.0",
        "info": { "title": "hitl", "version": env!("CARGO_PKG_VERSION") },
        "components": {
            "securitySchemes": { "token": { "type": "http", "scheme": "bearer" } },
            "schemas": schema::components(generator),
        },
        "security": [{ "token": [] }],
        "paths": paths,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_route_is_described() {
        for r in table() {
            assert!(
                (200..=299).contains(&r.detail.ok) || r.detail.ok == 101,
                "{} {} says no success status",
                r.method,
                r.path
            );
            for (name, text) in r.detail.query {
                let parsed: Result<Value, _> = serde_json::from_str(text);
                assert!(parsed.is_ok(), "{} {} ?{name}: {text}", r.method, r.path);
            }
        }
        let doc = openapi(true);
        assert!(
            openapi(false)["paths"]
                .as_object()
                .unwrap()
                .keys()
                .all(|p| !p.starts_with("/api/v1/task")),
            "no task routes without a task runner"
        );
        assert!(doc["paths"]["/api/v1/task-sessions"].is_object());
        let link = &doc["paths"]["/api/v1/requests"]["post"]["responses"]["201"]["links"];
        assert_eq!(
            link["GET /api/v1/requests/{id}"]["parameters"]["id"],
            "$response.body#/id"
        );
    }
}
