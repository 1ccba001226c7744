-- Business tables of the media pipeline: the side-effect ledger and the media catalog.
-- Applied with search_path set to the business schema (the engine's schema + "_media").

CREATE TABLE ledger (
    id bigserial PRIMARY KEY,
    run_id uuid NOT NULL,
    step text NOT NULL,
    attempt integer NOT NULL,
    worker_id uuid NOT NULL,
    lease_epoch bigint NOT NULL,
    operation text NOT NULL,
    phase text NOT NULL CHECK (phase IN ('intent', 'verified', 'done', 'failed', 'skipped')),
    detail jsonb,
    recorded_at timestamptz NOT NULL
);
CREATE INDEX ledger_by_run ON ledger (run_id, id);
CREATE INDEX ledger_by_operation ON ledger (operation, id);

CREATE TABLE catalog (
    id bigserial PRIMARY KEY,
    run_id uuid NOT NULL UNIQUE,
    title text NOT NULL,
    info_hash text NOT NULL,
    library_paths jsonb NOT NULL,
    size bigint NOT NULL,
    content_hash text,
    import_method text NOT NULL,
    imported_at timestamptz NOT NULL
);
CREATE INDEX catalog_by_info_hash ON catalog (info_hash);
