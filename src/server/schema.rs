//! The JSON Schemas of the API's bodies, for `/api/v1/openapi.json`: what each route
//! takes and gives, and the links that say which response's id each `{id}` route
//! takes, so a client generator or a fuzzer (schemathesis, in CI) can reach every
//! operation. Each schema states the rules the handlers enforce, so that a body the
//! document allows is a body the server takes.

use serde_json::{Value, json};

use crate::{
    api::CreateRequest,
    protocol::{AnswerShape, MAX_TIMEOUT_SECS, form},
};

/// Text with something in it besides whitespace.
const NOT_BLANK: &str = r"\S";
/// The schemas generated from the types themselves (schemars), under
/// `components.schemas`, which their `$ref`s point into.
fn generated() -> serde_json::Map<String, Value> {
    let mut settings = schemars::generate::SchemaSettings::draft2020_12();
    settings.definitions_path = "/components/schemas/".into();
    let mut generator = settings.into_generator();
    generator.subschema_for::<AnswerShape>();
    generator.subschema_for::<CreateRequest>();
    generator.take_definitions(true)
}

/// `components.schemas`.
pub fn components() -> Value {
    let mut schemas = hand_written();
    if let Value::Object(m) = &mut schemas {
        m.extend(generated());
    }
    schemas
}

/// The schemas not generated yet.
fn hand_written() -> Value {
    json!({
        "Error": {
            "type": "object",
            "required": ["success", "error", "status"],
            "properties": {
                "success": { "const": false },
                "error": { "type": "string" },
                "status": { "type": "integer" },
            },
        },
        "RespondBody": {
            "type": "object",
            "description": "Which fields an answer needs depends on the request's type: \
                            `response` for text, `choice` for a select, `choices` for a \
                            multiselect, `approved` or `permission` for approvals, \
                            `answers` for questions (one per question, or an object from \
                            each question to its answer); `cancelled: true` ends any. A body that does not fit the \
                            request is refused with 400.",
            "properties": {
                "response": { "type": ["string", "null"] },
                "answer": { "type": ["string", "null"] },
                "choice": { "type": ["string", "null"] },
                "choices": { "type": ["array", "null"], "items": { "type": "string" } },
                "answers": { "type": ["array", "object", "null"] },
                "permission": { "type": ["boolean", "null"] },
                "approved": { "type": ["boolean", "null"] },
                "always": { "type": ["boolean", "string", "null"],
                            "description": "With an approval: always allow calls like this one \
                                            here, by the rule the request offers \
                                            (`context.always_allow`; true) or by a rule \
                                            of your own (like `Bash(npm test:*)`)." },
                "comment": { "type": ["string", "null"] },
                "cancelled": { "type": ["boolean", "null"] },
                "respondedBy": { "type": ["string", "null"] },
            },
        },
        "CancelBody": {
            "type": "object",
            "properties": {
                "reason": { "type": ["string", "null"] },
                "respondedBy": { "type": ["string", "null"] },
            },
        },
        "Event": {
            "type": "object",
            "description": "Seed 004's HookEvent. With `humanInTheLoop`, it asks a human.",
            "required": ["hook_event_type"],
            "properties": {
                "source_app": { "type": ["string", "null"] },
                "session_id": { "type": ["string", "null"] },
                "hook_event_type": { "type": "string", "minLength": 1 },
                "payload": {},
                "timestamp": { "description": "Milliseconds since 1970 (default: now)." },
                "idempotencyKey": { "type": ["string", "null"], "minLength": 1, "maxLength": 200 },
                "humanInTheLoop": {
                    "type": ["object", "null"],
                    "required": ["type", "question"],
                    "properties": {
                        "type": { "enum": ["question", "question_input", "choice", "permission", "approval",
                                           "text", "yesno", "select", "multiselect", "questions"] },
                        "question": { "type": "string", "pattern": NOT_BLANK },
                        "responseWebSocketUrl": { "type": ["string", "null"] },
                        "timeout": { "type": ["number", "null"], "minimum": 0, "maximum": MAX_TIMEOUT_SECS },
                        "requiresResponse": { "type": ["boolean", "null"] },
                        "choices": { "type": ["array", "null"], "items": { "type": "string" } },
                        "questions": { "anyOf": [form::questions_schema(&mut schemars::SchemaGenerator::default()).to_value(), { "type": "null" }] },
                        "context": {},
                        "priority": { "enum": ["normal", "high", "urgent", null] },
                    },
                    "allOf": [
                        { "if": { "properties": { "type": { "enum": ["choice", "select", "multiselect"] } } },
                          "then": { "required": ["choices"], "properties": { "choices": { "type": "array", "minItems": 1 } } } },
                        { "if": { "properties": { "type": { "const": "questions" } } },
                          "then": { "required": ["questions"],
                            "properties": { "questions": { "type": "array", "minItems": 1 } } } },
                    ],
                },
            },
        },
        "RequestView": {
            "type": "object",
            "required": ["id", "status", "origin", "request", "answer_shape", "labels"],
            "properties": {
                "id": { "type": "string" },
                "status": { "type": "string" },
                "origin": { "type": "string" },
                "request": { "type": "object" },
                "answer_shape": { "$ref": "#/components/schemas/AnswerShape" },
                "labels": { "type": "array", "items": { "type": "string" },
                            "description": "What to show beside the question, each a short word." },
                "answer": { "type": "object" },
                "reason": { "type": "string" },
            },
        },
        "Responded": {
            "type": "object",
            "required": ["success", "id", "answer", "deliveryStatus"],
            "properties": {
                "success": { "const": true },
                "id": { "type": "string" },
                "answer": { "type": "object" },
                "deliveryStatus": { "enum": ["delivered", "pending_poll", "no_websocket"] },
            },
        },
        "EventView": {
            "type": "object",
            "required": ["id"],
            "properties": { "id": { "type": "integer" } },
        },
    })
}

