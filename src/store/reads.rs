//! What history is read as: stored requests and events, history rows and their
//! filters, answers left undelivered, and the [`Store`]'s queries for them.

use anyhow::Result;
use serde::Serialize;
use sqlx::Row;

use super::{Backend, NewEvent, Store};
use crate::protocol::{Answer, Kind, Origin, Priority, Request, Status, Variant};

/// [`Store::find_request`]'s lookup among requests that live in the store.
pub(super) const FIND_STORED_REQUEST: &str =
    "SELECT request_json, origin, status, answer_json, reason, finished_at
     FROM requests WHERE origin <> 'spool' AND id = $1";

/// [`Store::find_request`]'s lookup among spool questions: the newest asking.
pub(super) const FIND_SPOOL_REQUEST: &str =
    "SELECT request_json, origin, status, answer_json, reason, finished_at
     FROM requests WHERE origin = 'spool' AND id = $1
     ORDER BY asked_ms DESC, key DESC LIMIT 1";

/// A stored event with how its request stands.
#[derive(Debug, Clone)]
pub struct StoredEvent {
    /// The event's id.
    pub id: i64,
    /// The event as it was sent.
    pub event: NewEvent,
    /// The request it made, if any: its status and answer.
    pub request: Option<StoredRequest>,
}

/// A request as history holds it.
#[derive(Debug, Clone)]
pub struct StoredRequest {
    /// The request (who asked is its [`Request::origin`]).
    pub request: Request,
    /// Whether it lives in the store (settled there), rather than in a question file.
    pub stored: bool,
    /// Where it stands.
    pub status: Status,
    /// The answer, once there is one.
    pub answer: Option<Answer>,
    /// Why it ended without an answer.
    pub reason: Option<String>,
    /// When it ended.
    pub finished_at: Option<String>,
}

impl StoredRequest {
    /// The id of the agent event that carried a request made over HTTP (its id is
    /// that number as text); `None` for a question file's.
    pub fn event_id(&self) -> Option<i64> {
        self.stored.then(|| self.request.id.parse().ok()).flatten()
    }
}

/// A row's request with who asked. The `origin` column says it for a row that lives
/// in the store (the request's JSON may not: older rows did not carry it there), and
/// says `spool` for a question file's, whose JSON says who wrote it.
fn with_origin(mut request: Request, column: Origin) -> Request {
    if column != Origin::Spool {
        request.origin = column;
    }
    request
}

/// The distinct values the dashboard's filters offer.
#[derive(Debug, Clone, Default, Serialize)]
pub struct FilterOptions {
    /// Every source_app seen.
    pub source_apps: Vec<String>,
    /// Every session_id seen.
    pub session_ids: Vec<String>,
    /// Every hook_event_type seen.
    pub hook_event_types: Vec<String>,
}

/// An answer recorded as `delivering` when the broker stopped.
#[derive(Debug, Clone)]
pub struct Undelivered {
    /// (project, id, asked_at).
    pub key: (String, String, String),
    /// The format the question came in.
    pub variant: Variant,
    /// The question.
    pub request: Request,
    /// The answer chosen for it.
    pub answer: Answer,
}

/// One row of history, as `hitl history --json` prints it.
#[derive(Debug, Clone, Serialize)]
pub struct HistoryEntry {
    /// The request's id.
    pub id: String,
    /// The project folder (`http` for requests that live in the store).
    pub project: String,
    /// Who asked ([`Request::origin`]).
    pub origin: Origin,
    /// The asking agent.
    pub agent_id: String,
    /// Its name for people.
    pub agent_name: String,
    /// The kind of question.
    #[serde(rename = "type")]
    pub kind: Kind,
    /// Its priority.
    pub priority: Priority,
    /// The question.
    pub content: String,
    /// When it was asked (RFC 3339).
    pub asked_at: String,
    /// Where it stands.
    pub status: Status,
    /// The answer's text, if answered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub answer: Option<String>,
    /// The whole answer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub answer_detail: Option<serde_json::Value>,
    /// Who answered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub responded_by: Option<String>,
    /// When it ended.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<String>,
    /// Why it ended without an answer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// What UIs show beside the question ([`Request::labels`]).
    pub labels: Vec<String>,
    /// What hitl did about it besides asking and answering (notifications sent and
    /// how each went, votes), oldest first: filled in for one request looked up by
    /// id (`hitl history --id`, `GET /api/v1/requests/{id}/trail`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub trail: Vec<super::ops::TrailStep>,
}

