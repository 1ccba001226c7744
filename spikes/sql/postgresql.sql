-- The spikes' business queries, PostgreSQL dialect (twins in sqlite.sql). spike_biz stands for
-- another application's schema in the same database (scenario h).

-- name: insert_order
INSERT INTO spike_biz.orders (order_key, run_id, attempt)
VALUES (%(order_key)s, %(run_id)s::uuid, %(attempt)s);

-- name: server_time
-- The database server's clock, stamped on the evidence of the skewed-clocks scenario.
SELECT clock_timestamp() AS server_time;
