-- The durable engine's tables: the SQLite dialect of the PostgreSQL migration with the same
-- number. TIMETEXT (UTC ISO 8601), JSONTEXT and BOOLINT are decoded by umt.engine.store.sqlite.

CREATE TABLE workers (
    id text PRIMARY KEY,
    host_key text NOT NULL,
    hostname text NOT NULL,
    pid integer NOT NULL,
    process_start text NOT NULL,
    workflows JSONTEXT NOT NULL,
    started_at TIMETEXT NOT NULL,
    heartbeat_at TIMETEXT NOT NULL,
    stopped_at TIMETEXT
);
CREATE INDEX workers_live_by_host ON workers (host_key) WHERE stopped_at IS NULL;

CREATE TABLE runs (
    id text PRIMARY KEY,
    workflow_name text NOT NULL,
    workflow_version text NOT NULL,
    workflow_key text NOT NULL,
    status text NOT NULL CHECK (status IN
        ('pending', 'running', 'waiting', 'sleeping', 'succeeded', 'failed', 'canceled')),
    input JSONTEXT NOT NULL,
    output JSONTEXT,
    error JSONTEXT,
    idempotency_key text,
    key_active BOOLINT NOT NULL DEFAULT 0,
    compensable BOOLINT NOT NULL DEFAULT 0,
    compensation text CHECK (compensation IN ('pending', 'running', 'succeeded', 'failed')),
    detail text,
    -- When a worker should next look at the run: its start, the end of a sleep or of a
    -- signal timeout, a retry, or the expiry of the lease that holds it. NULL: nothing to do.
    due_at TIMETEXT,
    lease_owner text,
    lease_epoch integer NOT NULL DEFAULT 0,
    lease_expires_at TIMETEXT,
    created_at TIMETEXT NOT NULL,
    updated_at TIMETEXT NOT NULL,
    started_at TIMETEXT,
    finished_at TIMETEXT
);
-- A key is held while its run exists, except by failed or canceled runs that have finished
-- compensating: those release it so that the same work can be started again.
CREATE UNIQUE INDEX runs_idempotency_key ON runs (workflow_name, idempotency_key) WHERE key_active;
CREATE INDEX runs_due ON runs (workflow_key, due_at) WHERE due_at IS NOT NULL;
CREATE INDEX runs_by_status ON runs (status, created_at);
CREATE INDEX runs_by_lease_owner ON runs (lease_owner) WHERE lease_owner IS NOT NULL;

CREATE TABLE steps (
    run_id text NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    phase text NOT NULL CHECK (phase IN ('main', 'compensation')),
    position integer NOT NULL,
    name text NOT NULL,
    kind text NOT NULL CHECK (kind IN ('step', 'sleep', 'signal')),
    status text NOT NULL CHECK (status IN ('pending', 'running', 'retrying', 'sleeping', 'waiting',
        'succeeded', 'failed', 'timed_out', 'canceled')),
    result JSONTEXT,
    error JSONTEXT,
    failures integer NOT NULL DEFAULT 0,
    signal_name text,
    wake_at TIMETEXT,
    created_at TIMETEXT NOT NULL,
    updated_at TIMETEXT NOT NULL,
    finished_at TIMETEXT,
    PRIMARY KEY (run_id, phase, position)
);
CREATE INDEX steps_waiting_for_signal ON steps (signal_name) WHERE status = 'waiting';

CREATE TABLE attempts (
    id integer PRIMARY KEY AUTOINCREMENT,
    run_id text NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    phase text NOT NULL,
    position integer NOT NULL,
    attempt integer NOT NULL,
    status text NOT NULL CHECK (status IN ('running', 'succeeded', 'failed', 'interrupted',
        'canceled', 'lease_lost', 'handed_back')),
    worker_id text NOT NULL,
    lease_epoch integer NOT NULL,
    started_at TIMETEXT NOT NULL,
    finished_at TIMETEXT,
    error JSONTEXT,
    progress JSONTEXT,
    progress_at TIMETEXT
);
CREATE INDEX attempts_by_step ON attempts (run_id, phase, position);
CREATE INDEX attempts_running ON attempts (run_id) WHERE status = 'running';

CREATE TABLE signals (
    id text PRIMARY KEY,
    name text NOT NULL,
    target_run_id text,
    data JSONTEXT,
    idempotency_key text,
    status text NOT NULL CHECK (status IN ('kept', 'delivered', 'consumed')),
    delivered_to JSONTEXT NOT NULL,
    created_at TIMETEXT NOT NULL,
    expires_at TIMETEXT NOT NULL,
    delivered_at TIMETEXT
);
CREATE UNIQUE INDEX signals_idempotency_key ON signals (idempotency_key)
    WHERE idempotency_key IS NOT NULL;
CREATE INDEX signals_kept ON signals (name, created_at) WHERE status = 'kept';
CREATE INDEX signals_by_age ON signals (created_at);
