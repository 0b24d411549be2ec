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

// TestSubmitExistingMany: released intents answered together get what each
// would get alone (SubmitExisting, one after another, on a twin ledger):
// proceed with attempt 1 once approved, denied once rejected, rejected when
// malformed, in progress for the same intent again; and the timelines are
// the same.
func TestSubmitExistingMany(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		ctx := context.Background()
		intent := func(key string) string {
			return `{"key":"` + key + `","type":"intent","tool":"payments.refund","effect":"keyed","params":{"amount":10},"timeout":60,"require_approval":true}`
		}
		// run sets up three decided actions and answers the released
		// intents with answer.
		run := func(answer func(f *fixture, items []services.Released) []services.EntryResult) ([]services.EntryResult, map[string][]record.EntryType) {
			f := newFixture(t, st, FixtureOpts{})
			ids := map[string]string{}
			for _, k := range []string{"a", "b", "c"} {
				res := submit(t, f.l, f.agent, intent(k))
				require.Equal(t, record.OutcomePendingApproval, res.Outcome)
				ids[k] = res.Action.ID
			}
			for _, k := range []string{"a", "b", "c"} {
				d := services.DecisionInput{Decision: record.DecisionApprove}
				if k == "c" {
					d = services.DecisionInput{Decision: record.DecisionReject, Reason: "no"}
				}
				_, _, err := f.l.Decide(ctx, f.operator, ids[k], d)
				require.NoError(t, err)
			}
			res := answer(f, []services.Released{
				{P: f.agent, ActionID: ids["a"], Raw: []byte(intent("a"))},
				{P: f.agent, ActionID: ids["b"], Raw: []byte(intent("b"))},
				{P: f.agent, ActionID: ids["c"], Raw: []byte(intent("c"))},
				{P: f.agent, ActionID: ids["a"], Raw: []byte(intent("a"))},
				{P: f.agent, ActionID: ids["b"], Raw: []byte(`{"key":"b","type":"intent"`)},
			})
			timelines := map[string][]record.EntryType{}
			for k, id := range ids {
				for _, e := range f.entries(t, id) {
					timelines[k] = append(timelines[k], e.Type)
				}
			}
			return res, timelines
		}
		together, tlTogether := run(func(f *fixture, items []services.Released) []services.EntryResult {
			res, err := f.l.SubmitExistingMany(ctx, items)
			require.NoError(t, err)
			return res
		})
		alone, tlAlone := run(func(f *fixture, items []services.Released) []services.EntryResult {
			var out []services.EntryResult
			for _, it := range items {
				res, err := f.l.SubmitExisting(ctx, it.P, it.Raw)
				require.NoError(t, err)
				out = append(out, res)
			}
			return out
		})
		require.Len(t, together, 5)
		for _, i := range []int{0, 1} {
			require.Equal(t, record.OutcomeProceed, together[i].Outcome, "%d", i)
			require.Equal(t, 1, *together[i].Attempt)
			require.Equal(t, record.StatusInProgress, together[i].Action.Status)
		}
		require.Equal(t, record.OutcomeDenied, together[2].Outcome)
		require.Equal(t, record.OutcomeInProgress, together[3].Outcome, "the same intent again, once running")
		require.Equal(t, record.OutcomeRejected, together[4].Outcome)
		for i := range together {
			require.Equal(t, alone[i].Outcome, together[i].Outcome, "%d", i)
			require.Equal(t, alone[i].Attempt == nil, together[i].Attempt == nil, "%d", i)
		}
		require.Equal(t, tlAlone, tlTogether)
	})
}
