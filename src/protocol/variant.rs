//! Readers for the question formats agents already write, and where each expects its
//! answer. Four shapes exist in the wild (docs/PROTOCOL.md, "The older formats"):
//!
//! | variant         | question file                   | text field | answer file                   |
//! |-----------------|---------------------------------|------------|-------------------------------|
//! | canonical       | `questions/<id>.json`           | `content`  | `answers/<id>.json`           |
//! | seed 000        | `questions/<id>.json`           | `question` | `answers/<id>.json`           |
//! | seed 001        | `questions/q_<agent>_….json`    | `content`  | `answers/a_<agent>_<id>.json` |
//! | claude-helpers  | `questions/<agent_id>.json`     | `prompt`   | `answers/<agent_id>.json`     |
//!
//! The canonical answer carries every field any of them reads, so only the path differs,
//! except that claude-helpers takes an answer starting with `ERROR:` as a failure.

use jiff::Timestamp;
use serde_json::Value;
use thiserror::Error;

use super::{Answer, AnswerStatus, Kind, Request, VERSION, id::validate_id, now};

/// Which format a question arrived in; decides the answer's path and shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Variant {
    /// Written by `hitl ask` or the generated script (`version: 1`, `content`).
    Canonical,
    /// Seed 000's script: `question` field, `queue/<id>.queue` marker.
    Seed000,
    /// Seed 001's script: `q_…` file names, answers at `a_<agent_id>_<id>.json`.
    Seed001,
    /// claude-helpers 0.2.x from PyPI: `prompt`, one file per agent.
    ClaudeHelpers,
}

impl Variant {
    /// The name stored in history.
    pub fn as_str(self) -> &'static str {
        match self {
            Variant::Canonical => "canonical",
            Variant::Seed000 => "seed000",
            Variant::Seed001 => "seed001",
            Variant::ClaudeHelpers => "claude-helpers",
        }
    }

    /// Reads a name written by [`Variant::as_str`].
    pub fn parse(s: &str) -> Option<Variant> {
        [
            Variant::Canonical,
            Variant::Seed000,
            Variant::Seed001,
            Variant::ClaudeHelpers,
        ]
        .into_iter()
        .find(|v| v.as_str() == s)
    }

    /// The file name, inside `answers/`, that the asker of `req` waits for.
    pub fn answer_file_name(self, id: &str, agent_id: &str) -> String {
        match self {
            Variant::Canonical | Variant::Seed000 => format!("{id}.json"),
            Variant::Seed001 => format!("a_{agent_id}_{id}.json"),
            Variant::ClaudeHelpers => format!("{agent_id}.json"),
        }
    }

    /// The bytes of `answer` in the form this variant's readers understand.
    pub fn render_answer(self, answer: &Answer) -> Vec<u8> {
        if self == Variant::ClaudeHelpers && answer.status != AnswerStatus::Answered {
            let mut a = answer.clone();
            if !a.answer.starts_with("ERROR:") {
                a.answer = format!(
                    "ERROR: {}",
                    a.comment.as_deref().unwrap_or(a.status.as_str())
                );
            }
            return a.to_pretty_json();
        }
        answer.to_pretty_json()
    }
}