/// What a person searches the queue and history for, as typed into one box (the
/// dashboard's search, `GET /api/v1/requests?q=`, `hitl history --search`): text
/// that the question, its answer or the agent's name holds, and `tag:NAME` for
/// requests tagged so (any number, all of them), each in any case. Read by
/// [`Search::parse`]; history is searched by the database, the queue by
/// [`Search::matches`], to the same rule.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Search {
    /// The text, trimmed; `None` matches everything.
    pub text: Option<String>,
    /// Tags a request must all have, lowercased.
    pub tags: Vec<String>,
}

impl Search {
    /// Reads what was typed.
    pub fn parse(typed: &str) -> Search {
        let tag = |word: &str| {
            word.get(..4)
                .filter(|p| p.eq_ignore_ascii_case("tag:"))
                .and_then(|_| Some(word[4..].to_lowercase()).filter(|t| !t.is_empty()))
        };
        let words: Vec<&str> = typed.split_whitespace().collect();
        let tags: Vec<String> = words.iter().filter_map(|w| tag(w)).collect();
        // Without tags the text is kept as typed, its inner spaces too.
        let text = if tags.is_empty() {
            typed.trim().to_string()
        } else {
            let rest: Vec<&str> = words.into_iter().filter(|w| tag(w).is_none()).collect();
            rest.join(" ")
        };
        Search {
            text: (!text.is_empty()).then_some(text),
            tags,
        }
    }

    /// Whether a pending request (which has no answer yet) matches.
    pub fn matches(&self, r: &Request) -> bool {
        self.text.as_deref().is_none_or(|t| {
            let t = t.to_lowercase();
            r.content.to_lowercase().contains(&t) || r.agent_name.to_lowercase().contains(&t)
        }) && self
            .tags
            .iter()
            .all(|want| r.tags.iter().any(|t| t.to_lowercase() == *want))
    }

    /// The tags as the history query binds them: a JSON array, or none.
    fn tags_json(&self) -> Option<String> {
        (!self.tags.is_empty()).then(|| serde_json::json!(self.tags).to_string())
    }
}

/// Filters for [`Store::history`].
#[derive(Debug, Clone, Default)]
pub struct HistoryQuery {
    /// Only this request id.
    pub id: Option<String>,
    /// Only requests whose id starts so (`hitl history 01a2179b`).
    pub id_prefix: Option<String>,
    /// Only requests in this project folder.
    pub project: Option<String>,
    /// Only requests that stand so.
    pub status: Option<Status>,
    /// Only this agent's (by id or name).
    pub agent: Option<String>,
    /// Only requests that match what a person searched for.
    pub search: Search,
    /// Only requests asked before this instant (milliseconds since 1970): the page
    /// after one that ended with a request asked then.
    pub before_ms: Option<i64>,
    /// At most this many, newest first.
    pub limit: i64,
}

/// Reads the request columns of a row (`request_json`, `origin`, `status`…).
fn stored_request<R: Row>(r: &R) -> Option<StoredRequest>
where
    for<'a> &'a str: sqlx::ColumnIndex<R>,
    for<'a> Option<String>: sqlx::Decode<'a, R::Database> + sqlx::Type<R::Database>,
{
    let request_json: Option<String> = r.try_get("request_json").ok()?;
    let request = serde_json::from_str(&request_json?).ok()?;
    let status: Option<String> = r.try_get("status").ok()?;
    let answer: Option<String> = r.try_get("answer_json").ok()?;
    let column = Origin::parse(&r.try_get::<Option<String>, _>("origin").ok()??)?;
    Some(StoredRequest {
        request: with_origin(request, column),
        stored: column != Origin::Spool,
        status: Status::parse(&status?).unwrap_or(Status::Pending),
        answer: answer.and_then(|a| serde_json::from_str(&a).ok()),
        reason: r.try_get("reason").ok()?,
        finished_at: r.try_get("finished_at").ok()?,
    })
}

