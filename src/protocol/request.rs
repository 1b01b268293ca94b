//! The canonical question and answer, and how a human's reply becomes an answer.

use std::fmt;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{
    Kind, Origin, VERSION,
    form::{self, FormQuestion},
    lenient,
};

/// How soon a question should be answered. Ordered: `Urgent` is the greatest. Read
/// by [`Priority::parse`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Priority {
    /// The default.
    #[default]
    Normal,
    /// Ahead of normal questions.
    High,
    /// Ahead of everything.
    Urgent,
}

impl Priority {
    /// The name used on the wire and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Priority::Normal => "normal",
            Priority::High => "high",
            Priority::Urgent => "urgent",
        }
    }

    /// Every name a priority is read by, its own first; `low` and `medium` are
    /// taken as normal, `critical` as urgent, and an empty name as the default.
    pub const NAMES: &'static [(&'static str, Priority)] = &[
        ("normal", Priority::Normal),
        ("low", Priority::Normal),
        ("medium", Priority::Normal),
        ("", Priority::Normal),
        ("high", Priority::High),
        ("urgent", Priority::Urgent),
        ("critical", Priority::Urgent),
    ];

    /// Reads a priority name ([`Priority::NAMES`]), ignoring case and spaces around.
    pub fn parse(s: &str) -> Option<Priority> {
        let s = s.trim();
        Priority::NAMES
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(s))
            .map(|&(_, p)| p)
    }
}

impl std::str::FromStr for Priority {
    type Err = String;
    fn from_str(s: &str) -> Result<Priority, String> {
        Priority::parse(s)
            .ok_or_else(|| format!("unknown priority {s:?}; expected normal, high or urgent"))
    }
}

impl schemars::JsonSchema for Priority {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Priority".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "enum": ["normal", "high", "urgent"],
            "description": "How soon it should be answered: urgent, then high, then normal.",
        })
    }
}

impl<'de> Deserialize<'de> for Priority {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Priority, D::Error> {
        lenient::by_name(d)
    }
}

