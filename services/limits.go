package services

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/arbiter-ledger/arbiter/services/driver"
	"github.com/arbiter-ledger/arbiter/services/record"
)

// Limits across actions (SPEC "Limits across actions"). The limiter says,
// before any write and under the CEL bounds of package policies, which
// limits a possible first intent matches, with its amount and group. An
// intent that matches one is decided in a transaction of its own (or in
// the single writer's): each of its groups is locked (driver.LimitUse), the
// group's counted use read, and the action created, held or denied, with
// its charges, before the locks are let go. Intents that match no limit
// take their usual route and pay nothing for it.

// Limiter finds the enabled limits a first intent is charged to; package
// policies implements it. It is asked once per possible first intent, with
// the approver.
type Limiter interface {
	Limits(ctx context.Context, q ApprovalQuery) ([]LimitMatch, error)
}

// LimitMatch is a limit that matched a first intent: the limit at its
// version, and the intent's amount and group. Error is why the amount or
// the group could not be evaluated: the intent then exceeds the limit
// (fail closed).
type LimitMatch struct {
	ID, Name  string
	Version   int
	Group     string
	Amount    float64
	Max       float64
	Window    time.Duration
	Over      string // record.LimitHold or record.LimitDeny
	Mode      string // record.LimitEnforce or record.LimitShadow
	Approvals int
	Error     string
}

// limitsFor is what the limiter says of a possible first intent: asked's
// answer, or asked now when it was not asked before the write.
func (l *Ledger) limitsFor(ctx context.Context, a *asked, p Principal, in *EntryInput) ([]LimitMatch, error) {
	if l.limiter == nil || in.Type != record.TypeIntent {
		return nil, nil
	}
	if a != nil {
		return a.limits, a.limitErr
	}
	return l.limiter.Limits(ctx, l.queryFor(p.Namespace, in, p.Name, l.now()))
}

// limited reports whether an intent was found to match a limit before the
// write: it must then be decided in a transaction.
func (a *asked) limited() bool { return a != nil && len(a.limits) > 0 }

// checkLimits reads each matched group's counted use under its lock and
// judges the intent against it. The locks are taken in one order, so two
// intents of the same groups never wait for each other in a circle.
func (l *Ledger) checkLimits(ctx context.Context, u *unit, ms []LimitMatch, now time.Time) ([]record.LimitCheck, error) {
	order := make([]int, len(ms))
	ps := make([]driver.LimitUseParams, len(ms))
	for i, m := range ms {
		order[i] = i
		ps[i] = m.useParams(now)
	}
	slices.SortFunc(order, func(a, b int) int {
		return cmp.Or(cmp.Compare(ps[a].Lock, ps[b].Lock), cmp.Compare(ps[a].LimitID, ps[b].LimitID),
			cmp.Compare(ps[a].Group, ps[b].Group))
	})
	sorted := make([]driver.LimitUseParams, len(ms))
	for k, i := range order {
		sorted[k] = ps[i]
	}
	used, err := u.ex.LimitUse(ctx, sorted)
	if err != nil {
		return nil, DBError("ledger: read limit use", err)
	}
	checks := make([]record.LimitCheck, len(ms))
	for k, i := range order {
		checks[i] = ms[i].check(used[k])
	}
	return checks, nil
}

// useParams asks for m's group's use under its lock, as of now.
func (m LimitMatch) useParams(now time.Time) driver.LimitUseParams {
	return driver.LimitUseParams{LimitID: m.ID, Group: m.Group, Since: now.Add(-m.Window), Window: m.Window,
		Lock: driver.GroupLock(m.ID, m.Group)}
}

// check judges m's charge against its group's counted use.
func (m LimitMatch) check(used float64) record.LimitCheck {
	return record.LimitCheck{ID: m.ID, Name: m.Name, Version: m.Version, Group: m.Group, Amount: m.Amount,
		Max: m.Max, Used: used, Over: m.Over, Mode: m.Mode, Error: m.Error, Approvals: m.Approvals,
		Exceeded: m.Error != "" || used+m.Amount > m.Max}
}

// chargesOf is what a new action's limits charge, to record with it: a
// charge is held when the action waits for approval because it exceeded
// that limit.
func chargesOf(a *record.Action, checks []record.LimitCheck, now time.Time) []driver.LimitCharge {
	cs := make([]driver.LimitCharge, len(checks))
	for i, c := range checks {
		held := c.Holds() && a.Status == record.StatusAwaitingApproval
		cs[i] = driver.LimitCharge{LimitID: c.ID, Group: c.Group, ActionID: a.ID, Amount: c.Amount, ChargedAt: now,
			Held: held, Counts: driver.ChargeCounts(a.Status, held)}
	}
	return cs
}

// limitPlan applies what the limits found to the plan of a new action: the
// action carries its charges and the intent's entry every check; a limit
// that denies creates it denied. It reports whether the plan is final.
func limitPlan(pl *plan, checks []record.LimitCheck) bool {
	if len(checks) == 0 {
		return false
	}
	a := pl.next
	a.Limits = make([]record.LimitCharge, len(checks))
	for i, c := range checks {
		a.Limits[i] = c.Charge()
	}
	pl.record.payload.(*record.IntentPayload).Limits = checks
	var denies []record.LimitCheck
	for _, c := range checks {
		if c.Denies() {
			denies = append(denies, c)
		}
	}
	if len(denies) == 0 {
		return false
	}
	a.Status, a.Attempt, a.LeaseUntil = record.StatusDenied, 0, nil
	pl.outcome, pl.record.attempt = record.OutcomeDenied, nil
	msgs := make([]string, len(denies))
	for i, c := range denies {
		msgs[i] = exceededMessage(c)
	}
	pl.err = limitExceeded(a.Limits, strings.Join(msgs, "; "))
	pl.events = []record.EventType{record.EventLimitExceeded}
	return true
}

// limitExceeded is the error of an intent a limit denied: why, and the
// limits that denied it with their groups' use.
func limitExceeded(cs []record.LimitCharge, why string) *Error {
	e := Errorf(CodeLimitExceeded, "%s", why)
	for _, c := range cs {
		if c.Denied {
			e.Limits = append(e.Limits, c.Over())
		}
	}
	return e
}

// exceededMessage says why a limit refused an intent, for the agent and the
// person reading its answer.
func exceededMessage(c record.LimitCheck) string {
	if c.Error != "" {
		return fmt.Sprintf("limit %q (version %d) could not evaluate this intent (%s), so it counts as over the limit",
			c.Name, c.Version, c.Error)
	}
	return fmt.Sprintf("limit %q (version %d) allows %g in group %q; %g is used and this intent adds %g",
		c.Name, c.Version, c.Max, c.Group, c.Used, c.Amount)
}

// limitHolds are the limits that hold an intent, as its approval lists
// them, and the most approvals any of them requires.
func limitHolds(checks []record.LimitCheck) ([]record.ApprovalLimit, int) {
	var holds []record.ApprovalLimit
	required := 0
	for _, c := range checks {
		if c.Holds() {
			holds = append(holds, c.Charge().Over())
			required = max(required, c.Approvals)
		}
	}
	return holds, required
}
