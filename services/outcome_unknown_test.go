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

// outcome_unknown: the agent says it cannot tell whether the effect
// happened. The action is timed out at once, as if its lease had passed.

var (
	unknown1 = `{"key":"k","type":"outcome_unknown","attempt":1,"error":"timeout after 30 s calling the provider"}`
	unknown2 = `{"key":"k","type":"outcome_unknown","attempt":2,"error":"connection reset"}`
)

var outcomeUnknownCases = []entryCase{
	{name: "outcome_unknown for the current attempt times the action out at once", setup: toInProgress, entry: unknown1,
		want: entryWant{outcome: "recorded", status: "timed_out", attempt: 1, version: 2, lease: leaseKept,
			entries: []wantEntry{{"outcome_unknown", "agent", 1}}}},
	{name: "outcome_unknown after the lease passed, before the sweeper, times the action out", setup: toLeasePassed, entry: unknown1,
		want: entryWant{outcome: "recorded", status: "timed_out", attempt: 1, version: 2, lease: leaseKept,
			entries: []wantEntry{{"outcome_unknown", "agent", 1}}}},
	{name: "outcome_unknown sent again is a duplicate", setup: then(toInProgress, send(unknown1)), entry: unknown1,
		want: entryWant{outcome: "duplicate", status: "timed_out", attempt: 1, version: 2, lease: leaseKept}},
	{name: "outcome_unknown for an older attempt is stale", setup: toAttempt2, entry: unknown1,
		want: entryWant{outcome: "rejected", code: "stale_attempt", status: "in_progress", attempt: 2, version: 3, lease: leaseKept,
			entries: []wantEntry{{"stale_outcome", "agent", 1}}}},
	{name: "outcome_unknown for attempt 2 times attempt 2 out", setup: toAttempt2, entry: unknown2,
		want: entryWant{outcome: "recorded", status: "timed_out", attempt: 2, version: 4, lease: leaseKept,
			entries: []wantEntry{{"outcome_unknown", "agent", 2}}}},
	{name: "outcome_unknown on an action the sweeper timed out is recorded and changes nothing", setup: toTimedOut, entry: unknown1,
		want: entryWant{outcome: "recorded", status: "timed_out", attempt: 1, version: 2, lease: leaseKept,
			entries: []wantEntry{{"outcome_unknown", "agent", 1}}}},
	{name: "outcome_unknown on retry_requested leaves the retry in place", setup: toRetryRequested, entry: unknown1,
		want: entryWant{outcome: "recorded", status: "retry_requested", attempt: 1, version: 3, lease: leaseKept,
			entries: []wantEntry{{"outcome_unknown", "agent", 1}}}},
	{name: "outcome_unknown after succeeded is invalid_transition", setup: toSucceeded, entry: unknown1,
		want: entryWant{outcome: "rejected", code: "invalid_transition", status: "succeeded", attempt: 1, version: 2, lease: leaseNone, result: `{"refund":"re_1"}`,
			entries: []wantEntry{{"rejected", "agent", 1}}}},
	{name: "outcome_unknown after confirm is invalid_transition", setup: toConfirmed, entry: unknown1,
		want: entryWant{outcome: "rejected", code: "invalid_transition", status: "confirmed", attempt: 1, version: 3, lease: leaseKept, result: `{"refund":"re_9"}`,
			entries: []wantEntry{{"rejected", "agent", 1}}}},
	{name: "outcome_unknown for an attempt that has not started is invalid_transition", setup: toInProgress, entry: unknown2,
		want: entryWant{outcome: "rejected", code: "invalid_transition", status: "in_progress", attempt: 1, version: 1, lease: leaseKept,
			entries: []wantEntry{{"rejected", "agent", 2}}}},
	{name: "outcome_unknown on an unknown key is not_found", entry: unknown1,
		want: entryWant{outcome: "rejected", code: "not_found"}},
	{name: "outcome_unknown without error is invalid", entry: `{"key":"k","type":"outcome_unknown","attempt":1}`,
		want: entryWant{outcome: "rejected", code: "invalid"}},
	{name: "outcome_unknown without attempt is invalid", entry: `{"key":"k","type":"outcome_unknown","error":"timeout"}`,
		want: entryWant{outcome: "rejected", code: "invalid"}},
	{name: "outcome_unknown with retriable is invalid", entry: `{"key":"k","type":"outcome_unknown","attempt":1,"error":"timeout","retriable":true}`,
		want: entryWant{outcome: "rejected", code: "invalid"}},
	{name: "a lookup after outcome_unknown proceeds as after a passed lease", setup: then(toInProgress, send(unknown1)), entry: lookup1,
		want: entryWant{outcome: "proceed", status: "timed_out", attempt: 1, version: 3, lease: leaseKept, answerLease: 60 * time.Second,
			entries: []wantEntry{{"lookup", "agent", 1}}, check: lookups(1)}},
	{name: "an intent after outcome_unknown is held", setup: then(toInProgress, send(unknown1)), entry: intentK,
		want: entryWant{outcome: "held", status: "timed_out", attempt: 1, version: 2, lease: leaseKept}},
	{name: "a late succeeded after outcome_unknown resolves the action", setup: then(toInProgress, send(unknown1)), entry: succeeded1,
		want: entryWant{outcome: "recorded", status: "succeeded", attempt: 1, version: 3, lease: leaseNone, result: `{"refund":"re_1"}`,
			entries: []wantEntry{{"late_result", "agent", 1}}}},
}

func TestOutcomeUnknownTransitions(t *testing.T) {
	t.Parallel()
	runEntryCases(t, outcomeUnknownCases)
}

// TestOutcomeUnknownKeepsTheErrorAndAlerts: the entry keeps what the agent
// saw, action.timed_out is written with it, and the sweeper has nothing
// left to do for the action.
func TestOutcomeUnknownKeepsTheErrorAndAlerts(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		ctx := context.Background()
		e := newHookEnv(t, st)
		ep := e.endpoint(t, webhookstest.EndpointOpts{URL: "http://127.0.0.1:9/", Events: actionEvents})
		res := submitAll(t, e.l, e.agent, intentK, unknown1)
		require.Equal(t, record.OutcomeRecorded, res[1].Outcome, "%+v", res[1].Error)
		require.Nil(t, res[1].Error)
		require.Equal(t, record.StatusTimedOut, res[1].Action.Status)
		require.NotNil(t, res[1].Entry)
		require.Equal(t, record.TypeOutcomeUnknown, res[1].Entry.Type)
		p, err := record.DecodePayload(res[1].Entry)
		require.NoError(t, err)
		rp, ok := p.(*record.ReportPayload)
		require.True(t, ok, "payload %T", p)
		require.NotNil(t, rp.Error)
		require.Equal(t, "timeout after 30 s calling the provider", *rp.Error)

		require.Equal(t, map[string][]record.EventType{"k": {record.EventTimedOut}}, e.alertsByKey(t, ep.ID))

		e.clock.Advance(time.Hour)
		n, err := e.l.Sweep(ctx)
		require.NoError(t, err)
		require.Zero(t, n, "nothing left for the sweeper")
		require.Equal(t, map[string][]record.EventType{"k": {record.EventTimedOut}}, e.alertsByKey(t, ep.ID))
		require.Equal(t, 1, countEntries(t, st, res[1].Action.ID, record.TypeOutcomeUnknown))
		require.Zero(t, countEntries(t, st, res[1].Action.ID, record.TypeTimedOut))
	})
}
