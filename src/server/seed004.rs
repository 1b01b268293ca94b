//! Seed 004's `humanInTheLoop` vocabulary, translated to and from the broker's own
//! [`Request`], [`Reply`] and [`Answer`]. Pure functions: the routes do the I/O.
//!
//! Seed types map onto request kinds: `question` and `question_input` are text,
//! `choice` is select, `approval` and `permission` keep their names. The seed type is
//! kept in the request's metadata (`hitl_type`) so the answer goes back in the field
//! its client reads (`response`, `choice`, `approved`, `permission`).

use std::sync::Arc;

use serde::{Deserialize, Serialize, Serializer, ser::SerializeMap};
use serde_json::{Map, Value, json};

use crate::{
    api::{Always, RespondBody},
    protocol::{Answer, AnswerStatus, FormQuestion, Kind, Priority, Reply, Request, Status, form},
    store::{NewEvent, StoredEvent},
};

/// The `humanInTheLoop` object of `POST /events`. The API document's schema of it is
/// generated from this type, with the rules [`request_from_spec`] enforces.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(
    rename = "HumanInTheLoop",
    extend("allOf" = Kind::body_rules("choices"))
)]
pub struct HitlSpec {
    /// question, question_input, approval, permission or choice (also our own kinds).
    #[serde(rename = "type")]
    #[schemars(schema_with = "spec_schema::kind")]
    pub kind: String,
    /// What to ask.
    #[schemars(regex(pattern = r"\S"))]
    pub question: String,
    /// Where the agent listens for its answer, if anywhere.
    #[serde(default)]
    pub response_web_socket_url: Option<String>,
    /// Seconds to wait (default 300; 120 for approvals and permissions).
    #[serde(default)]
    #[schemars(range(min = 0, max = crate::protocol::MAX_TIMEOUT_SECS))]
    pub timeout: Option<f64>,
    /// Whether an answer is needed (default true).
    #[serde(default)]
    pub requires_response: Option<bool>,
    /// The options of a choice.
    #[serde(default)]
    pub choices: Option<Vec<String>>,
    /// The questions of a `questions` request (an extension: AskUserQuestion's shape).
    #[serde(default)]
    #[schemars(schema_with = "crate::protocol::body_schema::questions")]
    pub questions: Option<Vec<FormQuestion>>,
    /// Tool context for the human.
    #[serde(default)]
    pub context: Option<Value>,
    /// normal, high or urgent (an extension; the seed has none).
    #[serde(default)]
    #[schemars(schema_with = "crate::protocol::body_schema::priority")]
    pub priority: Option<String>,
}

/// The schemas of [`HitlSpec`]'s fields that its types alone do not say.
mod spec_schema {
    use schemars::{Schema, SchemaGenerator, json_schema};

    use crate::protocol::Kind;

    /// A kind's name or alias ([`Kind::NAMES`]), as [`Kind::parse`] reads it.
    pub fn kind(_: &mut SchemaGenerator) -> Schema {
        let names: Vec<&str> = Kind::NAMES.iter().map(|(n, _)| *n).collect();
        json_schema!({ "type": "string", "enum": names })
    }
}

/// The longest timeout accepted, in seconds (a week).
const MAX_TIMEOUT: f64 = crate::protocol::MAX_TIMEOUT_SECS as f64;

