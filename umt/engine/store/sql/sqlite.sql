-- The engine's named queries, SQLite dialect. Every query has a twin with the same name in
-- postgresql.sql. PostgreSQL has a few more (PostgresDatabase.queries_without_twin): notify
-- (SQLite has no notifications, workers watch PRAGMA data_version) and the migration lock.
-- Lists arrive as JSON arrays and are read with json_each. Writers are serialized by
-- BEGIN IMMEDIATE, which takes the place of row locks and SKIP LOCKED.
--
-- SQLite has no data-modifying CTEs, so a hot operation that writes several tables is a block
-- of a few statements, run in order in one transaction (Database.operation; in-process, they
-- cost no round trips); it returns the rows of its last statement that has result columns.
-- Each statement of a fenced operation includes the fence (the block fence, written once): as
-- writers are serialized, it holds for all of them or for none, and then the block returns no
-- row and wrote nothing.

-- name: insert_run
-- A new run; no row when the idempotency key is held by another run. Only its id comes back:
-- every other column is given or takes its default (Runs.create_run).
INSERT INTO runs (id, workflow_name, workflow_version, workflow_key, status, input,
                  idempotency_key, key_active, compensable, due_at, created_at, updated_at)
VALUES (:id, :workflow_name, :workflow_version, :workflow_key, 'pending', :input,
        :idempotency_key, :idempotency_key IS NOT NULL, :compensable, :due_at, :now, :now)
ON CONFLICT (workflow_name, idempotency_key) WHERE key_active DO NOTHING
RETURNING id;

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

