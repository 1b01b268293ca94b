//! The native API's wire types (`/api/v1`), shared by the server that reads and
//! writes them and the client (`hitl ask --server`, `hitl answer`, `hitl pending`)
//! that writes and reads them, so the two cannot drift apart.

pub mod client;

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::protocol::{Answer, AnswerShape, Kind, Origin, Reply, Request, Status};

/// The body of `POST /api/v1/requests`: a [`Request`]'s own fields but those its
/// way in sets ([`CreateRequest::SET_BY_SERVER`]), plus how to recognise a repeat
/// and the way the asker came. Read with [`CreateRequest::from_json`], which refuses
/// a field the server sets and a field nobody knows, as the OpenAPI document
/// (generated from this type and [`Request`]'s) says.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[schemars(
    transform = CreateRequest::body_only,
    description = "A question for a human. The fields the server sets (id, timestamp, \
                   version, asker, created_by, source) and unknown ones are refused."
)]
pub struct CreateRequest {
    /// What to ask, as a request says it.
    #[serde(flatten)]
    pub request: Request,
    /// A repeat with the same key returns the first request.
    #[serde(default)]
    #[schemars(length(min = 1, max = 200))]
    pub idempotency_key: Option<String>,
    /// The way the asker came when one of hitl's own adapters asks over HTTP (`hook`,
    /// `mcp`, …); `http` when absent. Never `spool`: spool questions are files.
    #[serde(default)]
    #[schemars(schema_with = "CreateRequest::origin_schema")]
    pub origin: Option<Origin>,
}

impl CreateRequest {
    /// The fields of a [`Request`] the server sets, whatever a body would say: who
    /// made it, when, and under which id.
    pub const SET_BY_SERVER: [&str; 6] = [
        "version",
        "id",
        "timestamp",
        "asker",
        "created_by",
        "source",
    ];

    /// The body that asks `r` (its id is the server's to choose), come by `origin`.
    pub fn from_request(r: &Request, origin: Origin, idempotency_key: &str) -> CreateRequest {
        CreateRequest {
            request: Request {
                // Absent is the API's default of 300 s; none is 0, for ever.
                timeout: Some(r.timeout.unwrap_or(0)),
                ..r.clone()
            },
            idempotency_key: Some(idempotency_key.to_string()),
            origin: (origin != Origin::Http).then_some(origin),
        }
    }

    /// The schema of a create body: a request's fields but those the server sets, and
    /// no others.
    fn body_only(schema: &mut schemars::Schema) {
        if let Some(Value::Object(props)) = schema.get_mut("properties") {
            for f in Self::SET_BY_SERVER {
                props.remove(f);
            }
        }
        schema.insert("additionalProperties".into(), false.into());
    }

    /// The origins an asker over HTTP may name: all but the spool's.
    fn origin_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let mut names: Vec<Value> = Origin::ALL
            .into_iter()
            .filter(|o| *o != Origin::Spool)
            .map(|o| Value::from(o.as_str()))
            .collect();
        names.push(Value::Null);
        schemars::json_schema!({
            "enum": names,
            "description": "The way the asker came, when one of hitl's own adapters asks over HTTP (default http).",
        })
    }

    /// Reads a body, or says which field is wrong and why.
    pub fn from_json(body: Map<String, Value>) -> Result<CreateRequest, String> {
        if let Some(f) = Self::SET_BY_SERVER.iter().find(|f| body.contains_key(**f)) {
            return Err(format!("{f} is set by the server; leave it out"));
        }
        let create: CreateRequest =
            serde_path_to_error::deserialize(Value::Object(body)).map_err(|e| {
                match e.path().to_string() {
                    p if p == "." => e.inner().to_string(),
                    p => format!("{p}: {}", e.inner()),
                }
            })?;
        if let Some(f) = create.request.unknown.keys().next() {
            return Err(format!(
                "unknown field {f:?} (see /api/v1/openapi.json); free-form labels go in metadata"
            ));
        }
        Ok(create)
    }
}