impl fmt::Display for Priority {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The process waiting for an answer, so the broker can tell when it died.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Asker {
    /// Its process id.
    pub pid: u32,
    /// Its start time in clock ticks since boot (`/proc/PID/stat` field 22), when known;
    /// a different start time under the same pid means the pid was reused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<u64>,
}

/// A question from an agent, in the canonical v1 form.
///
/// The one definition of a request: question files, the native API's create body
/// (`api::CreateRequest` flattens it), stored requests and every view are
/// this type through serde. Its fields are read forgivingly ([`lenient`]), as agents
/// write them by hand; the fields a way in owns (`id`, `timestamp`, `created_by`…)
/// may be absent and are filled by that way in. Build one with [`Request::new`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(transform = body_schema::rules)]
pub struct Request {
    /// Always [`VERSION`].
    #[serde(default = "version")]
    pub version: u32,
    /// Unique within its project's spool; `[A-Za-z0-9_.-]{1,128}`. Empty until the
    /// way in gives it one (a file's name, the store's event id).
    #[serde(default, deserialize_with = "lenient::scalar_string")]
    #[schemars(schema_with = "body_schema::id")]
    pub id: String,
    /// The asking agent's stable id (over the API, empty or absent is `http`).
    #[serde(default, deserialize_with = "lenient::scalar_string")]
    #[schemars(schema_with = "body_schema::agent_id")]
    pub agent_id: String,
    /// A name for people, such as `Claude-41235`; the agent's id when it gave none.
    #[serde(default, deserialize_with = "lenient::null_as_default")]
    #[schemars(schema_with = "body_schema::agent_name")]
    pub agent_name: String,
    /// Where the agent works.
    #[serde(
        default,
        alias = "working_directory",
        skip_serializing_if = "Option::is_none"
    )]
    pub working_dir: Option<String>,
    /// When it was asked.
    #[serde(default = "Timestamp::now", deserialize_with = "lenient::timestamp")]
    #[schemars(schema_with = "body_schema::timestamp")]
    pub timestamp: Timestamp,
    /// What kind of reply it wants (default text; names are read ignoring case).
    #[serde(
        rename = "type",
        default,
        deserialize_with = "lenient::null_as_default"
    )]
    #[schemars(schema_with = "body_schema::kind")]
    pub kind: Kind,
    /// The question itself, exactly as the agent wrote it.
    #[schemars(regex(pattern = r"\S"))]
    pub content: String,
    /// Choices for select and multiselect.
    #[serde(
        default,
        deserialize_with = "lenient::option_texts",
        skip_serializing_if = "Vec::is_empty"
    )]
    #[schemars(schema_with = "body_schema::options")]
    pub options: Vec<String>,
    /// The questions of a `questions` request.
    #[serde(
        default,
        deserialize_with = "lenient::null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    #[schemars(schema_with = "body_schema::questions")]
    pub questions: Vec<FormQuestion>,
    /// The least a `number` answer may be.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub minimum: Option<serde_json::Number>,
    /// The most a `number` answer may be.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maximum: Option<serde_json::Number>,
    /// How soon it should be answered.
    #[serde(default, deserialize_with = "lenient::null_as_default")]
    #[schemars(schema_with = "body_schema::priority")]
    pub priority: Priority,
    /// Seconds the agent waits (a fraction rounds up); 0 waits for ever, and so does
    /// absent in a question file (over the API, absent is 300).
    #[serde(
        default,
        deserialize_with = "lenient::timeout",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(schema_with = "body_schema::timeout")]
    pub timeout: Option<u64>,
    /// Short words the asker files it under (`ci`, `frontend`): shown beside it in
    /// every UI and a filter of history. Each is trimmed and cut to
    /// [`Request::MAX_TAG_CHARS`]; empty ones and repeats are dropped, and at most
    /// [`Request::MAX_TAGS`] kept.
    #[serde(
        default,
        deserialize_with = "tags",
        skip_serializing_if = "Vec::is_empty"
    )]
    #[schemars(schema_with = "body_schema::tags")]
    pub tags: Vec<String>,
    /// How many different people must approve it, for an approval or a permission:
    /// 2 (up to [`Request::MAX_APPROVALS`]) for two-person approval. Every surface of
    /// this machine's user (terminal, TUI, dashboard, the user's phone, `hitl
    /// answer`) counts as one person; others are reached elsewhere (a Telegram
    /// group's members). One denial ends it.
    #[serde(
        default = "one_approval",
        deserialize_with = "lenient::approvals",
        skip_serializing_if = "is_one_approval"
    )]
    #[schemars(schema_with = "body_schema::approvals")]
    pub approvals: u32,
    /// Free-form context for the human (file, command, diff…).
    #[serde(default, skip_serializing_if = "is_empty_object")]
    pub context: Value,
    /// Free-form labels: an object (anything else is kept under the key
    /// `metadata`). A question file's fields this build does not know end here too.
    #[serde(
        default,
        deserialize_with = "lenient::metadata",
        skip_serializing_if = "Map::is_empty"
    )]
    #[schemars(schema_with = "body_schema::any")]
    pub metadata: Map<String, Value>,
    /// The waiting process, when the asker said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub asker: Option<Asker>,
    /// Who created it over HTTP, as the server saw the caller: [`CREATED_BY_USER`] (the
    /// token, or a loopback process of the server's own OS user), else another OS user
    /// of this machine (`uid 1001 (bob)`), whatever agent name it gave. Set by the
    /// server, never taken from a body or a file; absent for the spool, where only
    /// the user can write.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_by: Option<String>,
    /// Who asked: the kind of asker, shown by every UI and kept in history. A
    /// question file's is what it says (`"source": "hook"` from `hitl hook`), else the
    /// spool's own; the server sets it for every other way in (the create body's
    /// `origin`), never taking a body's `source`. Where the request lives, and so its
    /// way back, is the broker's business, not this.
    #[serde(
        rename = "source",
        default,
        deserialize_with = "lenient::source",
        skip_serializing_if = "Origin::is_spool"
    )]
    #[schemars(schema_with = "body_schema::any")]
    pub origin: Origin,
    /// Fields this build does not know, as they were sent. Never kept here: a
    /// question file's go into `metadata` ([`Request::complete`]), and the API
    /// refuses a body that has any.
    #[serde(flatten, skip_serializing)]
    #[schemars(skip)]
    pub unknown: Map<String, Value>,
}

fn version() -> u32 {
    VERSION
}

/// Reads [`Request::tags`]: an array of strings, or `null` for none.
fn tags<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    let tags: Option<Vec<String>> = Option::deserialize(d)
        .map_err(|_| serde::de::Error::custom("tags must be an array of strings"))?;
    Ok(Request::clean_tags(tags.unwrap_or_default()))
}

