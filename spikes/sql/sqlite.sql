-- The spikes' business queries, SQLite dialect (twins in postgresql.sql). spike_orders stands
-- for another application's table in the same database file (scenario h).

-- name: insert_order
INSERT INTO spike_orders (order_key, run_id, attempt)
VALUES (:order_key, :run_id, :attempt);

-- name: server_time
SELECT strftime('%Y-%m-%dT%H:%M:%f+00:00', 'now') AS server_time;
