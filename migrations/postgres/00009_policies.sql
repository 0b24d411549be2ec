-- +goose Up
-- Approval policies: which first intents need people's approval. Every
-- change writes a new version; versions stay readable after a delete, for
-- the actions a version caught.
CREATE TABLE policies (
    id                 uuid PRIMARY KEY,
    namespace          text NOT NULL REFERENCES namespaces (name),
    name               text NOT NULL,
    tools              jsonb NOT NULL,          -- array of patterns; * matches any run of characters
    condition          text NOT NULL,           -- CEL; empty matches every intent for the tools
    approvals_required integer NOT NULL CHECK (approvals_required BETWEEN 1 AND 5),
    expires_after      integer NOT NULL,        -- seconds
    escalate_after     integer,                 -- seconds
    enabled            boolean NOT NULL,
    version            integer NOT NULL,
    created_at         timestamptz NOT NULL,
    updated_at         timestamptz NOT NULL,
    deleted_at         timestamptz
);
CREATE INDEX policies_namespace_idx ON policies (namespace) WHERE deleted_at IS NULL;

CREATE TABLE policy_versions (
    policy_id  uuid NOT NULL,
    version    integer NOT NULL,
    policy     jsonb NOT NULL,                  -- the policy as it was
    created_at timestamptz NOT NULL,
    PRIMARY KEY (policy_id, version)
);

-- +goose Down
DROP TABLE policy_versions;
DROP TABLE policies;