/// [`Request::created_by`] for the user's own callers.
pub const CREATED_BY_USER: &str = "user";

/// The longest another OS user's request waits: one it leaves (or that waits for
/// ever) times out and becomes history that retention sweeps, instead of holding
/// memory and the queue for good.
pub const OTHER_USER_MAX_TIMEOUT_SECS: u64 = 24 * 3600;

fn one_approval() -> u32 {
    1
}

fn is_one_approval(n: &u32) -> bool {
    *n <= 1
}

impl Request {
    /// The most approvals a request can need.
    pub const MAX_APPROVALS: u32 = 5;

    /// How many different people must approve it (1 unless it is an approval or a
    /// permission that asks for more).
    pub fn approvals_needed(&self) -> usize {
        match self.kind {
            Kind::Approval | Kind::Permission => {
                self.approvals.clamp(1, Request::MAX_APPROVALS) as usize
            }
            _ => 1,
        }
    }

    /// The most tags a request keeps.
    pub const MAX_TAGS: usize = 16;
    /// The most characters a tag keeps.
    pub const MAX_TAG_CHARS: usize = 64;
    /// The environment variable whose comma-separated tags every way of asking adds
    /// to its requests (`hitl ask`, `hitl hook`, `hitl mcp`): set it for an agent's
    /// session (`HITL_TAGS=frontend claude`) and all it asks is filed so.
    pub const TAGS_ENV: &str = "HITL_TAGS";

    /// Tags as a request keeps them (see [`Request::tags`]).
    pub fn clean_tags<S: AsRef<str>>(tags: impl IntoIterator<Item = S>) -> Vec<String> {
        let mut kept: Vec<String> = Vec::new();
        for tag in tags {
            let tag: String = tag
                .as_ref()
                .trim()
                .chars()
                .take(Request::MAX_TAG_CHARS)
                .collect();
            if !tag.is_empty() && !kept.contains(&tag) && kept.len() < Request::MAX_TAGS {
                kept.push(tag);
            }
        }
        kept
    }

    /// [`Request::TAGS_ENV`]'s tags, then `given`: the tags of a request this
    /// process asks.
    pub fn tags_with_env(given: &[String]) -> Vec<String> {
        let env = std::env::var(Request::TAGS_ENV).unwrap_or_default();
        let task = Request::task_of_session();
        Request::clean_tags(
            env.split(',')
                .chain(given.iter().map(String::as_str))
                .chain(task.as_deref()),
        )
    }

    /// The task this process's agent works on, when it runs in a task session: the
    /// session (`HITL_TASK_SESSION`) names it in `sessions/<name>.task` beside the
    /// runner's `events/` (`HITL_TASK_EVENTS`). A question it asks carries the task's
    /// id as a tag, so every UI names the task and the runner knows it waits.
    pub fn task_of_session() -> Option<String> {
        let session = std::env::var("HITL_TASK_SESSION").ok()?;
        let events = std::env::var_os("HITL_TASK_EVENTS")?;
        if crate::protocol::validate_id(&session).is_err() {
            return None;
        }
        let file = std::path::Path::new(&events)
            .parent()?
            .join("sessions")
            .join(format!("{session}.task"));
        let id = std::fs::read_to_string(file).ok()?;
        let id = id.trim();
        (id.starts_with("task-") && crate::protocol::is_valid_id(id)).then(|| id.to_string())
    }

    /// A `kind` question asking `content`, from the agent `agent_id` (shown as
    /// `agent_name`), asked now, with every other field at its default: no id yet
    /// (the way in gives it one), normal priority, waiting for ever. Set the rest
    /// with struct update syntax: `Request { options, ..Request::new(…) }`.
    pub fn new(
        agent_id: impl Into<String>,
        agent_name: impl Into<String>,
        kind: Kind,
        content: impl Into<String>,
    ) -> Request {
        Request {
            version: VERSION,
            id: String::new(),
            agent_id: agent_id.into(),
            agent_name: agent_name.into(),
            working_dir: None,
            timestamp: Timestamp::now(),
            kind,
            content: content.into(),
            options: Vec::new(),
            questions: Vec::new(),
            minimum: None,
            maximum: None,
            priority: Priority::Normal,
            timeout: None,
            tags: Vec::new(),
            approvals: 1,
            context: Value::Null,
            metadata: Map::new(),
            asker: None,
            created_by: None,
            origin: Origin::Spool,
            unknown: Map::new(),
        }
    }