/// Builds the request an event's `humanInTheLoop` asks for. Its id is filled in
/// when the store has given the event its id.
pub fn request_from_spec(
    spec: &HitlSpec,
    source_app: &str,
    session_id: &str,
) -> Result<Request, String> {
    let kind = Kind::parse(&spec.kind).ok_or_else(|| {
        format!(
            "humanInTheLoop.type {:?} is not one of question, question_input, approval, \
             permission, choice",
            spec.kind
        )
    })?;
    if spec.question.trim().is_empty() {
        return Err("humanInTheLoop.question is empty".into());
    }
    let options = spec.choices.clone().unwrap_or_default();
    if kind.needs_options() && options.is_empty() {
        return Err(format!(
            "a {} request needs humanInTheLoop.choices (at least one)",
            spec.kind
        ));
    }
    let timeout = match spec.timeout {
        None => Some(if kind.is_approval() { 120 } else { 300 }),
        Some(t) if t.is_finite() && (0.0..=MAX_TIMEOUT).contains(&t) => {
            Some(t.ceil() as u64).filter(|&t| t > 0)
        }
        Some(t) => {
            return Err(format!(
                "humanInTheLoop.timeout {t} is not a number of seconds between 0 and {MAX_TIMEOUT}"
            ));
        }
    };
    let priority = match &spec.priority {
        None => Priority::Normal,
        Some(p) => Priority::parse(p)
            .ok_or_else(|| format!("priority {p:?} is not normal, high or urgent"))?,
    };
    let mut metadata = Map::new();
    metadata.insert("hitl_type".into(), json!(spec.kind));
    metadata.insert("source_app".into(), json!(source_app));
    metadata.insert("session_id".into(), json!(session_id));
    if let Some(url) = &spec.response_web_socket_url {
        metadata.insert("response_websocket_url".into(), json!(url));
    }
    if spec.requires_response == Some(false) {
        metadata.insert("requires_response".into(), json!(false));
    }
    // The session id names the agent; ids follow the one rule whatever a client
    // sends (the original stays in the metadata).
    let agent_id = crate::protocol::id_from(session_id, 128, "unknown");
    let request = Request {
        options,
        questions: spec.questions.clone().unwrap_or_default(),
        priority,
        timeout,
        context: spec.context.clone().unwrap_or(Value::Null),
        metadata,
        ..Request::new(agent_id, source_app, kind, spec.question.clone())
    };
    match request.shape_error() {
        Some(why) => Err(format!("humanInTheLoop: {why}")),
        None => Ok(request),
    }
}

/// The seed type of a request: the one it was made with, else its kind's name.
pub fn seed_type(r: &Request) -> String {
    match r.metadata.get("hitl_type").and_then(Value::as_str) {
        Some(t) => t.to_string(),
        None => r.kind.seed004_name().into(),
    }
}

