-- Measurement queries of bench/workers.py on PostgreSQL. Each carries /*bench-driver*/ so that
-- its own statement counts leave them out. Tables are named with the engine's default schema.

-- name: create_pg_stat_statements
/*bench-driver*/ CREATE EXTENSION IF NOT EXISTS pg_stat_statements;

-- name: reset_pg_stat_statements
/*bench-driver*/ SELECT pg_stat_statements_reset();

-- name: data_directory
/*bench-driver*/ SELECT current_setting('data_directory') AS data_directory;

-- name: progress
/*bench-driver*/ SELECT
    count(*) FILTER (WHERE status = 'succeeded')::int AS succeeded,
    count(*) FILTER (WHERE status IN ('failed', 'canceled'))::int AS failed,
    extract(epoch FROM min(started_at))::float8 AS first_started,
    extract(epoch FROM max(finished_at))::float8 AS last_finished
FROM umt.runs WHERE workflow_name = %(workflow)s;

-- name: statements
/*bench-driver*/ /* top-level statements of this database, the bench's own left out */
SELECT queryid::text AS queryid, calls::float8 AS calls, rows::float8 AS rows,
       regexp_replace(query, '\s+', ' ', 'g') AS query
FROM pg_stat_statements
WHERE toplevel AND dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND query NOT LIKE '%%bench-driver%%' AND query NOT LIKE '%%bench-observer%%';

-- name: waits
/*bench-driver*/ /* backends of this database waiting on a lock (heavyweight or lightweight) */
SELECT wait_event_type, wait_event, regexp_replace(query, '\s+', ' ', 'g') AS query
FROM pg_stat_activity
WHERE datname = current_database() AND pid <> pg_backend_pid()
  AND wait_event_type IN ('Lock', 'LWLock');