-- name: newest_runs
-- Not run alone: the search, the keyset and the order of runs_page and runs_page_of_status.
(:pattern IS NULL
       OR json_extract(input, '$.title') LIKE :pattern ESCAPE '\'
       OR json_extract(input, '$.info_hash') LIKE :pattern ESCAPE '\')
  AND (:before_created_at IS NULL OR (created_at, id) < (:before_created_at, :before_id))
ORDER BY created_at DESC, id DESC
LIMIT :limit;

-- name: runs_page
-- Newest first, keyset-paginated: the page after (before_created_at, before_id), never an
-- OFFSET. pattern: a LIKE pattern matched against the title and the info-hash of the input.
SELECT * FROM runs WHERE {newest_runs};

-- name: runs_page_of_status
-- runs_page for one status, written so that the plan can use runs_by_status (SQLite plans
-- once for any parameters: "(:status IS NULL OR ...)" would never use it).
SELECT * FROM runs WHERE status = :status AND {newest_runs};

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
-- Not run alone: the first statement of send_signal and wait_for_signal, as on PostgreSQL;
-- BEGIN IMMEDIATE already serializes every writer.
SELECT :signal_name IS NOT NULL;

-- name: kept_signal
-- Not run alone: the oldest signal kept for signal_name that the run may take (none when
-- take_kept is false, or when the fence, a CTE of the including statement, failed).
SELECT id, data FROM signals
WHERE name = :signal_name AND status = 'kept' AND expires_at > :now AND :take_kept
  AND (target_run_id IS NULL OR target_run_id = :run_id)
  AND EXISTS (SELECT 1 FROM fence)
ORDER BY created_at, id
LIMIT 1;

-- name: wait_for_signal
-- The previous step's result when it is given (completing), then a signal wait: takes the kept signal if there is one (received: the step's result), else
-- records the waiting step and parks the run until wake_at (NULL: no limit). The step is
-- recorded waiting, then gets the kept signal, which is then consumed (found by the id in the
-- step's result); the run is released last, after the statement that returns the row.
{lock_signal_name};
{completing};
WITH fence AS ({fence})
INSERT INTO steps (run_id, phase, position, name, kind, status, signal_name, wake_at,
                   created_at, updated_at)
SELECT id, :phase, :position, :name, 'signal', 'waiting', :signal_name, :wake_at, :now, :now
FROM fence WHERE true
ON CONFLICT (run_id, phase, position) DO NOTHING;
WITH fence AS ({fence}), kept AS ({kept_signal})
UPDATE steps SET status = 'succeeded', finished_at = :now, updated_at = :now,
                 result = (SELECT json_object('signal_id', id, 'name', :signal_name,
                                              'data', json(data)) FROM kept)
WHERE run_id = (SELECT id FROM fence) AND phase = :phase AND position = :position
  AND status = 'waiting' AND EXISTS (SELECT 1 FROM kept);
WITH fence AS ({fence})
UPDATE signals SET status = 'consumed', delivered_to = json_array(:run_id), delivered_at = :now
WHERE status = 'kept'
  AND id = (SELECT json_extract(result, '$.signal_id') FROM steps
            WHERE run_id = (SELECT id FROM fence) AND phase = :phase AND position = :position
              AND status = 'succeeded');
WITH fence AS ({fence})
SELECT fence.id, s.result AS received
FROM fence
LEFT JOIN steps s ON s.run_id = fence.id AND s.phase = :phase AND s.position = :position
                 AND s.status = 'succeeded';
WITH fence AS ({fence})
UPDATE runs SET status = 'waiting', due_at = :wake_at, {release}
WHERE id = (SELECT id FROM fence)
  AND NOT EXISTS (SELECT 1 FROM steps
                  WHERE run_id = runs.id AND phase = :phase AND position = :position
                    AND status = 'succeeded');

-- name: signal_accepted
-- Not run alone: whether send_signal may write (see the last statement there).
NOT EXISTS (SELECT 1 FROM signals WHERE idempotency_key = :idempotency_key)
AND (:target_run_id IS NULL
     OR EXISTS (SELECT 1 FROM runs WHERE id = :target_run_id
                                     AND status NOT IN ('succeeded', 'failed', 'canceled')))

-- name: send_signal
-- Delivers a signal to every run waiting on its name (only to target_run_id when given): the
-- steps get its payload (which holds the signal's id, so the next statements find them), the
-- runs are due now, and the signal is recorded as delivered, or kept when no run waits.
-- Writes nothing when idempotency_key names an earlier signal (returned as earlier_*) or
-- target_run_id names no run (target_found) or a finished one (target_status; the final
-- statuses are those of models.FINAL_STATUSES). Returns one row.
{lock_signal_name};
UPDATE steps SET result = :payload
WHERE signal_name = :signal_name AND status = 'waiting'
  AND run_id IN (SELECT id FROM runs WHERE status = 'waiting')
  AND (:target_run_id IS NULL OR run_id = :target_run_id)
  AND {signal_accepted};
UPDATE runs SET status = 'pending', due_at = :now, updated_at = :now
WHERE status = 'waiting'
  AND id IN (SELECT run_id FROM steps
             WHERE signal_name = :signal_name AND status = 'waiting' AND result = :payload);
INSERT INTO signals (id, name, target_run_id, data, idempotency_key, status, delivered_to,
                     created_at, expires_at, delivered_at)
SELECT * FROM (
    SELECT :id, :signal_name, :target_run_id, :data, :idempotency_key,
           CASE WHEN count(*) > 0 THEN 'delivered' ELSE 'kept' END, json_group_array(run_id),
           :now, :expires_at, CASE WHEN count(*) > 0 THEN :now END
    FROM (SELECT run_id FROM steps
          WHERE signal_name = :signal_name AND status = 'waiting' AND result = :payload
          ORDER BY created_at, run_id)
)
WHERE {signal_accepted};
UPDATE steps SET status = 'succeeded', finished_at = :now, updated_at = :now
WHERE signal_name = :signal_name AND status = 'waiting' AND result = :payload;
SELECT mine.delivered_to,
       e.id AS earlier_id, e.name AS earlier_name, e.target_run_id AS earlier_target_run_id,
       e.data AS earlier_data, e.status AS earlier_status,
       e.delivered_to AS earlier_delivered_to,
       t.id IS NOT NULL AS target_found, t.status AS target_status
FROM (SELECT 1) AS one
LEFT JOIN signals mine ON mine.id = :id
LEFT JOIN signals e ON e.idempotency_key = :idempotency_key AND e.id <> :id
LEFT JOIN runs t ON t.id = :target_run_id;

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

-- name: claim_due
-- Not run alone: the runs claim_runs takes (all its statements see the same ones: writers are
-- serialized and only its last statement changes runs). held, take_leased: as in PostgreSQL
-- (one condition: SQLite's planner leaves the index runs_due for a scan when they are two; a
-- run held has a lease, so without take_leased it is left out anyway).
SELECT id FROM runs
WHERE workflow_key IN (SELECT value FROM json_each(:workflow_keys)) AND due_at <= :now
  AND CASE WHEN :take_leased THEN id NOT IN (SELECT value FROM json_each(:held))
           ELSE lease_expires_at IS NULL END
ORDER BY due_at
LIMIT :limit;

-- name: claim_runs
-- Leases due runs to the worker; their attempts still running are interrupted and their
-- running steps are pending again. claimed_before: whether the run may have recorded steps
-- (here always, the steps are read in the same transaction anyway).
UPDATE attempts SET status = 'interrupted', finished_at = :now
WHERE run_id IN ({claim_due}) AND status = 'running';
UPDATE steps SET status = 'pending', updated_at = :now
WHERE run_id IN ({claim_due}) AND status = 'running';
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
WHERE id IN ({claim_due})
RETURNING *, 1 AS claimed_before;

-- name: explain_claim_candidates
EXPLAIN QUERY PLAN {claim_due};

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

-- name: fence
-- The lease fence, written once: the run, if this worker still holds its lease at the epoch
-- it claimed. Queries of fenced operations include it by name; lock_fence runs it at the
-- start of a fenced transaction.
SELECT id FROM runs WHERE id = :run_id AND lease_owner = :worker_id AND lease_epoch = :lease_epoch;

-- name: lock_fence
{fence};

-- name: lease_of_run
-- Why a fence failed (read after a fenced operation wrote nothing).
SELECT status, lease_owner, lease_epoch FROM runs WHERE id = :run_id;

-- name: release
-- Not run alone: the SET list that gives a run's lease back (a running compensation is pending
-- again).
lease_owner = NULL, lease_expires_at = NULL, updated_at = :now,
compensation = CASE WHEN compensation = 'running' THEN 'pending' ELSE compensation END;

-- name: completing
-- Not run alone: the statements with which begin_step, complete_step, start_sleep,
-- wait_for_signal and complete_run commit an earlier step's result (completed_result of attempt completed_attempt_id at
-- completed_position; NULL: none), unless that step had succeeded already (a retried commit
-- whose first try did commit). The attempt first: it asks whether the step is done yet.
WITH fence AS ({fence})
UPDATE attempts SET status = 'succeeded', finished_at = :now, error = NULL
WHERE id = :completed_attempt_id AND status = 'running'
  AND EXISTS (SELECT 1 FROM steps
              WHERE run_id = (SELECT id FROM fence) AND phase = :phase
                AND position = :completed_position AND status <> 'succeeded');
