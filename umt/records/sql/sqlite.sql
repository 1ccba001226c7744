-- Queries of the ledger and the catalog, SQLite dialect (twins in postgresql.sql).

-- name: insert_ledger_entry
INSERT INTO ledger (run_id, step, attempt, worker_id, lease_epoch, operation, phase, detail,
                    recorded_at)
VALUES (:run_id, :step, :attempt, :worker_id, :lease_epoch,
        :operation, :phase, :detail, :recorded_at);

-- name: ledger_entries_of_run
SELECT * FROM ledger WHERE run_id = :run_id ORDER BY id;

-- name: runs_of_operation
SELECT run_id FROM ledger WHERE operation = :operation GROUP BY run_id ORDER BY min(id);

-- name: ledger_entries_of_operation
SELECT * FROM ledger
WHERE run_id = :run_id AND operation = :operation
ORDER BY id;

-- name: insert_catalog_item
INSERT INTO catalog (run_id, title, info_hash, library_paths, size, content_hash,
                     import_method, imported_at)
VALUES (:run_id, :title, :info_hash, :library_paths, :size,
        :content_hash, :import_method, :imported_at);

-- name: catalog_item_of_run
SELECT * FROM catalog WHERE run_id = :run_id;

-- name: catalog_items
SELECT * FROM catalog ORDER BY imported_at DESC, id DESC LIMIT :limit;

-- name: search_catalog
SELECT * FROM catalog
WHERE title LIKE :pattern ESCAPE '\' OR info_hash LIKE :pattern ESCAPE '\'
ORDER BY imported_at DESC, id DESC LIMIT :limit;

-- name: claim_library_path
INSERT INTO library_claims (path, run_id, claimed_at)
VALUES (:path, :run_id, :now)
ON CONFLICT (path) DO NOTHING;

-- name: library_path_holder
SELECT run_id FROM library_claims WHERE path = :path;

-- name: library_claims_of_run
SELECT path FROM library_claims WHERE run_id = :run_id ORDER BY path;

-- name: release_library_path
DELETE FROM library_claims WHERE path = :path AND run_id = :run_id;
