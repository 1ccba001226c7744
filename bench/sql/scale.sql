-- Measurement queries of bench/scale.py (PostgreSQL). Each carries /*bench-driver*/ so that the
-- harness leaves it out of its statement counts. The EXPLAIN mirrors the engine's claim_runs
-- candidate scan (umt/engine/store/sql/postgresql.sql).

-- name: explain_claim_candidates
/*bench-driver*/ EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON)
SELECT id FROM umt.runs
WHERE workflow_key = ANY(%(workflow_keys)s::text[]) AND due_at <= %(now)s
ORDER BY due_at
LIMIT %(limit)s
FOR UPDATE SKIP LOCKED;

-- name: explain_next_due
/*bench-driver*/ EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON)
SELECT min(d.due_at) AS next_due
FROM unnest(%(workflow_keys)s::text[]) AS k(workflow_key)
CROSS JOIN LATERAL (
    SELECT due_at FROM umt.runs
    WHERE workflow_key = k.workflow_key AND due_at IS NOT NULL
    ORDER BY due_at
    LIMIT 1
) AS d;

-- name: explain_waiting_steps_for_signal
/*bench-driver*/ EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON)
SELECT s.run_id, s.phase, s.position
FROM umt.steps s
JOIN umt.runs r ON r.id = s.run_id
WHERE s.signal_name = %(name)s AND s.status = 'waiting' AND r.status = 'waiting'
ORDER BY s.created_at, s.run_id;

-- name: count_by_status
/*bench-driver*/ SELECT workflow_name, status, count(*)::int AS runs
FROM umt.runs GROUP BY workflow_name, status ORDER BY workflow_name, status;

-- name: delete_workflow_runs
/*bench-driver*/ DELETE FROM umt.runs WHERE workflow_name = %(workflow)s;

-- name: table_sizes
/*bench-driver*/ SELECT relname, pg_total_relation_size(c.oid)::bigint AS bytes
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = 'umt' AND c.relkind = 'r' ORDER BY relname;
