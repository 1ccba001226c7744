-- The engine's named queries, SQLite dialect. Every query has a twin with the same name in
-- postgresql.sql. PostgreSQL has a few more (PostgresDatabase.queries_without_twin): notify
-- (SQLite has no notifications, workers watch PRAGMA data_version), the migration lock, and the
-- one-statement forms <name>_fast of the hot operations (here a transaction of several
-- statements costs no round trips: the database runs in this process).
-- Lists arrive as JSON arrays and are read with json_each. Writers are serialized by
-- BEGIN IMMEDIATE, which takes the place of row locks and SKIP LOCKED.

-- name: insert_run
INSERT INTO runs (id, workflow_name, workflow_version, workflow_key, status, input,
                  idempotency_key, key_active, compensable, due_at, created_at, updated_at)
VALUES (:id, :workflow_name, :workflow_version, :workflow_key, 'pending', :input,
        :idempotency_key, :idempotency_key IS NOT NULL, :compensable, :due_at, :now, :now)
ON CONFLICT (workflow_name, idempotency_key) WHERE key_active DO NOTHING
RETURNING *;

-- name: run_holding_key
SELECT * FROM runs
WHERE workflow_name = :workflow_name AND idempotency_key = :idempotency_key AND key_active;

-- name: get_run
SELECT * FROM runs WHERE id = :run_id;

-- name: lock_run
SELECT * FROM runs WHERE id = :run_id;

-- name: list_runs
SELECT * FROM runs
WHERE (:status IS NULL OR status = :status)
  AND (:workflow IS NULL OR workflow_name = :workflow)
ORDER BY created_at DESC, id
LIMIT :limit;