/// Why a question file was refused. The text is shown to people and written beside the
/// file in `.helpers/rejected/`.
#[derive(Debug, Error, PartialEq)]
pub enum ParseError {
    /// The file was empty; it may still be being written.
    #[error("the file is empty")]
    Empty,
    /// Not JSON at all, or cut short.
    #[error("not valid JSON: {0}")]
    Json(String),
    /// JSON, but not an object.
    #[error("expected a JSON object, found {0}")]
    NotObject(&'static str),
    /// No `content`, `question` or `prompt`.
    #[error("no question text: expected a string field \"content\", \"question\" or \"prompt\"")]
    NoText,
    /// A field that is not what it must be (the wrong type, an unknown kind…).
    #[error("{field}: {reason}")]
    Invalid {
        /// Where, as a path (`timeout`, `questions[0].options`).
        field: String,
        /// What is wrong with it.
        reason: String,
    },
    /// An id that could escape its folder or is otherwise unusable.
    #[error("bad {field}: {reason}")]
    BadId {
        /// `id` or `agent_id`.
        field: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// A select question without options.
    #[error("a {0} question needs at least one option")]
    NoOptions(Kind),
    /// A `questions` request whose questions cannot be asked.
    #[error("{0}")]
    BadForm(String),
}

impl ParseError {
    /// True when the file may simply not be fully written yet.
    pub fn maybe_partial(&self) -> bool {
        match self {
            ParseError::Empty => true,
            ParseError::Json(msg) => msg.contains("EOF"),
            _ => false,
        }
    }
}

/// A question read from a file, with the format it came in.
#[derive(Debug, Clone, PartialEq)]
pub struct ParsedQuestion {
    /// The question in canonical form.
    pub request: Request,
    /// The format it arrived in.
    pub variant: Variant,
}

impl ParsedQuestion {
    /// The file name, inside `answers/`, its asker waits for.
    pub fn answer_file_name(&self) -> String {
        self.variant
            .answer_file_name(&self.request.id, &self.request.agent_id)
    }
}

/// Reads a question file's bytes. `file_stem` is its name without `.json`; it is the id
/// of a question that has none and tells seed 001's `q_` files apart. A question that
/// does not say when it was asked is dated now.
pub fn parse_question(bytes: &[u8], file_stem: &str) -> Result<ParsedQuestion, ParseError> {
    parse_question_at(bytes, file_stem, now())
}

/// [`parse_question`], dating a question that does not say when it was asked at
/// `undated` (its file's modification time: the same on every read, so a restart
/// does not make it a new question, and its age is true).
pub fn parse_question_at(
    bytes: &[u8],
    file_stem: &str,
    undated: Timestamp,
) -> Result<ParsedQuestion, ParseError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(ParseError::Empty);
    }
    let value: Value = match serde_json::from_slice(bytes) {
        Ok(v) => v,
        // Seed scripts paste text into heredocs, so a question with a newline or a tab
        // arrives as a raw control character inside a string. Escape those and retry.
        Err(first) => match repair_control_chars(bytes) {
            Some(fixed) => serde_json::from_slice(&fixed).map_err(|_| json_error(&first))?,
            None => return Err(json_error(&first)),
        },
    };
    let Value::Object(mut obj) = value else {
        return Err(ParseError::NotObject(type_name(&value)));
    };

    let (variant, text_field) = if obj.contains_key("content") {
        if file_stem.starts_with("q_") && !obj.contains_key("version") {
            (Variant::Seed001, "content")
        } else {
            (Variant::Canonical, "content")
        }
    } else if obj.contains_key("question") {
        (Variant::Seed000, "question")
    } else if obj.contains_key("prompt") {
        (Variant::ClaudeHelpers, "prompt")
    } else {
        return Err(ParseError::NoText);
    };
    // The older formats differ from the canonical one only in the name of the
    // question's text and what an absent id means: once renamed, serde reads them all.
    match obj.remove(text_field) {
        Some(text @ Value::String(_)) => obj.insert("content".into(), text),
        _ => return Err(ParseError::NoText),
    };
    if obj.get("timestamp").is_none_or(Value::is_null) {
        obj.insert("timestamp".into(), Value::String(undated.to_string()));
    }
    let mut request: Request =
        serde_path_to_error::deserialize(Value::Object(obj)).map_err(|e| ParseError::Invalid {
            field: e.path().to_string(),
            reason: e.inner().to_string(),
        })?;

    if request.id.is_empty() {
        request.id = file_stem.to_string();
    }
    validate_id(&request.id).map_err(|e| ParseError::BadId {
        field: "id",
        reason: e.to_string(),
    })?;
    if request.agent_id.is_empty() {
        request.agent_id = match variant {
            Variant::ClaudeHelpers => file_stem.to_string(),
            _ => "unknown".to_string(),
        };
    }
    validate_id(&request.agent_id).map_err(|e| ParseError::BadId {
        field: "agent_id",
        reason: e.to_string(),
    })?;
    if request.agent_name.is_empty() {
        request.agent_name = request.agent_id.clone();
    }
    request.version = VERSION;
    request.timeout = request.timeout.filter(|&t| t > 0);
    // Only a server says who created a request; a file cannot claim it.
    request.created_by = None;
    // Unknown fields are kept, never refused.
    let unknown = std::mem::take(&mut request.unknown);
    request.metadata.extend(unknown);
    if request.kind.needs_options() && request.options.is_empty() {
        return Err(ParseError::NoOptions(request.kind));
    }
    if request.kind == Kind::Questions {
        super::form::check(&request.questions).map_err(ParseError::BadForm)?;
    }
    Ok(ParsedQuestion { request, variant })
}

