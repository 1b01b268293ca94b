-- A request made over HTTP wrote its id into two indexes: `requests_stored_id` (its
-- own, unique) and `requests_by_id` (every row's). Looking a request up by id asks
-- the stored requests first and then the spool's, each through an index of its own
-- rows, so a request written now enters one.
DROP INDEX requests_by_id;
CREATE INDEX requests_spool_id ON requests (id, asked_ms) WHERE origin = 'spool';
