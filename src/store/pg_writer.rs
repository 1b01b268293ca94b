//! PostgreSQL writes: a batch in one transaction, with one NOTIFY per kind of change
//! for the other replicas.
//!
//! Every statement is a network round trip, and on a busy server the round trips, not
//! the rows, are what a batch costs (~280 µs per request made over HTTP when each took
//! three). So a run of requests made over HTTP goes in as a few multi-row statements
//! (`UNNEST` over arrays), and a run of settles as one `UPDATE … FROM UNNEST`,
//! whatever their number. A run stops where an idempotency key or id repeats, so each
//! statement sees every row once and the ops keep the meaning they have one by one.
//! Spool history ops, rare next to these, go one statement each. A batch of one
//! request or one settle, the common case when the server is not busy, is a single
//! statement with no transaction around it ([`apply_alone`]).

use std::{borrow::Cow, collections::HashSet};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use sqlx::{PgPool, Postgres, Transaction};

use super::{NewEvent, Outcome, REMOTE_PROJECT, StoreOp, sql};
use crate::protocol::{Answer, Origin, Request, Variant};

type Tx<'a> = Transaction<'a, Postgres>;

/// At most this many ids per notice: PostgreSQL refuses payloads of 8,000 bytes or more.
const IDS_PER_NOTICE: usize = 200;

/// What one replica tells the others on [`super::CHANGES_CHANNEL`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Notice {
    /// The replica that made the change, so it can skip its own.
    pub r: String,
    /// `created` or `settled`.
    pub k: String,
    /// The requests it changed.
    pub ids: Vec<String>,
}

/// Writes a batch of one, if it is a request made over HTTP or a settle, as a
/// single statement without a transaction around it: one round trip where the
/// transaction took four or five, which is most of a lone request's latency.
/// `None` for other ops (they go through [`apply`]).
pub async fn apply_alone(pool: &PgPool, op: &StoreOp, replica: &str) -> Result<Option<Outcome>> {
    match op {
        StoreOp::CreateRemote { request, event } => {
            // The request's JSON with a placeholder id, cut in two around it.
            let marker = uuid::Uuid::new_v4().simple().to_string();
            let mut r = (**request).clone();
            r.id = marker.clone();
            let json = serde_json::to_string(&r)?;
            let (before, after) = json
                .split_once(&marker)
                .context("the request's JSON lost its id")?;
            let row: Option<(i64, i64)> = sqlx::query_as(sql::PG_CREATE_ALONE)
                .bind(text(&event.source_app))
                .bind(text(&event.session_id))
                .bind(text(&event.hook_event_type))
                .bind(serde_json::to_string(&event.payload)?)
                .bind(serde_json::to_string(&event.extra)?)
                .bind(event.timestamp_ms)
                .bind(event.hitl_json()?)
                .bind(event.idempotency_key.as_deref().map(text))
                .bind(uuid::Uuid::now_v7().to_string())
                .bind(REMOTE_PROJECT)
                .bind(r.timestamp.to_string())
                .bind(r.timestamp.as_millisecond())
                .bind(Variant::Canonical.as_str())
                .bind(text(&r.agent_id))
                .bind(text(&r.agent_name))
                .bind(r.kind.as_str())
                .bind(r.priority.as_str())
                .bind(super::CONTENT_COLUMN)
                .bind(before)
                .bind(after)
                .bind(r.deadline().map(|d| d.as_millisecond()))
                .bind(super::CHANGES_CHANNEL)
                .bind(replica)
                .bind(super::stored_origin_column(&r).as_str())
                .fetch_optional(pool)
                .await?;
            let (event_id, existing) = match row {
                Some((id, _)) => (id, false),
                None => {
                    let id: i64 = sqlx::query_scalar(sql::EVENT_BY_KEY)
                        .bind(event.idempotency_key.as_deref().map(text))
                        .fetch_one(pool)
                        .await
                        .context("looking up a repeated idempotency key")?;
                    (id, true)
                }
            };
            Ok(Some(Outcome::Created { event_id, existing }))
        }
        StoreOp::Settle {
            id,
            status,
            answer,
            reason,
        } => {
            let won: Option<(String, String)> = sqlx::query_as(sql::PG_SETTLE_ALONE)
                .bind(status.as_str())
                .bind(answer_json(answer)?)
                .bind(answer.as_ref().map(|a| text(&a.responded_by)))
                .bind(jiff::Timestamp::now().to_string())
                .bind(reason.as_deref().map(text))
                .bind(text(id))
                .bind(super::CHANGES_CHANNEL)
                .bind(replica)
                .fetch_optional(pool)
                .await?;
            Ok(Some(Outcome::Settled(won.is_some())))
        }
        _ => Ok(None),
    }
}