/// A reference to a schema in [`components`].
pub fn reference(name: &str) -> Value {
    json!({ "$ref": format!("#/components/schemas/{name}") })
}

/// The links from a response that names a request by `id_at` (a JSON pointer into
/// its body) to the operations that take that id.
pub fn links_to(operations: &[&str], id_at: &str) -> Value {
    let mut links = serde_json::Map::new();
    for op in operations {
        links.insert(
            op.to_string(),
            json!({
                "operationId": op,
                "parameters": { "id": format!("$response.body#{id_at}") },
            }),
        );
    }
    Value::Object(links)
}

/// What the document says of one operation beyond its route: its body (schema name,
/// required), its success status and body, and where its response's id leads.
#[derive(Debug, Clone, Copy, Default)]
pub struct Detail {
    /// The request body's schema, and whether a body is required.
    pub body: Option<(&'static str, bool)>,
    /// The success status.
    pub ok: u16,
    /// The success body's schema, if it has one of ours.
    pub ok_schema: Option<&'static str>,
    /// Operations that take the id this one returns, and where it is in the body.
    pub links: Option<(&'static [&'static str], &'static str)>,
    /// Refusals the operation gives besides 401/403/429 (every route may give those).
    pub errors: &'static [u16],
    /// Other success statuses (200 for a create that repeats an idempotency key,
    /// 202 for a poll or wait that is still pending).
    pub also_ok: &'static [u16],
    /// Query parameters: name and JSON Schema (as JSON text).
    pub query: &'static [(&'static str, &'static str)],
}

/// `?limit=` of the feeds.
const LIMIT: &[(&str, &str)] = &[(
    "limit",
    r#"{"type": "integer", "format": "int64", "minimum": -9223372036854775808, "maximum": 9223372036854775807, "description": "At most this many, and never more than 1000 (or, for feeds, 2 MiB of events)."}"#,
)];

/// The native operations that take a request's id.
const BY_REQUEST_ID: &[&str] = &[
    "GET /api/v1/requests/{id}",
    "POST /api/v1/requests/{id}/respond",
    "POST /api/v1/requests/{id}/cancel",
    "GET /api/v1/requests/{id}/wait",
];
/// The seed operations that take an event's id.
const BY_EVENT_ID: &[&str] = &["GET /events/{id}/response", "POST /events/{id}/respond"];

/// The [`Detail`] of `method path`; `None` for a route this module does not know
/// (a test keeps the two lists in step).
pub fn detail(method: &str, path: &str) -> Option<Detail> {
    let d = |ok, ok_schema| Detail {
        ok,
        ok_schema,
        ..Detail::default()
    };
    Some(match (method, path) {
        ("GET", "/healthz") => d(200, None),
        ("GET", "/metrics") => d(200, None),
        ("POST", "/events") => Detail {
            body: Some(("Event", true)),
            also_ok: &[200],
            links: Some((BY_EVENT_ID, "/id")),
            errors: &[400, 413, 415],
            ..d(201, Some("EventView"))
        },
        ("GET", "/events/recent") => Detail {
            errors: &[400],
            query: LIMIT,
            ..d(200, None)
        },
        ("GET", "/events/filter-options") => d(200, None),
        ("POST", "/events/{id}/respond") => Detail {
            body: Some(("RespondBody", true)),
            errors: &[400, 404, 409, 410, 413, 415],
            ..d(200, None)
        },
        ("GET", "/events/{id}/response") => Detail {
            errors: &[400, 404],
            also_ok: &[202],
            ..d(200, None)
        },
        ("GET", "/stream") => Detail {
            errors: &[400, 405, 426],
            ..d(101, None)
        },
        ("GET", "/api/v1/stream") => Detail {
            errors: &[400, 405, 426],
            query: &[(
                "attend",
                r#"{"type": "string", "pattern": "^[a-z][a-z0-9-]{0,31}$", "description": "This connection is a UI a person answers in (the dashboard says attend=dashboard): while it is open a human counts as present, and hooks wait for answers instead of leaving calls to Claude Code."}"#,
            )],
            ..d(101, None)
        },
        ("POST", "/api/v1/requests") => Detail {
            body: Some(("CreateRequest", true)),
            also_ok: &[200],
            query: &[(
                "wait",
                r#"{"type": "number", "minimum": 0, "maximum": 300, "description": "Seconds to hold the call for the request's end: 200 with it if it ends in time."}"#,
            )],
            links: Some((BY_REQUEST_ID, "/id")),
            errors: &[400, 413, 415],
            ..d(201, Some("RequestView"))
        },
        ("GET", "/api/v1/requests") => Detail {
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
            ..d(200, None)
        },
        ("GET", "/api/v1/requests/{id}") => Detail {
            errors: &[404],
            ..d(200, Some("RequestView"))
        },
        ("POST", "/api/v1/requests/{id}/respond") => Detail {
            body: Some(("RespondBody", true)),
            errors: &[400, 404, 409, 410, 413, 415],
            ..d(200, Some("Responded"))
        },
        ("POST", "/api/v1/requests/{id}/cancel") => Detail {
            body: Some(("CancelBody", false)),
            errors: &[400, 404, 409, 410, 413, 415],
            ..d(200, Some("Responded"))
        },
        ("GET", "/api/v1/requests/{id}/wait") => Detail {
            errors: &[400, 404],
            also_ok: &[202],
            query: &[(
                "timeout",
                r#"{"type": "number", "minimum": 0, "maximum": 300}"#,
            )],
            ..d(200, Some("RequestView"))
        },
        ("GET", "/api/v1/events") => Detail {
            errors: &[400],
            query: LIMIT,
            ..d(200, None)
        },
        ("GET", "/api/v1/agents") | ("GET", "/api/v1/metrics") => d(200, None),
        ("GET", "/api/v1/metrics/series") => Detail {
            errors: &[400],
            query: &[(
                "window",
                r#"{"enum": ["", "1h", "6h", "24h", "7d", "30d"], "description": "How far back: the last hour, 6 hours, day (the default), week or 30 days."}"#,
            )],
            ..d(200, None)
        },
        ("POST", "/api/v1/login-links") => d(201, None),
        ("POST", "/api/v1/logout") => d(200, None),
        ("GET", "/api/v1/openapi.json") => d(200, None),
        _ => return None,
    })
}