    /// Who else than the user created it, if someone did: shown beside it in every
    /// view, so a request another OS user made in an agent's name is not mistaken for
    /// the agent's.
    pub fn created_by_other(&self) -> Option<&str> {
        self.created_by.as_deref().filter(|c| *c != CREATED_BY_USER)
    }

    /// Records who created it over HTTP ([`Request::created_by`]). A request another
    /// OS user made can never pass for one of the user's agents: its agent id and
    /// name carry that user (`uid1001bob-claude-1a2b`, `Claude 1a2b [uid 1001 (bob)]`),
    /// so it neither joins an agent's requests nor reads like one.
    pub fn set_creator(&mut self, who: String) {
        if who != CREATED_BY_USER {
            let tag: String = who
                .chars()
                .filter(char::is_ascii_alphanumeric)
                .take(40)
                .collect();
            let id = format!("{tag}-{}", self.agent_id);
            self.agent_id = id.chars().take(128).collect();
            self.agent_name = format!("{} [{who}]", self.agent_name);
        }
        self.created_by = Some(who);
    }

    /// What every UI shows beside the question, in this order, each a short word:
    /// its priority unless normal, then its tags as `#tag`. `hitl pending`, the terminal prompt and (as views'
    /// `labels`) the dashboard show these and nothing else about it, so a field added
    /// here is shown everywhere.
    pub fn labels(&self) -> Vec<String> {
        let mut labels = Vec::new();
        if self.priority != Priority::Normal {
            labels.push(self.priority.as_str().to_string());
        }
        labels.extend(self.tags.iter().map(|t| format!("#{t}")));
        labels
    }
}

fn is_empty_object(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Object(m) => m.is_empty(),
        _ => false,
    }
}

impl Request {
    /// The rule an approval may add to always allow calls like this one here
    /// ("always allow this here"), if the asker offers one (`context.always_allow`).
    pub fn always_allow(&self) -> Option<&str> {
        self.context
            .get("always_allow")
            .and_then(Value::as_str)
            .filter(|r| !r.trim().is_empty())
    }

    /// When the broker gives up on it, if it has a timeout.
    pub fn deadline(&self) -> Option<Timestamp> {
        // Another OS user's request never waits for ever: one it left behind (from
        // before its share was enforced too) times out, and retention sweeps it.
        let secs = match (self.timeout.filter(|&t| t > 0), self.created_by_other()) {
            (Some(t), Some(_)) => t.min(OTHER_USER_MAX_TIMEOUT_SECS),
            (None, Some(_)) => OTHER_USER_MAX_TIMEOUT_SECS,
            (t, None) => t?,
        };
        self.timestamp
            .checked_add(jiff::SignedDuration::from_secs(
                secs.min(i64::MAX as u64) as i64
            ))
            .ok()
    }
}

/// A human's decision on one question, before it is written as an [`Answer`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// Text for text, yes/no and select questions.
    Text(String),
    /// The chosen options of a multiselect question.
    Choices(Vec<String>),
    /// One answer per question of a `questions` request, in order: an option's
    /// label, several joined by ", ", or the human's own text.
    Answers(Vec<String>),
    /// Approve or deny.
    Approval {
        /// True to approve.
        approved: bool,
        /// Why, if the human said.
        comment: Option<String>,
        /// "Always allow this here": the rule to remember, with an approval of a
        /// request that offers one ([`Request::always_allow`]).
        remember: Option<String>,
    },
    /// The human declined to answer.
    Cancel {
        /// Why, if the human said.
        reason: Option<String>,
    },
}

/// How a question ended, as written in its answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum AnswerStatus {
    /// A human answered (approvals and denials both count).
    Answered,
    /// Cancelled by a human, or refused by the broker as bad input.
    Cancelled,
    /// Nobody answered in time.
    Timeout,
}

impl AnswerStatus {
    /// The name used on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            AnswerStatus::Answered => "answered",
            AnswerStatus::Cancelled => "cancelled",
            AnswerStatus::Timeout => "timeout",
        }
    }
}

