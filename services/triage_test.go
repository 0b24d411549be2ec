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

// decide takes a decision on key that must succeed.
func (f *fixture) decide(t *testing.T, key string, decision record.Decision) {
	t.Helper()
	_, _, err := f.l.Decide(context.Background(), f.operator, f.action(t, key).ID,
		services.DecisionInput{Decision: decision, Reason: "triage test"})
	require.NoError(t, err)
}

// triageQueue builds, ten seconds apart, one action or alert of every kind
// the queue shows, plus an alert too old to show and two actions that need
// nobody. It returns the keys in the order the queue must list them.
func triageQueue(t *testing.T, f *fixture) []string {
	t.Helper()
	send := func(raw string) services.EntryResult { return submit(t, f.l, f.agent, raw) }
	reused := intent(IntentOpts{Key: "old-reused", Params: `{"order":"9999"}`})
	send(intent(IntentOpts{Key: "old-reused"}))
	send(`{"key":"old-reused","type":"succeeded","attempt":1}`)
	require.Equal(t, record.OutcomeRejected, send(reused).Outcome)
	f.clock.Advance(8 * 24 * time.Hour)

	send(intent(IntentOpts{Key: "timed-out"}))
	f.clock.Advance(61 * time.Second)
	n, err := f.l.Sweep(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1, n)

	f.clock.Advance(10 * time.Second)
	send(intent(IntentOpts{Key: "retry"}))
	send(`{"key":"retry","type":"failed","attempt":1,"error":"card declined"}`)
	f.decide(t, "retry", "retry")

	f.clock.Advance(10 * time.Second)
	send(intent(IntentOpts{Key: "compensate"}))
	send(`{"key":"compensate","type":"succeeded","attempt":1}`)
	f.decide(t, "compensate", "compensate")

	f.clock.Advance(10 * time.Second)
	send(intent(IntentOpts{Key: "reused"}))
	send(`{"key":"reused","type":"succeeded","attempt":1}`)
	require.Equal(t, record.OutcomeRejected, send(intent(IntentOpts{Key: "reused", Tool: "payments.charge"})).Outcome)

	f.clock.Advance(10 * time.Second)
	send(intent(IntentOpts{Key: "stale"}))
	send(`{"key":"stale","type":"failed","attempt":1,"error":"gateway timeout","retriable":true}`)
	send(intent(IntentOpts{Key: "stale"}))
	require.Equal(t, record.OutcomeRejected, send(`{"key":"stale","type":"succeeded","attempt":1}`).Outcome)

	send(intent(IntentOpts{Key: "running"}))
	return []string{"timed-out", "retry", "compensate", "reused", "stale"}
}

func TestTriage(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		ctx := context.Background()
		f := newFixture(t, st, FixtureOpts{})
		keys := triageQueue(t, f)
		admin := principal(t, st, PrincipalOpts{Role: services.RoleAdmin})

		tr, err := f.l.Triage(ctx, admin, 0)
		require.NoError(t, err)
		type row struct {
			key, kind string
			alert     bool
			status    record.Status
			since     time.Time
		}
		end := t0.Add(8 * 24 * time.Hour)
		want := []row{
			{"timed-out", "timed_out", false, record.StatusTimedOut, end.Add(61 * time.Second)},
			{"retry", "retry_requested", false, record.StatusRetryRequested, end.Add(71 * time.Second)},
			{"compensate", "compensation_requested", false, record.StatusCompensationRequested, end.Add(81 * time.Second)},
			{"reused", "key_reused", true, record.StatusSucceeded, end.Add(91 * time.Second)},
			{"stale", "stale_outcome", true, record.StatusInProgress, end.Add(101 * time.Second)},
		}
		got := make([]row, len(tr.Items))
		for i, it := range tr.Items {
			got[i] = row{it.Action.Key, it.Kind, it.Alert, it.Action.Status, it.Since}
			require.Equal(t, f.ns, it.Action.Namespace)
			require.Equal(t, "payments.refund", it.Action.Tool)
			require.Equal(t, record.EffectKeyed, it.Action.Effect)
		}
		require.Equal(t, want, got)
		require.Equal(t, 2, tr.Items[4].Action.Attempt, "the stale outcome's action is at attempt 2")
		require.Equal(t, 5, tr.Waiting)
		require.Equal(t, int64(5), tr.Total)
		require.Equal(t, map[string]int64{"in_progress": 2, "timed_out": 1, "retry_requested": 1,
			"compensation_requested": 1, "awaiting_approval": 0}, tr.Counts, "open statuses only; finished ones are not counted here")
		require.Equal(t, map[string]int64{"key_reused": 1, "stale_outcome": 1}, tr.Alerts)
		require.Equal(t, f.clock.Now(), tr.At)

		short, err := f.l.Triage(ctx, admin, 2)
		require.NoError(t, err)
		require.Len(t, short.Items, 2)
		require.Equal(t, keys[:2], []string{short.Items[0].Action.Key, short.Items[1].Action.Key})
		require.Equal(t, 5, short.Waiting, "the count covers the whole queue")

		// A retry leaves the queue once an agent picks it up.
		submit(t, f.l, f.agent, intent(IntentOpts{Key: "retry"}))
		tr, err = f.l.Triage(ctx, admin, 0)
		require.NoError(t, err)
		require.Equal(t, 4, tr.Waiting)
		for _, it := range tr.Items {
			require.NotEqual(t, "retry", it.Action.Key)
		}
	})
}