/// The ops of a batch that keep their order among themselves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Group {
    /// Events, with or without a request (they share the idempotency keys).
    Events,
    /// Settles of requests made over HTTP.
    Settles,
    /// Spool history.
    Spool,
}

fn group_of(op: &StoreOp) -> Group {
    match op {
        StoreOp::CreateRemote { .. } | StoreOp::Event(_) | StoreOp::Trail(_) => Group::Events,
        StoreOp::Settle { .. } => Group::Settles,
        StoreOp::Asked { .. } | StoreOp::Delivering { .. } | StoreOp::Finished { .. } => {
            Group::Spool
        }
    }
}

/// Applies `ops` in `tx` (committed by the caller); returns what each did, in order.
///
/// The groups commute, so each is written as one sequence (long runs, few
/// statements) rather than interleaved as the ops came: a settle's request was
/// committed before any broker could queue it, so it is never in the same batch, and
/// spool history shares no rows with requests made over HTTP.
pub async fn apply(tx: &mut Tx<'_>, ops: &[StoreOp], replica: &str) -> Result<Vec<Outcome>> {
    let mut outcomes: Vec<Option<Outcome>> = vec![None; ops.len()];
    let (mut created, mut settled) = (Vec::new(), Vec::new());
    for group in [Group::Events, Group::Settles, Group::Spool] {
        let (at, of): (Vec<usize>, Vec<&StoreOp>) = ops
            .iter()
            .enumerate()
            .filter(|(_, op)| group_of(op) == group)
            .unzip();
        let done = apply_in_order(tx, &of, &mut created, &mut settled).await?;
        for (i, outcome) in at.into_iter().zip(done) {
            outcomes[i] = Some(outcome);
        }
    }
    announce(tx, replica, "created", &created).await?;
    announce(tx, replica, "settled", &settled).await?;
    outcomes
        .into_iter()
        .map(|o| o.context("an op of the batch was not applied"))
        .collect()
}

/// Applies `ops` one run at a time, in their order.
async fn apply_in_order(
    tx: &mut Tx<'_>,
    ops: &[&StoreOp],
    created: &mut Vec<String>,
    settled: &mut Vec<String>,
) -> Result<Vec<Outcome>> {
    let mut outcomes = Vec::with_capacity(ops.len());
    let mut rest = ops;
    while let Some(first) = rest.first() {
        let taken = match first {
            StoreOp::CreateRemote { .. } => {
                let run = run_of(rest, |op| match op {
                    StoreOp::CreateRemote { event, .. } => Some(event.idempotency_key.as_deref()),
                    _ => None,
                });
                if run == 1 {
                    // Alone, the statement-per-row way takes fewer round trips.
                    outcomes.push(create_one(tx, first, created).await?);
                } else {
                    create_remote(tx, &rest[..run], &mut outcomes, created).await?;
                }
                run
            }
            StoreOp::Settle { .. } => {
                let run = run_of(rest, |op| match op {
                    StoreOp::Settle { id, .. } => Some(Some(id.as_str())),
                    _ => None,
                });
                settle(tx, &rest[..run], &mut outcomes, settled).await?;
                run
            }
            op => {
                outcomes.push(apply_one(tx, op).await?);
                1
            }
        };
        rest = &rest[taken..];
    }
    Ok(outcomes)
}

/// How many ops from the start of `ops` form a run: `key` says whether an op belongs
/// (`Some`) and what must not repeat within the run (`Some(None)`: nothing).
fn run_of<'a>(ops: &[&'a StoreOp], key: impl Fn(&'a StoreOp) -> Option<Option<&'a str>>) -> usize {
    let mut seen = HashSet::new();
    ops.iter()
        .take_while(|&&op| match key(op) {
            Some(Some(k)) => seen.insert(k),
            Some(None) => true,
            None => false,
        })
        .count()
}

