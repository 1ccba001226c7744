-- Queries of the ledger and the catalog, PostgreSQL dialect (twins in sqlite.sql).

-- name: insert_ledger_entry
INSERT INTO ledger (run_id, step, attempt, worker_id, lease_epoch, operation, phase, detail,
                    recorded_at)
VALUES (%(run_id)s::uuid, %(step)s, %(attempt)s, %(worker_id)s::uuid, %(lease_epoch)s,
        %(operation)s, %(phase)s, %(detail)s::jsonb, %(recorded_at)s);

-- name: ledger_entries_of_run
SELECT * FROM ledger WHERE run_id = %(run_id)s::uuid ORDER BY id;

-- name: runs_of_operation
SELECT run_id FROM ledger WHERE operation = %(operation)s GROUP BY run_id ORDER BY min(id);

-- name: ledger_entries_of_operation
SELECT * FROM ledger
WHERE run_id = %(run_id)s::uuid AND operation = %(operation)s
ORDER BY id;

-- name: insert_catalog_item
INSERT INTO catalog (run_id, title, info_hash, library_paths, size, content_hash,
                     import_method, imported_at)
VALUES (%(run_id)s::uuid, %(title)s, %(info_hash)s, %(library_paths)s::jsonb, %(size)s,
        %(content_hash)s, %(import_method)s, %(imported_at)s);

-- name: catalog_item_of_run
SELECT * FROM catalog WHERE run_id = %(run_id)s::uuid;

-- name: catalog_items
SELECT * FROM catalog ORDER BY imported_at DESC, id DESC LIMIT %(limit)s;

-- name: search_catalog
SELECT * FROM catalog
WHERE title ILIKE %(pattern)s OR info_hash ILIKE %(pattern)s
ORDER BY imported_at DESC, id DESC LIMIT %(limit)s;

-- name: claim_library_path
INSERT INTO library_claims (path, run_id, claimed_at)
VALUES (%(path)s, %(run_id)s::uuid, %(now)s)
ON CONFLICT (path) DO NOTHING;

-- name: library_path_holder
SELECT run_id FROM library_claims WHERE path = %(path)s;

-- name: library_claims_of_run
SELECT path FROM library_claims WHERE run_id = %(run_id)s::uuid ORDER BY path;

-- name: release_library_path
DELETE FROM library_claims WHERE path = %(path)s AND run_id = %(run_id)s::uuid;
