-- Requests made over HTTP live in the store, not the spool: `origin` says which, and
-- `deadline_ms` lets a restarted broker time them out exactly. Their ids are unique.
ALTER TABLE requests ADD COLUMN origin TEXT NOT NULL DEFAULT 'spool';
ALTER TABLE requests ADD COLUMN deadline_ms INTEGER;
CREATE UNIQUE INDEX requests_remote_id ON requests (id) WHERE origin = 'http';
CREATE INDEX requests_pending_remote ON requests (origin, status);

-- The activity feed of seed 004's POST /events: every agent event, with or without a
-- request (whose id is the event's). `idempotency_key` makes a repeated POST return
-- the first event.
CREATE TABLE events (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    source_app       TEXT NOT NULL,
    session_id       TEXT NOT NULL,
    hook_event_type  TEXT NOT NULL,
    payload_json     TEXT NOT NULL,
    extra_json       TEXT NOT NULL,
    timestamp_ms     INTEGER NOT NULL,
    hitl_json        TEXT,
    idempotency_key  TEXT UNIQUE
);
CREATE INDEX events_by_time ON events (timestamp_ms);
