-- +goose Up
-- Approvals count people, not credentials: an API key belongs to the user
-- it approves for. Keys that existed before have no owner: they may take
-- every decision but approve, until they are replaced by keys with one.
ALTER TABLE api_keys ADD COLUMN owner_id uuid REFERENCES users (id);
CREATE INDEX api_keys_owner_idx ON api_keys (owner_id) WHERE owner_id IS NOT NULL;

-- +goose Down
DROP INDEX api_keys_owner_idx;
ALTER TABLE api_keys DROP COLUMN owner_id;
