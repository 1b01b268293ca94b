//! The native API's wire types (`/api/v1`), shared by the server that reads and
//! writes them and the client (`hitl ask --server`, `hitl answer`, `hitl pending`)
//! that writes and reads them, so the two cannot drift apart.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::protocol::{Answer, FormQuestion, Kind, Origin, Priority, Reply, Request, Status};

/// The body of `POST /api/v1/requests`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateRequest {
    /// What to ask.
    #[serde(alias = "question")]
    pub content: String,
    /// text, yesno, select, multiselect, approval, permission (or a seed 004 type).
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// The choices of select and multiselect.
    #[serde(default, alias = "choices")]
    pub options: Vec<String>,
    /// The questions of a `questions` request (AskUserQuestion's shape).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub questions: Vec<FormQuestion>,
    /// Seconds to wait; 0 for ever (default 300).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "whole_seconds"
    )]
    pub timeout: Option<u64>,
    /// normal, high or urgent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<Priority>,
    /// Context for the human.
    #[serde(default)]
    pub context: Value,
    /// The asking agent's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    /// Its name for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_name: Option<String>,
    /// Where the agent works.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub working_dir: Option<String>,
    /// A repeat with the same key returns the first request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
    /// Free-form labels.
    #[serde(default)]
    pub metadata: Map<String, Value>,
    /// The way the asker came when one of hitl's own adapters asks over HTTP (`hook`,
    /// `mcp`, …); `http` when absent. Never `spool`: spool questions are files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<Origin>,
}

impl CreateRequest {
    /// The body that asks `r` (its id is the server's to choose), come by `origin`.
    pub fn from_request(r: &Request, origin: Origin, idempotency_key: &str) -> CreateRequest {
        CreateRequest {
            content: r.content.clone(),
            kind: Some(r.kind.as_str().to_string()),
            options: r.options.clone(),
            questions: r.questions.clone(),
            timeout: Some(r.timeout.unwrap_or(0)),
            priority: Some(r.priority),
            context: r.context.clone(),
            agent_id: Some(r.agent_id.clone()),
            agent_name: Some(r.agent_name.clone()),
            working_dir: r.working_dir.clone(),
            idempotency_key: Some(idempotency_key.to_string()),
            metadata: Map::new(),
            origin: (origin != Origin::Http).then_some(origin),
        }
    }
}

/// A responder's body: seed 004's fields plus `answer` and `choices` for the native
/// kinds. Unknown fields are ignored, as seed clients send extra ones.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
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
    pub answers: Option<Value>,
    /// Approve or deny an approval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approved: Option<bool>,
    /// "Always allow this here", with an approval: `true` for the rule the request
    /// offers, or a rule of the human's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub always: Option<Value>,
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
                body.always = remember.clone().map(Value::String);
            }
            Reply::Cancel { reason } => {
                body.cancelled = Some(true);
                body.comment = reason.clone();
            }
        }
        body
    }
}

/// How a request stands, as `/api/v1/requests` shows it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RequestView {
    /// Its id.
    pub id: String,
    /// Where it stands.
    pub status: Status,
    /// How it was asked.
    pub origin: Origin,
    /// The request.
    pub request: Request,
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

/// What `POST /api/v1/requests/{id}/respond` and `/cancel` return.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Responded {
    /// Always true.
    pub success: bool,
    /// The request's id.
    pub id: String,
    /// The answer delivered.
    pub answer: Answer,
    /// `delivered`, `pending_poll` or `no_websocket`.
    pub delivery_status: String,
}

/// Seconds as any JSON number with no fraction (`30` or `30.0`: JSON does not tell
/// them apart, and neither do JSON Schema's integers).
fn whole_seconds<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    let Some(n) = Option::<serde_json::Number>::deserialize(d)? else {
        return Ok(None);
    };
    if let Some(u) = n.as_u64() {
        return Ok(Some(u));
    }
    match n.as_f64() {
        Some(f) if f >= 0.0 && f.fract() == 0.0 && f <= u64::MAX as f64 => Ok(Some(f as u64)),
        _ => Err(serde::de::Error::custom(format!(
            "timeout {n} is not a whole number of seconds"
        ))),
    }
}
