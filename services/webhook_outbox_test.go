package services_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
	"github.com/arbiter-ledger/arbiter/services/record"
	"github.com/arbiter-ledger/arbiter/services/webhooks"
	"github.com/arbiter-ledger/arbiter/services/webhooks/webhookstest"
)

// The outbox: which ledger changes alert, to whom, and that an alert exists
// exactly when its change committed. Delivering what it holds is the
// webhook suite's (services/webhooks).

// hookEnv is a fixture with the webhook service beside its ledger.
type hookEnv struct {
	*fixture
	hooks *webhooks.Webhooks
}

func newHookEnv(t *testing.T, st *services.Store) *hookEnv {
	t.Helper()
	return &hookEnv{fixture: newFixture(t, st, FixtureOpts{}),
		hooks: webhooks.New(st, webhooks.Config{Policy: webhooks.AddressPolicy{AllowPrivate: true}})}
}

func (e *hookEnv) endpoint(t *testing.T, o webhookstest.EndpointOpts) *webhooks.Endpoint {
	t.Helper()
	return webhookstest.Endpoint(t, e.hooks, o)
}

func (e *hookEnv) deliveries(t *testing.T, endpointID string) []*webhooks.Delivery {
	t.Helper()
	return webhookstest.Deliveries(t, e.hooks, endpointID)
}

// timeOut records an intent for key with a one-second lease, lets it pass
// and sweeps, which alerts action.timed_out.
func (e *hookEnv) timeOut(t *testing.T, key string) *record.Action {
	t.Helper()
	res := submit(t, e.l, e.agent, intent(IntentOpts{Key: key, Timeout: 1}))
	require.Equal(t, record.OutcomeProceed, res.Outcome)
	e.clock.Advance(2 * time.Second)
	_, err := e.l.Sweep(context.Background())
	require.NoError(t, err)
	a, err := e.l.ActionByKey(context.Background(), e.agent, "", key)
	require.NoError(t, err)
	require.Equal(t, record.StatusTimedOut, a.Status)
	return a
}

// actionEvents are every event an action's change can alert.
var actionEvents = []record.EventType{record.EventTimedOut, record.EventDecided, record.EventKeyReused,
	record.EventStaleOutcome, record.EventLateResult, record.EventCompensated, record.EventFailed}

// alertsByKey maps the keys of the actions an endpoint's deliveries are about
// to their event types, sorted.
func (e *hookEnv) alertsByKey(t *testing.T, endpointID string) map[string][]record.EventType {
	t.Helper()
	out := map[string][]record.EventType{}
	for _, d := range e.deliveries(t, endpointID) {
		require.NotNil(t, d.ActionID)
		a, err := e.l.Action(context.Background(), webhookstest.Admin(), *d.ActionID)
		require.NoError(t, err)
		out[a.Key] = append(out[a.Key], record.EventType(d.EventType))
	}
	for k := range out {
		slices.Sort(out[k])
	}
	return out
}

func (e *hookEnv) decide(t *testing.T, key string, decision record.Decision) {
	t.Helper()
	a, err := e.l.ActionByKey(context.Background(), e.agent, "", key)
	require.NoError(t, err)
	_, _, err = e.l.Decide(context.Background(), e.operator, a.ID, services.DecisionInput{Decision: decision, Reason: "checked the PSP"})
	require.NoError(t, err)
}

