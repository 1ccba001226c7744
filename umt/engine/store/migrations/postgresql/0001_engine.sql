-- The durable engine's tables. Applied with search_path set to the engine's schema.

CREATE TABLE workers (
    id uuid PRIMARY KEY,
    host_key text NOT NULL,
    hostname text NOT NULL,
    pid integer NOT NULL,
    process_start text NOT NULL,
    workflows jsonb NOT NULL,
    started_at timestamptz NOT NULL,
    heartbeat_at timestamptz NOT NULL,
    stopped_at timestamptz
);
CREATE INDEX workers_live_by_host ON workers (host_key) WHERE stopped_at IS NULL;

CREATE TABLE runs (
    id uuid PRIMARY KEY,
    workflow_name text NOT NULL,
    workflow_version text NOT NULL,
    workflow_key text NOT NULL,
    status text NOT NULL CHECK (status IN
        ('pending', 'running', 'waiting', 'sleeping', 'succeeded', 'failed', 'canceled')),
    input jsonb NOT NULL,
    output jsonb,
    error jsonb,
    idempotency_key text,
    key_active boolean NOT NULL DEFAULT false,
    compensable boolean NOT NULL DEFAULT false,
    compensation text CHECK (compensation IN ('pending', 'running', 'succeeded', 'failed')),
    detail text,
    -- When a worker should next look at the run: its start, the end of a sleep or of a
    -- signal timeout, a retry, or the expiry of the lease that holds it. NULL: nothing to do.
    due_at timestamptz,
    lease_owner uuid,
    lease_epoch bigint NOT NULL DEFAULT 0,
    lease_expires_at timestamptz,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    started_at timestamptz,
    finished_at timestamptz
);
-- A key is held while its run exists, except by failed or canceled runs that have finished
-- compensating: those release it so that the same work can be started again.
CREATE UNIQUE INDEX runs_idempotency_key ON runs (workflow_name, idempotency_key) WHERE key_active;
CREATE INDEX runs_due ON runs (workflow_key, due_at) WHERE due_at IS NOT NULL;
CREATE INDEX runs_by_status ON runs (status, created_at);
CREATE INDEX runs_by_lease_owner ON runs (lease_owner) WHERE lease_owner IS NOT NULL;

CREATE TABLE steps (
    run_id uuid NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    phase text NOT NULL CHECK (phase IN ('main', 'compensation')),
    position integer NOT NULL,
    name text NOT NULL,
    kind text NOT NULL CHECK (kind IN ('step', 'sleep', 'signal')),
    status text NOT NULL CHECK (status IN ('pending', 'running', 'retrying', 'sleeping', 'waiting',
        'succeeded', 'failed', 'timed_out', 'canceled')),
    result jsonb,
    error jsonb,
    failures integer NOT NULL DEFAULT 0,
    signal_name text,
    wake_at timestamptz,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    finished_at timestamptz,
    PRIMARY KEY (run_id, phase, position)
);
CREATE INDEX steps_waiting_for_signal ON steps (signal_name) WHERE status = 'waiting';

CREATE TABLE attempts (
    id bigserial PRIMARY KEY,
    run_id uuid NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    phase text NOT NULL,
    position integer NOT NULL,
    attempt integer NOT NULL,
    status text NOT NULL CHECK (status IN ('running', 'succeeded', 'failed', 'interrupted',
        'canceled', 'lease_lost', 'handed_back')),
    worker_id uuid NOT NULL,
    lease_epoch bigint NOT NULL,
    started_at timestamptz NOT NULL,
    finished_at timestamptz,
    error jsonb,
    progress jsonb,
    progress_at timestamptz
);
CREATE INDEX attempts_by_step ON attempts (run_id, phase, position);
CREATE INDEX attempts_running ON attempts (run_id) WHERE status = 'running';

CREATE TABLE signals (
    id uuid PRIMARY KEY,
    name text NOT NULL,
    target_run_id uuid,
    data jsonb,
    idempotency_key text,
    status text NOT NULL CHECK (status IN ('kept', 'delivered', 'consumed')),
    delivered_to jsonb NOT NULL,
    created_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL,
    delivered_at timestamptz
);
CREATE UNIQUE INDEX signals_idempotency_key ON signals (idempotency_key)
    WHERE idempotency_key IS NOT NULL;
CREATE INDEX signals_kept ON signals (name, created_at) WHERE status = 'kept';
CREATE INDEX signals_by_age ON signals (created_at);
