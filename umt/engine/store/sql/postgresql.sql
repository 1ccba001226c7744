-- The engine's named queries, PostgreSQL dialect. Unqualified names resolve through the
-- connection's search_path (the engine's schema first). Every query here has a twin with the
-- same name in sqlite.sql, except those listed in PostgresDatabase.queries_without_twin.
--
-- Each operation of the store that writes for a run (insert_run, claim_runs, begin_step,
-- complete_step, fail_step, finish_parked_step, start_sleep, park_again, wait_for_signal,
-- complete_run, fail_run, finish_compensation, hand_back; send_signal) is ONE statement run in
-- autocommit (Database.operation; the signal ones after lock_signal_name, pipelined with it
-- as one implicit transaction: still one round trip and one commit): the fence check
-- (the run is still leased to the worker at its epoch; its row is locked), the writes and the
-- notification happen in that statement, so an operation costs one round trip and one commit
-- instead of BEGIN, a fence read, reads, writes, NOTIFY and COMMIT. Each returns no row when
-- its condition does not hold (the fence failed, an idempotency key is taken); nothing was
-- written then, and the store reads why to raise the precise error (LeaseLost, RunCanceled,
-- IdempotencyConflict). The fence is written once (the block fence) and included by name
-- where a query needs it, like the other blocks marked "not run alone". The store fills in the
-- parameter work_channel. A data-modifying CTE runs even when nothing reads it; a plain SELECT
-- (pg_notify) runs only when the final SELECT reads it, hence the counts there.

-- name: insert_run
-- A new run and its notification (work_payload: the run itself when it is due now, so that one
-- worker claims it; else its workflow); no row when the idempotency key is held by another run.
-- Only its id comes back: every other column is given or takes its default
-- (Runs.create_run), and decoding a whole row of runs costs a submit about a sixth of its
-- time.
WITH inserted AS (
    INSERT INTO runs (id, workflow_name, workflow_version, workflow_key, status, input,
                      idempotency_key, key_active, compensable, due_at, created_at, updated_at)
    VALUES (%(id)s, %(workflow_name)s, %(workflow_version)s, %(workflow_key)s, 'pending',
            %(input)s::jsonb, %(idempotency_key)s, %(idempotency_key)s::text IS NOT NULL,
            %(compensable)s, %(due_at)s, %(now)s, %(now)s)
    ON CONFLICT (workflow_name, idempotency_key) WHERE key_active DO NOTHING
    RETURNING id
)
SELECT inserted.id,
       (SELECT count(*) FROM (SELECT pg_notify(%(work_channel)s, %(work_payload)s)) AS n)
           AS notified
FROM inserted;

-- name: run_holding_key
SELECT * FROM runs
WHERE workflow_name = %(workflow_name)s AND idempotency_key = %(idempotency_key)s AND key_active;

-- name: get_run
SELECT * FROM runs WHERE id = %(run_id)s::uuid;

-- name: lock_run
SELECT * FROM runs WHERE id = %(run_id)s::uuid FOR UPDATE;

-- name: list_runs
SELECT * FROM runs
WHERE (%(status)s::text IS NULL OR status = %(status)s::text)
  AND (%(workflow)s::text IS NULL OR workflow_name = %(workflow)s::text)
ORDER BY created_at DESC, id
LIMIT %(limit)s;

-- name: newest_runs
-- Not run alone: the search, the keyset and the order of runs_page and runs_page_of_status.
(%(pattern)s::text IS NULL
       OR input->>'title' ILIKE %(pattern)s::text
       OR input->>'info_hash' ILIKE %(pattern)s::text)
  AND (%(before_created_at)s::timestamptz IS NULL
       OR (created_at, id) < (%(before_created_at)s::timestamptz, %(before_id)s::uuid))
ORDER BY created_at DESC, id DESC
LIMIT %(limit)s;

-- name: runs_page
-- Newest first, keyset-paginated: the page after (before_created_at, before_id), never an
-- OFFSET. pattern: a LIKE pattern matched against the title and the info-hash of the input.
SELECT * FROM runs WHERE {newest_runs};

