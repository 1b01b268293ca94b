-- A request's trail: what hitl did about it besides asking and answering (each
-- notification sent and how it went, each vote), for `hitl history --id` and the
-- dashboard. Found by the request's id; swept with history.
CREATE TABLE trail (
    id       TEXT NOT NULL,
    at_ms    INTEGER NOT NULL,
    step     TEXT NOT NULL,
    surface  TEXT NOT NULL,
    detail   TEXT NOT NULL
);
CREATE INDEX trail_by_id ON trail (id, at_ms);
CREATE INDEX trail_by_time ON trail (at_ms);