WITH fence AS ({fence})
UPDATE steps SET status = 'succeeded', result = :completed_result, updated_at = :now,
                 finished_at = :now
WHERE run_id = (SELECT id FROM fence) AND phase = :phase AND position = :completed_position
  AND status <> 'succeeded';

-- name: begin_step
-- The previous step's result when it is given (completing), then the step (new, or again
-- running) and its new attempt. Returns the attempt's id and number.
{completing};
WITH fence AS ({fence})
INSERT INTO steps (run_id, phase, position, name, kind, status, created_at, updated_at)
SELECT id, :phase, :position, :name, 'step', 'running', :now, :now FROM fence WHERE true
ON CONFLICT (run_id, phase, position)
    DO UPDATE SET status = 'running', updated_at = excluded.updated_at, finished_at = NULL;
WITH fence AS ({fence})
INSERT INTO attempts (run_id, phase, position, attempt, status, worker_id, lease_epoch,
                      started_at)
SELECT run_id, phase, position, failures + 1, 'running', :worker_id, :lease_epoch, :now
FROM steps
WHERE run_id = (SELECT id FROM fence) AND phase = :phase AND position = :position
RETURNING id, attempt;

-- name: complete_step
-- A step's result (completing); completed tells whether it committed now (0: it had already).
{completing};
WITH fence AS ({fence})
SELECT changes() > 0 AS completed FROM fence;

