package services

import (
	"context"
	"errors"
	"time"

	"github.com/arbiter-ledger/arbiter/services/driver"
	"github.com/arbiter-ledger/arbiter/services/record"
)

// A change of an action is decided by the rules table (machine.go) as a
// plan, turned into a driver.Change by newChange (the entry, the action as
// it will be stored, its deadline and its alerts) and written by write: the
// one path that writes the actions table. The driver writes each change
// with its entry and alerts in one statement or transaction, conditional on
// the version read.

// errLostRace means the action changed (or was created) between the read and
// the write; the caller reads again and decides again.
var errLostRace = errors.New("ledger: action changed concurrently")

// unit is where one piece of ledger work runs: a single change on the
// driver's executor (each write atomic by itself), or a batch of entries in
// one transaction, which then reads through it too, so a later entry sees
// what an earlier one wrote, and pays for one commit.
type unit struct {
	ex      driver.Executor
	tx      bool // ex is a transaction: several changes commit together
	alerted bool // a change wrote alerts: wake the dispatcher once committed
	// decided are the actions taken out of awaiting_approval: their
	// waiters are woken once the transaction commits.
	decided []*record.Action
}

// errNeedsTx means a plan makes two changes (plan.then), which must commit
// together, or a first intent is charged to limits under their groups'
// locks (limits.go): the caller decides again in a transaction.
var errNeedsTx = errors.New("ledger: the change needs a transaction")

// systemActor writes the changes that follow from an agent's entry.
var systemActor = record.Actor{Kind: record.ActorSystem, Name: "arbiter"}

// single is the unit of a change that stands alone.
func (l *Ledger) single() *unit { return &unit{ex: l.st.ex} }

func (l *Ledger) wakeDispatcher() {
	if l.alerted != nil {
		l.alerted()
	}
}

// newChange builds the change a plan decided: the entry to append (nil in
// for decisions and the sweeper) and the action as it will be stored.
func (l *Ledger) newChange(prev *record.Action, pl plan, actor record.Actor, in *EntryInput, now time.Time) *driver.Change {
	if pl.actor != nil { // the system records what time decided
		actor, in = *pl.actor, nil
	}
	e := record.Entry{ID: newID(), Type: pl.record.typ, Actor: actor, Attempt: pl.record.attempt,
		Payload: record.MarshalPayload(pl.record.payload), RecordedAt: now}
	if in != nil {
		e.OccurredAt = UTCPtr(in.OccurredAt)
	}
	next := l.stored(prev, pl.next, now)
	return &driver.Change{Prev: prev, Next: next, Entry: e, Alerts: alertsFor(pl.events, &e, next)}
}

// stored is the action as it will be stored: a new action at version 1, the
// new state with a bumped version, or the unchanged state when only an
// entry is appended. Either way updated_at moves, so retention counts from
// the newest entry, and the deadline follows the status.
func (l *Ledger) stored(prev, next *record.Action, now time.Time) *record.Action {
	var n *record.Action
	switch {
	case prev == nil:
		n = next.Clone()
		n.Version, n.EntrySeq = 1, 1
	case next == nil:
		n = prev.Clone()
	default:
		n = next.Clone()
		n.Version = prev.Version + 1
	}
	n.UpdatedAt = now
	n.Deadline = nil
	if at, ok := l.deadlines[n.Status]; ok {
		n.Deadline = at(n)
	}
	return n
}

// write writes changes in one set: new actions (Prev nil) or changes to
// existing ones, not both. It reports which were written; the others lost a
// race (the key exists, or the action changed since it was read).
func (l *Ledger) write(ctx context.Context, u *unit, chs []*driver.Change) ([]bool, error) {
	if !u.tx && chs[0].Prev != nil && mayFlip(chs) {
		// A charge may start or stop counting: its group's kept use
		// changes with the action, in one transaction.
		var written []bool
		err := l.inTxRetry(ctx, func(u *unit) error {
			var err error
			written, err = l.write(ctx, u, chs)
			return err
		})
		return written, err
	}
	var (
		written []bool
		err     error
	)
	if chs[0].Prev == nil {
		written, err = u.ex.ActionInsertMany(ctx, chs)
	} else {
		written, err = u.ex.ActionUpdateMany(ctx, chs)
	}
	if err != nil {
		return nil, DBError("ledger: write", err)
	}
	if chs[0].Prev != nil {
		if fs := driver.Flips(chs, written); len(fs) > 0 {
			if err := u.ex.LimitFlipsApply(ctx, fs); err != nil {
				return nil, DBError("ledger: count limit charges", err)
			}
		}
	}
	for i, ch := range chs {
		if written[i] && len(ch.Alerts) > 0 {
			u.alerted = true
		}
	}
	if chs[0].Prev != nil {
		if as := decided(chs, written); !u.tx {
			l.waiting.wake(as)
		} else {
			u.decided = append(u.decided, as...)
		}
		l.observeApprovals(chs, written)
		l.observeReconciliation(chs, written)
	}
	return written, nil
}

// mayFlip reports whether a change among chs may make a charge of its
// action start or stop counting.
func mayFlip(chs []*driver.Change) bool {
	for _, ch := range chs {
		if driver.ChangeMayFlip(ch) {
			return true
		}
	}
	return false
}

// inTx runs fn in one write transaction and wakes the dispatcher after the
// commit if fn wrote alerts.
func (l *Ledger) inTx(ctx context.Context, fn func(*unit) error) error {
	tx, err := l.st.drv.Begin(ctx)
	if err != nil {
		return DBError("ledger: begin", err)
	}
	u := &unit{ex: tx, tx: true}
	if err := fn(u); err != nil {
		tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return DBError("ledger: commit", err)
	}
	if u.alerted {
		l.wakeDispatcher()
	}
	l.waiting.wake(u.decided)
	return nil
}

// inTxRetry is inTx, run again when the database aborted the transaction to
// break a deadlock. Batches lock actions in key order, but the new actions
// of a batch are created first, in one statement, so two batches that each
// create a key the other then updates can still wait on each other.
func (l *Ledger) inTxRetry(ctx context.Context, fn func(*unit) error) error {
	for try := 1; ; try++ {
		err := l.inTx(ctx, fn)
		if try == 3 || l.st.drv.ClassifyError(err) != driver.ErrorDeadlock {
			return err
		}
	}
}

func newID() string { return driver.NewID() }

// Now is the time as Arbiter records it: UTC, to the microsecond the
// databases keep.
func Now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

// observeApprovals reports the approvals a set of written changes decided.
func (l *Ledger) observeApprovals(chs []*driver.Change, written []bool) {
	if l.approvalDecided == nil {
		return
	}
	for i, ch := range chs {
		from, to := ch.Prev.Status, ch.Next.Status
		if !written[i] || from == to || (from != record.StatusAwaitingApproval && from != record.StatusApproved) {
			continue
		}
		switch {
		case to == record.StatusApproved:
			l.approvalDecided("approved", ch.Entry.RecordedAt.Sub(ch.Prev.CreatedAt))
		case to == record.StatusDenied && from == record.StatusAwaitingApproval:
			l.approvalDecided("denied", ch.Entry.RecordedAt.Sub(ch.Prev.CreatedAt))
		}
	}
}
