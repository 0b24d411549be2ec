package services

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/arbiter-ledger/arbiter/services/driver"
	"github.com/arbiter-ledger/arbiter/services/record"
)

// CountEntries counts entries straight from the table, for tests that check
// what was written where no principal can look, e.g. after retention pruned
// the action. An empty actionID or typ matches every action or type.
func (s *Store) CountEntries(ctx context.Context, actionID string, typ record.EntryType) (int, error) {
	var n int
	err := s.db.WithContext(ctx).Raw(`SELECT count(*) FROM entries
		WHERE (? = '' OR CAST(action_id AS text) = ?) AND (? = '' OR type = ?)`,
		actionID, actionID, string(typ), string(typ)).Scan(&n).Error
	return n, err
}

// ErrLostRace is what a decision on a stale read answers.
var ErrLostRace = errLostRace

// DecideAsOf applies a decision to the action as the caller read it, without
// reading it again: the change reaches the writer the way a decision that
// lost a race to another writer does, so its compare-and-set fails if a is
// stale.
func (l *Ledger) DecideAsOf(ctx context.Context, p Principal, a *record.Action, d DecisionInput) error {
	_, _, err := l.decideOn(ctx, p, a, d)
	return err
}

// CountMessages counts outbox messages about an action ("" for any) of an
// event type ("" for any).
func (s *Store) CountMessages(ctx context.Context, actionID string, eventType record.EventType) (int, error) {
	var n int
	err := s.db.WithContext(ctx).Raw(`SELECT count(*) FROM webhook_messages
		WHERE (? = '' OR CAST(action_id AS text) = ?) AND (? = '' OR event_type = ?)`,
		actionID, actionID, string(eventType), string(eventType)).Scan(&n).Error
	return n, err
}

// ExecForTest runs a statement on the write connection, for tests that
// inject faults into the schema (a trigger that fails an insert).
func (s *Store) ExecForTest(ctx context.Context, q string) error {
	return s.wdb.WithContext(ctx).Exec(q).Error
}

// CountRows counts the rows of a table, for tests that check what a delete
// took with it.
func (s *Store) CountRows(ctx context.Context, table string) (int, error) {
	var n int
	err := s.db.WithContext(ctx).Raw(`SELECT count(*) FROM ` + table).Scan(&n).Error
	return n, err
}

// TimeOutAsOf times out the given actions as the sweeper does one batch,
// from these snapshots, without reading them again: an action that changed
// since its snapshot reaches the writer the way one does that changed
// between the sweeper's read and its write.
func (l *Ledger) TimeOutAsOf(ctx context.Context, due []*record.Action) (int, error) {
	return l.passDeadlines(ctx, due)
}

// MessageEntrySeqs returns data.entry.seq of every outbox message about an
// action.
func (s *Store) MessageEntrySeqs(ctx context.Context, actionID string) ([]int, error) {
	var payloads []string
	err := s.db.WithContext(ctx).Raw(`SELECT CAST(payload AS text) FROM webhook_messages
		WHERE CAST(action_id AS text) = ?`, actionID).Scan(&payloads).Error
	if err != nil {
		return nil, err
	}
	var out []int
	for _, raw := range payloads {
		var body MessageBody
		if err := json.Unmarshal([]byte(raw), &body); err != nil {
			return nil, err
		}
		if body.Data.Entry == nil {
			return nil, fmt.Errorf("message about %s has no entry", actionID)
		}
		out = append(out, body.Data.Entry.Seq)
	}
	return out, nil
}

// ReadDueActions runs the sweeper's read of passed deadlines, the first
// batch's and a later batch's (after a deadline at now), for tests of its
// query plan.
func (l *Ledger) ReadDueActions(ctx context.Context) error {
	now := l.now()
	if _, err := l.st.ex.ActionDueList(ctx, &driver.ActionDueListParams{Now: now, Limit: SweepBatch}); err != nil {
		return err
	}
	_, err := l.st.ex.ActionDueList(ctx, &driver.ActionDueListParams{Now: now, Limit: SweepBatch,
		After: &record.Action{ID: "00000000-0000-7000-8000-000000000000", Deadline: &now}})
	return err
}

// IntForTest runs a query that answers one integer (NULL reads as 0).
func (s *Store) IntForTest(ctx context.Context, q string) (int, error) {
	var n *int
	err := s.db.WithContext(ctx).Raw(q).Scan(&n).Error
	if n == nil {
		return 0, err
	}
	return *n, err
}

// WithRules gives the ledger its own copy of the rules and deadline tables,
// changed by edit, so a test can add a row and see it take effect.
func (l *Ledger) WithRules(edit func(rules map[string]map[record.Status]func(TestStep) TestPlan,
	deadlines map[record.Status]func(*record.Action) *time.Time)) {
	rs := map[string]map[record.Status]func(TestStep) TestPlan{}
	ds := map[record.Status]func(*record.Action) *time.Time{}
	edit(rs, ds)
	t := ruleTable{}
	for ev, row := range l.rules {
		t[ev] = map[record.Status]rule{}
		for st, r := range row {
			t[ev][st] = r
		}
	}
	for ev, row := range rs {
		if t[event(ev)] == nil {
			t[event(ev)] = map[record.Status]rule{}
		}
		for st, r := range row {
			t[event(ev)][st] = func(s *step) plan { return r(TestStep{s}).p }
		}
	}
	d := deadlineTable{}
	for st, f := range l.deadlines {
		d[st] = f
	}
	for st, f := range ds {
		d[st] = f
	}
	l.rules, l.deadlines = t, d
}

// TestStep and TestPlan let a test write rules: the step as the ledger
// passes it, and a plan made by NewTestPlan or by a rule of the real table
// (RealRule).
type TestStep struct{ s *step }

type TestPlan struct{ p plan }

// Action is the action as read (nil for a key with no action yet).
func (s TestStep) Action() *record.Action { return s.s.act }

// Now is the ledger's time for this step.
func (s TestStep) Now() time.Time { return s.s.now }

// RealRule runs the package's own rule for event and status on s.
func RealRule(ev string, st record.Status, s TestStep) TestPlan {
	return TestPlan{rules[event(ev)][st](s.s)}
}

// WithPlan changes a plan: the outcome answered, the action's next state
// (edited on a copy) and the alerts.
func (p TestPlan) WithPlan(outcome record.Outcome, next func(*record.Action), events ...record.EventType) TestPlan {
	p.p.outcome = outcome
	if next != nil && p.p.next != nil {
		n := p.p.next.Clone()
		next(n)
		p.p.next = n
	}
	if events != nil {
		p.p.events = events
	}
	return p
}

// EvDeadline is the event the sweeper asks the table about.
const EvDeadline = string(evDeadline)