/// One spool history op, or an event without a request.
async fn apply_one(tx: &mut Tx<'_>, op: &StoreOp) -> Result<Outcome> {
    match op {
        StoreOp::Asked {
            project,
            request,
            variant,
        } => {
            insert_request(tx, project, request, *variant, Origin::Spool).await?;
        }
        StoreOp::Delivering {
            project,
            request,
            variant,
            answer,
        } => {
            sqlx::query(sql::INSERT_DELIVERY)
                .bind(project)
                .bind(text(&request.id))
                .bind(request.timestamp.to_string())
                .bind(variant.as_str())
                .bind(text(&serde_json::to_string(request)?))
                .bind(text(&serde_json::to_string(answer)?))
                .execute(&mut **tx)
                .await?;
        }
        StoreOp::Finished {
            project,
            request,
            variant,
            status,
            answer,
            reason,
        } => {
            insert_request(tx, project, request, *variant, Origin::Spool).await?;
            sqlx::query(sql::FINISH_REQUEST)
                .bind(status.as_str())
                .bind(answer_json(answer)?)
                .bind(answer.as_ref().map(|a| text(&a.responded_by)))
                .bind(jiff::Timestamp::now().to_string())
                .bind(reason.as_deref().map(text))
                .bind(project)
                .bind(text(&request.id))
                .bind(request.timestamp.to_string())
                .execute(&mut **tx)
                .await?;
            sqlx::query(sql::DELETE_DELIVERY)
                .bind(project)
                .bind(text(&request.id))
                .bind(request.timestamp.to_string())
                .execute(&mut **tx)
                .await?;
        }
        StoreOp::Event(event) => {
            let (event_id, existing) = insert_event(tx, event).await?;
            return Ok(Outcome::Created { event_id, existing });
        }
        StoreOp::Trail(t) => {
            sqlx::query(sql::INSERT_TRAIL)
                .bind(text(&t.id))
                .bind(t.at_ms)
                .bind(text(&t.step))
                .bind(text(&t.surface))
                .bind(text(&t.detail.to_string()))
                .execute(&mut **tx)
                .await?;
        }
        StoreOp::CreateRemote { .. } | StoreOp::Settle { .. } => {
            unreachable!("runs of these are written by create_remote and settle")
        }
    }
    Ok(Outcome::Done)
}

/// Text as PostgreSQL can hold it: it refuses NUL characters, which JSON and SQLite
/// take, so a NUL becomes U+FFFD. (JSON columns need nothing: serde writes `\u0000`.)
fn text(s: &str) -> Cow<'_, str> {
    if s.contains('\0') {
        Cow::Owned(s.replace('\0', "\u{FFFD}"))
    } else {
        Cow::Borrowed(s)
    }
}

fn owned_text(s: &str) -> String {
    text(s).into_owned()
}

fn answer_json(answer: &Option<Box<Answer>>) -> Result<Option<String>> {
    Ok(answer.as_ref().map(serde_json::to_string).transpose()?)
}

