-- +goose NO TRANSACTION
-- +goose Up
-- Search by key or reference (SPEC "Actions": exact, or by prefix when q
-- ends in *): the indexes in the "C" collation, where the strings that
-- begin with a prefix are one range whatever the database's collation.
-- The queries spell the same COLLATE (pgdriver/actions.go). Built
-- concurrently: writes go on meanwhile.
CREATE INDEX CONCURRENTLY IF NOT EXISTS actions_key_c_idx ON actions ((key COLLATE "C"));
CREATE INDEX CONCURRENTLY IF NOT EXISTS actions_reference_c_idx ON actions ((reference COLLATE "C")) WHERE reference IS NOT NULL;
DROP INDEX CONCURRENTLY IF EXISTS actions_key_idx;
DROP INDEX CONCURRENTLY IF EXISTS actions_reference_idx;

-- +goose Down
CREATE INDEX CONCURRENTLY IF NOT EXISTS actions_key_idx ON actions (key);
CREATE INDEX CONCURRENTLY IF NOT EXISTS actions_reference_idx ON actions (reference) WHERE reference IS NOT NULL;
DROP INDEX CONCURRENTLY IF EXISTS actions_reference_c_idx;
DROP INDEX CONCURRENTLY IF EXISTS actions_key_c_idx;
