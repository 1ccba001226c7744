-- Measurement queries of bench/workers.py on SQLite (read on a connection of their own).

-- name: progress
SELECT coalesce(sum(status = 'succeeded'), 0) AS succeeded,
       coalesce(sum(status IN ('failed', 'canceled')), 0) AS failed,
       min(started_at) AS first_started,
       max(finished_at) AS last_finished
FROM runs WHERE workflow_name = :workflow;