/// Turns a responder's body into a reply for `r`, or says which field `r` needs.
pub fn reply_for(r: &Request, body: &RespondBody) -> Result<Reply, String> {
    if body.cancelled == Some(true) {
        return Ok(Reply::Cancel {
            reason: body.comment.clone(),
        });
    }
    let text = body.response.as_ref().or(body.answer.as_ref());
    let kind = seed_type(r);
    match r.kind {
        Kind::Approval | Kind::Permission => {
            let decision = if r.kind == Kind::Permission {
                body.permission.or(body.approved)
            } else {
                body.approved.or(body.permission)
            };
            let field = if r.kind == Kind::Permission {
                "permission"
            } else {
                "approved"
            };
            let approved = match (decision, text) {
                (Some(d), _) => d,
                (None, Some(t)) => match r.interpret(t)? {
                    Reply::Approval { approved, .. } => approved,
                    _ => unreachable!("approvals interpret to approvals"),
                },
                (None, None) => {
                    return Err(format!(
                        "a {kind} request is answered with \"{field}\": true or false (or \"cancelled\": true)"
                    ));
                }
            };
            let remember = match &body.always {
                None | Some(Always::Offered(false)) => None,
                Some(Always::Offered(true)) => Some(
                    r.always_allow()
                        .ok_or("this request offers no rule to always allow")?
                        .to_string(),
                ),
                Some(Always::Rule(rule)) => Some(rule.clone()),
            };
            Ok(Reply::Approval {
                approved,
                comment: body.comment.clone(),
                remember,
            })
        }
        Kind::Select => {
            let picked = body.choice.as_ref().or(text).ok_or_else(|| {
                format!(
                    "a {kind} request is answered with \"choice\": one of {:?}",
                    r.options
                )
            })?;
            if !r.options.iter().any(|o| o == picked) {
                return Err(format!(
                    "\"choice\": {picked:?} is not one of the options {:?}",
                    r.options
                ));
            }
            Ok(Reply::Text(picked.clone()))
        }
        Kind::Multiselect => {
            let picked = body.choices.clone().ok_or_else(|| {
                format!(
                    "a multiselect request is answered with \"choices\": some of {:?}",
                    r.options
                )
            })?;
            if let Some(bad) = picked.iter().find(|p| !r.options.contains(p)) {
                return Err(format!("{bad:?} is not one of the options {:?}", r.options));
            }
            Ok(Reply::Choices(picked))
        }
        Kind::Yesno => {
            let t =
                text.ok_or("a yesno request is answered with \"response\": \"yes\" or \"no\"")?;
            r.interpret(t)
        }
        Kind::Questions => {
            let given = body.answers.as_ref().ok_or(
                "a questions request is answered with \"answers\": one per question, or an \
                 object from each question to its answer",
            )?;
            let answers = match given {
                Value::Object(map) => form::answers_from_map(&r.questions, map)?,
                Value::Array(list) => {
                    let keyed = r
                        .questions
                        .iter()
                        .map(|q| q.question.clone())
                        .zip(list.iter().cloned())
                        .collect();
                    if list.len() != r.questions.len() {
                        return Err(format!(
                            "\"answers\" holds {} answers for {} questions",
                            list.len(),
                            r.questions.len()
                        ));
                    }
                    form::answers_from_map(&r.questions, &keyed)?
                }
                other => return Err(format!("\"answers\" is {other}, not a list or an object")),
            };
            Ok(Reply::Answers(answers))
        }
        // Every other kind is answered with text, read as the kind reads it.
        _ => {
            let t = text.ok_or_else(|| {
                format!(
                    "a {kind} request is answered with \"response\": text (or \"cancelled\": true)"
                )
            })?;
            r.interpret(t)
        }
    }
}

/// A stable key for one answer, the same on every replica: clients use it to drop a
/// response they get twice (once over their WebSocket, once by polling).
///
/// A UUID v5 (SHA-1, RFC 9562) of the request id, the answer's time and who gave it:
/// the same bytes on every build and toolchain, unlike std's `DefaultHasher`, whose
/// output may change between Rust releases.
pub fn idempotency_key(request_id: &str, a: &Answer) -> String {
    let name = format!(
        "{request_id}\n{}\n{}",
        a.timestamp.as_nanosecond(),
        a.responded_by
    );
    uuid::Uuid::new_v5(&ANSWER_KEYS, name.as_bytes()).to_string()
}

/// The namespace of answers' idempotency keys: any fixed UUID would do; this one must
/// never change, or replicas of different versions would disagree.
const ANSWER_KEYS: uuid::Uuid = uuid::Uuid::from_u128(0x3c1f_6f0e_2b7a_5d4c_9e8f_1a2b_3c4d_5e6f);

/// Seed 004's HumanInTheLoopResponse for an answer to `r`, as a JSON value (see
/// [`ResponseData`]).
pub fn response_data(r: &Request, event_id: Option<i64>, a: &Answer) -> Value {
    serde_json::to_value(ResponseData::new(r, event_id, a)).unwrap_or(Value::Null)
}

/// Seed 004's HumanInTheLoopResponse for an answer: what is pushed to the agent,
/// what its poll returns in `data`, and the `response` of the event's status. The
/// answer goes in the field its client reads (`response`, `choice`, `choices`,
/// `approved` or `permission`, `answers`). Serialised straight from the answer: on
/// the answer and poll routes, building it as a map of values was a tenth of the
/// server's own work.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResponseData<'a> {
    /// The answer's idempotency key ([`idempotency_key`]).
    pub idempotency_key: String,
    responded_at: i64,
    responded_by: &'a str,
    status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    event_id: Option<i64>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    cancelled: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    permission: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    approved: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    choice: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    choices: Option<&'a [String]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    answers: Option<&'a Map<String, Value>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    response: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    comment: Option<&'a str>,
}

