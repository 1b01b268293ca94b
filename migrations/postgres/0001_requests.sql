-- Every question ever seen, and how it ended. One row per asking: a claude-helpers
-- agent reuses its file name (its id) for every question, so the key is
-- (project, id, asked_at), with a generated `key` for references.
CREATE TABLE requests (
    key           TEXT PRIMARY KEY NOT NULL,
    project       TEXT NOT NULL,
    id            TEXT NOT NULL,
    asked_at      TEXT NOT NULL,
    asked_ms      BIGINT NOT NULL,
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
    UNIQUE (project, id, asked_at)
);
CREATE INDEX requests_by_id ON requests (id);
CREATE INDEX requests_by_time ON requests (asked_ms);
CREATE INDEX requests_by_status ON requests (status);