/// Reads an events row joined with its request.
fn stored_event<R: Row>(r: &R) -> Option<StoredEvent>
where
    for<'a> &'a str: sqlx::ColumnIndex<R>,
    for<'a> Option<String>: sqlx::Decode<'a, R::Database> + sqlx::Type<R::Database>,
    for<'a> String: sqlx::Decode<'a, R::Database> + sqlx::Type<R::Database>,
    for<'a> i64: sqlx::Decode<'a, R::Database> + sqlx::Type<R::Database>,
{
    let json = |col: &str| -> Option<serde_json::Value> {
        let text: Option<String> = r.try_get(col).ok()?;
        serde_json::from_str(&text?).ok()
    };
    let extra = match json("extra_json") {
        Some(serde_json::Value::Object(m)) => m,
        _ => serde_json::Map::new(),
    };
    let request = stored_request(r);
    let mut hitl = json("hitl_json");
    // The question and its context are stored once, in the request (see
    // `NewEvent::hitl_json`).
    if let (Some(serde_json::Value::Object(h)), Some(req)) = (hitl.as_mut(), &request) {
        if !h.contains_key("question") {
            h.insert("question".into(), req.request.content.clone().into());
        }
        if !h.contains_key("context") && !req.request.context.is_null() {
            h.insert("context".into(), req.request.context.clone());
        }
    }
    Some(StoredEvent {
        id: r.try_get("id").ok()?,
        event: NewEvent {
            source_app: r.try_get("source_app").ok()?,
            session_id: r.try_get("session_id").ok()?,
            hook_event_type: r.try_get("hook_event_type").ok()?,
            payload: json("payload_json").unwrap_or(serde_json::Value::Null),
            extra,
            timestamp_ms: r.try_get("timestamp_ms").ok()?,
            hitl,
            idempotency_key: r.try_get("idempotency_key").ok()?,
        },
        request,
    })
}

/// Events joined with their requests (a request has its event's id), for
/// [`stored_event`]; the callers add the filter and order.
macro_rules! events_select {
    () => {
        "SELECT e.id, e.source_app, e.session_id, e.hook_event_type, e.payload_json,
                e.extra_json, e.timestamp_ms, e.hitl_json, e.idempotency_key,
                r.request_json, r.origin, r.status, r.answer_json, r.reason, r.finished_at
         FROM events e
         LEFT JOIN requests r
           ON e.hitl_json IS NOT NULL AND r.origin <> 'spool' AND r.id = CAST(e.id AS TEXT)"
    };
}

impl Store {
    /// Requests living in the store (not in question files) that are still pending,
    /// oldest first, with the id of the event that carried each: a starting broker
    /// queues them again.
    pub async fn pending_remote(&self) -> Result<Vec<(Request, i64)>> {
        with_pool!(self, |pool| {
            let rows = sqlx::query(
                "SELECT request_json, origin FROM requests
                 WHERE origin <> 'spool' AND status = 'pending' ORDER BY asked_ms",
            )
            .fetch_all(pool)
            .await?;
            Ok(rows
                .into_iter()
                .filter_map(|r| {
                    let request: Request =
                        serde_json::from_str(&r.get::<String, _>("request_json")).ok()?;
                    let column = Origin::parse(&r.get::<String, _>("origin"))?;
                    let event_id = request.id.parse().ok()?;
                    Some((with_origin(request, column), event_id))
                })
                .collect())
        })
    }

    /// The projects with spool questions history records as pending, most recently
    /// asked first.
    pub async fn pending_projects(&self) -> Result<Vec<String>> {
        with_pool!(self, |pool| {
            Ok(sqlx::query_scalar(
                "SELECT project FROM requests WHERE origin = 'spool' AND status = 'pending'
                 GROUP BY project ORDER BY max(asked_ms) DESC",
            )
            .fetch_all(pool)
            .await?)
        })
    }

