package services

import (
	"context"
	"encoding/json"
	"fmt"
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

// TimeOutAsOf times out the given actions as the sweeper does one batch,
// from these snapshots, without reading them again: an action that changed
// since its snapshot reaches the writer the way one does that changed
// between the sweeper's read and its write.
func (l *Ledger) TimeOutAsOf(ctx context.Context, due []*Action) (int, error) {
	return l.timeOut(ctx, due)
}

// MessageEntrySeqs returns data.entry.seq of every outbox message about an
// action.
func (s *Store) MessageEntrySeqs(ctx context.Context, actionID string) ([]int, error) {
	rows, err := s.rsq.QueryContext(ctx, s.rebind(`SELECT payload FROM webhook_messages
		WHERE CAST(action_id AS text) = $1`), actionID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []int
	for rows.Next() {
		var raw []byte
		if err := rows.Scan(&raw); err != nil {
			return nil, err
		}
		var body MessageBody
		if err := json.Unmarshal(raw, &body); err != nil {
			return nil, err
		}
		if body.Data.Entry == nil {
			return nil, fmt.Errorf("message about %s has no entry", actionID)
		}
		out = append(out, body.Data.Entry.Seq)
	}
	return out, rows.Err()
}

// ReadDueActions runs the sweeper's read of due leases, the first batch's
// and a later batch's (after a lease at now), for tests of its query plan.
func (l *Ledger) ReadDueActions(ctx context.Context) error {
	now := l.now()
	if _, err := l.dueActions(ctx, now, nil); err != nil {
		return err
	}
	_, err := l.dueActions(ctx, now, &Action{ID: "00000000-0000-7000-8000-000000000000", LeaseUntil: &now})
	return err
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