// TestAlertEvents: each alerting change writes its events, and only those;
// a retriable failure alerts nothing.
func TestAlertEvents(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newHookEnv(t, st)
		ep := e.endpoint(t, webhookstest.EndpointOpts{URL: "http://127.0.0.1:9/", Events: actionEvents})
		agentSays := func(key string, outcome record.Outcome, raws ...string) {
			t.Helper()
			res := submitAll(t, e.l, e.agent, raws...)
			require.Equal(t, outcome, res[len(res)-1].Outcome, "%s: %+v", key, res[len(res)-1].Error)
		}

		agentSays("reused", record.OutcomeRejected, intent(IntentOpts{Key: "reused"}),
			intent(IntentOpts{Key: "reused", Params: `{"order":"9001"}`}))
		agentSays("stale", record.OutcomeRejected, intent(IntentOpts{Key: "stale"}),
			`{"key":"stale","type":"failed","attempt":1,"error":"gateway timeout","retriable":true}`,
			intent(IntentOpts{Key: "stale"}),
			`{"key":"stale","type":"succeeded","attempt":1}`)
		agentSays("failed", record.OutcomeRecorded, intent(IntentOpts{Key: "failed"}),
			`{"key":"failed","type":"failed","attempt":1,"error":"card declined"}`)
		agentSays("retriable", record.OutcomeRecorded, intent(IntentOpts{Key: "retriable"}),
			`{"key":"retriable","type":"failed","attempt":1,"error":"gateway timeout","retriable":true}`)
		agentSays("compensated", record.OutcomeRecorded, intent(IntentOpts{Key: "compensated"}),
			`{"key":"compensated","type":"succeeded","attempt":1}`)
		e.decide(t, "compensated", "compensate")
		agentSays("compensated", record.OutcomeRecorded, intent(IntentOpts{Key: "compensated"}),
			`{"key":"compensated","type":"compensated","attempt":1}`)
		agentSays("by-hand", record.OutcomeRecorded, intent(IntentOpts{Key: "by-hand"}),
			`{"key":"by-hand","type":"succeeded","attempt":1}`)
		e.decide(t, "by-hand", "compensate")
		e.decide(t, "by-hand", "mark_compensated")

		// Outcomes after the lease passed, before the sweeper saw it.
		agentSays("late", record.OutcomeProceed, intent(IntentOpts{Key: "late", Timeout: 1}))
		agentSays("late-failure", record.OutcomeProceed, intent(IntentOpts{Key: "late-failure", Timeout: 1}))
		e.clock.Advance(2 * time.Second)
		agentSays("late", record.OutcomeRecorded, `{"key":"late","type":"succeeded","attempt":1}`)
		agentSays("late-failure", record.OutcomeRecorded, `{"key":"late-failure","type":"failed","attempt":1,"error":"declined"}`)
		e.timeOut(t, "timed-out")

		require.Equal(t, map[string][]record.EventType{
			"reused":       {record.EventKeyReused},
			"stale":        {record.EventStaleOutcome},
			"failed":       {record.EventFailed},
			"compensated":  {record.EventCompensated, record.EventDecided},
			"by-hand":      {record.EventCompensated, record.EventDecided, record.EventDecided},
			"late":         {record.EventLateResult},
			"late-failure": {record.EventFailed, record.EventLateResult},
			"timed-out":    {record.EventTimedOut},
		}, e.alertsByKey(t, ep.ID))
		n, err := st.CountMessages(context.Background(), "", "")
		require.NoError(t, err)
		require.Equal(t, 12, n, "one message per alert")
	})
}

// TestDecidedCarriesTheDecision: action.decided says what was decided, why
// and by whom, beside the action after the decision and its entry.
func TestDecidedCarriesTheDecision(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		ctx := context.Background()
		e := newHookEnv(t, st)
		rcv := webhookstest.NewReceiver(t)
		ep := e.endpoint(t, webhookstest.EndpointOpts{URL: rcv.URL, Events: []record.EventType{record.EventDecided}})
		a := e.timeOut(t, "k")
		_, _, err := e.l.Decide(ctx, e.operator, a.ID, services.DecisionInput{Decision: "retry",
			Reason: "No refund in the PSP for order 8812."})
		require.NoError(t, err)
		webhookstest.StartDispatcher(t, st, webhookstest.DispatcherOpts{})

		r := rcv.WaitRequests(t, 1)[0]
		require.NoError(t, webhookstest.Verify(ep.Secret, r))
		m := webhookstest.MessageOf(t, r)
		require.Equal(t, record.EventDecided, m.Type)
		require.Equal(t, &services.DecisionInfo{Decision: "retry", Reason: "No refund in the PSP for order 8812.",
			Operator: "alice@example.com"}, m.Data.Decision)
		require.Equal(t, a.ID, m.Data.Action.ID)
		require.Equal(t, record.StatusRetryRequested, m.Data.Action.Status)
		require.Equal(t, 3, m.Data.Action.Version)
		require.Equal(t, record.TypeDecision, m.Data.Entry.Type)
		require.Equal(t, 3, m.Data.Entry.Seq)
		require.Equal(t, record.Actor{Kind: "operator", Name: "alice@example.com", Via: "api_key:ops-alice"}, m.Data.Entry.Actor)
		require.Equal(t, m.Data.Entry.RecordedAt, m.Timestamp)
	})
}