-- name: runs_page_of_status
-- runs_page for one status, written so that the plan can use runs_by_status.
SELECT * FROM runs WHERE status = %(status)s::text AND {newest_runs};

-- name: count_runs_by_status
SELECT status, count(*) AS runs FROM runs GROUP BY status ORDER BY status;

-- name: steps_of_run
SELECT s.*,
       (SELECT count(*) FROM attempts a
         WHERE a.run_id = s.run_id AND a.phase = s.phase AND a.position = s.position) AS attempts
FROM steps s
WHERE s.run_id = %(run_id)s::uuid
ORDER BY CASE s.phase WHEN 'main' THEN 0 ELSE 1 END, s.position;

-- name: attempts_of_run
SELECT a.*, s.name AS step_name
FROM attempts a
JOIN steps s ON s.run_id = a.run_id AND s.phase = a.phase AND s.position = a.position
WHERE a.run_id = %(run_id)s::uuid
ORDER BY a.id;

-- name: running_attempts_of_runs
SELECT a.*, s.name AS step_name
FROM attempts a
JOIN steps s ON s.run_id = a.run_id AND s.phase = a.phase AND s.position = a.position
WHERE a.run_id = ANY(%(run_ids)s::uuid[]) AND a.status = 'running'
ORDER BY a.id;

-- name: cancel_run
-- A running run's lease is revoked (epoch bumped) so its worker's next write is rejected. If
-- the workflow compensates, compensation becomes due when the old holder hands the run back,
-- or at the latest when its lease would have expired.
UPDATE runs SET
    status = 'canceled',
    lease_epoch = lease_epoch + 1,
    compensation = CASE WHEN compensable THEN 'pending' END,
    key_active = key_active AND compensable,
    due_at = CASE
        WHEN NOT compensable THEN NULL
        WHEN status = 'running' AND lease_expires_at > %(now)s THEN lease_expires_at
        ELSE %(now)s END,
    lease_expires_at = NULL,
    finished_at = %(now)s,
    updated_at = %(now)s
WHERE id = %(run_id)s::uuid
RETURNING *;

-- name: cancel_open_steps
UPDATE steps SET status = 'canceled', updated_at = %(now)s, finished_at = %(now)s
WHERE run_id = %(run_id)s::uuid AND phase = 'main'
  AND status IN ('running', 'retrying', 'sleeping', 'waiting');

-- name: cancel_running_attempts
-- The attempt's outcome is decided now: it must not stay 'running' if its worker is gone
-- and nobody ever claims the run again (a canceled run without compensation).
UPDATE attempts SET status = 'canceled', finished_at = %(now)s, error = %(error)s::jsonb
WHERE run_id = %(run_id)s::uuid AND phase = 'main' AND status = 'running';

-- name: annotate_run
UPDATE runs SET detail = %(detail)s, updated_at = %(now)s WHERE id = %(run_id)s::uuid;

-- name: notify
SELECT pg_notify(%(channel)s, %(payload)s);

-- name: lock_signal_name
-- Not run alone: the first statement of send_signal and wait_for_signal. Serializes a sender
-- and a run starting to wait on the same name, so that one of them always sees the other's
-- row: the including query's next statement takes its snapshot after the lock.
SELECT pg_advisory_xact_lock(hashtextextended(%(signal_name)s, 0));

-- name: kept_signal
-- Not run alone: the oldest signal kept for signal_name that the run may take (none when
-- take_kept is false, or when the fence, a CTE of the including query, failed).
SELECT id, data FROM signals
WHERE name = %(signal_name)s AND status = 'kept' AND expires_at > %(now)s AND %(take_kept)s
  AND (target_run_id IS NULL OR target_run_id = %(run_id)s::uuid)
  AND EXISTS (SELECT 1 FROM fence)
ORDER BY created_at, id
LIMIT 1;

