package services

import (
	"context"
	"time"
)

// SetClock replaces the ledger's clock, so tests move time instead of
// sleeping. Call it before the ledger is used.
func (l *Ledger) SetClock(now func() time.Time) { l.now = now }

// CountEntries counts entries straight from the table, for tests that check
// what was written where no principal can look, e.g. after retention pruned
// the action. An empty actionID or typ matches every action or type.
func (s *Store) CountEntries(ctx context.Context, actionID, typ string) (int, error) {
	q := `SELECT count(*) FROM entries
		WHERE ($1 = '' OR CAST(action_id AS text) = $1) AND ($2 = '' OR type = $2)`
	var n int
	err := s.rsq.QueryRowContext(ctx, s.rebind(q), actionID, typ).Scan(&n)
	return n, err
}
