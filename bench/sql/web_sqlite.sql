-- Bulk data of bench/web.py, SQLite dialect (twins in web_postgresql.sql).

-- name: park_runs
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < :count)
INSERT INTO runs (id, workflow_name, workflow_version, workflow_key, status, input,
                  compensable, created_at, updated_at)
SELECT lower(printf('%s-%s-4%s-a%s-%s', hex(randomblob(4)), hex(randomblob(2)),
                    substr(hex(randomblob(2)), 2), substr(hex(randomblob(2)), 2),
                    hex(randomblob(6)))),
       'acquire', '1', 'acquire@1',
       CASE i % 5 WHEN 0 THEN 'succeeded' WHEN 1 THEN 'failed' WHEN 2 THEN 'canceled'
                  WHEN 3 THEN 'sleeping' ELSE 'waiting' END,
       json_object('title', 'Bench Film ' || i, 'info_hash', printf('%040x', i)),
       1,
       strftime('%Y-%m-%dT%H:%M:%S.000000+00:00', :newest, '-' || (:count - i) || ' seconds'),
       strftime('%Y-%m-%dT%H:%M:%S.000000+00:00', :newest, '-' || (:count - i) || ' seconds')
FROM n;

-- name: statements_so_far
SELECT 0 AS calls;

-- name: enable_statements
SELECT 1;