-- name: wait_for_signal
-- The previous step's result when it is given (completing), then a signal wait: takes the kept signal if there is one (received: the step's result), else
-- records the waiting step and parks the run until wake_at (NULL: no limit; other workers are
-- notified of a due time). After lock_signal_name, as a statement of its own, so that it sees
-- a signal sent while it waited for the lock.
{lock_signal_name};
WITH fence AS ({fence} FOR NO KEY UPDATE), {completing}, kept AS (
    {kept_signal}
    FOR UPDATE SKIP LOCKED
), consumed AS (
    UPDATE signals SET status = 'consumed', delivered_to = jsonb_build_array(%(run_id)s::text),
                       delivered_at = %(now)s
    WHERE id = (SELECT id FROM kept)
), taken AS (
    SELECT fence.id,
           CASE WHEN kept.id IS NOT NULL THEN jsonb_build_object(
               'signal_id', kept.id::text, 'name', %(signal_name)s::text, 'data', kept.data)
           END AS received
    FROM fence LEFT JOIN kept ON true
), step AS (
    INSERT INTO steps (run_id, phase, position, name, kind, status, result, signal_name,
                       wake_at, created_at, updated_at, finished_at)
    SELECT id, %(phase)s, %(position)s, %(name)s, 'signal',
           CASE WHEN received IS NULL THEN 'waiting' ELSE 'succeeded' END, received,
           %(signal_name)s, %(wake_at)s, %(now)s, %(now)s,
           CASE WHEN received IS NOT NULL THEN %(now)s::timestamptz END
    FROM taken
    ON CONFLICT (run_id, phase, position) DO UPDATE
        SET status = excluded.status, result = excluded.result,
            finished_at = excluded.finished_at, updated_at = excluded.updated_at
        WHERE steps.status = 'waiting' AND excluded.status = 'succeeded'
), released AS (
    UPDATE runs SET status = 'waiting', due_at = %(wake_at)s, {release}
    WHERE id = (SELECT id FROM fence) AND NOT EXISTS (SELECT 1 FROM kept)
    RETURNING workflow_key, due_at
)
SELECT id, received, {notify_released} AS notified
FROM taken;

-- name: signal_accepted
-- Not run alone: whether send_signal may write; follows its CTEs earlier and target.
NOT EXISTS (SELECT 1 FROM earlier)
AND (%(target_run_id)s::uuid IS NULL
     OR EXISTS (SELECT 1 FROM target WHERE status NOT IN ('succeeded', 'failed', 'canceled')))

-- name: send_signal
-- Delivers a signal to every run waiting on its name (only to target_run_id when given): the
-- steps get its payload, the runs are due now (one notification per workflow), and the signal
-- is recorded as delivered, or kept when no run waits. After lock_signal_name, as a statement
-- of its own so that its snapshot is taken after the lock (a run that started waiting
-- meanwhile is seen). Writes nothing when idempotency_key names an earlier signal (returned
-- as earlier_*) or target_run_id names no run (target_found) or a finished one
-- (target_status; the final statuses are those of models.FINAL_STATUSES). Always returns one
-- row.
{lock_signal_name};
WITH earlier AS (
    SELECT * FROM signals WHERE idempotency_key = %(idempotency_key)s
), target AS (
    SELECT status FROM runs WHERE id = %(target_run_id)s::uuid FOR UPDATE
), accepted AS (
    SELECT {signal_accepted} AS yes
), waiting AS (
    SELECT s.run_id, s.phase, s.position, s.created_at
    FROM steps s
    JOIN runs r ON r.id = s.run_id
    WHERE s.signal_name = %(signal_name)s AND s.status = 'waiting' AND r.status = 'waiting'
      AND (%(target_run_id)s::uuid IS NULL OR r.id = %(target_run_id)s::uuid)
      AND (SELECT yes FROM accepted)
    ORDER BY s.created_at, s.run_id
    FOR UPDATE OF r
), delivered AS (
    UPDATE steps st SET status = 'succeeded', result = %(payload)s::jsonb,
                        finished_at = %(now)s, updated_at = %(now)s
    FROM waiting w
    WHERE st.run_id = w.run_id AND st.phase = w.phase AND st.position = w.position
      AND st.status = 'waiting'
    RETURNING st.run_id, w.created_at
), woken AS (
    UPDATE runs r SET status = 'pending', due_at = %(now)s, updated_at = %(now)s
    FROM delivered d
    WHERE r.id = d.run_id AND r.status = 'waiting'
    RETURNING r.id, r.workflow_key, d.created_at
), notified AS (
    SELECT pg_notify(%(work_channel)s, k.workflow_key)
    FROM (SELECT DISTINCT workflow_key FROM woken) AS k
), kept AS (
    INSERT INTO signals (id, name, target_run_id, data, idempotency_key, status, delivered_to,
                         created_at, expires_at, delivered_at)
    SELECT %(id)s, %(signal_name)s, %(target_run_id)s::uuid, %(data)s::jsonb,
           %(idempotency_key)s,
           CASE WHEN count(*) > 0 THEN 'delivered' ELSE 'kept' END,
           COALESCE(jsonb_agg(woken.id::text ORDER BY woken.created_at, woken.id), '[]'::jsonb),
           %(now)s, %(expires_at)s, CASE WHEN count(*) > 0 THEN %(now)s::timestamptz END
    FROM woken
    HAVING (SELECT yes FROM accepted)
    RETURNING delivered_to
)
SELECT (SELECT delivered_to FROM kept) AS delivered_to,
       (SELECT count(*) FROM notified) AS notified,
       e.id AS earlier_id, e.name AS earlier_name, e.target_run_id AS earlier_target_run_id,
       e.data AS earlier_data, e.status AS earlier_status,
       e.delivered_to AS earlier_delivered_to,
       EXISTS (SELECT 1 FROM target) AS target_found,
       (SELECT status FROM target) AS target_status
