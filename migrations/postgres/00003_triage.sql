-- +goose Up
-- The triage queue: actions waiting on a person, oldest first. The
-- conditions are spelled exactly as services/triage.go queries them, so the
-- planner can prove the partial indexes apply.
CREATE INDEX actions_triage_idx ON actions (updated_at)
    WHERE status IN ('timed_out', 'retry_requested', 'compensation_requested');
-- Alerts on the triage queue: recent key reuse and stale outcomes.
CREATE INDEX entries_alerts_idx ON entries (recorded_at)
    WHERE type IN ('key_reused', 'stale_outcome');

-- +goose Down
DROP INDEX entries_alerts_idx;
DROP INDEX actions_triage_idx;
