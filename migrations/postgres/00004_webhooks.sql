-- +goose Up
CREATE TABLE webhook_endpoints (
    id                    uuid PRIMARY KEY,
    url                   text NOT NULL,
    event_types           jsonb NOT NULL,          -- array of event type names
    namespaces            jsonb NOT NULL,          -- array; empty means every namespace
    format                text NOT NULL CHECK (format IN ('standard', 'slack')),
    description           text NOT NULL,
    enabled               boolean NOT NULL,
    disabled_reason       text,
    secret                text NOT NULL,
    previous_secret       text,
    previous_secret_until timestamptz,
    failing_since         timestamptz,
    created_at            timestamptz NOT NULL,
    updated_at            timestamptz NOT NULL
);

-- The outbox: one message per alert, written in the transaction of the
-- ledger change that causes it.
CREATE TABLE webhook_messages (
    id          uuid PRIMARY KEY,
    event_type  text NOT NULL,
    namespace   text,
    action_id   uuid,
    payload     jsonb NOT NULL,
    created_at  timestamptz NOT NULL
);
CREATE INDEX webhook_messages_action_idx ON webhook_messages (action_id);

-- One delivery per message and matching endpoint.
CREATE TABLE webhook_deliveries (
    id              uuid PRIMARY KEY,
    message_id      uuid NOT NULL REFERENCES webhook_messages (id) ON DELETE CASCADE,
    endpoint_id     uuid NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
    state           text NOT NULL CHECK (state IN ('pending', 'succeeded', 'failed')),
    attempts        integer NOT NULL,
    next_attempt_at timestamptz NOT NULL,
    claim           uuid,                          -- the dispatcher holding it
    claimed_until   timestamptz,
    last_status     integer,
    last_error      text,
    created_at      timestamptz NOT NULL,
    updated_at      timestamptz NOT NULL
);
CREATE INDEX webhook_deliveries_due_idx ON webhook_deliveries (next_attempt_at) WHERE state = 'pending';
CREATE INDEX webhook_deliveries_endpoint_idx ON webhook_deliveries (endpoint_id, created_at DESC);
CREATE INDEX webhook_deliveries_message_idx ON webhook_deliveries (message_id);

-- Every attempt of every delivery.
CREATE TABLE webhook_attempts (
    id               uuid PRIMARY KEY,
    delivery_id      uuid NOT NULL REFERENCES webhook_deliveries (id) ON DELETE CASCADE,
    attempted_at     timestamptz NOT NULL,
    status_code      integer,
    latency_ms       integer NOT NULL,
    response_excerpt text NOT NULL,
    error            text
);
CREATE INDEX webhook_attempts_delivery_idx ON webhook_attempts (delivery_id, attempted_at);

-- +goose Down
DROP TABLE webhook_attempts;
DROP TABLE webhook_deliveries;
DROP TABLE webhook_messages;
DROP TABLE webhook_endpoints;