FROM (SELECT 1) AS one
LEFT JOIN earlier e ON true;

-- name: runs_waiting_on_prefix
SELECT s.run_id, s.position, s.signal_name, s.wake_at, r.workflow_name, r.detail
FROM steps s
JOIN runs r ON r.id = s.run_id
WHERE s.status = 'waiting' AND r.status = 'waiting'
  AND left(s.signal_name, length(%(prefix)s)) = %(prefix)s
ORDER BY s.created_at;

-- name: insert_worker
INSERT INTO workers (id, host_key, hostname, pid, process_start, workflows, started_at,
                     heartbeat_at)
VALUES (%(id)s, %(host_key)s, %(hostname)s, %(pid)s, %(process_start)s, %(workflows)s::jsonb,
        %(now)s, %(now)s);

-- name: touch_worker
UPDATE workers SET heartbeat_at = %(now)s WHERE id = %(worker_id)s::uuid;

-- name: stop_worker
UPDATE workers SET stopped_at = %(now)s WHERE id = %(worker_id)s::uuid AND stopped_at IS NULL;

-- name: live_workers_on_host
SELECT id, pid, process_start FROM workers
WHERE host_key = %(host_key)s AND stopped_at IS NULL AND id <> %(worker_id)s::uuid;

-- name: live_workers
SELECT id, hostname, pid, workflows, started_at, heartbeat_at FROM workers
WHERE stopped_at IS NULL AND heartbeat_at > %(since)s
ORDER BY started_at, id;

-- name: change_marker
-- For readers that show live state: the snapshot text changes whenever a transaction that
-- writes begins or ends (LISTEN/NOTIFY misses what needs no worker woken, e.g. a finished step
-- or copy progress); busy: a step is being executed right now; next_due: when the next run of
-- these workflows becomes due (its claim will notify nobody either).
SELECT pg_current_snapshot()::text AS marker,
       EXISTS (SELECT 1 FROM attempts WHERE status = 'running') AS busy,
       ({next_due}) AS next_due;

-- name: server_time
-- The fleet's clock (ServerClock): the server's time as it reads the clock, not the start of
-- the transaction.
SELECT clock_timestamp() AS server_time;

-- name: mark_workers_dead
UPDATE workers SET stopped_at = %(now)s
WHERE id = ANY(%(worker_ids)s::uuid[]) AND stopped_at IS NULL;