/// An empty `answers` object, for a `questions` answer that has none.
static NO_ANSWERS: std::sync::LazyLock<Map<String, Value>> = std::sync::LazyLock::new(Map::new);

impl<'a> ResponseData<'a> {
    /// The response object for answer `a` to `r` (made by event `event_id`, if any).
    pub fn new(r: &Request, event_id: Option<i64>, a: &'a Answer) -> ResponseData<'a> {
        let mut data = ResponseData {
            idempotency_key: idempotency_key(&r.id, a),
            responded_at: a.timestamp.as_millisecond(),
            responded_by: &a.responded_by,
            status: a.status.as_str(),
            event_id,
            cancelled: a.status == AnswerStatus::Cancelled,
            permission: None,
            approved: None,
            choice: None,
            choices: None,
            answers: None,
            response: None,
            comment: a.comment.as_deref(),
        };
        if a.status == AnswerStatus::Answered {
            match r.kind {
                Kind::Approval | Kind::Permission => {
                    let approved = Some(a.approved.unwrap_or(false));
                    if seed_type(r) == "permission" {
                        data.permission = approved;
                    } else {
                        data.approved = approved;
                    }
                }
                Kind::Select => data.choice = Some(&a.content),
                Kind::Multiselect => data.choices = Some(a.choices.as_deref().unwrap_or(&[])),
                Kind::Questions => {
                    data.answers = Some(a.answers.as_ref().unwrap_or(&NO_ANSWERS));
                    data.response = Some(&a.content);
                }
                // Every other kind's answer is its text.
                _ => data.response = Some(&a.content),
            }
        }
        data
    }
}

/// Seed 004's HumanInTheLoopStatus for a request in `status`, as a JSON value (see
/// [`HitlStatus`]).
pub fn status_object(status: Status, answer: Option<&Answer>, reason: Option<&str>) -> Value {
    serde_json::to_value(HitlStatus::new(status, answer, reason)).unwrap_or(Value::Null)
}

/// Seed 004's HumanInTheLoopStatus: `pending`, `responded`, `timeout` or `error`,
/// when and why, and the response itself once answered.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HitlStatus<'a> {
    status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    responded_at: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    timeout_at: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error_message: Option<&'a str>,
    /// The response, for an answered or cancelled request ([`HitlStatus::answered`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response: Option<ResponseData<'a>>,
}

impl<'a> HitlStatus<'a> {
    /// The status of a request in `status`, answered by `answer` (or timed out then),
    /// ended for `reason`; without the response.
    pub fn new(status: Status, answer: Option<&Answer>, reason: Option<&'a str>) -> HitlStatus<'a> {
        let name = match status {
            Status::Pending => "pending",
            Status::Answered | Status::Cancelled => "responded",
            Status::Timeout => "timeout",
            Status::Withdrawn | Status::Abandoned | Status::Rejected => "error",
        };
        let at = answer.map(|a| a.timestamp.as_millisecond());
        HitlStatus {
            status: name,
            responded_at: at,
            timeout_at: at.filter(|_| status == Status::Timeout),
            error_message: (name == "error").then(|| reason.unwrap_or(status.as_str())),
            response: None,
        }
    }

    /// The status with its response: for `answer` to `r` unless it timed out.
    pub fn answered(
        status: Status,
        r: &Request,
        event_id: Option<i64>,
        answer: Option<&'a Answer>,
        reason: Option<&'a str>,
    ) -> HitlStatus<'a> {
        HitlStatus {
            response: answer
                .filter(|_| status != Status::Timeout)
                .map(|a| ResponseData::new(r, event_id, a)),
            ..HitlStatus::new(status, answer, reason)
        }
    }
}

