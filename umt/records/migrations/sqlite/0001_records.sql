-- Business tables of the media pipeline (SQLite dialect of the PostgreSQL migration with the
-- same number): the side-effect ledger and the media catalog.

CREATE TABLE ledger (
    id integer PRIMARY KEY AUTOINCREMENT,
    run_id text NOT NULL,
    step text NOT NULL,
    attempt integer NOT NULL,
    worker_id text NOT NULL,
    lease_epoch integer NOT NULL,
    operation text NOT NULL,
    phase text NOT NULL CHECK (phase IN ('intent', 'verified', 'done', 'failed', 'skipped')),
    detail JSONTEXT,
    recorded_at TIMETEXT NOT NULL
);
CREATE INDEX ledger_by_run ON ledger (run_id, id);
CREATE INDEX ledger_by_operation ON ledger (operation, id);

CREATE TABLE catalog (
    id integer PRIMARY KEY AUTOINCREMENT,
    run_id text NOT NULL UNIQUE,
    title text NOT NULL,
    info_hash text NOT NULL,
    library_paths JSONTEXT NOT NULL,
    size integer NOT NULL,
    content_hash text,
    import_method text NOT NULL,
    imported_at TIMETEXT NOT NULL
);
CREATE INDEX catalog_by_info_hash ON catalog (info_hash);
