//! The write statements, shared by both backends and both drivers (sqlx for
//! PostgreSQL, rusqlite for SQLite writes). `$N` placeholders appear in increasing
//! order, so SQLite numbers them as PostgreSQL does.

/// Records a request once; a repeat (same project, id and time asked) changes nothing.
/// Binds: key, project, id, asked_at, asked_ms, variant, agent_id, agent_name, kind,
/// priority, content, request_json, origin, deadline_ms.
pub const INSERT_REQUEST: &str = "INSERT INTO requests (key, project, id, asked_at, asked_ms,
        variant, agent_id, agent_name, kind, priority, content, request_json, origin, deadline_ms)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
    ON CONFLICT (project, id, asked_at) DO NOTHING";

/// Marks an answer as being delivered. Binds: answer_json, project, id, asked_at.
pub const MARK_DELIVERING: &str = "UPDATE requests SET status = 'delivering', answer_json = $1
    WHERE project = $2 AND id = $3 AND asked_at = $4 AND status = 'pending'";

/// Records how a spool request ended, never downgrading an ended one. Binds: status,
/// answer_json, responded_by, finished_at, reason, project, id, asked_at.
pub const FINISH_REQUEST: &str = "UPDATE requests SET status = $1, answer_json = $2,
        responded_by = $3, finished_at = $4, reason = $5
    WHERE project = $6 AND id = $7 AND asked_at = $8 AND status IN ('pending', 'delivering')";

/// Stores an event unless its idempotency key is known; returns its id if stored.
/// Binds: source_app, session_id, hook_event_type, payload_json, extra_json,
/// timestamp_ms, hitl_json, idempotency_key.
pub const INSERT_EVENT: &str = "INSERT INTO events (source_app, session_id, hook_event_type,
        payload_json, extra_json, timestamp_ms, hitl_json, idempotency_key)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
    ON CONFLICT (idempotency_key) DO NOTHING
    RETURNING id";

/// The event stored under an idempotency key. Binds: idempotency_key.
pub const EVENT_BY_KEY: &str = "SELECT id FROM events WHERE idempotency_key = $1";

/// Ends a request made over HTTP if it is still pending. Binds: status, answer_json,
/// responded_by, finished_at, reason, id.
pub const SETTLE: &str = "UPDATE requests SET status = $1, answer_json = $2, responded_by = $3,
        finished_at = $4, reason = $5
    WHERE origin = 'http' AND id = $6 AND status = 'pending'";

/// Tells other replicas of a change, on commit (PostgreSQL). Binds: channel, payload.
pub const NOTIFY: &str = "SELECT pg_notify($1, $2)";
