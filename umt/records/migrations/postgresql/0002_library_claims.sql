-- One library path, one owner: a run claims each destination before it writes a byte, and a
-- second run asking for the same path finds it held.

CREATE TABLE library_claims (
    path text PRIMARY KEY,
    run_id uuid NOT NULL,
    claimed_at timestamptz NOT NULL
);
CREATE INDEX library_claims_by_run ON library_claims (run_id);
