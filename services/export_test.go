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

// Webhook test hooks.

// SetRetrySchedule gives this dispatcher its own waits between attempts, so
// tests retry in milliseconds without touching the shared RetrySchedule.
func (d *Dispatcher) SetRetrySchedule(s []time.Duration) { d.schedule = s }

// SetClock replaces the webhook service's clock (rotation deadlines).
func (w *Webhooks) SetClock(now func() time.Time) { w.now = now }

// ErrLostRace is what commit answers when the action changed since it was
// read.
var ErrLostRace = errLostRace

// DecideAsOf applies a decision to the action as the caller read it, without
// reading it again: the change reaches commit the way a decision that lost a
// race to another writer does, so its compare-and-set fails if a is stale.
func (l *Ledger) DecideAsOf(ctx context.Context, p Principal, a *Action, d DecisionInput) error {
	now := l.now()
	actor := Actor{Kind: "operator", Name: p.Name}
	pl := rules[event(d.Decision)][a.Status](&step{now: now, act: a, dec: &d, actor: actor})
	if pl.err != nil {
		return pl.err
	}
	_, _, err := l.commit(ctx, &change{prev: a, next: pl.next, events: pl.events, entry: Entry{
		ID: newID(), Type: pl.record.typ, Actor: actor, Attempt: pl.record.attempt,
		Payload: marshalPayload(pl.record.payload), RecordedAt: now,
	}})
	return err
}

// CountMessages counts outbox messages about an action ("" for any) of an
// event type ("" for any).
func (s *Store) CountMessages(ctx context.Context, actionID, eventType string) (int, error) {
	q := `SELECT count(*) FROM webhook_messages
		WHERE ($1 = '' OR CAST(action_id AS text) = $1) AND ($2 = '' OR event_type = $2)`
	var n int
	err := s.rsq.QueryRowContext(ctx, s.rebind(q), actionID, eventType).Scan(&n)
	return n, err
}

// ExecForTest runs a statement on the write connection, for tests that
// inject faults into the schema (a trigger that fails an insert).
func (s *Store) ExecForTest(ctx context.Context, q string) error {
	_, err := s.wsq.ExecContext(ctx, q)
	return err
}

// CountRows counts the rows of a table, for tests that check what a delete
// took with it.
func (s *Store) CountRows(ctx context.Context, table string) (int, error) {
	var n int
	err := s.rsq.QueryRowContext(ctx, `SELECT count(*) FROM `+table).Scan(&n)
	return n, err
}

// IntForTest runs a query that answers one integer (NULL reads as 0).
func (s *Store) IntForTest(ctx context.Context, q string) (int, error) {
	var n *int
	err := s.rsq.QueryRowContext(ctx, q).Scan(&n)
	if n == nil {
		return 0, err
	}
	return *n, err
}
