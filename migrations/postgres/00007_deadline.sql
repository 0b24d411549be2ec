-- +goose Up
-- A generic deadline: when the sweeper next asks the rules table what the
-- passing of time means for an action. Today it is the lease of an action
-- in progress; approvals and lookups bring deadlines of their own. The
-- ledger derives it from the status; no other code writes it.
ALTER TABLE actions ADD COLUMN deadline timestamptz;
UPDATE actions SET deadline = lease_until WHERE status = 'in_progress';
CREATE INDEX actions_deadline_idx ON actions (deadline) WHERE deadline IS NOT NULL;
-- It replaces the index of live leases, which only the sweeper read (as
-- narrow as it was, so writing an action costs no more); counting actions
-- in progress reads actions_status_id_idx.
DROP INDEX actions_lease_idx;

-- +goose Down
CREATE INDEX actions_lease_idx ON actions (lease_until) WHERE status = 'in_progress';
DROP INDEX actions_deadline_idx;
ALTER TABLE actions DROP COLUMN deadline;