    /// The ids of the requests living in the store that are still pending.
    pub async fn pending_remote_ids(&self) -> Result<Vec<String>> {
        with_pool!(self, |pool| {
            Ok(sqlx::query_scalar(
                "SELECT id FROM requests WHERE origin <> 'spool' AND status = 'pending'",
            )
            .fetch_all(pool)
            .await?)
        })
    }

    /// The newest request with this id; one made over HTTP first.
    ///
    /// Two lookups, each through the index of its own rows (`requests_stored_id`,
    /// unique; `requests_spool_id`, where an id is asked again and again): one index
    /// over every id would be written for every request.
    pub async fn find_request(&self, id: &str) -> Result<Option<StoredRequest>> {
        with_pool!(self, |pool| {
            let mut row = sqlx::query(FIND_STORED_REQUEST)
                .bind(id)
                .fetch_optional(pool)
                .await?;
            if row.is_none() {
                row = sqlx::query(FIND_SPOOL_REQUEST)
                    .bind(id)
                    .fetch_optional(pool)
                    .await?;
            }
            Ok(row.and_then(|r| stored_request(&r)))
        })
    }

    /// The newest events, newest first, with their requests: at most `limit`, and
    /// no more once their text passes `max_bytes` (the first always comes). Rows are
    /// read one at a time, so a feed of large events costs memory in proportion to
    /// the budget, not to the limit.
    pub async fn recent_events(&self, limit: i64, max_bytes: usize) -> Result<Vec<StoredEvent>> {
        use futures_util::TryStreamExt;
        with_pool!(self, |pool| {
            let mut rows = sqlx::query(concat!(events_select!(), " ORDER BY e.id DESC LIMIT $1"))
                .bind(limit.max(0))
                .fetch(pool);
            let (mut out, mut bytes) = (Vec::new(), 0usize);
            while let Some(row) = rows.try_next().await? {
                let size: usize = [
                    "payload_json",
                    "extra_json",
                    "hitl_json",
                    "request_json",
                    "answer_json",
                ]
                .iter()
                .filter_map(|c| row.try_get::<Option<String>, _>(*c).ok().flatten())
                .map(|t| t.len())
                .sum();
                if !out.is_empty() && bytes + size > max_bytes {
                    break;
                }
                bytes += size;
                out.extend(stored_event(&row));
            }
            Ok(out)
        })
    }

    /// One event, with its request.
    pub async fn event(&self, id: i64) -> Result<Option<StoredEvent>> {
        with_pool!(self, |pool| {
            let row = sqlx::query(concat!(events_select!(), " WHERE e.id = $1"))
                .bind(id)
                .fetch_optional(pool)
                .await?;
            Ok(row.as_ref().and_then(stored_event))
        })
    }

    /// The distinct apps, sessions and event types seen, for the dashboard's filters.
    pub async fn filter_options(&self) -> Result<FilterOptions> {
        with_pool!(self, |pool| {
            let mut out = FilterOptions::default();
            for (column, into) in [
                ("source_app", &mut out.source_apps),
                ("session_id", &mut out.session_ids),
                ("hook_event_type", &mut out.hook_event_types),
            ] {
                let sql =
                    format!("SELECT DISTINCT {column} AS v FROM events ORDER BY v LIMIT 1000");
                let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
                    .fetch_all(pool)
                    .await?;
                *into = rows.into_iter().map(|r| r.get("v")).collect();
            }
            Ok(out)
        })
    }

