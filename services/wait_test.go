package services_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
	"github.com/arbiter-ledger/arbiter/services/record"
)

// awaited is what AwaitDecisionFunc called back with.
type awaited struct {
	a   *record.Action
	err error
}

// awaitFunc starts AwaitDecisionFunc on l for the fixture's action "k" and
// returns where its answer arrives.
func awaitFunc(t *testing.T, f *fixture, l *services.Ledger, wait time.Duration) <-chan awaited {
	t.Helper()
	got := make(chan awaited, 2)
	l.AwaitDecisionFunc(f.agent, f.action(t, "k").ID, wait, func(a *record.Action, err error) { got <- awaited{a, err} })
	return got
}

func answer(t *testing.T, got <-chan awaited) awaited {
	t.Helper()
	select {
	case g := <-got:
		return g
	case <-time.After(30 * time.Second):
		t.Fatal("AwaitDecisionFunc never called back")
		return awaited{}
	}
}

// TestAwaitDecisionFunc: a parked wait ends with the decided action when
// this process decides, when another ledger (replica) on the same database
// decides, with the action still awaiting when the wait passes or the
// ledger ends its waits, and exactly once.
func TestAwaitDecisionFunc(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		ctx := context.Background()
		decide := func(t *testing.T, f *fixture, l *services.Ledger) {
			_, _, err := l.Decide(ctx, f.operator, f.action(t, "k").ID,
				services.DecisionInput{Decision: record.DecisionApprove})
			require.NoError(t, err)
		}

		t.Run("decided here", func(t *testing.T) {
			f := newFixture(t, st, FixtureOpts{})
			require.Equal(t, record.OutcomePendingApproval, submit(t, f.l, f.agent, intentApproval).Outcome)
			got := awaitFunc(t, f, f.l, time.Minute)
			decide(t, f, f.l)
			g := answer(t, got)
			require.NoError(t, g.err)
			require.Equal(t, record.StatusApproved, g.a.Status)
			require.Empty(t, got, "called back once")
		})

		t.Run("decided on another replica", func(t *testing.T) {
			f := newFixture(t, st, FixtureOpts{})
			require.Equal(t, record.OutcomePendingApproval, submit(t, f.l, f.agent, intentApproval).Outcome)
			got := awaitFunc(t, f, f.l, time.Minute)
			other, _ := newLedger(st, LedgerOpts{})
			decide(t, f, other)
			g := answer(t, got)
			require.NoError(t, g.err)
			require.Equal(t, record.StatusApproved, g.a.Status)
		})

		t.Run("the wait passes", func(t *testing.T) {
			f := newFixture(t, st, FixtureOpts{})
			require.Equal(t, record.OutcomePendingApproval, submit(t, f.l, f.agent, intentApproval).Outcome)
			g := answer(t, awaitFunc(t, f, f.l, 10*time.Millisecond))
			require.NoError(t, g.err)
			if g.a != nil { // nil when the wait passed before the first read
				require.Equal(t, record.StatusAwaitingApproval, g.a.Status)
			}
		})

		t.Run("not awaiting approval", func(t *testing.T) {
			f := newFixture(t, st, FixtureOpts{})
			require.Equal(t, record.OutcomePendingApproval, submit(t, f.l, f.agent, intentApproval).Outcome)
			decide(t, f, f.l)
			g := answer(t, awaitFunc(t, f, f.l, time.Minute))
			require.NoError(t, g.err)
			require.Equal(t, record.StatusApproved, g.a.Status)
		})

		t.Run("the ledger ends its waits", func(t *testing.T) {
			f := newFixture(t, st, FixtureOpts{})
			require.Equal(t, record.OutcomePendingApproval, submit(t, f.l, f.agent, intentApproval).Outcome)
			got := awaitFunc(t, f, f.l, time.Hour)
			require.NoError(t, f.l.EndWaits(ctx))
			g := answer(t, got)
			require.NoError(t, g.err)
			if g.a != nil {
				require.Equal(t, record.StatusAwaitingApproval, g.a.Status)
			}
			// A wait begun after the end is answered at once.
			g = answer(t, awaitFunc(t, f, f.l, time.Hour))
			require.NoError(t, g.err)
		})
	})
}