-- name: expire_leases_of_workers
UPDATE runs SET due_at = %(now)s, lease_expires_at = %(now)s, updated_at = %(now)s
WHERE lease_owner = ANY(%(worker_ids)s::uuid[]) AND due_at > %(now)s
RETURNING id;

-- name: claimable
-- Not run alone (PostgreSQL only): a due run the worker may claim: of a workflow version it
-- registers, not one it executes already (held: a lease of its own that looks expired is
-- extended by its heartbeat, not claimed again); without take_leased, none whose lease merely
-- looks expired (just after the clock jumped forward).
workflow_key = ANY(%(workflow_keys)s::text[])
  AND id <> ALL(%(held)s::uuid[]) AND (%(take_leased)s OR lease_expires_at IS NULL)

-- name: claim_due
-- Not run alone: the runs claim_runs takes (locked; those other workers are claiming are
-- skipped). claimed_before: the run was claimed earlier, so it may have recorded steps (a run
-- never claimed has none).
SELECT id, started_at IS NOT NULL AS claimed_before FROM runs
WHERE due_at <= %(now)s AND {claimable}
ORDER BY due_at
LIMIT %(limit)s
FOR UPDATE SKIP LOCKED;

-- name: lease_due
-- Not run alone (PostgreSQL only): what claim_runs and claim_notified_runs do with the runs of
-- the CTE due: lease them to the worker; their attempts still running are interrupted and
-- their running steps are pending again.
claimed AS (
    UPDATE runs r SET
        lease_epoch = r.lease_epoch + 1,
        lease_owner = %(worker_id)s::uuid,
        lease_expires_at = %(lease_expires_at)s,
        due_at = %(lease_expires_at)s,
        status = CASE WHEN r.status IN ('canceled', 'failed') THEN r.status ELSE 'running' END,
        compensation = CASE WHEN r.status IN ('canceled', 'failed') THEN 'running'
                            ELSE r.compensation END,
        started_at = COALESCE(r.started_at, %(now)s),
        updated_at = %(now)s
    FROM due
    WHERE r.id = due.id
    RETURNING r.*, due.claimed_before
), interrupted AS (
    UPDATE attempts SET status = 'interrupted', finished_at = %(now)s
    WHERE run_id IN (SELECT id FROM claimed WHERE claimed_before) AND status = 'running'
), reset AS (
    UPDATE steps SET status = 'pending', updated_at = %(now)s
    WHERE run_id IN (SELECT id FROM claimed WHERE claimed_before) AND status = 'running'
)
SELECT * FROM claimed;

-- name: claim_runs
-- Leases due runs to the worker (lease_due).
WITH due AS ({claim_due}), {lease_due};

-- name: claim_notified_runs
-- PostgreSQL only: of the runs that notifications named to this worker (run_ids), leases those
-- still claimable (lease_due): one another worker took meanwhile is simply not returned. A
-- probe of the primary key per run, not a scan of the due runs. A run is named when it is
-- created due at once: due_at is its created_at then, and this worker's reading of the fleet's
-- clock may lag its creator's by a little (a lease taken or a later due time is always later).
WITH due AS (
    SELECT id, started_at IS NOT NULL AS claimed_before FROM runs
    WHERE id = ANY(%(run_ids)s::uuid[]) AND due_at <= GREATEST(%(now)s, created_at)
      AND {claimable}
    ORDER BY due_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
), {lease_due};

-- name: explain_claim_candidates
EXPLAIN {claim_due};

-- name: steps_of_runs
SELECT * FROM steps WHERE run_id = ANY(%(run_ids)s::uuid[]) ORDER BY run_id, phase, position;

-- name: next_due
-- One index probe per workflow key, so the cost does not grow with the number of sleeping runs.
SELECT min(d.due_at) AS next_due
FROM unnest(%(workflow_keys)s::text[]) AS k(workflow_key)
CROSS JOIN LATERAL (
    SELECT due_at FROM runs
    WHERE workflow_key = k.workflow_key AND due_at IS NOT NULL
    ORDER BY due_at
    LIMIT 1
) AS d;

-- name: extend_leases
UPDATE runs r SET lease_expires_at = %(lease_expires_at)s, due_at = %(lease_expires_at)s,
                  updated_at = %(now)s