/// The canonical v1 answer. `content` and `answer` carry the same text because the two
/// seed formats read different fields; `cancelled` is what seed 000 checks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Answer {
    /// Always [`VERSION`].
    pub version: u32,
    /// The question's id.
    pub id: String,
    /// The asking agent's id.
    pub agent_id: String,
    /// When it was answered.
    #[schemars(with = "String")]
    pub timestamp: Timestamp,
    /// Always `"answer"` (seed 001 writes it).
    #[serde(rename = "type")]
    pub message_type: String,
    /// How the question ended.
    pub status: AnswerStatus,
    /// The answer's text.
    pub content: String,
    /// The same text, for readers of seed 000's format.
    pub answer: String,
    /// True unless a human answered.
    pub cancelled: bool,
    /// For approvals and permissions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approved: Option<bool>,
    /// A comment or reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
    /// For multiselect.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub choices: Option<Vec<String>>,
    /// For `questions`: each question's text to its answer (AskUserQuestion's
    /// `answers`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answers: Option<Map<String, Value>>,
    /// "Always allow this here": the rule the human chose to remember with an
    /// approval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remember: Option<String>,
    /// Who answered: `terminal`, `cli:USER`, `auto`, `broker` (timeouts, rejections)…
    pub responded_by: String,
}

impl Answer {
    fn base(id: &str, agent_id: &str, status: AnswerStatus, text: String, by: &str) -> Answer {
        Answer {
            version: VERSION,
            id: id.to_string(),
            agent_id: agent_id.to_string(),
            timestamp: Timestamp::now(),
            message_type: "answer".into(),
            status,
            answer: text.clone(),
            content: text,
            cancelled: status != AnswerStatus::Answered,
            approved: None,
            comment: None,
            choices: None,
            answers: None,
            remember: None,
            responded_by: by.to_string(),
        }
    }

    /// The answer a reply makes to `req`.
    pub fn from_reply(req: &Request, reply: Reply, responded_by: &str) -> Answer {
        let (id, agent) = (req.id.as_str(), req.agent_id.as_str());
        match reply {
            Reply::Text(t) => Answer::base(id, agent, AnswerStatus::Answered, t, responded_by),
            Reply::Choices(c) => Answer {
                choices: Some(c.clone()),
                ..Answer::base(
                    id,
                    agent,
                    AnswerStatus::Answered,
                    c.join(", "),
                    responded_by,
                )
            },
            Reply::Answers(a) => {
                // The text, for readers of the files: "question: answer" a line.
                let text = req
                    .questions
                    .iter()
                    .zip(&a)
                    .map(|(q, a)| format!("{}: {a}", q.question))
                    .collect::<Vec<_>>()
                    .join("\n");
                Answer {
                    answers: Some(form::answer_map(&req.questions, &a)),
                    ..Answer::base(id, agent, AnswerStatus::Answered, text, responded_by)
                }
            }
            Reply::Approval {
                approved,
                comment,
                remember,
            } => {
                let word = if approved { "approved" } else { "denied" };
                Answer {
                    approved: Some(approved),
                    comment,
                    remember,
                    ..Answer::base(id, agent, AnswerStatus::Answered, word.into(), responded_by)
                }
            }
            Reply::Cancel { reason } => Answer {
                approved: req.kind.is_approval().then_some(false),
                comment: reason,
                ..Answer::base(
                    id,
                    agent,
                    AnswerStatus::Cancelled,
                    String::new(),
                    responded_by,
                )
            },
        }
    }

    /// The answer the broker writes when `req` ran out of time.
    pub fn timeout(req: &Request) -> Answer {
        Answer {
            approved: req.kind.is_approval().then_some(false),
            comment: Some("no answer before the timeout".into()),
            ..Answer::base(
                &req.id,
                &req.agent_id,
                AnswerStatus::Timeout,
                String::new(),
                "broker",
            )
        }
    }

    /// The answer that tells an asker its question was refused as bad input.
    pub fn rejected(id: &str, agent_id: &str, reason: &str) -> Answer {
        Answer {
            comment: Some(reason.to_string()),
            ..Answer::base(
                id,
                agent_id,
                AnswerStatus::Cancelled,
                format!("ERROR: question rejected: {reason}"),
                "broker",
            )
        }
    }

