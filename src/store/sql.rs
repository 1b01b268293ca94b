//! The write statements, shared by both backends and both drivers (sqlx for
//! PostgreSQL, rusqlite for SQLite writes). `$N` placeholders appear in increasing
//! order, so SQLite numbers them as PostgreSQL does.

/// Records a request; a spool question recorded again (same project, id and time
/// asked: its file read after a restart) changes nothing.
/// Binds: key, project, id, asked_at, asked_ms, variant, agent_id, agent_name, kind,
/// priority, content, request_json, origin, deadline_ms.
pub const INSERT_REQUEST: &str = "INSERT INTO requests (key, project, id, asked_at, asked_ms,
        variant, agent_id, agent_name, kind, priority, content, request_json, origin, deadline_ms)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
    ON CONFLICT (project, id, asked_at) WHERE origin = 'spool' DO NOTHING";

/// Records an answer as being delivered; the first one chosen stands. Binds: project,
/// id, asked_at, variant, request_json, answer_json.
pub const INSERT_DELIVERY: &str = "INSERT INTO deliveries (project, id, asked_at, variant,
        request_json, answer_json)
    VALUES ($1, $2, $3, $4, $5, $6)
    ON CONFLICT (project, id, asked_at) DO NOTHING";

/// Forgets a delivery once the request's end is recorded. Binds: project, id, asked_at.
pub const DELETE_DELIVERY: &str =
    "DELETE FROM deliveries WHERE project = $1 AND id = $2 AND asked_at = $3";

/// Records how a spool request ended, never downgrading an ended one. Binds: status,
/// answer_json, responded_by, finished_at, reason, project, id, asked_at. The row is
/// found through `requests_spool_asking`, a partial index that serves only a
/// statement naming its `origin = 'spool'`: without it, every answer read the whole
/// history.
pub const FINISH_REQUEST: &str = "UPDATE requests SET status = $1, answer_json = $2,
        responded_by = $3, finished_at = $4, reason = $5
    WHERE origin = 'spool' AND project = $6 AND id = $7 AND asked_at = $8
        AND status = 'pending'";

/// Records a step of a request's trail. Binds: id, at_ms, step, surface, detail.
pub const INSERT_TRAIL: &str =
    "INSERT INTO trail (id, at_ms, step, surface, detail) VALUES ($1, $2, $3, $4, $5)";

/// Stores an event unless its idempotency key is known; returns its id if stored.
/// Binds: source_app, session_id, hook_event_type, payload_json, extra_json,
/// timestamp_ms, hitl_json, idempotency_key.
pub const INSERT_EVENT: &str = "INSERT INTO events (source_app, session_id, hook_event_type,
        payload_json, extra_json, timestamp_ms, hitl_json, idempotency_key)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
    ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
    RETURNING id";

/// [`INSERT_EVENT`] for SQLite, whose id is then `last_insert_rowid()`. SQLite
/// carries out RETURNING as a trigger writing into a temporary B-tree, and a
/// statement with a trigger keeps a journal of its own in case it must be undone:
/// opening, filling and closing them was a tenth of the writer's time under load.
pub const SQLITE_INSERT_EVENT: &str = "INSERT INTO events (source_app, session_id,
        hook_event_type, payload_json, extra_json, timestamp_ms, hitl_json, idempotency_key)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
    ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING";

/// The event stored under an idempotency key. Binds: idempotency_key.
pub const EVENT_BY_KEY: &str = "SELECT id FROM events WHERE idempotency_key = $1";

/// Ends a request made over HTTP if it is still pending. Binds: status, answer_json,
/// responded_by, finished_at, reason, id.
pub const SETTLE: &str = "UPDATE requests SET status = $1, answer_json = $2, responded_by = $3,
        finished_at = $4, reason = $5
    WHERE origin <> 'spool' AND id = $6 AND status = 'pending'";

/// Tells other replicas of a change, on commit (PostgreSQL). Binds: channel, payload.
pub const NOTIFY: &str = "SELECT pg_notify($1, $2)";

// PostgreSQL only: many rows a statement (`pg_writer.rs`).

/// Takes `$1` ids from the events' sequence, so a batch's requests can be written
/// with their ids in place.
pub const PG_RESERVE_EVENT_IDS: &str =
    "SELECT nextval(pg_get_serial_sequence('events', 'id')) FROM generate_series(1, $1)";

