package services_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
	"github.com/arbiter-ledger/arbiter/services/record"
	"github.com/arbiter-ledger/arbiter/services/webhooks/webhookstest"
)

// The rules table decides every change: these tests give a ledger a row of
// their own and see it take effect on both databases, through each path that
// writes (a single entry through group commit, a batch, the sweeper).

// holdFirstIntents is a test-only row for the first intent of a key: the
// action is created waiting (retry_requested, attempt 0, no lease), the
// agent is answered held, and an alert is written with it. It is the shape
// approval before execution takes.
func holdFirstIntents(rules map[string]map[record.Status]func(services.TestStep) services.TestPlan,
	_ map[record.Status]func(*record.Action) *time.Time) {
	rules[string(record.TypeIntent)] = map[record.Status]func(services.TestStep) services.TestPlan{
		record.StatusNone: func(s services.TestStep) services.TestPlan {
			return services.RealRule(string(record.TypeIntent), record.StatusNone, s).WithPlan(record.OutcomeHeld,
				func(a *record.Action) {
					a.Status, a.Attempt, a.LeaseUntil = record.StatusRetryRequested, 0, nil
				}, record.EventKeyReused)
		},
	}
}

func TestFirstIntentIsDecidedByTheRulesTable(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		ctx := context.Background()
		e := newHookEnv(t, st)
		e.endpoint(t, webhookstest.EndpointOpts{URL: "http://127.0.0.1:9/", Events: []record.EventType{record.EventKeyReused}})
		e.l.WithRules(holdFirstIntents)

		// A single entry: the group commit's insert of new actions.
		res := submit(t, e.l, e.agent, intent(IntentOpts{Key: "one"}))
		require.Equal(t, record.OutcomeHeld, res.Outcome)
		require.Equal(t, record.StatusRetryRequested, res.Action.Status)
		require.Equal(t, 0, res.Action.Attempt)
		require.Nil(t, res.LeaseUntil)
		stored, err := e.l.ActionByKey(ctx, e.agent, "", "one")
		require.NoError(t, err)
		require.Equal(t, record.StatusRetryRequested, stored.Status)
		require.Equal(t, 0, stored.Attempt)
		n, err := st.CountMessages(ctx, stored.ID, record.EventKeyReused)
		require.NoError(t, err)
		require.Equal(t, 1, n, "the first intent's alert is written with it")

		// The same intent again is decided by the table's existing rows: the
		// waiting action starts its first attempt.
		again := submit(t, e.l, e.agent, intent(IntentOpts{Key: "one"}))
		require.Equal(t, record.OutcomeProceed, again.Outcome)
		require.Equal(t, 1, again.Action.Attempt)
		require.Equal(t, record.StatusInProgress, again.Action.Status)

		// A batch creates its new actions through the same row.
		batch := submitAll(t, e.l, e.agent, intent(IntentOpts{Key: "two"}), intent(IntentOpts{Key: "three"}),
			intent(IntentOpts{Key: "two"}))
		require.Equal(t, []record.Outcome{record.OutcomeHeld, record.OutcomeHeld, record.OutcomeProceed},
			[]record.Outcome{batch[0].Outcome, batch[1].Outcome, batch[2].Outcome})
		require.Equal(t, record.StatusRetryRequested, batch[1].Action.Status)

		// Without the row, the same store answers as SPEC says.
		plain, _ := newLedger(st, LedgerOpts{})
		res = submit(t, plain, e.agent, intent(IntentOpts{Key: "four"}))
		require.Equal(t, record.OutcomeProceed, res.Outcome)
		require.Equal(t, record.StatusInProgress, res.Action.Status)
		require.Equal(t, 1, res.Action.Attempt)
	})
}

// TestSweeperAsksTheTableWhatADeadlinePassingMeans: a test-only deadline
// for waiting actions, and the row that abandons them when it passes.
func TestSweeperAsksTheTableWhatADeadlinePassingMeans(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		ctx := context.Background()
		f := newFixture(t, st, FixtureOpts{})
		f.l.WithRules(func(rules map[string]map[record.Status]func(services.TestStep) services.TestPlan,
			deadlines map[record.Status]func(*record.Action) *time.Time) {
			holdFirstIntents(rules, deadlines)
			deadlines[record.StatusRetryRequested] = func(a *record.Action) *time.Time {
				at := a.CreatedAt.Add(time.Minute)
				return &at
			}
			rules[services.EvDeadline] = map[record.Status]func(services.TestStep) services.TestPlan{
				record.StatusRetryRequested: func(s services.TestStep) services.TestPlan {
					return services.RealRule(services.EvDeadline, record.StatusInProgress, s).WithPlan(record.OutcomeRecorded,
						func(a *record.Action) { a.Status = record.StatusAbandoned })
				},
			}
		})
		submit(t, f.l, f.agent, intent(IntentOpts{Key: "waits"}))

		n, err := f.l.Sweep(ctx)
		require.NoError(t, err)
		require.Zero(t, n, "the deadline has not passed")
		f.clock.Advance(2 * time.Minute)
		n, err = f.l.Sweep(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		a, err := f.l.ActionByKey(ctx, f.agent, "", "waits")
		require.NoError(t, err)
		require.Equal(t, record.StatusAbandoned, a.Status)
		n, err = f.l.Sweep(ctx)
		require.NoError(t, err)
		require.Zero(t, n, "a status without a deadline is not swept again")
	})
}
