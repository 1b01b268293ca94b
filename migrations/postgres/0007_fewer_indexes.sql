-- Every index is written on every insert. Two unique indexes held entries nobody
-- looks for: `(project, id, asked_at)` over every request, though only spool
-- questions can come twice (a request made over HTTP has its event's fresh id,
-- unique in `requests_stored_id`), and `idempotency_key` over every event, an entry
-- for each event sent without a key too. Each now covers the rows it guards.
-- (`key` keeps its primary key here: retention deletes by it.)
ALTER TABLE requests DROP CONSTRAINT requests_project_id_asked_at_key;
CREATE UNIQUE INDEX requests_spool_asking ON requests (project, id, asked_at)
    WHERE origin = 'spool';
ALTER TABLE events DROP CONSTRAINT events_idempotency_key_key;
CREATE UNIQUE INDEX events_idempotency ON events (idempotency_key)
    WHERE idempotency_key IS NOT NULL;
