CREATE TABLE ledger (
    operation text PRIMARY KEY,
    run_id text NOT NULL,
    lease_epoch integer NOT NULL
);
ALTER TABLE catalog ADD COLUMN size integer;