/// Stores events (given ids) unless their idempotency key is known; returns the ids
/// stored. Binds one array per column, as [`INSERT_EVENT`] with the id first.
pub const PG_INSERT_EVENTS: &str = "INSERT INTO events (id, source_app, session_id,
        hook_event_type, payload_json, extra_json, timestamp_ms, hitl_json, idempotency_key)
    SELECT * FROM UNNEST($1::int8[], $2::text[], $3::text[], $4::text[], $5::text[],
        $6::text[], $7::int8[], $8::text[], $9::text[])
    ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
    RETURNING id";

/// The events stored under idempotency keys, as (id, key). Binds: keys.
pub const PG_EVENTS_BY_KEYS: &str =
    "SELECT id, idempotency_key FROM events WHERE idempotency_key = ANY($1::text[])";

/// Records requests once each. Binds one array per column of [`INSERT_REQUEST`].
pub const PG_INSERT_REQUESTS: &str = "INSERT INTO requests (key, project, id, asked_at,
        asked_ms, variant, agent_id, agent_name, kind, priority, content, request_json,
        origin, deadline_ms)
    SELECT * FROM UNNEST($1::text[], $2::text[], $3::text[], $4::text[], $5::int8[],
        $6::text[], $7::text[], $8::text[], $9::text[], $10::text[], $11::text[],
        $12::text[], $13::text[], $14::int8[])
    ON CONFLICT (project, id, asked_at) WHERE origin = 'spool' DO NOTHING";

/// Ends requests made over HTTP that are still pending, as [`SETTLE`] does one;
/// returns the ids it ended. Binds arrays: id, status, answer_json, responded_by,
/// reason (no id twice); then finished_at, one for all.
pub const PG_SETTLE_MANY: &str = "UPDATE requests SET status = v.status,
        answer_json = v.answer_json, responded_by = v.responded_by,
        finished_at = $6, reason = v.reason
    FROM UNNEST($1::text[], $2::text[], $3::text[], $4::text[], $5::text[])
        AS v (id, status, answer_json, responded_by, reason)
    WHERE requests.origin <> 'spool' AND requests.id = v.id AND requests.status = 'pending'
    RETURNING requests.id";

/// A lone request made over HTTP in one statement (no transaction around it): its
/// event, the request under the event's id, and the notice to other replicas. No row
/// back when the idempotency key was known. The request's JSON comes in two halves,
/// `$19` and `$20`, for the id to go between. Binds: the event's columns as
/// [`INSERT_EVENT`]; key, project, asked_at, asked_ms, variant, agent_id, agent_name,
/// kind, priority, content, JSON before the id, JSON after it, deadline_ms; channel,
/// replica; origin.
pub const PG_CREATE_ALONE: &str = "WITH ev AS (
        INSERT INTO events (source_app, session_id, hook_event_type, payload_json,
            extra_json, timestamp_ms, hitl_json, idempotency_key)
        VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
        ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
        RETURNING id
    ), req AS (
        INSERT INTO requests (key, project, id, asked_at, asked_ms, variant, agent_id,
            agent_name, kind, priority, content, request_json, origin, deadline_ms)
        SELECT $9, $10, CAST(ev.id AS TEXT), $11, $12, $13, $14, $15, $16, $17, $18,
            $19 || CAST(ev.id AS TEXT) || $20, $24, $21
        FROM ev
        RETURNING id
    )
    SELECT ev.id, (SELECT count(pg_notify($22, json_build_object('r', $23::text,
            'k', 'created', 'ids', json_build_array(req.id))::text)) FROM req) AS told
    FROM ev";

/// A lone settle in one statement, with its notice when it won; the id back if it
/// did. Binds: as [`SETTLE`], then channel, replica.
pub const PG_SETTLE_ALONE: &str = "WITH s AS (
        UPDATE requests SET status = $1, answer_json = $2, responded_by = $3,
            finished_at = $4, reason = $5
        WHERE origin <> 'spool' AND id = $6 AND status = 'pending'
        RETURNING id
    )
    SELECT s.id, pg_notify($7, json_build_object('r', $8::text, 'k', 'settled',
            'ids', json_build_array(s.id))::text)::text AS told
    FROM s";