// TestSubscriptions: an endpoint gets the event types it subscribes to, in
// its namespaces (none listed: every namespace).
func TestSubscriptions(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		x := newHookEnv(t, st)
		y := &hookEnv{fixture: newFixture(t, st, FixtureOpts{}), hooks: x.hooks}
		url := "http://127.0.0.1:9/"
		failedInX := x.endpoint(t, webhookstest.EndpointOpts{URL: url, Events: []record.EventType{record.EventFailed}, Namespaces: []string{x.ns}})
		timedOutAnywhere := x.endpoint(t, webhookstest.EndpointOpts{URL: url, Events: []record.EventType{record.EventTimedOut}})
		bothInY := x.endpoint(t, webhookstest.EndpointOpts{URL: url, Events: []record.EventType{record.EventFailed, record.EventTimedOut}, Namespaces: []string{y.ns}})
		decidedInXY := x.endpoint(t, webhookstest.EndpointOpts{URL: url, Events: []record.EventType{record.EventDecided}, Namespaces: []string{x.ns, y.ns}})

		for _, e := range []*hookEnv{x, y} {
			submitAll(t, e.l, e.agent, intent(IntentOpts{Key: e.ns + "-failed"}),
				fmt.Sprintf(`{"key":%q,"type":"failed","attempt":1,"error":"declined"}`, e.ns+"-failed"))
			e.timeOut(t, e.ns+"-timed-out")
		}
		require.Equal(t, map[string][]record.EventType{x.ns + "-failed": {record.EventFailed}}, x.alertsByKey(t, failedInX.ID))
		require.Equal(t, map[string][]record.EventType{x.ns + "-timed-out": {record.EventTimedOut}, y.ns + "-timed-out": {record.EventTimedOut}},
			x.alertsByKey(t, timedOutAnywhere.ID))
		require.Equal(t, map[string][]record.EventType{y.ns + "-failed": {record.EventFailed}, y.ns + "-timed-out": {record.EventTimedOut}},
			x.alertsByKey(t, bothInY.ID))
		require.Empty(t, x.alertsByKey(t, decidedInXY.ID))
	})
}

// TestDecisionThatLosesItsRaceWritesNoMessage: a stale decision, whether
// refused up front (expected_version) or at commit (the compare-and-set
// fails), leaves no alert behind.
func TestDecisionThatLosesItsRaceWritesNoMessage(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		ctx := context.Background()
		e := newHookEnv(t, st)
		e.endpoint(t, webhookstest.EndpointOpts{URL: "http://127.0.0.1:9/", Events: []record.EventType{record.EventDecided}})
		a := e.timeOut(t, "k") // as read: timed_out at version 2
		messages := func() int {
			n, err := st.CountMessages(ctx, a.ID, record.EventDecided)
			require.NoError(t, err)
			return n
		}

		_, _, err := e.l.Decide(ctx, e.operator, a.ID, services.DecisionInput{Decision: "confirm", Reason: "seen in the PSP", ExpectedVersion: new(1)})
		webhookstest.RequireCode(t, services.CodeVersionConflict, err)
		require.Zero(t, messages())

		_, _, err = e.l.Decide(ctx, e.operator, a.ID, services.DecisionInput{Decision: "abandon", Reason: "never happened"})
		require.NoError(t, err)
		require.Equal(t, 1, messages())

		err = e.l.DecideAsOf(ctx, e.operator, a, services.DecisionInput{Decision: "confirm", Reason: "seen in the PSP"})
		require.ErrorIs(t, err, services.ErrLostRace)
		require.Equal(t, 1, messages(), "the losing commit inserted no message")
		n, err := st.CountEntries(ctx, a.ID, "")
		require.NoError(t, err)
		require.Equal(t, 3, n, "and no entry")
	})
}

// TestConcurrentDecisionsAlertOnce: of many concurrent decisions one wins,
// and exactly one action.decided is written.
func TestConcurrentDecisionsAlertOnce(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		ctx := context.Background()
		e := newHookEnv(t, st)
		ep := e.endpoint(t, webhookstest.EndpointOpts{URL: "http://127.0.0.1:9/", Events: []record.EventType{record.EventDecided}})
		a := e.timeOut(t, "k")
		var wg sync.WaitGroup
		errs := make([]error, 8)
		for i := range errs {
			decision := []record.Decision{"confirm", "abandon"}[i%2]
			wg.Go(func() {
				_, _, errs[i] = e.l.Decide(ctx, e.operator, a.ID, services.DecisionInput{Decision: decision, Reason: "race"})
			})
		}
		wg.Wait()
		won := 0
		for _, err := range errs {
			if err == nil {
				won++
				continue
			}
			ae, ok := services.AsError(err)
			require.True(t, ok, "%v", err)
			require.Contains(t, []string{services.CodeVersionConflict, services.CodeInvalidTransition}, ae.Code)
		}
		require.Equal(t, 1, won)
		n, err := st.CountMessages(ctx, a.ID, record.EventDecided)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		require.Len(t, e.deliveries(t, ep.ID), 1)
	})
}

