package services

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/arbiter-ledger/arbiter/services/driver"
	"github.com/arbiter-ledger/arbiter/services/record"
)

// Freezes (SPEC "Limits across actions"): while one is active for a tool,
// the first intent of a new key waits for approval with the freeze in its
// approval's frozen_by, and every other intent that would proceed or
// compensate is answered frozen and changes nothing. Outcomes, heartbeats,
// lookups and decisions go on, so work already running is recorded. Lifting
// a freeze lets go of the actions it held (Release): each is approved once
// no freeze holds it and its people have approved it.

// FrozenRetryAfter is the Retry-After of a frozen answer: freezes are seen
// by every replica within a second, so asking again sooner learns nothing.
const FrozenRetryAfter = 5 * time.Second

// Freezer says which active freezes of a namespace cover a tool, from what
// it read at most a second ago; package policies implements it.
type Freezer interface {
	Frozen(ctx context.Context, ns, tool string) ([]record.FreezeRef, error)
}

var evUnfreeze = event("unfreeze") // a freeze that held the action was lifted

// frozenFor asks the freezer about an intent's tool; nil without one.
func (l *Ledger) frozenFor(ctx context.Context, ns string, in *EntryInput) ([]record.FreezeRef, error) {
	if l.freezer == nil || in.Type != record.TypeIntent || in.Tool == nil {
		return nil, nil
	}
	fs, err := l.freezer.Frozen(ctx, ns, *in.Tool)
	if err != nil {
		return nil, DBError("ledger: read active freezes", err)
	}
	return fs, nil
}

// unlessFrozen answers frozen, changing nothing, where r would let an
// intent run or compensate while a freeze covers its tool.
func unlessFrozen(r rule) rule {
	return func(s *step) plan {
		pl := r(s)
		if len(s.frozen) == 0 || (pl.outcome != record.OutcomeProceed && pl.outcome != record.OutcomeCompensate) {
			return pl
		}
		return frozenPlan(s.frozen)
	}
}

func frozenPlan(fs []record.FreezeRef) plan {
	why := make([]string, len(fs))
	for i, f := range fs {
		why[i] = fmt.Sprintf("freeze %s (%q)", f.ID, f.Reason)
	}
	e := Errorf(CodeFrozen, "%s holds this tool: nothing ran and nothing changed; try again after it is lifted",
		strings.Join(why, ", "))
	e.RetryAfter = int(FrozenRetryAfter.Seconds())
	return plan{outcome: record.OutcomeFrozen, err: e}
}

// unfreeze lets go of an action a lifted freeze held: the freeze leaves its
// frozen_by, and the action is approved if nothing else holds it.
func unfreeze(s *step) plan {
	ap := s.act.Approval
	if ap == nil || approvalExpired(s) {
		return plan{}
	}
	next := s.act.Clone()
	if !next.Approval.Unfreeze(s.lift.ID) {
		return plan{}
	}
	p := &record.UnfrozenPayload{Freeze: record.FreezeRef{ID: s.lift.ID}, LiftedBy: s.actor, Reason: s.lift.Reason,
		FrozenBy: next.Approval.FrozenBy}
	for _, f := range ap.FrozenBy {
		if f.ID == s.lift.ID {
			p.Freeze = f
		}
	}
	if p.FrozenBy == nil {
		p.FrozenBy = []record.FreezeRef{}
	}
	pl := plan{outcome: record.OutcomeRecorded, next: next, record: &recordSpec{typ: record.TypeUnfrozen, payload: p},
		actor: &systemActor}
	if next.Approval.Approved() {
		next.Status, p.Approved = record.StatusApproved, true
		pl.events = []record.EventType{record.EventApproved}
	}
	return pl
}

// ReleaseBatch bounds the actions one round of Release reads and writes.
const ReleaseBatch = 500

// Release lets go of every action of namespace ns that freeze id held
// awaiting approval, once the freeze is lifted (by and why: who lifted it),
// and returns how many it changed. An action that changes meanwhile is
// read again; Release may run again (the sweeper repeats it for a lifted
// freeze until it reports nothing left), and finds nothing twice.
func (l *Ledger) Release(ctx context.Context, ns, id string, by record.Actor, why string) (int, error) {
	n := 0
	before := ""
	for {
		as, err := l.st.ex.ActionList(ctx, &driver.ActionListParams{Namespace: ns,
			Statuses: []record.Status{record.StatusAwaitingApproval}, BeforeID: before, Limit: ReleaseBatch})
		if err != nil {
			return n, DBError("ledger: read actions a freeze held", err)
		}
		now := l.now()
		var chs []*driver.Change
		for _, a := range as {
			pl := l.rules[evUnfreeze][a.Status](&step{now: now, ns: ns, act: a, actor: by,
				lift: &record.FreezeRef{ID: id, Reason: why}})
			if pl.record != nil {
				chs = append(chs, l.newChange(a, pl, systemActor, nil, now))
			}
		}
		if len(chs) > 0 {
			u := l.single()
			written, err := l.write(ctx, u, chs)
			if err != nil {
				return n, err
			}
			if u.alerted {
				l.wakeDispatcher()
			}
			for _, w := range written {
				if w {
					n++
				}
			}
		}
		if len(as) < ReleaseBatch {
			return n, nil
		}
		before = as[len(as)-1].ID
	}
}