/// Records a request once; a repeat (same project, id and time asked) changes nothing.
/// `column` is its `origin` column: the spool's for a row whose request lives in a
/// question file, else who asked (never the spool's).
async fn insert_request(
    tx: &mut Tx<'_>,
    project: &str,
    r: &Request,
    variant: Variant,
    column: Origin,
) -> Result<()> {
    sqlx::query(sql::INSERT_REQUEST)
        .bind(uuid::Uuid::now_v7().to_string())
        .bind(project)
        .bind(text(&r.id))
        .bind(r.timestamp.to_string())
        .bind(r.timestamp.as_millisecond())
        .bind(variant.as_str())
        .bind(text(&r.agent_id))
        .bind(text(&r.agent_name))
        .bind(r.kind.as_str())
        .bind(r.priority.as_str())
        .bind(super::CONTENT_COLUMN)
        .bind(serde_json::to_string(r)?)
        .bind(column.as_str())
        .bind(r.deadline().map(|d| d.as_millisecond()))
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// Stores an event once per idempotency key; returns `(event_id, existing)`.
async fn insert_event(tx: &mut Tx<'_>, e: &NewEvent) -> Result<(i64, bool)> {
    let inserted: Option<i64> = sqlx::query_scalar(sql::INSERT_EVENT)
        .bind(text(&e.source_app))
        .bind(text(&e.session_id))
        .bind(text(&e.hook_event_type))
        .bind(serde_json::to_string(&e.payload)?)
        .bind(serde_json::to_string(&e.extra)?)
        .bind(e.timestamp_ms)
        .bind(e.hitl_json()?)
        .bind(e.idempotency_key.as_deref().map(text))
        .fetch_optional(&mut **tx)
        .await?;
    match inserted {
        Some(id) => Ok((id, false)),
        None => {
            let id: i64 = sqlx::query_scalar(sql::EVENT_BY_KEY)
                .bind(e.idempotency_key.as_deref().map(text))
                .fetch_one(&mut **tx)
                .await?;
            Ok((id, true))
        }
    }
}

/// One request made over HTTP: its event, then (unless the key was known) itself.
async fn create_one(tx: &mut Tx<'_>, op: &StoreOp, created: &mut Vec<String>) -> Result<Outcome> {
    let StoreOp::CreateRemote { request, event } = op else {
        unreachable!("create_one takes a CreateRemote")
    };
    let (event_id, existing) = insert_event(tx, event).await?;
    if !existing {
        let mut r = (**request).clone();
        r.id = event_id.to_string();
        insert_request(
            tx,
            REMOTE_PROJECT,
            &r,
            Variant::Canonical,
            super::stored_origin_column(&r),
        )
        .await?;
        created.push(r.id);
    }
    Ok(Outcome::Created { event_id, existing })
}

/// A run of requests made over HTTP, no idempotency key twice: their events and
/// requests in two statements (plus one for ids, and one to look up repeats).
async fn create_remote(
    tx: &mut Tx<'_>,
    run: &[&StoreOp],
    outcomes: &mut Vec<Outcome>,
    created: &mut Vec<String>,
) -> Result<()> {
    let pairs: Vec<(&Request, &NewEvent)> = run
        .iter()
        .filter_map(|op| match op {
            StoreOp::CreateRemote { request, event } => Some((&**request, &**event)),
            _ => None,
        })
        .collect();
    // Ids first, so each request's JSON can carry its own before it is written.
    let mut ids: Vec<i64> = sqlx::query_scalar(sql::PG_RESERVE_EVENT_IDS)
        .bind(pairs.len() as i64)
        .fetch_all(&mut **tx)
        .await
        .context("reserving event ids")?;
    ids.sort_unstable();

    let mut cols = EventColumns::default();
    for ((_, e), id) in pairs.iter().zip(&ids) {
        cols.push(*id, e)?;
    }
    let inserted: HashSet<i64> = cols
        .bind(sqlx::query_scalar(sql::PG_INSERT_EVENTS))
        .fetch_all(&mut **tx)
        .await
        .context("storing events")?
        .into_iter()
        .collect();

    // A key stored before (by an earlier batch or another replica) names its event.
    let repeated: Vec<String> = pairs
        .iter()
        .zip(&ids)
        .filter(|(_, id)| !inserted.contains(id))
        .filter_map(|((_, e), _)| e.idempotency_key.as_deref().map(owned_text))
        .collect();
    let earlier: std::collections::HashMap<String, i64> = if repeated.is_empty() {
        Default::default()
    } else {
        sqlx::query_as::<_, (i64, String)>(sql::PG_EVENTS_BY_KEYS)
            .bind(&repeated)
            .fetch_all(&mut **tx)
            .await
            .context("looking up repeated idempotency keys")?
            .into_iter()
            .map(|(id, key)| (key, id))
            .collect()
    };

    let mut requests = RequestColumns::default();
    for ((request, event), id) in pairs.iter().zip(&ids) {
        if inserted.contains(id) {
            let mut r = (*request).clone();
            r.id = id.to_string();
            requests.push(
                REMOTE_PROJECT,
                &r,
                Variant::Canonical,
                super::stored_origin_column(&r),
            )?;
            created.push(r.id);
            outcomes.push(Outcome::Created {
                event_id: *id,
                existing: false,
            });
        } else {
            let key = owned_text(event.idempotency_key.as_deref().unwrap_or_default());
            let event_id = *earlier
                .get(&key)
                .with_context(|| format!("the event with idempotency key {key:?} vanished"))?;
            outcomes.push(Outcome::Created {
                event_id,
                existing: true,
            });
        }
    }
    if !requests.key.is_empty() {
        requests
            .bind(sqlx::query(sql::PG_INSERT_REQUESTS))
            .execute(&mut **tx)
            .await
            .context("storing requests")?;
    }
    Ok(())
}

/// A run of settles, no id twice, in one statement.
async fn settle(
    tx: &mut Tx<'_>,
    run: &[&StoreOp],
    outcomes: &mut Vec<Outcome>,
    settled: &mut Vec<String>,
) -> Result<()> {
    let now = jiff::Timestamp::now().to_string();
    if let [
        StoreOp::Settle {
            id,
            status,
            answer,
            reason,
        },
    ] = run
    {
        // Alone: the one-row statement, whose plan PostgreSQL keeps.
        let done = sqlx::query(sql::SETTLE)
            .bind(status.as_str())
            .bind(answer_json(answer)?)
            .bind(answer.as_ref().map(|a| text(&a.responded_by)))
            .bind(now)
            .bind(reason.as_deref().map(text))
            .bind(text(id))
            .execute(&mut **tx)
            .await?;
        let won = done.rows_affected() == 1;
        if won {
            settled.push(id.clone());
        }
        outcomes.push(Outcome::Settled(won));
        return Ok(());
    }
    let (mut ids, mut statuses, mut answers, mut by, mut reasons) =
        (vec![], vec![], vec![], vec![], vec![]);
    for &op in run {
        let StoreOp::Settle {
            id,
            status,
            answer,
            reason,
        } = op
        else {
            continue;
        };
        ids.push(owned_text(id));
        statuses.push(status.as_str());
        answers.push(answer_json(answer)?);
        by.push(answer.as_ref().map(|a| owned_text(&a.responded_by)));
        reasons.push(reason.as_deref().map(owned_text));
    }
    let won: HashSet<String> = sqlx::query_scalar(sql::PG_SETTLE_MANY)
        .bind(&ids)
        .bind(&statuses)
        .bind(&answers)
        .bind(&by)
        .bind(&reasons)
        .bind(&now)
        .fetch_all(&mut **tx)
        .await
        .context("settling requests")?
        .into_iter()
        .collect();
    for id in ids {
        let this = won.contains(&id);
        if this {
            settled.push(id);
        }
        outcomes.push(Outcome::Settled(this));
    }
    Ok(())
}

/// Tells the other replicas, on commit, that `ids` were `kind` (created or settled).
async fn announce(tx: &mut Tx<'_>, replica: &str, kind: &str, ids: &[String]) -> Result<()> {
    for chunk in ids.chunks(IDS_PER_NOTICE) {
        let notice = Notice {
            r: replica.to_string(),
            k: kind.to_string(),
            ids: chunk.to_vec(),
        };
        sqlx::query(sql::NOTIFY)
            .bind(super::CHANGES_CHANNEL)
            .bind(serde_json::to_string(&notice)?)
            .execute(&mut **tx)
            .await?;
    }
    Ok(())
}

/// Events as columns, for `UNNEST`.
#[derive(Default)]
struct EventColumns {
    id: Vec<i64>,
    source_app: Vec<String>,
    session_id: Vec<String>,
    hook_event_type: Vec<String>,
    payload_json: Vec<String>,
    extra_json: Vec<String>,
    timestamp_ms: Vec<i64>,
    hitl_json: Vec<Option<String>>,
    idempotency_key: Vec<Option<String>>,
}

impl EventColumns {
    fn push(&mut self, id: i64, e: &NewEvent) -> Result<()> {
        self.id.push(id);
        self.source_app.push(owned_text(&e.source_app));
        self.session_id.push(owned_text(&e.session_id));
        self.hook_event_type.push(owned_text(&e.hook_event_type));
        self.payload_json.push(serde_json::to_string(&e.payload)?);
        self.extra_json.push(serde_json::to_string(&e.extra)?);
        self.timestamp_ms.push(e.timestamp_ms);
        self.hitl_json.push(e.hitl_json()?);
        self.idempotency_key
            .push(e.idempotency_key.as_deref().map(owned_text));
        Ok(())
    }

    fn bind<'q, O>(
        &'q self,
        q: sqlx::query::QueryScalar<'q, Postgres, O, sqlx::postgres::PgArguments>,
    ) -> sqlx::query::QueryScalar<'q, Postgres, O, sqlx::postgres::PgArguments> {
        q.bind(&self.id)
            .bind(&self.source_app)
            .bind(&self.session_id)
            .bind(&self.hook_event_type)
            .bind(&self.payload_json)
            .bind(&self.extra_json)
            .bind(&self.timestamp_ms)
            .bind(&self.hitl_json)
            .bind(&self.idempotency_key)
    }
}

