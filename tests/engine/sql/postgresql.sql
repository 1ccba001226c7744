-- Business-side queries of the engine tests (a stand-in for umt's ledger and catalog).

-- name: create_effects
CREATE TABLE IF NOT EXISTS effects (
    id bigserial PRIMARY KEY,
    run_id text NOT NULL,
    step text NOT NULL,
    attempt integer NOT NULL,
    lease_epoch bigint NOT NULL,
    pid integer NOT NULL DEFAULT pg_backend_pid(),
    worker_pid integer,
    note text NOT NULL DEFAULT ''
);

-- name: insert_effect
INSERT INTO effects (run_id, step, attempt, lease_epoch, note)
VALUES (%(run_id)s, %(step)s, %(attempt)s, %(lease_epoch)s, %(note)s);

-- name: insert_worker_effect
INSERT INTO effects (run_id, step, attempt, lease_epoch, worker_pid, note)
VALUES (%(run_id)s, %(step)s, %(attempt)s, %(lease_epoch)s, %(worker_pid)s, %(note)s);

-- name: effects
SELECT run_id, step, attempt, lease_epoch, worker_pid, note FROM effects
WHERE %(run_id)s::text IS NULL OR run_id = %(run_id)s::text
ORDER BY id;

-- name: effect_counts
SELECT run_id, step, count(*) AS n FROM effects GROUP BY run_id, step;

-- name: insert_sleeping_runs
-- Many parked runs at once, for the claim-plan test.
INSERT INTO runs (id, workflow_name, workflow_version, workflow_key, status, input, due_at,
                  created_at, updated_at)
SELECT gen_random_uuid(), 'sleeper', '1', 'sleeper@1', 'sleeping', 'null'::jsonb,
       %(wake_at)s::timestamptz + make_interval(secs => g), %(now)s, %(now)s
FROM generate_series(1, %(count)s) AS g;

-- name: analyze_runs
ANALYZE runs;

-- name: create_executions
-- Every start of a step body, written outside any fence: how often a body really ran.
CREATE TABLE IF NOT EXISTS executions (
    id bigserial PRIMARY KEY,
    run_id text NOT NULL,
    step text NOT NULL,
    lease_epoch bigint NOT NULL,
    worker_pid integer NOT NULL,
    -- the server's time: what the tests of skewed clocks compare
    executed_at timestamptz NOT NULL DEFAULT clock_timestamp()
);

-- name: insert_execution
INSERT INTO executions (run_id, step, lease_epoch, worker_pid)
VALUES (%(run_id)s, %(step)s, %(lease_epoch)s, %(worker_pid)s);

-- name: executions
SELECT run_id, step, lease_epoch, worker_pid FROM executions ORDER BY id;

-- name: execution_times
SELECT run_id, step, lease_epoch, worker_pid, executed_at FROM executions ORDER BY id;

-- name: server_now
SELECT clock_timestamp() AS now;

-- name: create_catalog
CREATE TABLE IF NOT EXISTS catalog (title text PRIMARY KEY, run_id text NOT NULL);

-- name: insert_catalog
INSERT INTO catalog (title, run_id) VALUES (%(title)s, %(run_id)s);

-- name: catalog
SELECT title, run_id FROM catalog ORDER BY title;

-- name: insert_effect_then_refuse
-- Two statements, the second refused (the id is taken): an operation of several statements.
INSERT INTO effects (id, run_id, step, attempt, lease_epoch, note)
VALUES (-1, %(run_id)s, 'first', 1, 0, '');
INSERT INTO effects (id, run_id, step, attempt, lease_epoch, note)
VALUES (-1, %(run_id)s, 'second', 1, 0, '');
