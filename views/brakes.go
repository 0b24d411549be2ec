package views

import (
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/arbiter-ledger/arbiter/services/policies"
	"github.com/arbiter-ledger/arbiter/services/record"
)

// LimitsView is the limits page: each limit with the groups that use the
// most of it now.
type LimitsView struct {
	Limits []LimitUse
}

// LimitUse is one limit and its busiest groups.
type LimitUse struct {
	Limit *policies.Limit
	Usage *policies.Usage
}

// LimitGroupView is one group of one limit: its use and the actions behind
// it, newest first.
type LimitGroupView struct {
	Limit   *policies.Limit
	Group   string
	Used    float64
	Charges []policies.GroupCharge
}

// limitGroupPath is the page of one group of a limit.
func limitGroupPath(id, group string) string {
	return "/limits/" + url.PathEscape(id) + "/group?" + url.Values{"group": {group}}.Encode()
}

// chargeText says whether a charge counts now, and why not.
func chargeText(c policies.GroupCharge) string {
	switch {
	case c.Counts:
		return "counts"
	case c.Held:
		return "held: counts once approved"
	default:
		return "stopped counting: " + string(c.Status)
	}
}

// countingCharges is how many of cs count now.
func countingCharges(cs []policies.GroupCharge) int {
	n := 0
	for _, c := range cs {
		if c.Counts {
			n++
		}
	}
	return n
}

// FreezesView is the freezes page: the active freezes with a lift form
// each, the form to start one, the last lifted ones, and the breakers with
// what they count now.
type FreezesView struct {
	Active, Lifted []*record.Freeze
	Breakers       []*policies.Breaker
	// Form is the start form as typed, with its refusal.
	Form FreezeForm
	// LiftError is a refused lift's reason, for the freeze LiftID.
	LiftError, LiftID string
}

// FreezeForm is the start-a-freeze form as typed.
type FreezeForm struct {
	Namespace, Tools, Reason string
	Error                    string
}

// FreezeButton is the small form that starts a freeze from triage or a
// tool's actions: the namespace and tools it would freeze, as typed.
type FreezeButton struct {
	Namespace, Tools string
}

// limitsPath is a limit's tool on the action list: its actions.
func limitActionsPath(l *policies.Limit) string {
	q := url.Values{"namespace": {l.Namespace}}
	if len(l.Tools) == 1 && !strings.Contains(l.Tools[0], "*") {
		q.Set("tool", l.Tools[0])
	}
	return "/actions?" + q.Encode()
}

// groupShare is how much of max a group uses, as a percentage for people.
func groupShare(used, max float64) string {
	if max <= 0 {
		return "over (max 0)"
	}
	return fmt.Sprintf("%.0f%%", 100*used/max)
}

// meterMax is the meter's top: max, or the use when the group is over it
// (people approved it over the cap) so the bar stays full.
func meterMax(used, max float64) string {
	return amountText(maxFloat(max, used, 1e-9))
}

func maxFloat(xs ...float64) float64 {
	m := xs[0]
	for _, x := range xs[1:] {
		if x > m {
			m = x
		}
	}
	return m
}

// leavesIn says when a group's oldest counted charge stops counting.
func leavesIn(oldest time.Time, window int, now time.Time) string {
	return timeRel(oldest.Add(time.Duration(window)*time.Second), now)
}

// freezeBy names who started a freeze.
func freezeBy(f *record.Freeze) string {
	if f.By.Kind == record.ActorSystem {
		return f.By.Name + " (tripped)"
	}
	return f.By.Name
}

// ratioText is a breaker's share, or "-" when it does not check it.
func ratioText(r *float64) string {
	if r == nil {
		return "-"
	}
	return fmt.Sprintf("above %.0f%%", 100**r)
}

// breakerCounts says what a breaker counts now.
func breakerCounts(b *policies.Breaker) string {
	if b.State == nil {
		return ""
	}
	s := b.State
	return fmt.Sprintf("%d with an outcome since %s (at least %d to judge): %d timed out, %d failed", s.Actions,
		s.Since.UTC().Format("15:04:05 UTC"), b.MinActions, s.TimedOut, s.Failed)
}

func toolsText(tools []string) string { return strings.Join(tools, ", ") }
