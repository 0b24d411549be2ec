-- +goose Up
-- The dispatcher claims each endpoint's oldest due deliveries, up to the
-- endpoint's free slots: one short index range per endpoint, however long
-- another endpoint's backlog is.
CREATE INDEX webhook_deliveries_endpoint_due_idx ON webhook_deliveries (endpoint_id, next_attempt_at) WHERE state = 'pending';
DROP INDEX webhook_deliveries_due_idx;

-- +goose Down
CREATE INDEX webhook_deliveries_due_idx ON webhook_deliveries (next_attempt_at) WHERE state = 'pending';
DROP INDEX webhook_deliveries_endpoint_due_idx;