impl Serialize for CreateRequest {
    /// The request's fields but those the server sets, then the key and origin.
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let Ok(Value::Object(mut body)) = serde_json::to_value(&self.request) else {
            return Err(serde::ser::Error::custom("a request is always an object"));
        };
        for f in Self::SET_BY_SERVER {
            body.remove(f);
        }
        if let Some(k) = &self.idempotency_key {
            body.insert("idempotency_key".into(), Value::from(k.as_str()));
        }
        if let Some(o) = self.origin {
            body.insert("origin".into(), Value::from(o.as_str()));
        }
        body.serialize(s)
    }
}

/// A responder's body: seed 004's fields plus `answer` and `choices` for the native
/// kinds. Unknown fields are ignored, as seed clients send extra ones.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(description = "Which fields an answer needs depends on the request's \
    answer_shape (its `field`): `response` for text, `choice` for a select, `choices` \
    for a multiselect, `approved` or `permission` for approvals, `answers` for \
    questions (one per question, or an object from each question to its answer); \
    `cancelled: true` ends any. A body that does not fit the request is refused \
    with 400.")]
pub struct RespondBody {
    /// Who answers (default: the authenticated caller's name).
    #[serde(
        default,
        alias = "responded_by",
        skip_serializing_if = "Option::is_none"
    )]
    pub responded_by: Option<String>,
    /// Text for questions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response: Option<String>,
    /// Text (native alias of `response`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<String>,
    /// True when the human cancels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cancelled: Option<bool>,
    /// Allow or deny a permission.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permission: Option<bool>,
    /// The chosen option of a choice.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub choice: Option<String>,
    /// The chosen options of a multiselect.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub choices: Option<Vec<String>>,
    /// The answers to a `questions` request: one per question, in order, or an
    /// object from each question's text to its answer (AskUserQuestion's shape).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "list_or_map")]
    pub answers: Option<Value>,
    /// Approve or deny an approval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approved: Option<bool>,
    /// "Always allow this here", with an approval: `true` for the rule the request
    /// offers (`answer_shape.always`), or a rule of the human's own (like
    /// `Bash(npm test:*)`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub always: Option<Always>,
    /// A comment, or the reason for a cancel.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
}

impl RespondBody {
    /// The body that gives `reply` to a request of kind `kind`, as `by`.
    pub fn from_reply(kind: Kind, reply: &Reply, by: &str) -> RespondBody {
        let mut body = RespondBody {
            responded_by: Some(by.to_string()),
            ..RespondBody::default()
        };
        match reply {
            Reply::Text(t) if kind == Kind::Select => body.choice = Some(t.clone()),
            Reply::Text(t) => body.response = Some(t.clone()),
            Reply::Choices(c) => body.choices = Some(c.clone()),
            Reply::Answers(a) => body.answers = Some(Value::from(a.clone())),
            Reply::Approval {
                approved,
                comment,
                remember,
            } => {
                body.approved = Some(*approved);
                body.permission = Some(*approved);
                body.comment = comment.clone();
                body.always = remember.clone().map(Always::Rule);
            }
            Reply::Cancel { reason } => {
                body.cancelled = Some(true);
                body.comment = reason.clone();
            }
        }
        body
    }
}

/// "Always allow this here", beside an approval.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum Always {
    /// `true`: by the rule the request offers; `false`: not at all.
    Offered(bool),
    /// By a rule of the human's own.
    Rule(String),
}

impl<'de> Deserialize<'de> for Always {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Always, D::Error> {
        match Value::deserialize(d)? {
            Value::Bool(b) => Ok(Always::Offered(b)),
            Value::String(rule) => Ok(Always::Rule(rule)),
            other => Err(serde::de::Error::custom(format!(
                "\"always\" is true or a rule, not {other}"
            ))),
        }
    }
}

/// How a request stands, as `/api/v1/requests` shows it.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RequestView {
    /// Its id.
    pub id: String,
    /// Where it stands.
    pub status: Status,
    /// How it was asked.
    pub origin: Origin,
    /// The request (a stored one as it was taken, whichever way it came).
    #[schemars(with = "Map<String, Value>")]
    pub request: Request,
    /// How it is answered: what UIs draw their controls from.
    pub answer_shape: AnswerShape,
    /// What UIs show beside the question ([`Request::labels`]).
    #[serde(default)]
    pub labels: Vec<String>,
    /// Its answer, once it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<Answer>,
    /// Why it ended without an answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The project of a spool question.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<PathBuf>,
}

