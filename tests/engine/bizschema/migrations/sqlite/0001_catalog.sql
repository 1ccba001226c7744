CREATE TABLE catalog (
    id integer PRIMARY KEY AUTOINCREMENT,
    run_id text NOT NULL,
    title text NOT NULL
);
