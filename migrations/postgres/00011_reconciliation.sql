-- +goose Up
-- Look before you resend: an action keeps its key's expiry (key_ttl), the
-- lookups of its current attempt and their last answer, and how its
-- compensation went.
ALTER TABLE actions ADD COLUMN reconciliation jsonb;
-- A compensation now holds a lease in lease_until; the passed lease an
-- action kept from before its compensation was requested is not one.
UPDATE actions SET lease_until = NULL WHERE status = 'compensation_requested';

-- +goose Down
ALTER TABLE actions DROP COLUMN reconciliation;
