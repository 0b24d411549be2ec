-- +goose Up
-- Review alerts on triage (SPEC "acknowledge"): late results join key
-- reuse and stale outcomes, spelled as services/triage.go queries them.
CREATE INDEX entries_review_idx ON entries (recorded_at)
    WHERE type IN ('key_reused', 'stale_outcome', 'late_result');
DROP INDEX entries_alerts_idx;

-- +goose Down
CREATE INDEX entries_alerts_idx ON entries (recorded_at)
    WHERE type IN ('key_reused', 'stale_outcome');
DROP INDEX entries_review_idx;
