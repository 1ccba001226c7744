-- Measurement queries of DBOS's peer-bench driver (bench/dbos_driver.py), PostgreSQL only.
-- They read DBOS's system tables (schema dbos, as DBOS 3.4 lays them out) and carry
-- /*bench-driver*/ so that the harness leaves them out of its pg_stat_statements counts.

-- name: runs_state
/*bench-driver*/ SELECT ws.workflow_uuid AS id, ws.status, ws.serialization,
       ws.created_at::float8 AS created_ms,
       coalesce(ws.completed_at, ws.updated_at)::float8 AS finished_ms,
       coalesce(wo.output, ws.output) AS output
FROM dbos.workflow_status ws
LEFT JOIN dbos.workflow_output wo ON wo.workflow_uuid = ws.workflow_uuid
WHERE ws.workflow_uuid = ANY(%(ids)s::text[]);

-- name: count_parked
/*bench-driver*/ /* parked: PENDING, and the newest operation recorded is a durable sleep
   (DBOS.sleep, or the timeout DBOS.recv records once its waiter is in place) */
SELECT count(*)::int AS parked
FROM dbos.workflow_status ws
WHERE ws.workflow_uuid = ANY(%(ids)s::text[]) AND ws.status = 'PENDING'
  AND (SELECT oo.function_name FROM dbos.operation_outputs oo
       WHERE oo.workflow_uuid = ws.workflow_uuid
       ORDER BY oo.function_id DESC LIMIT 1) = 'DBOS.sleep';

-- name: reset_runs
/*bench-driver*/ TRUNCATE dbos.workflow_status, dbos.operation_outputs, dbos.workflow_input,
  dbos.workflow_output, dbos.notifications, dbos.workflow_events, dbos.workflow_events_history,
  dbos.streams CASCADE;

-- name: stats
/*bench-driver*/ SELECT
  (SELECT count(*)::int FROM dbos.workflow_status) AS runs,
  (SELECT count(*)::int FROM dbos.operation_outputs) AS steps,
  (SELECT count(*)::int FROM dbos.notifications) AS signals;