FROM unnest(%(run_ids)s::uuid[], %(epochs)s::bigint[]) AS held(run_id, epoch)
WHERE r.id = held.run_id AND r.lease_epoch = held.epoch AND r.lease_owner = %(worker_id)s::uuid
RETURNING r.id;

-- name: lease_states
SELECT id, status, lease_owner, lease_epoch FROM runs WHERE id = ANY(%(run_ids)s::uuid[]);

-- name: fence
-- The lease fence, written once: the run, if this worker still holds its lease at the epoch
-- it claimed. Queries of fenced operations include it by name (and lock the row); lock_fence
-- runs it at the start of a fenced transaction.
SELECT id FROM runs
WHERE id = %(run_id)s::uuid AND lease_owner = %(worker_id)s::uuid
  AND lease_epoch = %(lease_epoch)s;

-- name: lock_fence
{fence}
FOR NO KEY UPDATE;

-- name: lease_of_run
-- Why a fence failed (read after a fenced operation wrote nothing).
SELECT status, lease_owner, lease_epoch FROM runs WHERE id = %(run_id)s::uuid;

-- name: release
-- Not run alone: the SET list that gives a run's lease back (a running compensation is pending
-- again).
lease_owner = NULL, lease_expires_at = NULL, updated_at = %(now)s,
compensation = CASE WHEN compensation = 'running' THEN 'pending' ELSE compensation END;

-- name: notify_released
-- Not run alone (PostgreSQL only): the number of notifications sent for the runs of the CTE
-- released that are due (a plain SELECT runs only when the final SELECT reads it).
(SELECT count(*) FROM (SELECT pg_notify(%(work_channel)s, workflow_key) FROM released
                       WHERE due_at IS NOT NULL) AS n);

-- name: completing
-- Not a statement: the CTEs with which begin_step, complete_step, start_sleep,
-- wait_for_signal and complete_run commit an earlier step's result (completed_result of attempt completed_attempt_id at
-- completed_position; NULL: none), unless that step had succeeded already (a retried commit
-- whose first try did commit). Follows the CTE fence.
completed AS (
    UPDATE steps SET status = 'succeeded', result = %(completed_result)s::jsonb,
                     updated_at = %(now)s, finished_at = %(now)s
    WHERE run_id = (SELECT id FROM fence) AND phase = %(phase)s
      AND position = %(completed_position)s::integer AND status <> 'succeeded'
    RETURNING 1
), completed_attempt AS (
    UPDATE attempts SET status = 'succeeded', finished_at = %(now)s, error = NULL
    WHERE id = %(completed_attempt_id)s::bigint AND status = 'running'
      AND EXISTS (SELECT 1 FROM completed)
);

-- name: begin_step
-- The previous step's result when it is given (completing), then the step (new, or again
-- running) and its new attempt. Returns the attempt's id and number.
WITH fence AS ({fence} FOR NO KEY UPDATE), {completing}, step AS (
    INSERT INTO steps (run_id, phase, position, name, kind, status, created_at, updated_at)
    SELECT fence.id, %(phase)s, %(position)s, %(name)s, 'step', 'running', %(now)s, %(now)s
    FROM fence
    ON CONFLICT (run_id, phase, position)
        DO UPDATE SET status = 'running', updated_at = excluded.updated_at, finished_at = NULL
    RETURNING failures
)
INSERT INTO attempts (run_id, phase, position, attempt, status, worker_id, lease_epoch,
                      started_at)
SELECT %(run_id)s::uuid, %(phase)s, %(position)s, step.failures + 1, 'running',
       %(worker_id)s::uuid, %(lease_epoch)s, %(now)s
FROM step
RETURNING id, attempt;

-- name: complete_step
-- A step's result (completing); completed tells whether it committed now (false: it had
-- already). Also run inside a transaction, before the step's buffered business statements
-- (which run only when completed).
WITH fence AS ({fence} FOR NO KEY UPDATE), {completing}
SELECT EXISTS (SELECT 1 FROM completed) AS completed FROM fence;