/// Requests as columns, for `UNNEST`.
#[derive(Default)]
struct RequestColumns {
    key: Vec<String>,
    project: Vec<String>,
    id: Vec<String>,
    asked_at: Vec<String>,
    asked_ms: Vec<i64>,
    variant: Vec<&'static str>,
    agent_id: Vec<String>,
    agent_name: Vec<String>,
    kind: Vec<&'static str>,
    priority: Vec<&'static str>,
    content: Vec<String>,
    request_json: Vec<String>,
    origin: Vec<&'static str>,
    deadline_ms: Vec<Option<i64>>,
}

impl RequestColumns {
    fn push(&mut self, project: &str, r: &Request, variant: Variant, origin: Origin) -> Result<()> {
        self.key.push(uuid::Uuid::now_v7().to_string());
        self.project.push(project.to_string());
        self.id.push(owned_text(&r.id));
        self.asked_at.push(r.timestamp.to_string());
        self.asked_ms.push(r.timestamp.as_millisecond());
        self.variant.push(variant.as_str());
        self.agent_id.push(owned_text(&r.agent_id));
        self.agent_name.push(owned_text(&r.agent_name));
        self.kind.push(r.kind.as_str());
        self.priority.push(r.priority.as_str());
        self.content.push(super::CONTENT_COLUMN.to_string());
        self.request_json.push(serde_json::to_string(r)?);
        self.origin.push(origin.as_str());
        self.deadline_ms
            .push(r.deadline().map(|d| d.as_millisecond()));
        Ok(())
    }