    /// History, newest first.
    pub async fn history(&self, q: &HistoryQuery) -> Result<Vec<HistoryEntry>> {
        let limit = if q.limit > 0 { q.limit } else { i64::MAX };
        // Where one text holds another: SQLite's INSTR, PostgreSQL's STRPOS (no LIKE,
        // whose wildcards the searched text would have to escape).
        let contains = match self.backend {
            Backend::Sqlite(..) => "INSTR",
            Backend::Postgres(_) => "STRPOS",
        };
        // The searched tags ($9, a JSON array) that the request's tags lack: none
        // may be.
        let tags_lacked = match self.backend {
            Backend::Sqlite(..) => {
                "SELECT 1 FROM json_each($9) AS want WHERE want.value NOT IN
                     (SELECT LOWER(have.value) FROM json_each(request_json, '$.tags') AS have)"
            }
            Backend::Postgres(_) => {
                "SELECT 1 FROM jsonb_array_elements_text(CAST($9 AS jsonb)) AS want(tag)
                 WHERE want.tag NOT IN (SELECT LOWER(have.tag) FROM jsonb_array_elements_text(
                     COALESCE(CAST(request_json AS jsonb) -> 'tags', '[]'::jsonb)) AS have(tag))"
            }
        };
        let sql = format!(
            "SELECT id, project, origin, agent_id, agent_name, kind, priority, request_json,
                        asked_at, status, answer_json, responded_by, finished_at, reason
                 FROM requests
                 WHERE (CAST($1 AS TEXT) IS NULL OR id = $1)
                   AND (CAST($2 AS TEXT) IS NULL OR project = $2)
                   AND (CAST($4 AS TEXT) IS NULL OR status = $4)
                   AND (CAST($5 AS TEXT) IS NULL OR agent_id = $5 OR agent_name = $5)
                   AND (CAST($6 AS TEXT) IS NULL
                        OR {contains}(LOWER(COALESCE(request_json, '')), LOWER($6)) > 0
                        OR {contains}(LOWER(COALESCE(answer_json, '')), LOWER($6)) > 0
                        OR {contains}(LOWER(agent_name), LOWER($6)) > 0)
                   AND (CAST($7 AS BIGINT) IS NULL OR asked_ms < $7)
                   AND (CAST($8 AS TEXT) IS NULL OR substr(id, 1, length($8)) = $8)
                   AND (CAST($9 AS TEXT) IS NULL OR NOT EXISTS ({tags_lacked}))
                 ORDER BY asked_ms DESC, key DESC
                 LIMIT $3"
        );
        with_pool!(self, |pool| {
            let rows = sqlx::query(sqlx::AssertSqlSafe(sql.as_str()))
                .bind(&q.id)
                .bind(&q.project)
                .bind(limit)
                .bind(q.status.map(Status::as_str))
                .bind(&q.agent)
                // Lowered by the database on both sides: its idea of case holds for both.
                .bind(&q.search.text)
                .bind(q.before_ms)
                .bind(&q.id_prefix)
                .bind(q.search.tags_json())
                .fetch_all(pool)
                .await?;
            Ok(rows
                .into_iter()
                .filter_map(|r| {
                    let id: String = r.get("id");
                    let (origin, kind, priority, status) = match (
                        Origin::parse(r.get("origin")),
                        Kind::parse(r.get("kind")),
                        Priority::parse(r.get("priority")),
                        Status::parse(r.get("status")),
                    ) {
                        (Some(o), Some(k), Some(p), Some(s)) => (o, k, p, s),
                        // Only this program writes these columns: a row it cannot
                        // read was changed by hand, and is left out, not guessed at.
                        _ => {
                            tracing::warn!(id, "a history row has an unknown origin, type, priority or status; left out");
                            return None;
                        }
                    };
                    let answer_detail: Option<serde_json::Value> = r
                        .get::<Option<String>, _>("answer_json")
                        .and_then(|j| serde_json::from_str(&j).ok());
                    let request = r
                        .get::<Option<String>, _>("request_json")
                        .and_then(|j| serde_json::from_str::<Request>(&j).ok())
                        .map(|q| with_origin(q, origin));
                    Some(HistoryEntry {
                        id,
                        project: r.get("project"),
                        origin: request.as_ref().map_or(origin, |q| q.origin),
                        agent_id: r.get("agent_id"),
                        agent_name: r.get("agent_name"),
                        kind,
                        priority,
                        labels: request.as_ref().map(Request::labels).unwrap_or_default(),
                        trail: Vec::new(),
                        // The text is stored once, in the request's JSON.
                        content: request.map(|q| q.content).unwrap_or_default(),
                        asked_at: r.get("asked_at"),
                        status,
                        answer: answer_detail
                            .as_ref()
                            .and_then(|a| a.get("content"))
                            .and_then(|c| c.as_str())
                            .map(str::to_string),
                        answer_detail,
                        responded_by: r.get("responded_by"),
                        finished_at: r.get("finished_at"),
                        reason: r.get("reason"),
                    })
                })
                .collect())
        })
    }