-- name: fail_step
-- A failed attempt. With retry the step is retrying and the run released until due_at (other
-- workers notified), else the step failed for good. Returns the step's failure count.
WITH fence AS ({fence} FOR NO KEY UPDATE), attempt AS (
    UPDATE attempts SET status = 'failed', finished_at = %(now)s, error = %(error)s::jsonb
    WHERE id = %(attempt_id)s AND status = 'running' AND EXISTS (SELECT 1 FROM fence)
), step AS (
    UPDATE steps SET failures = failures + 1, error = %(error)s::jsonb, updated_at = %(now)s,
                     status = CASE WHEN %(retry)s THEN 'retrying' ELSE 'failed' END,
                     finished_at = CASE WHEN %(retry)s THEN NULL ELSE %(now)s::timestamptz END
    WHERE run_id = (SELECT id FROM fence) AND phase = %(phase)s AND position = %(position)s
    RETURNING failures
), released AS (
    UPDATE runs SET status = %(status)s, due_at = %(due_at)s, {release}
    WHERE id = (SELECT id FROM fence) AND %(retry)s
    RETURNING workflow_key, due_at
)
SELECT failures, {notify_released} AS notified
FROM step;

-- name: finish_parked_step
-- A timer fired (succeeded) or a signal wait timed out (timed_out).
WITH fence AS ({fence} FOR NO KEY UPDATE), step AS (
    UPDATE steps SET status = %(status)s, updated_at = %(now)s, finished_at = %(now)s
    WHERE run_id = (SELECT id FROM fence) AND phase = %(phase)s AND position = %(position)s
)
SELECT id FROM fence;

-- name: start_sleep
-- The previous step's result when it is given (completing), then a timer step; when park,
-- the run is released until wake_at (and other workers notified).
WITH fence AS ({fence} FOR NO KEY UPDATE), {completing}, step AS (
    INSERT INTO steps (run_id, phase, position, name, kind, status, wake_at, created_at,
                       updated_at, finished_at)
    SELECT fence.id, %(phase)s, %(position)s, %(name)s, 'sleep',
           CASE WHEN %(park)s THEN 'sleeping' ELSE 'succeeded' END, %(wake_at)s, %(now)s,
           %(now)s, CASE WHEN %(park)s THEN NULL ELSE %(now)s::timestamptz END
    FROM fence
), released AS (
    UPDATE runs SET status = 'sleeping', due_at = %(wake_at)s, {release}
    WHERE id = (SELECT id FROM fence) AND %(park)s
    RETURNING workflow_key, due_at
)
SELECT id, {notify_released} AS notified
FROM fence;

-- name: park_again
-- The run was claimed before its timer: release it again until due_at, notifying.
WITH fence AS ({fence} FOR NO KEY UPDATE), released AS (
    UPDATE runs SET status = %(status)s, due_at = %(due_at)s, {release}
    WHERE id = (SELECT id FROM fence)
    RETURNING id, workflow_key, due_at
)
SELECT id, {notify_released} AS notified
FROM released;

-- name: hand_back
-- A stopping worker returns a run it could not finish (and closes its attempt, if any): its
-- running steps are pending again and it is due now (other workers notified).
WITH fence AS ({fence} FOR NO KEY UPDATE), attempt AS (
    UPDATE attempts SET status = 'handed_back', finished_at = %(now)s, error = NULL
    WHERE id = %(attempt_id)s::bigint AND status = 'running' AND EXISTS (SELECT 1 FROM fence)
), reset AS (
    UPDATE steps SET status = 'pending', updated_at = %(now)s
    WHERE run_id = (SELECT id FROM fence) AND status = 'running'
), released AS (
    UPDATE runs SET status = %(status)s, due_at = %(now)s, {release}
    WHERE id = (SELECT id FROM fence)
    RETURNING id, workflow_key, due_at
)
SELECT id, {notify_released} AS notified
FROM released;

-- name: finish_attempt
UPDATE attempts SET status = %(status)s, finished_at = %(now)s, error = %(error)s::jsonb
WHERE id = %(attempt_id)s AND status = 'running';

