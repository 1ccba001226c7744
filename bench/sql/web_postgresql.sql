-- Bulk data of bench/web.py, PostgreSQL dialect (twins in web_sqlite.sql). Run with the
-- engine's search_path. /*bench-driver*/ keeps them out of the statement counts.

-- name: park_runs
/*bench-driver*/ INSERT INTO runs (id, workflow_name, workflow_version, workflow_key, status,
                  input, compensable, created_at, updated_at)
SELECT gen_random_uuid(), 'acquire', '1', 'acquire@1',
       (ARRAY['succeeded', 'failed', 'canceled', 'sleeping', 'waiting'])[1 + i %% 5],
       jsonb_build_object('title', 'Bench Film ' || i, 'info_hash', md5(i::text) || '00000000'),
       true, %(newest)s::timestamptz - make_interval(secs => %(count)s - i),
       %(newest)s::timestamptz - make_interval(secs => %(count)s - i)
FROM generate_series(1, %(count)s) AS i;

-- name: statements_so_far
/*bench-driver*/ SELECT coalesce(sum(calls), 0)::bigint AS calls FROM public.pg_stat_statements
WHERE query NOT LIKE '%%bench-driver%%';

-- name: enable_statements
/*bench-driver*/ CREATE EXTENSION IF NOT EXISTS pg_stat_statements SCHEMA public;
