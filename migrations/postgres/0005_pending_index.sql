-- Every index is written on every insert: a request made over HTTP wrote eight
-- b-trees, its answer three. The two indexes over every row's status served one
-- question (which stored requests are still pending: a starting broker, the
-- replicas' resync, retention), which one small index of those rows answers; it
-- holds only requests still waiting, so an answer removes an entry and adds none.
DROP INDEX requests_by_status;
DROP INDEX requests_pending_remote;
CREATE INDEX requests_pending_stored ON requests (asked_ms)
    WHERE origin <> 'spool' AND status = 'pending';
