-- +goose NO TRANSACTION
-- +goose Up
-- Review alerts on triage (SPEC "acknowledge"): late results join key
-- reuse and stale outcomes. The condition is spelled exactly as
-- services/triage.go queries it (TriageAlerts), so the planner can prove
-- the partial index applies. Built concurrently: the entries table may be
-- large, and writes go on meanwhile.
CREATE INDEX CONCURRENTLY IF NOT EXISTS entries_review_idx ON entries (recorded_at)
    WHERE type IN ('key_reused', 'stale_outcome', 'late_result');
DROP INDEX CONCURRENTLY IF EXISTS entries_alerts_idx;

-- +goose Down
CREATE INDEX CONCURRENTLY IF NOT EXISTS entries_alerts_idx ON entries (recorded_at)
    WHERE type IN ('key_reused', 'stale_outcome');
DROP INDEX CONCURRENTLY IF EXISTS entries_review_idx;
