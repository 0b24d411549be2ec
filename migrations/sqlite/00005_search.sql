-- +goose Up
-- The action list's search by key or reference, across namespaces.
CREATE INDEX actions_key_idx ON actions (key);
CREATE INDEX actions_reference_idx ON actions (reference) WHERE reference IS NOT NULL;

-- +goose Down
DROP INDEX actions_reference_idx;
DROP INDEX actions_key_idx;