/// Seed 004's HookEvent for a stored event.
pub fn event_json(e: &StoredEvent) -> Value {
    let status = e.event.hitl.as_ref().map(|_| match &e.request {
        Some(r) => HitlStatus::answered(
            r.status,
            &r.request,
            Some(e.id),
            r.answer.as_ref(),
            r.reason.as_deref(),
        ),
        None => HitlStatus::new(Status::Pending, None, None),
    });
    new_event_json(e.id, &e.event, status.as_ref())
}

/// Seed 004's HookEvent for `event`, stored as event `id`; `status` is its request's
/// `humanInTheLoopStatus` (only an event with `humanInTheLoop` has one).
pub fn new_event_json(id: i64, event: &NewEvent, status: Option<&HitlStatus>) -> Value {
    let mut v = json!({
        "id": id,
        "source_app": event.source_app,
        "session_id": event.session_id,
        "hook_event_type": event.hook_event_type,
        "payload": event.payload,
        "timestamp": event.timestamp_ms,
    });
    for (k, x) in &event.extra {
        v[k.as_str()] = x.clone();
    }
    if let Some(h) = &event.hitl {
        v["humanInTheLoop"] = h.clone();
        v["humanInTheLoopStatus"] = status
            .and_then(|s| serde_json::to_value(s).ok())
            .unwrap_or_else(|| json!({ "status": "pending" }));
    }
    v
}

/// A request's seed 004 event with the status it ended in: the event as it was
/// made, its `humanInTheLoopStatus` replaced (added at the end if it had none).
/// Serialised without copying the event, which can be large.
pub struct EndedEvent<'a> {
    /// The event as it was made or stored.
    pub event: Arc<Value>,
    /// How its request ended.
    pub status: HitlStatus<'a>,
}

impl Serialize for EndedEvent<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let Some(fields) = self.event.as_object() else {
            return self.event.serialize(s);
        };
        let replaced = fields.contains_key(STATUS_FIELD);
        let mut map = s.serialize_map(Some(fields.len() + usize::from(!replaced)))?;
        for (k, v) in fields {
            if k == STATUS_FIELD {
                map.serialize_entry(k, &self.status)?;
            } else {
                map.serialize_entry(k, v)?;
            }
        }
        if !replaced {
            map.serialize_entry(STATUS_FIELD, &self.status)?;
        }
        map.end()
    }
}

