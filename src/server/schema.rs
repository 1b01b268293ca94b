//! The JSON Schemas of the API's bodies, for `/api/v1/openapi.json`: what each route
//! takes and gives, and the links that say which response's id each `{id}` route
//! takes, so a client generator or a fuzzer (schemathesis, in CI) can reach every
//! operation. Each route of the route table (`routes.rs`) carries its [`Detail`];
//! a body's schema is generated from its type ([`of`]: schemars, with the rules the
//! handlers enforce stated beside the fields), and only seed 004's event envelope is
//! written here by hand. A body the document allows is a body the server takes.

use serde_json::{Value, json};

use schemars::{JsonSchema, Schema, SchemaGenerator};

use crate::protocol::AnswerShape;
use crate::server::seed004::HitlSpec;

/// The generator of the document's schemas: each type's lands in
/// `components.schemas`, where its `$ref`s point.
pub fn generator() -> SchemaGenerator {
    let mut settings = schemars::generate::SchemaSettings::draft2020_12();
    settings.definitions_path = "/components/schemas/".into();
    settings.into_generator()
}

/// `components.schemas`: those written by hand and those `generator` made.
pub fn components(mut generator: SchemaGenerator) -> Value {
    generator.subschema_for::<AnswerShape>();
    generator.subschema_for::<HitlSpec>();
    let mut schemas = hand_written();
    if let Value::Object(m) = &mut schemas {
        m.extend(generator.take_definitions(true));
    }
    schemas
}

/// Seed 004's event envelope, read by hand as that format is (unknown fields kept);
/// what it asks with, `humanInTheLoop`, is [`HitlSpec`]'s generated schema.
fn hand_written() -> Value {
    json!({
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
                "humanInTheLoop": { "anyOf": [reference("HumanInTheLoop"), { "type": "null" }] },
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

/// A body's schema: generated from its type ([`of`]), or one of [`components`]'
/// written by hand.
#[derive(Debug, Clone, Copy)]
pub enum Body {
    /// From the type, through the document's generator.
    Typed(fn(&mut SchemaGenerator) -> Schema),
    /// A hand-written schema of [`components`], by name.
    Named(&'static str),
}

/// The schema of `T`, generated.
pub fn of<T: JsonSchema>() -> Body {
    Body::Typed(SchemaGenerator::subschema_for::<T>)
}

impl Body {
    /// The schema, as a reference into the components.
    pub fn schema(self, generator: &mut SchemaGenerator) -> Value {
        match self {
            Body::Typed(schema) => schema(generator).to_value(),
            Body::Named(name) => reference(name),
        }
    }
}

/// The [`Detail`] of an operation that succeeds with `status`, its body `schema`.
pub fn ok(status: u16, schema: Option<Body>) -> Detail {
    Detail {
        ok: status,
        ok_schema: schema,
        ..Detail::default()
    }
}

/// What the document says of one operation beyond its route: its body (schema name,
/// required), its success status and body, and where its response's id leads.
#[derive(Debug, Clone, Copy, Default)]
pub struct Detail {
    /// The request body's schema, and whether a body is required.
    pub body: Option<(Body, bool)>,
    /// The success status.
    pub ok: u16,
    /// The success body's schema, if it has one of ours.
    pub ok_schema: Option<Body>,
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
pub const LIMIT: &[(&str, &str)] = &[(
    "limit",
    r#"{"type": "integer", "format": "int64", "minimum": -9223372036854775808, "maximum": 9223372036854775807, "description": "At most this many, and never more than 1000 (or, for feeds, 2 MiB of events)."}"#,
)];

/// The native operations that take a request's id.
pub const BY_REQUEST_ID: &[&str] = &[
    "GET /api/v1/requests/{id}",
    "POST /api/v1/requests/{id}/respond",
    "POST /api/v1/requests/{id}/cancel",
    "GET /api/v1/requests/{id}/wait",
];
/// The operations that take a task's id.
pub const BY_TASK_ID: &[&str] = &[
    "GET /api/v1/tasks/{id}",
    "GET /api/v1/tasks/{id}/result",
    "POST /api/v1/tasks/{id}/cancel",
    "POST /api/v1/tasks/{id}/retry",
    "GET /api/v1/tasks/{id}/wait",
];
/// The seed operations that take an event's id.
pub const BY_EVENT_ID: &[&str] = &["GET /events/{id}/response", "POST /events/{id}/respond"];
