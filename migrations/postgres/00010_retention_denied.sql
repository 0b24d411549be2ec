-- +goose Up
-- Denied actions are final, so retention prunes them with the other
-- terminal ones; its partial index lists the terminal statuses exactly as
-- record.TerminalStatuses does, so the prune's condition reads it.
DROP INDEX actions_updated_idx;
CREATE INDEX actions_updated_idx ON actions (updated_at)
    WHERE status IN ('succeeded', 'failed', 'confirmed', 'compensated', 'abandoned', 'denied');

-- +goose Down
DROP INDEX actions_updated_idx;
CREATE INDEX actions_updated_idx ON actions (updated_at)
    WHERE status IN ('succeeded', 'failed', 'confirmed', 'compensated', 'abandoned');