    /// The steps of request `id`'s trail, oldest first (at most 1,000).
    pub async fn trail(&self, id: &str) -> Result<Vec<super::ops::TrailStep>> {
        self.trail_where(TrailOf::Request, id).await
    }

    /// Every request's trail steps of kind `step`, oldest first (the newest 10,000):
    /// a starting broker's votes to count again.
    pub async fn trail_steps(&self, step: &str) -> Result<Vec<super::ops::TrailStep>> {
        self.trail_where(TrailOf::Step, step).await
    }

    async fn trail_where(&self, of: TrailOf, key: &str) -> Result<Vec<super::ops::TrailStep>> {
        let sql = match of {
            TrailOf::Request => {
                "SELECT id, at_ms, step, surface, detail FROM trail
                 WHERE id = $1 ORDER BY at_ms LIMIT 1000"
            }
            TrailOf::Step => {
                "SELECT id, at_ms, step, surface, detail FROM trail
                 WHERE step = $1 ORDER BY at_ms DESC LIMIT 10000"
            }
        };
        let mut steps: Vec<super::ops::TrailStep> = with_pool!(self, |pool| {
            let rows = sqlx::query(sql).bind(key).fetch_all(pool).await?;
            rows.into_iter()
                .map(|r| super::ops::TrailStep {
                    id: r.get("id"),
                    at_ms: r.get("at_ms"),
                    step: r.get("step"),
                    surface: r.get("surface"),
                    detail: serde_json::from_str(&r.get::<String, _>("detail")).unwrap_or_default(),
                })
                .collect()
        });
        if of == TrailOf::Step {
            steps.reverse();
        }
        Ok(steps)
    }

    /// Answers the broker chose but may not have delivered (it died in between).
    pub async fn undelivered(&self) -> Result<Vec<Undelivered>> {
        with_pool!(self, |pool| {
            let rows = sqlx::query(
                "SELECT project, id, asked_at, variant, request_json, answer_json
                 FROM deliveries",
            )
            .fetch_all(pool)
            .await?;
            Ok(rows
                .into_iter()
                .filter_map(|r| {
                    Some(Undelivered {
                        key: (r.get("project"), r.get("id"), r.get("asked_at")),
                        variant: Variant::parse(r.get("variant"))?,
                        request: serde_json::from_str(&r.get::<String, _>("request_json")).ok()?,
                        answer: serde_json::from_str(&r.get::<String, _>("answer_json")).ok()?,
                    })
                })
                .collect())
        })
    }
}

/// Whose trail steps are read: one request's, or every request's of one kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TrailOf {
    Request,
    Step,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_search_is_text_and_tags() {
        let s = Search::parse("  deploy  tag:CI the  build TAG:x tag: ");
        assert_eq!(s.text.as_deref(), Some("deploy the build tag:"));
        assert_eq!(s.tags, ["ci", "x"]);
        // Without tags, the text as typed.
        let s = Search::parse(" 50%  off ");
        assert_eq!((s.text.as_deref(), s.tags.len()), (Some("50%  off"), 0));
        assert_eq!(Search::parse("   "), Search::default());
        let r = Request {
            tags: vec!["CI".into(), "deploy".into()],
            ..Request::new("a", "Agent", Kind::Text, "Ship it?")
        };
        assert!(Search::parse("tag:ci ship").matches(&r));
        assert!(Search::parse("tag:ci tag:DEPLOY").matches(&r));
        assert!(!Search::parse("tag:ci tag:release").matches(&r));
        assert!(!Search::parse("tag:ci sail").matches(&r));
        assert!(Search::parse("agent").matches(&r));
    }
}