    /// The exit code `hitl ask` ends with for this answer: 0 answered (and approved),
    /// 1 cancelled or denied, 2 timed out.
    pub fn exit_code(&self) -> u8 {
        match self.status {
            AnswerStatus::Answered if self.approved == Some(false) => 1,
            AnswerStatus::Answered => 0,
            AnswerStatus::Cancelled => 1,
            AnswerStatus::Timeout => 2,
        }
    }

    /// Pretty JSON, one field per line, as the seed scripts' line-based readers need.
    pub fn to_pretty_json(&self) -> Vec<u8> {
        let mut out = serde_json::to_vec_pretty(self).expect("answers always serialize");
        out.push(b'\n');
        out
    }
}

/// What [`Request`]'s fields take, as JSON Schema: the forgiving readings of
/// [`lenient`] and the rules the API holds a body to, so that the API document's
/// create body, generated from `Request`, allows exactly the bodies the server takes.
pub(crate) mod body_schema {
    use schemars::{Schema, SchemaGenerator, json_schema};
    use serde_json::{Value, json};

    use super::{Kind, Priority};
    use crate::protocol::{MAX_TIMEOUT_SECS, form};

    /// The id rule ([`crate::protocol::validate_id`]): `[A-Za-z0-9_.-]{1,128}`, not
    /// `.` or `..`.
    pub const ID: &str = r"^(?!\.{1,2}$)[A-Za-z0-9_.-]{1,128}$";

    /// Anything.
    pub fn any(_: &mut SchemaGenerator) -> Schema {
        Schema::from(true)
    }

    /// A request's id: a valid id or a whole number.
    pub fn id(_: &mut SchemaGenerator) -> Schema {
        json_schema!({ "anyOf": [
            { "type": "string", "pattern": ID },
            { "type": "integer", "minimum": 0, "maximum": u64::MAX },
        ] })
    }

