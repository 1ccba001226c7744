CREATE TABLE ledger (
    operation text PRIMARY KEY,
    run_id uuid NOT NULL,
    lease_epoch bigint NOT NULL
);
ALTER TABLE catalog ADD COLUMN size bigint;