impl RequestView {
    /// How pending request `p` stands.
    pub fn of_pending(p: &crate::broker::PendingRequest) -> RequestView {
        let r = &p.request;
        RequestView {
            id: r.id.clone(),
            status: Status::Pending,
            origin: r.origin,
            answer_shape: r.answer_shape(),
            labels: r.labels(),
            request: r.clone(),
            answer: None,
            reason: None,
            project: (!p.project.as_os_str().is_empty()).then(|| p.project.clone()),
        }
    }
}

/// What `POST /api/v1/requests/{id}/respond` and `/cancel` return.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Responded {
    /// Always true.
    pub success: bool,
    /// The request's id.
    pub id: String,
    /// The answer delivered.
    pub answer: Answer,
    /// `delivered`, `pending_poll` or `no_websocket`.
    #[schemars(schema_with = "delivery_status")]
    pub delivery_status: String,
}

/// `answers`: a list (one per question) or an object (question → answer).
fn list_or_map(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({ "type": ["array", "object", "null"] })
}

/// How an answer went back.
fn delivery_status(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({ "enum": ["delivered", "pending_poll", "no_websocket"] })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{Kind, Priority};
    use serde_json::json;

    fn body(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => unreachable!(),
        }
    }

    #[test]
    fn the_create_body_schema_has_every_field_a_body_may_have_and_no_other() {
        let schema = schemars::schema_for!(CreateRequest);
        let props = schema
            .get("properties")
            .and_then(Value::as_object)
            .expect("properties");
        assert_eq!(schema.get("additionalProperties"), Some(&json!(false)));
        // Every field set, so every one of them is written.
        let r = Request {
            working_dir: Some("/w".into()),
            options: vec!["a".into()],
            questions: vec![crate::protocol::FormQuestion {
                question: "q".into(),
                header: String::new(),
                options: Vec::new(),
                multi_select: false,
                optional: false,
                value: None,
            }],
            minimum: Some(1.into()),
            maximum: Some(2.into()),
            priority: Priority::High,
            timeout: Some(5),
            context: json!({ "c": 1 }),
            metadata: body(json!({ "m": 1 })),
            ..Request::new("a", "A", Kind::Select, "q?")
        };
        let written =
            serde_json::to_value(CreateRequest::from_request(&r, Origin::Mcp, "k")).unwrap();
        for field in written.as_object().unwrap().keys() {
            assert!(props.contains_key(field), "{field} is not in the schema");
        }
        for field in CreateRequest::SET_BY_SERVER {
            assert!(!props.contains_key(field), "{field} is the server's");
        }
    }

    #[test]
    fn a_create_body_is_a_request_without_what_the_server_sets() {
        let r = Request {
            options: vec!["a".into(), "b".into()],
            priority: Priority::High,
            ..Request::new("ag", "Ag", Kind::Select, "Which?")
        };
        let sent = serde_json::to_value(CreateRequest::from_request(&r, Origin::Mcp, "k")).unwrap();
        for f in CreateRequest::SET_BY_SERVER {
            assert!(sent.get(f).is_none(), "{f} is the server's: {sent}");
        }
        let read = CreateRequest::from_json(body(sent)).unwrap();
        assert_eq!(read.origin, Some(Origin::Mcp));
        assert_eq!(read.idempotency_key.as_deref(), Some("k"));
        assert_eq!(
            (
                read.request.kind,
                read.request.options,
                read.request.priority
            ),
            (Kind::Select, r.options, Priority::High)
        );
        // None waits for ever: sent as 0, as the API's absent means 300 s.
        assert_eq!(read.request.timeout, Some(0));
    }

    #[test]
    fn a_create_body_says_which_field_is_wrong() {
        let err = |v: Value| CreateRequest::from_json(body(v)).unwrap_err();
        assert!(err(json!({"content": "?", "id": "x"})).contains("id is set by the server"));
        let e = err(json!({"content": "?", "timout": 5}));
        assert!(e.contains("unknown field \"timout\""), "{e}");
        let e = err(json!({"content": "?", "type": "poem"}));
        assert!(e.contains("unknown type \"poem\""), "{e}");
        let e = err(json!({"content": "?", "timeout": "soon"}));
        assert!(e.contains("number of seconds"), "{e}");
        assert!(
            CreateRequest::from_json(body(json!({"content": "?", "type": "choice",
            "options": ["a"], "agent_id": 7, "timeout": 1.5})))
            .is_ok_and(|c| c.request.kind == Kind::Select
                && c.request.agent_id == "7"
                && c.request.timeout == Some(2))
        );
    }
}

