-- Every origin but the spool lives in the store (HTTP, and hooks, MCP, tasks and
-- mailboxes): their ids, the events' ids, are unique among them all.
DROP INDEX requests_remote_id;
CREATE UNIQUE INDEX requests_stored_id ON requests (id) WHERE origin <> 'spool';