func TestTriageIsScopedToTheNamespace(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		ctx := context.Background()
		f := newFixture(t, st, FixtureOpts{})
		triageQueue(t, f)
		other := newFixture(t, st, FixtureOpts{Clock: f.clock})
		submit(t, other.l, other.agent, intent(IntentOpts{Key: "elsewhere", Timeout: 1}))
		submit(t, other.l, other.agent, `{"key":"elsewhere","type":"succeeded","attempt":1}`)
		submit(t, other.l, other.agent, intent(IntentOpts{Key: "elsewhere", Tool: "other.tool"}))

		tr, err := other.l.Triage(ctx, other.operator, 0)
		require.NoError(t, err)
		require.Len(t, tr.Items, 1)
		require.Equal(t, "elsewhere", tr.Items[0].Action.Key)
		require.Equal(t, "key_reused", tr.Items[0].Kind)
		require.Equal(t, int64(0), tr.Total)
		require.NotContains(t, tr.Counts, "succeeded")
		require.Equal(t, int64(0), tr.Counts["timed_out"], "another namespace's actions are not counted")
		require.Equal(t, map[string]int64{"key_reused": 1, "stale_outcome": 0}, tr.Alerts)
		require.Equal(t, 1, tr.Waiting)

		tr, err = f.l.Triage(ctx, f.operator, 0)
		require.NoError(t, err)
		require.Len(t, tr.Items, 5)
		for _, it := range tr.Items {
			require.Equal(t, f.ns, it.Action.Namespace)
		}
	})
}

func TestTriageStamp(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		ctx := context.Background()
		f := newFixture(t, st, FixtureOpts{})
		stamp := func() string {
			t.Helper()
			s, err := f.l.TriageStamp(ctx, services.Principal{Role: services.RoleAdmin})
			require.NoError(t, err)
			require.NotEmpty(t, s)
			return s
		}
		changes := func(what string, step func()) {
			t.Helper()
			before := stamp()
			step()
			after := stamp()
			require.NotEqual(t, before, after, "the stamp must change when %s", what)
		}
		keeps := func(what string, step func()) {
			t.Helper()
			before := stamp()
			step()
			require.Equal(t, before, stamp(), "the stamp must not change when %s", what)
		}

		keeps("an intent starts", func() { submit(t, f.l, f.agent, intent(IntentOpts{Key: "k"})) })
		keeps("nothing happens", func() {})
		f.clock.Advance(61 * time.Second)
		changes("an action times out", func() {
			_, err := f.l.Sweep(ctx)
			require.NoError(t, err)
		})
		f.clock.Advance(time.Second)
		changes("a decision keeps it waiting", func() { f.decide(t, "k", "retry") })
		f.clock.Advance(time.Second)
		changes("an agent picks up the retry", func() { submit(t, f.l, f.agent, intent(IntentOpts{Key: "k"})) })
		f.clock.Advance(time.Second)
		changes("a key is reused", func() {
			submit(t, f.l, f.agent, intent(IntentOpts{Key: "k", Tool: "payments.charge"}))
		})
		f.clock.Advance(time.Second)
		keeps("an action succeeds", func() {
			submit(t, f.l, f.agent, `{"key":"k","type":"succeeded","attempt":2}`)
		})
		changes("a stale outcome arrives", func() {
			submit(t, f.l, f.agent, `{"key":"k","type":"failed","attempt":1,"error":"late"}`)
		})
		changes("alerts age out", func() { f.clock.Advance(services.TriageAlertWindow) })
	})
}