fn json_error(e: &serde_json::Error) -> ParseError {
    ParseError::Json(e.to_string())
}

/// What kind of JSON value `v` is, for messages ("a string", "an array"…).
pub(crate) fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Escapes raw control characters that appear inside JSON strings. Returns `None` when
/// there were none, so the caller keeps the original error.
fn repair_control_chars(bytes: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(bytes.len() + 16);
    let (mut in_string, mut escaped, mut changed) = (false, false, false);
    for &b in bytes {
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            } else if b < 0x20 {
                changed = true;
                match b {
                    b'\n' => out.extend_from_slice(b"\\n"),
                    b'\t' => out.extend_from_slice(b"\\t"),
                    b'\r' => out.extend_from_slice(b"\\r"),
                    _ => out.extend_from_slice(format!("\\u{b:04x}").as_bytes()),
                }
                continue;
            }
        } else if b == b'"' {
            in_string = true;
        }
        out.push(b);
    }
    changed.then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_seed_000() {
        let q = br#"{"id":"test123","agent_id":"test","timestamp":"2024-01-01T00:00:00","question":"Test question?","timeout":300,"metadata":{}}"#;
        let p = parse_question(q, "test123").unwrap();
        assert_eq!(p.variant, Variant::Seed000);
        assert_eq!(p.request.content, "Test question?");
        assert_eq!(p.request.timeout, Some(300));
        assert_eq!(p.answer_file_name(), "test123.json");
    }

    #[test]
    fn reads_seed_001_with_raw_newlines() {
        let q = b"{\n  \"id\": \"1738_42_42\",\n  \"agent_id\": \"agent_42\",\n  \"agent_name\": \"Claude-42\",\n  \"working_dir\": \"/p\",\n  \"timestamp\": 1738339200123456789,\n  \"type\": \"select\",\n  \"content\": \"Which\n\tone?\",\n  \"options\": [\"Express\",\"Fastify\"],\n  \"priority\": \"normal\",\n  \"answered\": false,\n  \"timeout\": 300\n}\n";
        let p = parse_question(q, "q_agent_42_1738_1738_42_42").unwrap();
        assert_eq!(p.variant, Variant::Seed001);
        assert_eq!(p.request.content, "Which\n\tone?");
        assert_eq!(p.request.kind, Kind::Select);
        assert_eq!(p.answer_file_name(), "a_agent_42_1738_42_42.json");
        assert_eq!(p.request.metadata["answered"], Value::Bool(false));
    }

    #[test]
    fn reads_claude_helpers() {
        let q = br#"{"type":"voice","agent_id":"agent_7","timestamp":1738339200.5,"prompt":"Say it","timeout":60,"metadata":{"k":1}}"#;
        let p = parse_question(q, "agent_7").unwrap();
        assert_eq!(p.variant, Variant::ClaudeHelpers);
        assert_eq!(p.request.id, "agent_7");
        assert_eq!(p.answer_file_name(), "agent_7.json");
        let a = Answer::rejected("agent_7", "agent_7", "bad");
        let body: Value = serde_json::from_slice(&p.variant.render_answer(&a)).unwrap();
        assert!(body["answer"].as_str().unwrap().starts_with("ERROR:"));
    }

    #[test]
    fn refuses_bad_input_with_reasons() {
        assert_eq!(parse_question(b"", "x"), Err(ParseError::Empty));
        assert!(
            parse_question(b"{\"content\":\"a", "x")
                .unwrap_err()
                .maybe_partial()
        );
        assert_eq!(
            parse_question(b"[1]", "x"),
            Err(ParseError::NotObject("an array"))
        );
        assert_eq!(parse_question(b"{}", "x"), Err(ParseError::NoText));
        assert_eq!(
            parse_question(br#"{"content":5}"#, "x"),
            Err(ParseError::NoText)
        );
        assert!(matches!(
            parse_question(br#"{"content":"a","id":"../../etc/passwd"}"#, "x"),
            Err(ParseError::BadId { field: "id", .. })
        ));
        assert!(matches!(
            parse_question(br#"{"content":"a","type":"poem"}"#, "x"),
            Err(ParseError::Invalid { field, .. }) if field == "type"
        ));
        assert!(matches!(
            parse_question(br#"{"content":"a","timeout":"soon"}"#, "x"),
            Err(ParseError::Invalid { field, .. }) if field == "timeout"
        ));
        assert!(matches!(
            parse_question(br#"{"content":"a","type":"select"}"#, "x"),
            Err(ParseError::NoOptions(Kind::Select))
        ));
        assert!(matches!(
            parse_question(b"\xff\xfe{", "x"),
            Err(ParseError::Json(_))
        ));
    }

    #[test]
    fn canonical_round_trip_keeps_unicode_and_unknown_fields() {
        let text = "\"\\\n\t$(rm -rf /) `id` Привет 🎉";
        let mut v = serde_json::json!({"version":1,"id":"abc","agent_id":"ag","agent_name":"Ag",
            "timestamp":"2026-11-22T10:00:00.123Z","type":"text","content":text,"extra":{"x":[1]}});
        let p = parse_question(serde_json::to_vec(&v).unwrap().as_slice(), "abc").unwrap();
        assert_eq!(p.variant, Variant::Canonical);
        assert_eq!(p.request.content, text);
        assert_eq!(p.request.metadata["extra"], v["extra"].take());
        let again = serde_json::to_vec(&p.request).unwrap();
        assert_eq!(parse_question(&again, "abc").unwrap().request, p.request);
    }

    mod properties {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            /// Any bytes at all: a question or a reason, never a panic.
            #[test]
            fn any_bytes_parse_or_say_why(bytes in proptest::collection::vec(any::<u8>(), 0..512),
                                          stem in "[a-z_0-9]{1,12}") {
                let _ = parse_question(&bytes, &stem);
            }

            /// Any JSON object: the same.
            #[test]
            fn any_json_object_parses_or_says_why(v in arb_json(3)) {
                let bytes = serde_json::to_vec(&serde_json::json!({"content": "x", "extra": v})).unwrap();
                prop_assert!(parse_question(&bytes, "q").is_ok());
                let bytes = serde_json::to_vec(&v).unwrap();
                let _ = parse_question(&bytes, "q");
            }

            /// Text comes back exactly, whatever it holds.
            #[test]
            fn content_round_trips(text in any::<String>(), opts in proptest::collection::vec(any::<String>(), 1..4)) {
                let v = serde_json::json!({"version": 1, "id": "a", "agent_id": "b",
                    "type": "select", "content": text, "options": opts});
                let p = parse_question(&serde_json::to_vec(&v).unwrap(), "a").unwrap();
                prop_assert_eq!(&p.request.content, &text);
                prop_assert_eq!(&p.request.options, &opts);
                let again = parse_question(&serde_json::to_vec(&p.request).unwrap(), "a").unwrap();
                prop_assert_eq!(again.request, p.request);
            }
        }

        fn arb_json(depth: u32) -> impl Strategy<Value = Value> {
            let leaf = prop_oneof![
                Just(Value::Null),
                any::<bool>().prop_map(Value::Bool),
                any::<i64>().prop_map(Value::from),
                any::<f64>()
                    .prop_filter("finite", |f| f.is_finite())
                    .prop_map(|f| serde_json::json!(f)),
                any::<String>().prop_map(Value::String),
            ];
            leaf.prop_recursive(depth, 32, 4, |inner| {
                prop_oneof![
                    proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                    proptest::collection::btree_map(
                        prop_oneof![
                            Just("content".to_string()),
                            Just("type".to_string()),
                            Just("id".to_string()),
                            Just("options".to_string()),
                            Just("timeout".to_string()),
                            Just("timestamp".to_string()),
                            Just("asker".to_string()),
                            Just("prompt".to_string()),
                            Just("question".to_string()),
                            any::<String>(),
                        ],
                        inner,
                        0..5,
                    )
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
                ]
            })
        }
    }
}
