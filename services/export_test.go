package services

import (
	"context"
	"time"
)

// SetClock replaces the ledger's clock, so tests move time instead of
// sleeping. Call it before the ledger is used.
func (l *Ledger) SetClock(now func() time.Time) { l.now = now }

// CountEntries counts the entries of the given type of an action (of every
// action when actionID is empty; of every type when typ is empty), for tests that check what was written
// without a principal, e.g. after retention pruned the action.
func (s *Store) CountEntries(ctx context.Context, actionID, typ string) (int, error) {
	q := `SELECT count(*) FROM entries WHERE ($1 = '' OR CAST(action_id AS text) = $1) AND ($2 = '' OR type = $2)`
	var n int
	err := s.rsq.QueryRowContext(ctx, s.rebind(q), actionID, typ).Scan(&n)
	return n, err
}
