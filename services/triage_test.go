package services_test

import (
	"context"
	"encoding/json"
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
		require.Equal(t, map[string]int64{"key_reused": 1, "stale_outcome": 1, "late_result": 0}, tr.Alerts)
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
		require.Equal(t, map[string]int64{"key_reused": 1, "stale_outcome": 0, "late_result": 0}, tr.Alerts)
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

// TestAcknowledgeClearsReviewAlerts: the acknowledge decision takes an
// action's review alerts (key reuse, a stale outcome, a late result) off
// triage and records who looked and why, without changing the action; with
// nothing left to review it is invalid_transition; a new alert after it
// shows again; bulk decisions acknowledge too.
func TestAcknowledgeClearsReviewAlerts(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		ctx := context.Background()
		f := newFixture(t, st, FixtureOpts{})
		triageQueue(t, f)
		f.clock.Advance(10 * time.Second)
		submit(t, f.l, f.agent, intent(IntentOpts{Key: "late", Timeout: 1}))
		f.clock.Advance(2 * time.Second)
		_, err := f.l.Sweep(ctx)
		require.NoError(t, err)
		require.Equal(t, record.OutcomeRecorded, submit(t, f.l, f.agent, `{"key":"late","type":"succeeded","attempt":1}`).Outcome)

		kinds := func() map[string]string {
			t.Helper()
			tr, err := f.l.Triage(ctx, f.operator, 0)
			require.NoError(t, err)
			out := map[string]string{}
			for _, it := range tr.Items {
				out[it.Action.Key] = it.Kind
			}
			return out
		}
		require.Equal(t, map[string]string{"timed-out": "timed_out", "retry": "retry_requested", "compensate": "compensation_requested",
			"reused": "key_reused", "stale": "stale_outcome", "late": "late_result"}, kinds())
		stamp, err := f.l.TriageStamp(ctx, f.operator)
		require.NoError(t, err)

		ack := services.DecisionInput{Decision: record.DecisionAcknowledge, Reason: "the second call came from a retried run; no second refund"}
		before := f.action(t, "reused")
		act, entry, err := f.l.Decide(ctx, f.operator, before.ID, ack)
		require.NoError(t, err)
		require.Equal(t, record.StatusSucceeded, act.Status, "the action does not change")
		require.Equal(t, before.Version, act.Version)
		require.Equal(t, record.TypeDecision, entry.Type)
		var pl record.DecisionPayload
		require.NoError(t, json.Unmarshal(entry.Payload, &pl))
		require.Equal(t, record.DecisionAcknowledge, pl.Decision)
		require.Equal(t, ack.Reason, pl.Reason)
		require.Equal(t, record.ActorOperator, entry.Actor.Kind)
		require.NotContains(t, kinds(), "reused", "the alert left triage")
		tr, err := f.l.Triage(ctx, f.operator, 0)
		require.NoError(t, err)
		require.Equal(t, map[string]int64{"key_reused": 0, "stale_outcome": 1, "late_result": 1}, tr.Alerts)
		after, err := f.l.TriageStamp(ctx, f.operator)
		require.NoError(t, err)
		require.NotEqual(t, stamp, after, "open pages refresh")

		_, _, err = f.l.Decide(ctx, f.operator, before.ID, ack)
		require.ErrorIs(t, err, services.ErrInvalidTransition, "nothing is left to review")
		require.Contains(t, err.Error(), "nothing to acknowledge")
		_, _, err = f.l.Decide(ctx, f.operator, f.action(t, "timed-out").ID, ack)
		require.ErrorIs(t, err, services.ErrInvalidTransition, "a timed-out action is decided, not acknowledged")
		_, _, err = f.l.Decide(ctx, f.operator, f.action(t, "stale").ID, services.DecisionInput{Decision: record.DecisionAcknowledge})
		require.ErrorIs(t, err, services.ErrInvalid, "a reason is required")
		_, _, err = f.l.Decide(ctx, principal(t, st, PrincipalOpts{Namespace: f.ns, Role: services.RoleReader}), f.action(t, "stale").ID, ack)
		require.ErrorIs(t, err, services.ErrForbidden)

		// The key offered again with other params: a new alert shows.
		require.Equal(t, record.OutcomeRejected, submit(t, f.l, f.agent, intent(IntentOpts{Key: "reused", Tool: "payments.charge"})).Outcome)
		require.Equal(t, "key_reused", kinds()["reused"])

		// In bulk: the three with alerts are acknowledged, the timed-out one
		// is skipped as invalid_transition.
		ids := []string{f.action(t, "reused").ID, f.action(t, "stale").ID, f.action(t, "late").ID, f.action(t, "timed-out").ID}
		stale := f.action(t, "stale")
		maxCount := 3
		res, err := f.l.DecideMany(ctx, f.operator, services.BulkInput{Filter: &services.BulkFilter{IDs: ids},
			Decision: record.DecisionAcknowledge, Reason: "reviewed the morning's alerts", MaxCount: &maxCount})
		require.NoError(t, err)
		require.Equal(t, 3, res.Result.Applied)
		require.Equal(t, []services.BulkSkip{{ID: ids[3], Code: services.CodeInvalidTransition}}, res.Result.Skipped)
		require.Equal(t, map[string]string{"timed-out": "timed_out", "retry": "retry_requested", "compensate": "compensation_requested"}, kinds())
		require.Equal(t, stale.Status, f.action(t, "stale").Status)
		require.Equal(t, stale.Version, f.action(t, "stale").Version)
	})
}
