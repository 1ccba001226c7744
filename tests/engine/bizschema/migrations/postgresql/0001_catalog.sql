CREATE TABLE catalog (
    id bigserial PRIMARY KEY,
    run_id uuid NOT NULL,
    title text NOT NULL
);