// TestFailedTransactionLeavesNoMessage: when writing the alert fails after
// the ledger wrote the action and its entry, nothing of the change remains.
func TestFailedTransactionLeavesNoMessage(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		ctx := context.Background()
		e := newHookEnv(t, st)
		e.endpoint(t, webhookstest.EndpointOpts{URL: "http://127.0.0.1:9/", Events: []record.EventType{record.EventDecided}})
		a := e.timeOut(t, "k")
		fail, heal := `CREATE TRIGGER fail_delivery BEFORE INSERT ON webhook_deliveries
			BEGIN SELECT RAISE(ABORT, 'injected failure'); END`, `DROP TRIGGER fail_delivery`
		if st.Dialect == services.Postgres {
			require.NoError(t, st.ExecForTest(ctx, `CREATE FUNCTION fail_delivery() RETURNS trigger LANGUAGE plpgsql
				AS $$ BEGIN RAISE EXCEPTION 'injected failure'; END $$`))
			fail = `CREATE TRIGGER fail_delivery BEFORE INSERT ON webhook_deliveries FOR EACH ROW EXECUTE FUNCTION fail_delivery()`
			heal = `DROP TRIGGER fail_delivery ON webhook_deliveries`
		}
		require.NoError(t, st.ExecForTest(ctx, fail))

		decision := services.DecisionInput{Decision: "abandon", Reason: "never happened"}
		_, _, err := e.l.Decide(ctx, e.operator, a.ID, decision)
		require.Error(t, err)
		var coded *services.Error
		require.False(t, errors.As(err, &coded) && coded.Code == services.CodeVersionConflict, "a database failure, not a lost race: %v", err)
		after, err := e.l.Action(ctx, e.operator, a.ID)
		require.NoError(t, err)
		require.Equal(t, record.StatusTimedOut, after.Status, "the action is unchanged")
		require.Equal(t, a.Version, after.Version)
		n, err := st.CountEntries(ctx, a.ID, "")
		require.NoError(t, err)
		require.Equal(t, 2, n, "the entry was rolled back")
		n, err = st.CountMessages(ctx, a.ID, record.EventDecided)
		require.NoError(t, err)
		require.Zero(t, n, "the message was rolled back")

		require.NoError(t, st.ExecForTest(ctx, heal))
		_, _, err = e.l.Decide(ctx, e.operator, a.ID, decision)
		require.NoError(t, err)
		n, err = st.CountMessages(ctx, a.ID, record.EventDecided)
		require.NoError(t, err)
		require.Equal(t, 1, n)
	})
}

// TestEndpointEnabledAfterASweepWithout: a set of changes written while no
// endpoint was enabled (whose alerts were then never built) does not keep
// the next set from alerting an endpoint enabled since, nor does a decision
// in between.
func TestEndpointEnabledAfterASweepWithout(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newHookEnv(t, st)
		e.timeOut(t, "before")
		e.timeOut(t, "still-before")
		ep := e.endpoint(t, webhookstest.EndpointOpts{URL: "http://127.0.0.1:9/", Events: []record.EventType{record.EventTimedOut, record.EventDecided}})
		e.timeOut(t, "after")
		e.decide(t, "before", record.DecisionAbandon)
		e.timeOut(t, "after-again")
		require.Equal(t, map[string][]record.EventType{
			"after":       {record.EventTimedOut},
			"before":      {record.EventDecided},
			"after-again": {record.EventTimedOut},
		}, e.alertsByKey(t, ep.ID))
		a, err := e.l.ActionByKey(context.Background(), e.agent, "", "after")
		require.NoError(t, err)
		seqs, err := st.MessageEntrySeqs(context.Background(), a.ID)
		require.NoError(t, err)
		require.Equal(t, []int{2}, seqs, "the message carries its entry's seq")
	})
}
