-- Every index is a b-tree written on every insert, and on this class of machine a
-- request made over HTTP spent most of its commit writing ten pages. Three of them
-- held nothing anyone looks for:
-- * `key`'s primary-key index: the key is a random reference nobody looks a row up
--   by (retention deletes by rowid here);
-- * `UNIQUE (project, id, asked_at)` over every row: only spool questions can come
--   twice (a question file read again after a restart); a request made over HTTP has
--   its event's fresh id, unique in `requests_stored_id`;
-- * `UNIQUE (idempotency_key)` over every event: it held an entry for each event
--   sent without a key too.
-- SQLite cannot drop a table's constraints, so both tables are made again, rows and
-- event ids (and the id sequence) kept.
CREATE TABLE requests_new (
    key           TEXT NOT NULL,
    project       TEXT NOT NULL,
    id            TEXT NOT NULL,
    asked_at      TEXT NOT NULL,
    asked_ms      INTEGER NOT NULL,
    variant       TEXT NOT NULL,
    agent_id      TEXT NOT NULL,
    agent_name    TEXT NOT NULL,
    kind          TEXT NOT NULL,
    priority      TEXT NOT NULL,
    content       TEXT NOT NULL,
    request_json  TEXT NOT NULL,
    status        TEXT NOT NULL DEFAULT 'pending',
    answer_json   TEXT,
    responded_by  TEXT,
    finished_at   TEXT,
    reason        TEXT,
    origin        TEXT NOT NULL DEFAULT 'spool',
    deadline_ms   INTEGER
);
INSERT INTO requests_new (key, project, id, asked_at, asked_ms, variant, agent_id,
        agent_name, kind, priority, content, request_json, status, answer_json,
        responded_by, finished_at, reason, origin, deadline_ms)
    SELECT key, project, id, asked_at, asked_ms, variant, agent_id, agent_name, kind,
        priority, content, request_json, status, answer_json, responded_by,
        finished_at, reason, origin, deadline_ms
    FROM requests ORDER BY rowid;
DROP TABLE requests;
ALTER TABLE requests_new RENAME TO requests;
CREATE UNIQUE INDEX requests_spool_asking ON requests (project, id, asked_at)
    WHERE origin = 'spool';
CREATE INDEX requests_by_time ON requests (asked_ms);
CREATE UNIQUE INDEX requests_stored_id ON requests (id) WHERE origin <> 'spool';
CREATE INDEX requests_pending_stored ON requests (asked_ms)
    WHERE origin <> 'spool' AND status = 'pending';
CREATE INDEX requests_spool_id ON requests (id, asked_ms) WHERE origin = 'spool';

CREATE TABLE events_new (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    source_app       TEXT NOT NULL,
    session_id       TEXT NOT NULL,
    hook_event_type  TEXT NOT NULL,
    payload_json     TEXT NOT NULL,
    extra_json       TEXT NOT NULL,
    timestamp_ms     INTEGER NOT NULL,
    hitl_json        TEXT,
    idempotency_key  TEXT
);
INSERT INTO events_new (id, source_app, session_id, hook_event_type, payload_json,
        extra_json, timestamp_ms, hitl_json, idempotency_key)
    SELECT id, source_app, session_id, hook_event_type, payload_json, extra_json,
        timestamp_ms, hitl_json, idempotency_key
    FROM events;
-- Ids are never given twice, even those of events deleted since.
DELETE FROM sqlite_sequence WHERE name = 'events_new';
INSERT INTO sqlite_sequence (name, seq)
    SELECT 'events_new', seq FROM sqlite_sequence WHERE name = 'events';
DROP TABLE events;
ALTER TABLE events_new RENAME TO events;
CREATE UNIQUE INDEX events_idempotency ON events (idempotency_key)
    WHERE idempotency_key IS NOT NULL;
CREATE INDEX events_by_time ON events (timestamp_ms);