    /// The agent's id: empty or null is the way in's default (`http`).
    pub fn agent_id(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "anyOf": [
                { "type": "string", "pattern": ID },
                { "const": "" },
                { "type": "integer", "minimum": 0, "maximum": u64::MAX },
                { "type": "null" },
            ],
        })
    }

    /// A name for people: no control characters, at most 128 of them.
    pub fn agent_name(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": ["string", "null"],
            "maxLength": 128,
            "pattern": r"^[^\u0000-\u001f\u007f-\u009f]*$",
        })
    }

    /// RFC 3339 or a unix time.
    pub fn timestamp(_: &mut SchemaGenerator) -> Schema {
        json_schema!({ "type": ["string", "number"] })
    }

    /// An enum of `names` (read ignoring case), or null.
    fn names_or_null<T>(names: &[(&str, T)]) -> Value {
        let names: Vec<&str> = names.iter().map(|(n, _)| *n).collect();
        json!({ "anyOf": [{ "enum": names }, { "type": "null" }] })
    }

    /// A kind's name or alias ([`Kind::NAMES`]).
    pub fn kind(_: &mut SchemaGenerator) -> Schema {
        Schema::try_from(names_or_null(Kind::NAMES)).expect("an object")
    }

    /// A priority's name or alias ([`Priority::NAMES`]).
    pub fn priority(_: &mut SchemaGenerator) -> Schema {
        Schema::try_from(names_or_null(Priority::NAMES)).expect("an object")
    }

    /// Options as text or numbers.
    pub fn options(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": ["array", "null"],
            "items": { "type": ["string", "number"] },
        })
    }

    /// A form's questions (AskUserQuestion's shape).
    pub fn questions(generator: &mut SchemaGenerator) -> Schema {
        let form = form::questions_schema(generator);
        json_schema!({ "anyOf": [form, { "type": "null" }] })
    }

    /// Tags: strings (trimmed and cut, never refused), or null.
    pub fn tags(_: &mut SchemaGenerator) -> Schema {
        json_schema!({ "type": ["array", "null"], "items": { "type": "string" } })
    }

    /// How many people must approve: a whole number from 1 to 5, or null (1).
    pub fn approvals(_: &mut SchemaGenerator) -> Schema {
        json_schema!({ "type": ["integer", "null"], "minimum": 1, "maximum": 5 })
    }

    /// Seconds, a fraction rounding up.
    pub fn timeout(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": ["number", "null"],
            "minimum": 0,
            "maximum": MAX_TIMEOUT_SECS,
        })
    }

    /// `working_directory`, the other name of `working_dir` (never both), and what
    /// each kind asks of the other fields ([`Kind::body_rules`]).
    pub fn rules(schema: &mut Schema) {
        if let Some(Value::Object(props)) = schema.get_mut("properties")
            && let Some(dir) = props.get("working_dir").cloned()
        {
            let mut alias = dir;
            alias["description"] = "Another name of working_dir.".into();
            props.insert("working_directory".into(), alias);
        }
        let mut rules =
            vec![json!({ "not": { "required": ["working_dir", "working_directory"] } })];
        rules.extend(Kind::body_rules("options"));
        schema.insert("allOf".into(), Value::Array(rules));
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn approvals_are_a_whole_number_from_one_to_five_and_count_for_approvals_only() {
        let read = |v: Value| {
            let mut q = json!({ "id": "q", "agent_id": "a", "content": "?", "type": "approval" });
            q["approvals"] = v;
            serde_json::from_value::<Request>(q)
        };
        assert_eq!(read(json!(2)).unwrap().approvals_needed(), 2);
        assert_eq!(read(json!(2.0)).unwrap().approvals, 2);
        assert_eq!(read(Value::Null).unwrap().approvals, 1);
        for bad in [json!(0), json!(6), json!(1.5), json!("2")] {
            let e = read(bad.clone()).unwrap_err().to_string();
            assert!(e.contains("from 1 to 5"), "{bad}: {e}");
        }
        let text = Request {
            approvals: 3,
            ..Request::new("a", "A", Kind::Text, "?")
        };
        assert_eq!(text.approvals_needed(), 1);
        // Written only when more than one.
        let one = serde_json::to_value(Request::new("a", "A", Kind::Approval, "?")).unwrap();
        assert!(one.get("approvals").is_none(), "{one}");
    }

    fn req(kind: Kind, options: &[&str]) -> Request {
        Request {
            id: "q1".into(),
            timestamp: Timestamp::UNIX_EPOCH,
            options: options.iter().map(|s| s.to_string()).collect(),
            timeout: Some(10),
            ..Request::new("a1", "A", kind, "?")
        }
    }

    #[test]
    fn exit_codes_follow_the_table() {
        let a = req(Kind::Approval, &[]);
        let ok = Answer::from_reply(&a, a.auto_reply(""), "auto");
        assert_eq!(ok.exit_code(), 0);
        let denied = Answer::from_reply(
            &a,
            Reply::Approval {
                approved: false,
                comment: None,
                remember: None,
            },
            "t",
        );
        assert_eq!(denied.exit_code(), 1);
        assert_eq!(Answer::timeout(&a).exit_code(), 2);
        let c = Answer::from_reply(&a, Reply::Cancel { reason: None }, "t");
        assert_eq!(c.exit_code(), 1);
        assert!(c.cancelled);
    }

    #[test]
    fn answers_are_one_field_per_line() {
        let r = req(Kind::Text, &[]);
        let a = Answer::from_reply(&r, Reply::Text("line1\nline2 true".into()), "t");
        let text = String::from_utf8(a.to_pretty_json()).unwrap();
        let cancelled = text.lines().find(|l| l.contains("\"cancelled\"")).unwrap();
        assert_eq!(cancelled.trim(), "\"cancelled\": false,");
        assert!(
            text.lines()
                .any(|l| l.trim() == r#""content": "line1\nline2 true","#)
        );
    }

    #[test]
    fn another_users_request_never_waits_for_ever() {
        let mut r = req(Kind::Text, &[]);
        r.timeout = None;
        assert_eq!(r.deadline(), None, "the user's own may wait for ever");
        r.set_creator("uid 65534 (nobody)".into());
        let day = jiff::SignedDuration::from_secs(OTHER_USER_MAX_TIMEOUT_SECS as i64);
        assert_eq!(r.deadline(), r.timestamp.checked_add(day).ok());
        r.timeout = Some(7 * 86_400);
        assert_eq!(r.deadline(), r.timestamp.checked_add(day).ok());
        r.timeout = Some(60);
        assert_eq!(
            r.deadline(),
            r.timestamp
                .checked_add(jiff::SignedDuration::from_secs(60))
                .ok()
        );
        assert!(
            r.agent_id.starts_with("uid65534nobody-")
                && r.agent_name.ends_with("[uid 65534 (nobody)]")
        );
    }
}
