-- +goose Up
CREATE TABLE namespaces (
    name       text PRIMARY KEY,
    created_at timestamptz NOT NULL
);

CREATE TABLE api_keys (
    id           uuid PRIMARY KEY,
    namespace    text REFERENCES namespaces (name),
    name         text NOT NULL,
    role         text NOT NULL CHECK (role IN ('agent', 'reader', 'operator', 'admin')),
    prefix       text NOT NULL,
    hash         bytea NOT NULL UNIQUE,
    created_at   timestamptz NOT NULL,
    last_used_at timestamptz,
    revoked_at   timestamptz,
    CHECK ((role = 'admin') = (namespace IS NULL))
);

CREATE TABLE actions (
    id           uuid PRIMARY KEY,
    namespace    text NOT NULL REFERENCES namespaces (name),
    key          text NOT NULL,
    tool         text NOT NULL,
    effect       text NOT NULL,
    status       text NOT NULL,
    attempt      integer NOT NULL,
    version      integer NOT NULL,
    lease_until  timestamptz,
    reference    text,
    agent        text,
    run_id       text,
    fingerprint  text NOT NULL,
    params       jsonb NOT NULL,
    result       jsonb,
    external_ref text,
    retriable    boolean NOT NULL DEFAULT false,
    entry_seq    integer NOT NULL,
    created_at   timestamptz NOT NULL,
    updated_at   timestamptz NOT NULL,
    UNIQUE (namespace, key)
);

-- The sweeper's scan: only live leases are indexed.
CREATE INDEX actions_lease_idx ON actions (lease_until) WHERE status = 'in_progress';
-- Lists are newest first (ids are UUIDv7, so id order is creation order).
CREATE INDEX actions_namespace_id_idx ON actions (namespace, id DESC);
CREATE INDEX actions_status_id_idx ON actions (status, id DESC);
-- Retention scans terminal actions by age.
CREATE INDEX actions_updated_idx ON actions (updated_at)
    WHERE status IN ('succeeded', 'failed', 'confirmed', 'compensated', 'abandoned');

CREATE TABLE entries (
    id          uuid PRIMARY KEY,
    action_id   uuid NOT NULL REFERENCES actions (id) ON DELETE CASCADE,
    namespace   text NOT NULL,
    seq         integer NOT NULL,
    type        text NOT NULL,
    actor_kind  text NOT NULL,
    actor_name  text NOT NULL,
    attempt     integer,
    payload     jsonb NOT NULL,
    occurred_at timestamptz,
    recorded_at timestamptz NOT NULL,
    UNIQUE (action_id, seq)
);

-- +goose Down
DROP TABLE entries;
DROP TABLE actions;
DROP TABLE api_keys;
DROP TABLE namespaces;