-- name: runs_page
-- Newest first, keyset-paginated: the page after (before_created_at, before_id), never an
-- OFFSET. pattern: a LIKE pattern matched against the title and the info-hash of the input.
SELECT * FROM runs
WHERE (:pattern IS NULL
       OR json_extract(input, '$.title') LIKE :pattern ESCAPE '\'
       OR json_extract(input, '$.info_hash') LIKE :pattern ESCAPE '\')
  AND (:before_created_at IS NULL OR (created_at, id) < (:before_created_at, :before_id))
ORDER BY created_at DESC, id DESC
LIMIT :limit;

-- name: runs_page_of_status
-- runs_page for one status, written so that the plan can use runs_by_status (SQLite plans
-- once for any parameters: "(:status IS NULL OR ...)" would never use it).
SELECT * FROM runs
WHERE status = :status
  AND (:pattern IS NULL
       OR json_extract(input, '$.title') LIKE :pattern ESCAPE '\'
       OR json_extract(input, '$.info_hash') LIKE :pattern ESCAPE '\')
  AND (:before_created_at IS NULL OR (created_at, id) < (:before_created_at, :before_id))
ORDER BY created_at DESC, id DESC
LIMIT :limit;

-- name: count_runs_by_status
SELECT status, count(*) AS runs FROM runs GROUP BY status ORDER BY status;

-- name: steps_of_run
SELECT s.*,
       (SELECT count(*) FROM attempts a
         WHERE a.run_id = s.run_id AND a.phase = s.phase AND a.position = s.position) AS attempts
FROM steps s
WHERE s.run_id = :run_id
ORDER BY CASE s.phase WHEN 'main' THEN 0 ELSE 1 END, s.position;

-- name: attempts_of_run
SELECT a.*, s.name AS step_name
FROM attempts a
JOIN steps s ON s.run_id = a.run_id AND s.phase = a.phase AND s.position = a.position
WHERE a.run_id = :run_id
ORDER BY a.id;

-- name: running_attempts_of_runs
SELECT a.*, s.name AS step_name
FROM attempts a
JOIN steps s ON s.run_id = a.run_id AND s.phase = a.phase AND s.position = a.position
WHERE a.run_id IN (SELECT value FROM json_each(:run_ids)) AND a.status = 'running'
ORDER BY a.id;

-- name: cancel_run
UPDATE runs SET
    status = 'canceled',
    lease_epoch = lease_epoch + 1,
    compensation = CASE WHEN compensable THEN 'pending' END,
    key_active = key_active AND compensable,
    due_at = CASE
        WHEN NOT compensable THEN NULL
        WHEN status = 'running' AND lease_expires_at > :now THEN lease_expires_at
        ELSE :now END,
    lease_expires_at = NULL,
    finished_at = :now,
    updated_at = :now
WHERE id = :run_id
RETURNING *;

-- name: cancel_open_steps
UPDATE steps SET status = 'canceled', updated_at = :now, finished_at = :now
WHERE run_id = :run_id AND phase = 'main'
  AND status IN ('running', 'retrying', 'sleeping', 'waiting');

-- name: cancel_running_attempts
UPDATE attempts SET status = 'canceled', finished_at = :now, error = :error
WHERE run_id = :run_id AND phase = 'main' AND status = 'running';

-- name: annotate_run
UPDATE runs SET detail = :detail, updated_at = :now WHERE id = :run_id;

-- name: lock_signal_name
-- BEGIN IMMEDIATE already serializes every writer.
SELECT :name IS NOT NULL;

-- name: signal_by_key
SELECT * FROM signals WHERE idempotency_key = :idempotency_key;

-- name: waiting_steps_for_signal
SELECT s.run_id, s.phase, s.position
FROM steps s
JOIN runs r ON r.id = s.run_id
WHERE s.signal_name = :name AND s.status = 'waiting' AND r.status = 'waiting'
  AND (:target_run_id IS NULL OR r.id = :target_run_id)
ORDER BY s.created_at, s.run_id;

-- name: deliver_to_step
UPDATE steps SET status = 'succeeded', result = :result, finished_at = :now, updated_at = :now
WHERE run_id = :run_id AND phase = :phase AND position = :position AND status = 'waiting';

-- name: wake_run
UPDATE runs SET status = 'pending', due_at = :now, updated_at = :now
WHERE id = :run_id AND status = 'waiting'
RETURNING workflow_key;

-- name: insert_signal
INSERT INTO signals (id, name, target_run_id, data, idempotency_key, status, delivered_to,
                     created_at, expires_at, delivered_at)
VALUES (:id, :name, :target_run_id, :data, :idempotency_key, :status, :delivered_to, :now,
        :expires_at, :delivered_at);

-- name: take_kept_signal
SELECT * FROM signals
WHERE name = :name AND status = 'kept' AND expires_at > :now
  AND (target_run_id IS NULL OR target_run_id = :run_id)
ORDER BY created_at, id
LIMIT 1;

-- name: consume_signal
UPDATE signals SET status = 'consumed', delivered_to = :delivered_to, delivered_at = :now
WHERE id = :signal_id;

-- name: runs_waiting_on_prefix
SELECT s.run_id, s.position, s.signal_name, s.wake_at, r.workflow_name, r.detail
FROM steps s
JOIN runs r ON r.id = s.run_id
WHERE s.status = 'waiting' AND r.status = 'waiting'
  AND substr(s.signal_name, 1, length(:prefix)) = :prefix
ORDER BY s.created_at;

-- name: insert_worker
INSERT INTO workers (id, host_key, hostname, pid, process_start, workflows, started_at,
                     heartbeat_at)
VALUES (:id, :host_key, :hostname, :pid, :process_start, :workflows, :now, :now);

-- name: touch_worker
UPDATE workers SET heartbeat_at = :now WHERE id = :worker_id;

-- name: stop_worker
UPDATE workers SET stopped_at = :now WHERE id = :worker_id AND stopped_at IS NULL;

-- name: live_workers_elsewhere
SELECT hostname, heartbeat_at FROM workers
WHERE hostname <> :hostname AND stopped_at IS NULL AND heartbeat_at > :since
ORDER BY heartbeat_at DESC
LIMIT 1;

-- name: live_workers_on_host
SELECT id, pid, process_start FROM workers
WHERE host_key = :host_key AND stopped_at IS NULL AND id <> :worker_id;

-- name: live_workers
SELECT id, hostname, pid, workflows, started_at, heartbeat_at FROM workers
WHERE stopped_at IS NULL AND heartbeat_at > :since
ORDER BY started_at, id;

-- name: mark_workers_dead
UPDATE workers SET stopped_at = :now
WHERE id IN (SELECT value FROM json_each(:worker_ids)) AND stopped_at IS NULL;

-- name: expire_leases_of_workers
UPDATE runs SET due_at = :now, lease_expires_at = :now, updated_at = :now
WHERE lease_owner IN (SELECT value FROM json_each(:worker_ids)) AND due_at > :now
RETURNING id;

-- name: claim_runs
UPDATE runs SET
    lease_epoch = lease_epoch + 1,
    lease_owner = :worker_id,
    lease_expires_at = :lease_expires_at,
    due_at = :lease_expires_at,
    status = CASE WHEN status IN ('canceled', 'failed') THEN status ELSE 'running' END,
    compensation = CASE WHEN status IN ('canceled', 'failed') THEN 'running'
                        ELSE compensation END,
    started_at = COALESCE(started_at, :now),
    updated_at = :now
WHERE id IN (
    SELECT id FROM runs
    WHERE workflow_key IN (SELECT value FROM json_each(:workflow_keys)) AND due_at <= :now
    ORDER BY due_at
    LIMIT :limit
)
RETURNING *;

-- name: explain_claim_candidates
EXPLAIN QUERY PLAN SELECT id FROM runs
WHERE workflow_key IN (SELECT value FROM json_each(:workflow_keys)) AND due_at <= :now
ORDER BY due_at
LIMIT :limit;

-- name: reset_running_steps
UPDATE steps SET status = 'pending', updated_at = :now
WHERE run_id IN (SELECT value FROM json_each(:run_ids)) AND status = 'running';

-- name: interrupt_running_attempts
UPDATE attempts SET status = 'interrupted', finished_at = :now
WHERE run_id IN (SELECT value FROM json_each(:run_ids)) AND status = 'running';

-- name: steps_of_runs
SELECT * FROM steps WHERE run_id IN (SELECT value FROM json_each(:run_ids))
ORDER BY run_id, phase, position;

-- name: next_due
SELECT min((SELECT due_at FROM runs
            WHERE workflow_key = k.value AND due_at IS NOT NULL
            ORDER BY due_at LIMIT 1)) AS "next_due [TIMETEXT]"
FROM json_each(:workflow_keys) AS k;

-- name: extend_leases
UPDATE runs SET lease_expires_at = :lease_expires_at, due_at = :lease_expires_at,
                updated_at = :now
FROM (SELECT i.value AS run_id, e.value AS epoch
      FROM json_each(:run_ids) AS i JOIN json_each(:epochs) AS e ON e.key = i.key) AS held
WHERE runs.id = held.run_id AND runs.lease_epoch = held.epoch AND runs.lease_owner = :worker_id
RETURNING runs.id;

-- name: lease_states
SELECT id, status, lease_owner, lease_epoch FROM runs
WHERE id IN (SELECT value FROM json_each(:run_ids));

-- name: lock_run_for_fence
SELECT status, lease_owner, lease_epoch FROM runs WHERE id = :run_id;

-- name: get_step
SELECT * FROM steps WHERE run_id = :run_id AND phase = :phase AND position = :position;

-- name: insert_step
INSERT INTO steps (run_id, phase, position, name, kind, status, result, signal_name, wake_at,
                   created_at, updated_at, finished_at)
VALUES (:run_id, :phase, :position, :name, :kind, :status, :result, :signal_name, :wake_at,
        :now, :now, :finished_at);

-- name: set_step_status
UPDATE steps SET status = :status, updated_at = :now, finished_at = :finished_at
WHERE run_id = :run_id AND phase = :phase AND position = :position;

-- name: succeed_step
UPDATE steps SET status = 'succeeded', result = :result, updated_at = :now, finished_at = :now
WHERE run_id = :run_id AND phase = :phase AND position = :position;

-- name: count_step_failure
UPDATE steps SET failures = failures + 1, status = :status, error = :error, updated_at = :now,
                 finished_at = :finished_at
WHERE run_id = :run_id AND phase = :phase AND position = :position
RETURNING failures;

-- name: insert_attempt
INSERT INTO attempts (run_id, phase, position, attempt, status, worker_id, lease_epoch,
                      started_at)
VALUES (:run_id, :phase, :position, :attempt, 'running', :worker_id, :lease_epoch, :now)
RETURNING id;

-- name: finish_attempt
UPDATE attempts SET status = :status, finished_at = :now, error = :error
WHERE id = :attempt_id AND status = 'running';

-- name: report_progress
UPDATE attempts SET progress = :progress, progress_at = :now
WHERE id = :attempt_id AND status = 'running'
  AND EXISTS (SELECT 1 FROM runs
              WHERE id = :run_id AND lease_owner = :worker_id AND lease_epoch = :lease_epoch);

-- name: release_run
UPDATE runs SET status = :status, due_at = :due_at, lease_owner = NULL, lease_expires_at = NULL,
                updated_at = :now,
                compensation = CASE WHEN compensation = 'running' THEN 'pending'
                                    ELSE compensation END
WHERE id = :run_id
RETURNING workflow_key;

-- name: complete_run
UPDATE runs SET status = 'succeeded', output = :output, error = NULL, detail = NULL,
                due_at = NULL, lease_owner = NULL, lease_expires_at = NULL,
                finished_at = :now, updated_at = :now
WHERE id = :run_id;

-- name: fail_run
UPDATE runs SET status = 'failed', error = :error,
                compensation = CASE WHEN :compensate THEN 'pending' END,
                key_active = key_active AND :compensate,
                due_at = CASE WHEN :compensate THEN :now END,
                lease_owner = NULL, lease_expires_at = NULL,
                finished_at = :now, updated_at = :now
WHERE id = :run_id
RETURNING workflow_key;

-- name: finish_compensation
UPDATE runs SET compensation = :compensation, key_active = 0, due_at = NULL,
                lease_owner = NULL, lease_expires_at = NULL, updated_at = :now,
                error = COALESCE(:error, error)
WHERE id = :run_id;

-- name: expedite_compensation
UPDATE runs SET due_at = :now, updated_at = :now
WHERE id = :run_id AND lease_owner = :worker_id AND compensation = 'pending' AND due_at > :now
RETURNING workflow_key;

-- name: delete_finished_runs
DELETE FROM runs
WHERE status IN ('succeeded', 'failed', 'canceled') AND finished_at < :cutoff
  AND (compensation IS NULL OR compensation IN ('succeeded', 'failed'));

-- name: delete_old_signals
DELETE FROM signals
WHERE (status = 'kept' AND expires_at < :now) OR (status <> 'kept' AND created_at < :cutoff);

-- name: delete_stopped_workers
DELETE FROM workers WHERE stopped_at < :cutoff;

-- name: migrations_table_present
SELECT count(*) > 0 AS present FROM sqlite_master
WHERE type = 'table' AND name = 'schema_migrations';

-- name: create_migrations_table
CREATE TABLE IF NOT EXISTS schema_migrations (
    component text NOT NULL,
    version integer NOT NULL,
    name text NOT NULL,
    checksum text NOT NULL,
    applied_at TIMETEXT NOT NULL,
    PRIMARY KEY (component, version)
);

-- name: applied_migrations
SELECT component, version, name, checksum FROM schema_migrations ORDER BY component, version;

-- name: record_migration
INSERT INTO schema_migrations (component, version, name, checksum, applied_at)
VALUES (:component, :version, :name, :checksum, :now);

-- name: list_tables
SELECT 'main' AS table_schema, name AS table_name FROM sqlite_master
WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND :schemas IS NOT NULL
ORDER BY name;

-- name: list_columns
SELECT t.name AS table_name, c.name AS column_name
FROM sqlite_master AS t, pragma_table_info(t.name) AS c
WHERE t.type = 'table' AND t.name NOT LIKE 'sqlite_%' AND :schemas IS NOT NULL
ORDER BY t.name, c.cid;
