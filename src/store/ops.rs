//! The writes history takes: each [`StoreOp`] and what it did ([`Outcome`]), and an
//! agent event as it is stored ([`NewEvent`]). The writers (`sqlite_writer`,
//! `pg_writer`) carry them out.

use serde::Serialize;

use crate::protocol::{Answer, Request, Status, Variant};

/// One write to history.
#[derive(Debug, Clone)]
pub enum StoreOp {
    /// A request was seen (recorded once; repeats are ignored).
    Asked {
        /// The project folder.
        project: String,
        /// The request.
        request: Box<Request>,
        /// The format it came in.
        variant: Variant,
    },
    /// The broker chose an answer and is about to deliver it. Recorded *before* the
    /// answer file is written, so a broker killed in between re-delivers this same
    /// answer at its next start instead of asking the human again.
    Delivering {
        /// The project folder.
        project: String,
        /// The request.
        request: Box<Request>,
        /// The format it came in.
        variant: Variant,
        /// The answer about to be written.
        answer: Box<Answer>,
    },
    /// A request ended.
    Finished {
        /// The project folder.
        project: String,
        /// The request (recorded too, in case it was never seen pending).
        request: Box<Request>,
        /// The format it came in.
        variant: Variant,
        /// How it ended.
        status: Status,
        /// The answer written, if any.
        answer: Option<Box<Answer>>,
        /// Why, for states without an answer (abandoned, rejected, withdrawn).
        reason: Option<String>,
    },
    /// A request made over HTTP, with the agent event that carried it. It is durable
    /// once this commits, and acknowledged only then. Its id is the event's id; a
    /// repeat with the same idempotency key creates nothing and reports the first.
    CreateRemote {
        /// The request (its id is filled in from the event's; its origin is never the
        /// spool's, which names the rows that live in question files).
        request: Box<Request>,
        /// The event that carried it.
        event: Box<NewEvent>,
    },
    /// An agent event without a request, for the activity feed.
    Event(Box<NewEvent>),
    /// A step of a request's trail: a notification sent and how it went, a vote.
    Trail(Box<TrailStep>),
    /// Ends a request made over HTTP if it is still pending. Of racing responders (on
    /// this broker or another replica) exactly one settles it: the outcome says which.
    Settle {
        /// The request's id.
        id: String,
        /// How it ended.
        status: Status,
        /// The answer, if any.
        answer: Option<Box<Answer>>,
        /// Why, for states without an answer.
        reason: Option<String>,
    },
}

/// What one [`StoreOp`] did, in the order the ops were given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Recorded; nothing to report.
    Done,
    /// An event (and its request, if any) was stored.
    Created {
        /// The event's id (also the request's, as text).
        event_id: i64,
        /// True when the idempotency key named an event stored before: nothing new
        /// was created and this is the first one's id.
        existing: bool,
    },
    /// A settle: `true` if this op ended the request, `false` if it had already ended.
    Settled(bool),
}

/// A step of a request's trail (the `trail` table): what hitl did about a request
/// besides asking and answering it.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct TrailStep {
    /// The request's id.
    pub id: String,
    /// When, milliseconds since the epoch.
    pub at_ms: i64,
    /// What happened: `notified` (a message sent to a person somewhere), `vote`.
    pub step: String,
    /// Where: `push`, `telegram`, `webhook`, `desktop`, …
    pub surface: String,
    /// The rest: to whom, delivered or the error, who voted.
    pub detail: serde_json::Value,
}

impl TrailStep {
    /// A notification about `id` sent on `surface` to `to` (said without its secret
    /// part), and how it went: `delivered`, or the `error`; `extra` fields beside.
    pub fn notified(
        id: &str,
        surface: &str,
        to: &str,
        outcome: Result<(), &str>,
        extra: serde_json::Value,
    ) -> TrailStep {
        let mut detail = serde_json::json!({ "to": to, "delivered": outcome.is_ok() });
        if let Err(why) = outcome {
            detail["error"] = why.into();
        }
        if let (Some(d), serde_json::Value::Object(more)) = (detail.as_object_mut(), extra) {
            d.extend(more);
        }
        TrailStep::now(id, "notified", surface, detail)
    }

    /// A step of `id`'s trail, now.
    pub fn now(id: &str, step: &str, surface: &str, detail: serde_json::Value) -> TrailStep {
        TrailStep {
            id: id.to_string(),
            at_ms: jiff::Timestamp::now().as_millisecond(),
            step: step.to_string(),
            surface: surface.to_string(),
            detail,
        }
    }
}

/// An agent event as POST /events receives it (seed 004's HookEvent).
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct NewEvent {
    /// The application that sent it.
    pub source_app: String,
    /// The agent's session.
    pub session_id: String,
    /// `PreToolUse`, `Notification`, …
    pub hook_event_type: String,
    /// The hook's own payload.
    pub payload: serde_json::Value,
    /// Other top-level fields (chat, summary, model_name…), kept as sent.
    pub extra: serde_json::Map<String, serde_json::Value>,
    /// When it happened, in milliseconds since the epoch.
    pub timestamp_ms: i64,
    /// The `humanInTheLoop` object, when the event asks a human.
    pub hitl: Option<serde_json::Value>,
    /// Makes a repeated POST return the first event instead of a new one.
    pub idempotency_key: Option<String>,
}

impl NewEvent {
    /// The `humanInTheLoop` object as stored: without its `question` and `context`,
    /// which the request made from it keeps. A question's text (and its tool
    /// context, a diff say) is stored once, in the request; [`stored_event`] puts
    /// them back on the way out.
    pub fn hitl_json(&self) -> serde_json::Result<Option<String>> {
        /// An object's entries but the two the request keeps, written as they are
        /// met (not a copy of the object with two removed).
        struct Stored<'a>(&'a serde_json::Map<String, serde_json::Value>);
        impl serde::Serialize for Stored<'_> {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_map(
                    (self.0.iter()).filter(|(k, _)| !matches!(k.as_str(), "question" | "context")),
                )
            }
        }
        match &self.hitl {
            None => Ok(None),
            Some(serde_json::Value::Object(o)) => serde_json::to_string(&Stored(o)).map(Some),
            Some(other) => serde_json::to_string(other).map(Some),
        }
    }
}