-- name: report_progress
-- Fenced in one statement: progress of an execution that lost its run is not recorded.
UPDATE attempts SET progress = %(progress)s::jsonb, progress_at = %(now)s
WHERE id = %(attempt_id)s AND status = 'running'
  AND EXISTS ({fence});

-- name: complete_run
-- The last step's result when it is given (completing), then the run's success.
WITH fence AS ({fence} FOR NO KEY UPDATE), {completing}
UPDATE runs SET status = 'succeeded', output = %(output)s::jsonb, error = NULL, detail = NULL,
                due_at = NULL, lease_owner = NULL, lease_expires_at = NULL,
                finished_at = %(now)s, updated_at = %(now)s
WHERE id = (SELECT id FROM fence)
RETURNING id;

-- name: fail_run
-- The run failed; with compensate its compensation is due now (other workers notified).
WITH fence AS ({fence} FOR NO KEY UPDATE), released AS (
    UPDATE runs SET status = 'failed', error = %(error)s::jsonb,
                    compensation = CASE WHEN %(compensate)s THEN 'pending' END,
                    key_active = key_active AND %(compensate)s,
                    due_at = CASE WHEN %(compensate)s THEN %(now)s::timestamptz END,
                    lease_owner = NULL, lease_expires_at = NULL,
                    finished_at = %(now)s, updated_at = %(now)s
    WHERE id = (SELECT id FROM fence)
    RETURNING id, workflow_key, due_at
)
SELECT id, {notify_released} AS notified
FROM released;

-- name: finish_compensation
WITH fence AS ({fence} FOR NO KEY UPDATE)
UPDATE runs SET compensation = %(compensation)s, key_active = false, due_at = NULL,
                lease_owner = NULL, lease_expires_at = NULL, updated_at = %(now)s,
                error = COALESCE(%(error)s::jsonb, error)
WHERE id = (SELECT id FROM fence)
RETURNING id;

-- name: expedite_compensation
UPDATE runs SET due_at = %(now)s, updated_at = %(now)s
WHERE id = %(run_id)s::uuid AND lease_owner = %(worker_id)s::uuid
  AND compensation = 'pending' AND due_at > %(now)s
RETURNING workflow_key;

-- name: delete_finished_runs
DELETE FROM runs
WHERE status IN ('succeeded', 'failed', 'canceled') AND finished_at < %(cutoff)s
  AND (compensation IS NULL OR compensation IN ('succeeded', 'failed'));

-- name: delete_old_signals
DELETE FROM signals
WHERE (status = 'kept' AND expires_at < %(now)s) OR (status <> 'kept' AND created_at < %(cutoff)s);

-- name: delete_stopped_workers
DELETE FROM workers WHERE stopped_at < %(cutoff)s;

-- name: migrations_table_present
SELECT to_regclass('schema_migrations') IS NOT NULL AS present;

-- name: create_migrations_table
CREATE TABLE IF NOT EXISTS schema_migrations (
    component text NOT NULL,
    version integer NOT NULL,
    name text NOT NULL,
    checksum text NOT NULL,
    applied_at timestamptz NOT NULL,
    PRIMARY KEY (component, version)
);

-- name: applied_migrations
SELECT component, version, name, checksum FROM schema_migrations ORDER BY component, version;

-- name: record_migration
INSERT INTO schema_migrations (component, version, name, checksum, applied_at)
VALUES (%(component)s, %(version)s, %(name)s, %(checksum)s, %(now)s);

-- name: lock_migrations
SELECT pg_advisory_lock(hashtextextended(%(lock_name)s, 0));

-- name: unlock_migrations
SELECT pg_advisory_unlock(hashtextextended(%(lock_name)s, 0));

-- name: list_tables
SELECT table_schema, table_name FROM information_schema.tables
WHERE table_schema = ANY(%(schemas)s::text[]) AND table_type = 'BASE TABLE'
ORDER BY table_schema, table_name;

-- name: list_columns
SELECT table_name, column_name FROM information_schema.columns
WHERE table_schema = ANY(%(schemas)s::text[])
ORDER BY table_name, ordinal_position;
