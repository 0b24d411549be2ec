-- +goose Up
-- Freezes: the brake an operator pulls, or a breaker trips. While a freeze
-- is active (lifted_at NULL), new keys of the tools it covers wait for
-- approval and other intents are answered frozen. released_at is set once
-- every action the freeze held has been let go after its lift.
CREATE TABLE freezes (
    id          uuid PRIMARY KEY,
    namespace   text NOT NULL REFERENCES namespaces (name),
    tools       jsonb NOT NULL,              -- array of patterns, as for policies
    reason      text NOT NULL,
    by_kind     text NOT NULL CHECK (by_kind IN ('operator', 'system')),
    by_name     text NOT NULL,
    by_via      text NOT NULL DEFAULT '',   -- how an operator started it: dashboard or api_key:<name>
    breaker_id  uuid,                        -- the breaker that tripped it, if one did
    started_at  timestamptz NOT NULL,
    lifted_at   timestamptz,
    lifted_kind text,
    lifted_name text,
    lifted_via  text,
    lift_reason text,
    released_at timestamptz
);
CREATE INDEX freezes_active_idx ON freezes (namespace) WHERE lifted_at IS NULL;
CREATE INDEX freezes_unreleased_idx ON freezes (lifted_at) WHERE released_at IS NULL;
CREATE INDEX freezes_namespace_started_idx ON freezes (namespace, started_at DESC);
-- A breaker does not trip again while its freeze is active, whichever
-- replica checks it.
CREATE UNIQUE INDEX freezes_breaker_active_idx ON freezes (breaker_id) WHERE lifted_at IS NULL AND breaker_id IS NOT NULL;
CREATE INDEX freezes_breaker_idx ON freezes (breaker_id, started_at DESC) WHERE breaker_id IS NOT NULL;

-- Breakers: a share of unknown or failed outcomes among a tool's recent
-- actions that starts a freeze.
CREATE TABLE breakers (
    id                uuid PRIMARY KEY,
    namespace         text NOT NULL REFERENCES namespaces (name),
    name              text NOT NULL,
    tools             jsonb NOT NULL,
    window_seconds    integer NOT NULL CHECK (window_seconds BETWEEN 1 AND 86400),
    min_actions       integer NOT NULL CHECK (min_actions BETWEEN 1 AND 100000),
    max_unknown_ratio double precision CHECK (max_unknown_ratio BETWEEN 0 AND 1),
    max_failure_ratio double precision CHECK (max_failure_ratio BETWEEN 0 AND 1),
    enabled           boolean NOT NULL,
    version           integer NOT NULL,
    created_at        timestamptz NOT NULL,
    updated_at        timestamptz NOT NULL,
    deleted_at        timestamptz
);
CREATE INDEX breakers_namespace_idx ON breakers (namespace) WHERE deleted_at IS NULL;

CREATE TABLE breaker_versions (
    breaker_id  uuid NOT NULL,
    version     integer NOT NULL,
    breaker_def jsonb NOT NULL,                -- the breaker as it was
    created_at  timestamptz NOT NULL,
    PRIMARY KEY (breaker_id, version)
);

-- +goose Down
DROP TABLE breaker_versions;
DROP TABLE breakers;
DROP TABLE freezes;
