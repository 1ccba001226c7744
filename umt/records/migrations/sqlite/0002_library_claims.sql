-- One library path, one owner (SQLite dialect of the PostgreSQL migration with the same number).

CREATE TABLE library_claims (
    path text PRIMARY KEY,
    run_id text NOT NULL,
    claimed_at TIMETEXT NOT NULL
);
CREATE INDEX library_claims_by_run ON library_claims (run_id);
