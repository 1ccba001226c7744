-- Business-side queries of the engine tests (a stand-in for umt's ledger and catalog).

-- name: create_effects
CREATE TABLE IF NOT EXISTS effects (
    id integer PRIMARY KEY AUTOINCREMENT,
    run_id text NOT NULL,
    step text NOT NULL,
    attempt integer NOT NULL,
    lease_epoch integer NOT NULL,
    pid integer,
    worker_pid integer,
    note text NOT NULL DEFAULT ''
);

-- name: insert_effect
INSERT INTO effects (run_id, step, attempt, lease_epoch, note)
VALUES (:run_id, :step, :attempt, :lease_epoch, :note);

-- name: insert_worker_effect
INSERT INTO effects (run_id, step, attempt, lease_epoch, worker_pid, note)
VALUES (:run_id, :step, :attempt, :lease_epoch, :worker_pid, :note);

-- name: effects
SELECT run_id, step, attempt, lease_epoch, worker_pid, note FROM effects
WHERE :run_id IS NULL OR run_id = :run_id
ORDER BY id;

-- name: effect_counts
SELECT run_id, step, count(*) AS n FROM effects GROUP BY run_id, step;

-- name: insert_sleeping_runs
-- Many parked runs at once, for the claim-plan test.
WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < :count)
INSERT INTO runs (id, workflow_name, workflow_version, workflow_key, status, input, due_at,
                  created_at, updated_at)
SELECT lower(hex(randomblob(16))), 'sleeper', '1', 'sleeper@1', 'sleeping', 'null',
       strftime('%Y-%m-%dT%H:%M:%S', :wake_at, '+' || n || ' seconds') || '.000000+00:00', :now, :now
FROM g;

-- name: analyze_runs
ANALYZE;

-- name: create_executions
-- Every start of a step body, written outside any fence: how often a body really ran.
CREATE TABLE IF NOT EXISTS executions (
    id integer PRIMARY KEY AUTOINCREMENT,
    run_id text NOT NULL,
    step text NOT NULL,
    lease_epoch integer NOT NULL,
    worker_pid integer NOT NULL,
    executed_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%f+00:00', 'now'))
);

-- name: insert_execution
INSERT INTO executions (run_id, step, lease_epoch, worker_pid)
VALUES (:run_id, :step, :lease_epoch, :worker_pid);

-- name: executions
SELECT run_id, step, lease_epoch, worker_pid FROM executions ORDER BY id;

-- name: execution_times
SELECT run_id, step, lease_epoch, worker_pid, executed_at AS "executed_at [TIMETEXT]"
FROM executions ORDER BY id;

-- name: server_now
SELECT strftime('%Y-%m-%dT%H:%M:%f+00:00', 'now') AS "now [TIMETEXT]";

-- name: create_catalog
CREATE TABLE IF NOT EXISTS catalog (title text PRIMARY KEY, run_id text NOT NULL);

-- name: insert_catalog
INSERT INTO catalog (title, run_id) VALUES (:title, :run_id);

-- name: catalog
SELECT title, run_id FROM catalog ORDER BY title;

-- name: insert_effect_then_refuse
-- Two statements, the second refused (the id is taken): an operation of several statements.
INSERT INTO effects (id, run_id, step, attempt, lease_epoch, note)
VALUES (-1, :run_id, 'first', 1, 0, '');
INSERT INTO effects (id, run_id, step, attempt, lease_epoch, note)
VALUES (-1, :run_id, 'second', 1, 0, '');
