-- Answers the broker chose and is delivering, kept apart from `requests` so that
-- recording one (on the asker's path: it commits before the answer file is written)
-- touches one small B-tree instead of the requests table and its indexes. A row
-- lives until the request's end is recorded; a broker that died in between delivers
-- the same answer at its next start.
CREATE TABLE deliveries (
    project       TEXT NOT NULL,
    id            TEXT NOT NULL,
    asked_at      TEXT NOT NULL,
    variant       TEXT NOT NULL,
    request_json  TEXT NOT NULL,
    answer_json   TEXT NOT NULL,
    PRIMARY KEY (project, id, asked_at)
) WITHOUT ROWID;

INSERT INTO deliveries (project, id, asked_at, variant, request_json, answer_json)
    SELECT project, id, asked_at, variant, request_json, answer_json
    FROM requests WHERE status = 'delivering' AND answer_json IS NOT NULL;
UPDATE requests SET status = 'pending', answer_json = NULL WHERE status = 'delivering';