/// A logged-in browser, as lists show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Device {
    /// Its id, for `hitl devices revoke` (not a secret: it logs nothing in).
    pub id: String,
    /// What it is called: the name given to `hitl pair --name`, else what its
    /// browser says it is ("Chrome on Android").
    pub name: String,
    /// How it logged in: `pair` or `link` (a dashboard login link).
    pub by: String,
    /// When it logged in, seconds since the epoch.
    pub since: u64,
    /// When it was last seen, seconds since the epoch.
    pub last_seen: u64,
    /// The address it was last seen from (the forwarded client's, through a tunnel).
    pub from: String,
    /// When its session ends unless it logs in again, seconds since the epoch.
    pub until: u64,
}

/// `POST /api/v1/pairings`'s body.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PairBody {
    /// What to call the device (`phone`); absent or empty: what its browser says.
    #[serde(default)]
    pub name: Option<String>,
}

/// A pairing link, as `POST /api/v1/pairings` gives it.
#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Pairing {
    /// The link that logs one device in, once: `[http] public_url` (or the server's
    /// own URL) with a single-use code.
    pub url: String,
    /// The name the device will have (empty: what its browser says).
    pub name: String,
    /// Seconds the link stays good unless it is opened.
    pub expires_in_seconds: u64,
}

/// `GET /api/v1/push/vapid`: the key a browser subscribes with.
#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct VapidKey {
    /// This server's VAPID public key (P-256, uncompressed, base64url): the
    /// `applicationServerKey` of `pushManager.subscribe`.
    pub public_key: String,
}

/// `POST /api/v1/push/subscriptions`'s body: a browser's `PushSubscription`, as
/// its `toJSON()` gives it.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct PushSubscriptionBody {
    /// The push service's URL for this browser: one of the browsers' own push
    /// services (as the pattern says), or a host in `[http] delivery_hosts`.
    #[schemars(regex(
        pattern = r"^https://([a-z0-9-]+\.)*(fcm\.googleapis\.com|android\.googleapis\.com|push\.services\.mozilla\.com|push\.apple\.com|notify\.windows\.com)/[!-~]{0,2000}$"
    ))]
    pub endpoint: String,
    /// When the browser will end it (milliseconds since the epoch), or null.
    #[serde(default, rename = "expirationTime")]
    pub expiration_time: Option<serde_json::Value>,
    /// The browser's keys.
    pub keys: PushKeys,
}

/// A subscription's keys.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct PushKeys {
    /// The browser's P-256 public key (an uncompressed point, 65 bytes), base64url.
    #[schemars(regex(pattern = r"^B[A-P][A-Za-z0-9_-]{84}[AEIMQUYcgkosw048]$"))]
    pub p256dh: String,
    /// Its 16-byte auth secret, base64url.
    #[schemars(regex(pattern = r"^[A-Za-z0-9_-]{21}[AQgw]$"))]
    pub auth: String,
}

/// A subscription kept, as `POST /api/v1/push/subscriptions` says it.
#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PushSubscribed {
    /// The push service's scheme and host (its URL's path is the browser's secret).
    pub service: String,
    /// The device it belongs to (it ends with the device), or none for the token.
    #[serde(default)]
    pub device: Option<String>,
}