    fn bind<'q>(
        &'q self,
        q: sqlx::query::Query<'q, Postgres, sqlx::postgres::PgArguments>,
    ) -> sqlx::query::Query<'q, Postgres, sqlx::postgres::PgArguments> {
        q.bind(&self.key)
            .bind(&self.project)
            .bind(&self.id)
            .bind(&self.asked_at)
            .bind(&self.asked_ms)
            .bind(&self.variant)
            .bind(&self.agent_id)
            .bind(&self.agent_name)
            .bind(&self.kind)
            .bind(&self.priority)
            .bind(&self.content)
            .bind(&self.request_json)
            .bind(&self.origin)
            .bind(&self.deadline_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::Status;

    fn settle(id: &str) -> StoreOp {
        StoreOp::Settle {
            id: id.into(),
            status: Status::Cancelled,
            answer: None,
            reason: None,
        }
    }

    #[test]
    fn a_run_stops_at_another_kind_of_op_or_a_repeated_id() {
        fn key(op: &StoreOp) -> Option<Option<&str>> {
            match op {
                StoreOp::Settle { id, .. } => Some(Some(id.as_str())),
                _ => None,
            }
        }
        let ops = [settle("1"), settle("2"), settle("1"), settle("3")];
        let ops: Vec<&StoreOp> = ops.iter().collect();
        assert_eq!(run_of(&ops, key), 2);
        assert_eq!(run_of(&ops[2..], key), 2);
        let event = StoreOp::Event(Box::new(NewEvent {
            source_app: "a".into(),
            session_id: "s".into(),
            hook_event_type: "Stop".into(),
            payload: serde_json::Value::Null,
            extra: Default::default(),
            timestamp_ms: 0,
            hitl: None,
            idempotency_key: None,
        }));
        let mixed = [settle("1"), event, settle("2")];
        assert_eq!(group_of(&mixed[1]), Group::Events);
        let mixed: Vec<&StoreOp> = mixed.iter().collect();
        assert_eq!(run_of(&mixed, key), 1);
    }
}
