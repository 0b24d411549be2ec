-- +goose Up
-- Approval before execution: an action held for approval carries its
-- requirement, the votes, the deadlines and the policies that caught it.
ALTER TABLE actions ADD COLUMN approval text;
-- Actions awaiting approval wait on a person: the triage queue reads them
-- through its partial index, whose list services/triage.go spells the same.
DROP INDEX actions_triage_idx;
CREATE INDEX actions_triage_idx ON actions (updated_at)
    WHERE status IN ('timed_out', 'retry_requested', 'compensation_requested', 'awaiting_approval');

-- +goose Down
DROP INDEX actions_triage_idx;
CREATE INDEX actions_triage_idx ON actions (updated_at)
    WHERE status IN ('timed_out', 'retry_requested', 'compensation_requested');
ALTER TABLE actions DROP COLUMN approval;