const STATUS_FIELD: &str = "humanInTheLoopStatus";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ended_event_is_the_event_with_its_status_replaced_or_added() {
        let status = || HitlStatus::new(Status::Withdrawn, None, Some("went away"));
        let with_status = json!({
            "id": 3, "payload": { "b": [1, "x"] }, "humanInTheLoop": { "question": "q" },
            "humanInTheLoopStatus": { "status": "pending" }, "timestamp": 5,
        });
        let bare = json!({ "id": 3, "payload": {} });
        for event in [with_status, bare] {
            let mut want = event.clone();
            want["humanInTheLoopStatus"] = serde_json::to_value(status()).unwrap();
            let got = EndedEvent {
                event: Arc::new(event),
                status: status(),
            };
            assert_eq!(serde_json::to_string(&got).unwrap(), want.to_string());
        }
    }

    fn spec(kind: &str) -> HitlSpec {
        serde_json::from_value(json!({
            "type": kind, "question": "Proceed?", "responseWebSocketUrl": "ws://localhost:1",
            "choices": ["a", "b"]
        }))
        .unwrap()
    }

    #[test]
    fn seed_types_map_to_kinds_with_their_default_timeouts() {
        let r = request_from_spec(&spec("approval"), "app", "s1").unwrap();
        assert_eq!((r.kind, r.timeout), (Kind::Approval, Some(120)));
        let r = request_from_spec(&spec("question_input"), "app", "s1").unwrap();
        assert_eq!((r.kind, r.timeout), (Kind::Text, Some(300)));
        assert_eq!(seed_type(&r), "question_input");
        assert!(request_from_spec(&spec("poll"), "app", "s1").is_err());
    }

    #[test]
    fn each_type_wants_its_own_field() {
        let choice = request_from_spec(&spec("choice"), "app", "s").unwrap();
        let body = |v: Value| serde_json::from_value::<RespondBody>(v).unwrap();
        assert_eq!(
            reply_for(&choice, &body(json!({"choice": "b"}))),
            Ok(Reply::Text("b".into()))
        );
        assert!(reply_for(&choice, &body(json!({"choice": "z"}))).is_err());
        assert!(reply_for(&choice, &body(json!({"approved": true}))).is_err());
        let perm = request_from_spec(&spec("permission"), "app", "s").unwrap();
        assert!(matches!(
            reply_for(&perm, &body(json!({"permission": false}))),
            Ok(Reply::Approval {
                approved: false,
                ..
            })
        ));
        assert!(reply_for(&perm, &body(json!({"response": "maybe"}))).is_err());
        let any = reply_for(&perm, &body(json!({"cancelled": true})));
        assert!(matches!(any, Ok(Reply::Cancel { .. })));
    }

    #[test]
    fn a_form_is_answered_by_list_or_by_question_text() {
        let spec: HitlSpec = serde_json::from_value(json!({
            "type": "questions", "question": "Set-up",
            "questions": [
                { "question": "Which framework?", "options": [{ "label": "React" }, { "label": "Vue" }] },
                { "question": "Which db?", "multiSelect": true,
                  "options": [{ "label": "sqlite" }, { "label": "pg" }] }
            ]
        }))
        .unwrap();
        let form = request_from_spec(&spec, "app", "s").unwrap();
        assert_eq!(form.kind, Kind::Questions);
        let body = |v: Value| serde_json::from_value::<RespondBody>(v).unwrap();
        let answers = Reply::Answers(vec!["Vue".into(), "sqlite, pg".into()]);
        let want = Ok(answers.clone());
        assert_eq!(
            reply_for(&form, &body(json!({"answers": ["Vue", "sqlite, pg"]}))),
            want
        );
        assert_eq!(
            reply_for(
                &form,
                &body(
                    json!({"answers": {"Which framework?": "Vue", "Which db?": ["sqlite", "pg"]}})
                )
            ),
            want
        );
        let short = reply_for(&form, &body(json!({"answers": ["Vue"]}))).unwrap_err();
        assert!(short.contains("1 answers for 2 questions"), "{short}");
        let missing = reply_for(&form, &body(json!({"answers": {"Which db?": "pg"}}))).unwrap_err();
        assert!(missing.contains("Which framework?"), "{missing}");
        assert!(reply_for(&form, &body(json!({"response": "Vue"}))).is_err());
        let a = Answer::from_reply(&form, answers, "web");
        let d = response_data(&form, None, &a);
        assert_eq!(d["answers"]["Which db?"], "sqlite, pg");
        assert_eq!(
            d["response"],
            "Which framework?: Vue\nWhich db?: sqlite, pg"
        );
        let empty: HitlSpec =
            serde_json::from_value(json!({"type": "questions", "question": "q"})).unwrap();
        assert!(request_from_spec(&empty, "app", "s").is_err());
    }

    #[test]
    fn answers_go_back_in_the_field_the_client_reads() {
        let perm = request_from_spec(&spec("permission"), "app", "s").unwrap();
        let a = Answer::from_reply(
            &perm,
            Reply::Approval {
                approved: true,
                comment: Some("ok".into()),
                remember: None,
            },
            "web",
        );
        let d = response_data(&perm, Some(7), &a);
        assert_eq!(d["permission"], json!(true));
        assert_eq!(d["eventId"], json!(7));
        assert_eq!(d["idempotencyKey"], json!(idempotency_key(&perm.id, &a)));
        // Stable across builds and toolchains: a fixed input, a fixed key.
        let mut fixed = a.clone();
        fixed.timestamp = "2026-01-02T03:04:05Z".parse().unwrap();
        fixed.responded_by = "alice".into();
        let key = idempotency_key("42", &fixed);
        assert_eq!(key, "a5c12453-7acf-5192-993e-0c79075cf09b");
        assert_eq!(uuid::Uuid::parse_str(&key).unwrap().get_version_num(), 5);
    }

    /// The serialised response and status objects are, byte for byte, what building
    /// them as JSON maps gave (the shape seed 004's clients were tested against).
    #[test]
    fn response_and_status_keep_their_fields_and_order() {
        fn reference_data(r: &Request, event_id: Option<i64>, a: &Answer) -> Value {
            let mut data = json!({
                "idempotencyKey": idempotency_key(&r.id, a),
                "respondedAt": a.timestamp.as_millisecond(),
                "respondedBy": a.responded_by,
                "status": a.status.as_str(),
            });
            if let Some(id) = event_id {
                data["eventId"] = json!(id);
            }
            if a.status == AnswerStatus::Cancelled {
                data["cancelled"] = json!(true);
            }
            if a.status == AnswerStatus::Answered {
                match r.kind {
                    Kind::Approval | Kind::Permission => {
                        let field = if seed_type(r) == "permission" {
                            "permission"
                        } else {
                            "approved"
                        };
                        data[field] = json!(a.approved.unwrap_or(false));
                    }
                    Kind::Select => data["choice"] = json!(a.content),
                    Kind::Multiselect => {
                        data["choices"] = json!(a.choices.clone().unwrap_or_default())
                    }
                    Kind::Questions => {
                        data["answers"] = json!(a.answers.clone().unwrap_or_default());
                        data["response"] = json!(a.content);
                    }
                    _ => data["response"] = json!(a.content),
                }
            }
            if let Some(c) = &a.comment {
                data["comment"] = json!(c);
            }
            data
        }
        fn reference_status(
            status: Status,
            answer: Option<&Answer>,
            reason: Option<&str>,
        ) -> Value {
            let name = match status {
                Status::Pending => "pending",
                Status::Answered | Status::Cancelled => "responded",
                Status::Timeout => "timeout",
                Status::Withdrawn | Status::Abandoned | Status::Rejected => "error",
            };
            let mut v = json!({ "status": name });
            if let Some(a) = answer {
                v["respondedAt"] = json!(a.timestamp.as_millisecond());
                if status == Status::Timeout {
                    v["timeoutAt"] = json!(a.timestamp.as_millisecond());
                }
            }
            if name == "error" {
                v["errorMessage"] = json!(reason.unwrap_or(status.as_str()));
            }
            v
        }
        let kinds = [
            "question",
            "question_input",
            "approval",
            "permission",
            "choice",
            "yesno",
            "multiselect",
        ];
        let mut requests: Vec<Request> = kinds
            .iter()
            .map(|k| request_from_spec(&spec(k), "app", "s").unwrap())
            .collect();
        let form: HitlSpec = serde_json::from_value(json!({
            "type": "questions", "question": "q",
            "questions": [{ "question": "Which?", "options": [{ "label": "a" }, { "label": "b" }] }]
        }))
        .unwrap();
        requests.push(request_from_spec(&form, "app", "s").unwrap());
        let mut answers = Vec::new();
        for r in &requests {
            for body in [
                json!({ "response": "a", "approved": true, "choice": "a", "choices": ["a", "b"],
                        "answers": ["a"], "comment": "why" }),
                json!({ "response": "b", "approved": false, "choice": "b", "choices": [],
                        "answers": ["b"] }),
            ] {
                let body: RespondBody = serde_json::from_value(body).unwrap();
                if let Ok(reply) = reply_for(r, &body) {
                    answers.push((r, Answer::from_reply(r, reply, "web")));
                }
            }
            let cancel = Reply::Cancel {
                reason: Some("gone".into()),
            };
            answers.push((r, Answer::from_reply(r, cancel, "web")));
            answers.push((r, Answer::timeout(r)));
        }
        assert!(answers.len() > 2 * requests.len());
        for (r, a) in &answers {
            for event_id in [None, Some(7)] {
                assert_eq!(
                    serde_json::to_string(&ResponseData::new(r, event_id, a)).unwrap(),
                    reference_data(r, event_id, a).to_string()
                );
            }
            for status in Status::ALL {
                for (answer, reason) in [(Some(a), None), (None, Some("went away")), (None, None)] {
                    assert_eq!(
                        serde_json::to_string(&HitlStatus::new(status, answer, reason)).unwrap(),
                        reference_status(status, answer, reason).to_string()
                    );
                }
            }
        }
    }

    mod properties {
        use super::*;
        use proptest::prelude::*;

        /// Any JSON, with the field names the decoders look for among the keys.
        fn any_json() -> impl Strategy<Value = Value> {
            let key = prop_oneof![
                Just("type".to_string()),
                Just("question".to_string()),
                Just("choices".to_string()),
                Just("timeout".to_string()),
                Just("context".to_string()),
                Just("priority".to_string()),
                Just("response".to_string()),
                Just("choice".to_string()),
                Just("approved".to_string()),
                Just("permission".to_string()),
                Just("cancelled".to_string()),
                Just("comment".to_string()),
                Just("respondedBy".to_string()),
                Just("questions".to_string()),
                Just("answers".to_string()),
                Just("options".to_string()),
                Just("label".to_string()),
                "[a-zA-Z_]{1,10}",
            ];
            let leaf = prop_oneof![
                Just(Value::Null),
                any::<bool>().prop_map(Value::from),
                any::<i64>().prop_map(Value::from),
                any::<f64>().prop_map(
                    |f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)
                ),
                prop_oneof![
                    Just("question".to_string()),
                    Just("choice".to_string()),
                    Just("approval".to_string()),
                    Just("permission".to_string()),
                    Just("question_input".to_string()),
                    ".{0,12}",
                ]
                .prop_map(Value::from),
            ];
            leaf.prop_recursive(3, 40, 6, move |inner| {
                prop_oneof![
                    proptest::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
                    proptest::collection::btree_map(key.clone(), inner, 0..8)
                        .prop_map(|m| Value::Object(m.into_iter().collect())),
                ]
            })
        }

        proptest! {
            /// Whatever an agent sends as `humanInTheLoop` and whatever a responder
            /// sends back, decoding and translating either succeed or say why; they
            /// never panic.
            #[test]
            fn decoders_never_panic(spec in any_json(), body in any_json()) {
                if let Ok(spec) = serde_json::from_value::<HitlSpec>(spec)
                    && let Ok(r) = request_from_spec(&spec, "app", "s")
                    && let Ok(body) = serde_json::from_value::<RespondBody>(body)
                    && let Ok(reply) = reply_for(&r, &body)
                {
                    let a = Answer::from_reply(&r, reply, "p");
                    let _ = response_data(&r, Some(1), &a);
                    let _ = status_object(Status::Answered, Some(&a), None);
                }
            }

            /// Every kind refuses a body without its field with a message naming it.
            #[test]
            fn every_kind_says_what_it_needs(kind in prop_oneof![
                Just("question"), Just("question_input"), Just("approval"),
                Just("permission"), Just("choice"), Just("yesno"), Just("multiselect"),
            ]) {
                let spec: HitlSpec = serde_json::from_value(json!({
                    "type": kind, "question": "q", "choices": ["a", "b"]
                })).unwrap();
                let r = request_from_spec(&spec, "app", "s").unwrap();
                let e = reply_for(&r, &RespondBody::default()).unwrap_err();
                prop_assert!(e.contains('"'), "{}", e);
            }
        }
    }
}
