-- Measurement queries of the peer-bench driver (bench/umt_driver.py), PostgreSQL only.
-- They are not engine work: each carries /*bench-driver*/ so that the harness leaves them out
-- of its pg_stat_statements counts. Tables are named with the engine's default schema, umt.

-- name: runs_state
/*bench-driver*/ SELECT id::text AS id, status, output,
       (extract(epoch FROM created_at) * 1000)::float8 AS created_ms,
       (extract(epoch FROM finished_at) * 1000)::float8 AS finished_ms
FROM umt.runs WHERE id = ANY(%(ids)s::uuid[]);

-- name: count_parked
/*bench-driver*/ /* parked: waits durably (sleep or signal wait) and no worker holds it */
SELECT count(*)::int AS parked
FROM umt.runs
WHERE id = ANY(%(ids)s::uuid[]) AND status IN ('sleeping', 'waiting') AND lease_owner IS NULL;

-- name: reset_runs
/*bench-driver*/ TRUNCATE umt.attempts, umt.steps, umt.runs, umt.signals;

-- name: reset_runs_keeping
/*bench-driver*/ /* scale runs keep the background runs of one workflow (bench/scale.py) */
DELETE FROM umt.runs WHERE workflow_name <> %(keep)s;

-- name: reset_signals
/*bench-driver*/ DELETE FROM umt.signals;

-- name: reset_workers
/*bench-driver*/ DELETE FROM umt.workers WHERE stopped_at IS NOT NULL;

-- name: stats
/*bench-driver*/ SELECT
    (SELECT count(*)::int FROM umt.runs) AS runs,
    (SELECT count(*)::int FROM umt.steps) AS steps,
    (SELECT count(*)::int FROM umt.attempts) AS attempts,
    (SELECT count(*)::int FROM umt.signals) AS signals;