-- name: fail_step
-- A failed attempt. With retry the step is retrying and the run released until due_at, else
-- the step failed for good. Returns the step's failure count.
WITH fence AS ({fence})
UPDATE attempts SET status = 'failed', finished_at = :now, error = :error
WHERE id = :attempt_id AND status = 'running' AND EXISTS (SELECT 1 FROM fence);
WITH fence AS ({fence})
UPDATE steps SET failures = failures + 1, error = :error, updated_at = :now,
                 status = CASE WHEN :retry THEN 'retrying' ELSE 'failed' END,
                 finished_at = CASE WHEN :retry THEN NULL ELSE :now END
WHERE run_id = (SELECT id FROM fence) AND phase = :phase AND position = :position
RETURNING failures;
WITH fence AS ({fence})
UPDATE runs SET status = :status, due_at = :due_at, {release}
WHERE id = (SELECT id FROM fence) AND :retry;

-- name: finish_parked_step
-- A timer fired (succeeded) or a signal wait timed out (timed_out).
WITH fence AS ({fence})
UPDATE steps SET status = :status, updated_at = :now, finished_at = :now
WHERE run_id = (SELECT id FROM fence) AND phase = :phase AND position = :position;
{fence};

-- name: start_sleep
-- The previous step's result when it is given (completing), then a timer step; when park,
-- the run is released until wake_at.
{completing};
WITH fence AS ({fence})
INSERT INTO steps (run_id, phase, position, name, kind, status, wake_at, created_at,
                   updated_at, finished_at)
SELECT id, :phase, :position, :name, 'sleep',
       CASE WHEN :park THEN 'sleeping' ELSE 'succeeded' END, :wake_at, :now, :now,
       CASE WHEN :park THEN NULL ELSE :now END
FROM fence
RETURNING run_id AS id;
WITH fence AS ({fence})
UPDATE runs SET status = 'sleeping', due_at = :wake_at, {release}
WHERE id = (SELECT id FROM fence) AND :park;

-- name: park_again
-- The run was claimed before its timer: release it again until due_at.
WITH fence AS ({fence})
UPDATE runs SET status = :status, due_at = :due_at, {release}
WHERE id = (SELECT id FROM fence)
RETURNING id;

-- name: hand_back
-- A stopping worker returns a run it could not finish (and closes its attempt, if any): its
-- running steps are pending again and it is due now.
WITH fence AS ({fence})
UPDATE attempts SET status = 'handed_back', finished_at = :now, error = NULL
WHERE id = :attempt_id AND status = 'running' AND EXISTS (SELECT 1 FROM fence);
WITH fence AS ({fence})
UPDATE steps SET status = 'pending', updated_at = :now
WHERE run_id = (SELECT id FROM fence) AND status = 'running';
WITH fence AS ({fence})
UPDATE runs SET status = :status, due_at = :now, {release}
WHERE id = (SELECT id FROM fence)
RETURNING id;

-- name: finish_attempt
UPDATE attempts SET status = :status, finished_at = :now, error = :error
WHERE id = :attempt_id AND status = 'running';

-- name: report_progress
UPDATE attempts SET progress = :progress, progress_at = :now
WHERE id = :attempt_id AND status = 'running'
  AND EXISTS ({fence});

-- name: complete_run
-- The last step's result when it is given (completing), then the run's success.
{completing};
WITH fence AS ({fence})
UPDATE runs SET status = 'succeeded', output = :output, error = NULL, detail = NULL,
                due_at = NULL, lease_owner = NULL, lease_expires_at = NULL,
                finished_at = :now, updated_at = :now
WHERE id = (SELECT id FROM fence)
RETURNING id;

-- name: fail_run
-- The run failed; with compensate its compensation is due now.
WITH fence AS ({fence})
UPDATE runs SET status = 'failed', error = :error,
                compensation = CASE WHEN :compensate THEN 'pending' END,
                key_active = key_active AND :compensate,
                due_at = CASE WHEN :compensate THEN :now END,
                lease_owner = NULL, lease_expires_at = NULL,
                finished_at = :now, updated_at = :now
WHERE id = (SELECT id FROM fence)
RETURNING id;

-- name: finish_compensation
WITH fence AS ({fence})
UPDATE runs SET compensation = :compensation, key_active = 0, due_at = NULL,
                lease_owner = NULL, lease_expires_at = NULL, updated_at = :now,
                error = COALESCE(:error, error)
WHERE id = (SELECT id FROM fence)
RETURNING id;

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
