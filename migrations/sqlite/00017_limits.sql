-- +goose Up
-- Limits across actions: a budget or a rate per business group. A limit
-- charges the first intents it matches, in their group; a charge counts
-- while it is younger than the window and its action has not stopped
-- counting (limit_charges). Every change writes a new version, as for
-- policies.
CREATE TABLE limits (
    id                 text PRIMARY KEY,
    namespace          text NOT NULL REFERENCES namespaces (name),
    name               text NOT NULL,
    tools              text NOT NULL,           -- array of patterns, as for policies
    condition          text NOT NULL,           -- CEL bool; empty matches every intent for the tools
    amount             text NOT NULL,           -- CEL int or double; empty charges 1
    group_by           text NOT NULL,           -- CEL string; empty is one group for the namespace
    window_seconds     integer NOT NULL CHECK (window_seconds BETWEEN 1 AND 2592000),
    max_amount         real NOT NULL CHECK (max_amount >= 0),
    over_action        text NOT NULL CHECK (over_action IN ('hold', 'deny')),
    approvals_required integer NOT NULL CHECK (approvals_required BETWEEN 1 AND 5),
    mode               text NOT NULL CHECK (mode IN ('enforce', 'shadow')),
    enabled            boolean NOT NULL,
    version            integer NOT NULL,
    created_at         datetime NOT NULL,
    updated_at         datetime NOT NULL,
    deleted_at         datetime
);
CREATE INDEX limits_namespace_idx ON limits (namespace) WHERE deleted_at IS NULL;

CREATE TABLE limit_versions (
    limit_id   text NOT NULL,
    version    integer NOT NULL,
    limit_def  text NOT NULL,                  -- the limit as it was
    created_at datetime NOT NULL,
    PRIMARY KEY (limit_id, version)
);

-- One row per (limit, action): what the action's first intent was charged
-- in its group. held: the action waits for approval because it exceeded
-- this limit, so the charge counts only once people approve it. Whether a
-- charge counts is read from its action's status, so nothing here changes
-- after the insert.
CREATE TABLE limit_charges (
    limit_id   text NOT NULL,
    group_key  text NOT NULL,
    charged_at datetime NOT NULL,
    action_id  text NOT NULL REFERENCES actions (id) ON DELETE CASCADE,
    amount     real NOT NULL,
    held       boolean NOT NULL,
    PRIMARY KEY (limit_id, group_key, charged_at, action_id)
);
CREATE INDEX limit_charges_action_idx ON limit_charges (action_id);

-- What the limits charged the action: [{"id", "name", "version", "group",
-- "amount", "exceeded"}], NULL when no limit matched.
ALTER TABLE actions ADD COLUMN limits text;

-- Policies may run in shadow: evaluated and recorded, never enforced.
ALTER TABLE policies ADD COLUMN mode text NOT NULL DEFAULT 'enforce';

-- +goose Down
ALTER TABLE policies DROP COLUMN mode;
ALTER TABLE actions DROP COLUMN limits;
DROP TABLE limit_charges;
DROP TABLE limit_versions;
DROP TABLE limits;
