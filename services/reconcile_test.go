package services_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
	"github.com/arbiter-ledger/arbiter/services/record"
	"github.com/arbiter-ledger/arbiter/services/webhooks/webhookstest"
)

// Look before you resend and the compensation lease, from the agent's
// side: every lookup case of SPEC "Look before you resend
// (reconciliation)" (each answer on each effect class, the key's ttl, the
// lease, the fourth lookup, late and stale answers) and the compensation's
// lease, on both databases.

var (
	lookup1        = `{"key":"k","type":"lookup","attempt":1}`
	lookup1Short   = `{"key":"k","type":"lookup","attempt":1,"timeout":30}`
	lookup2        = `{"key":"k","type":"lookup","attempt":2}`
	compFailed1    = `{"key":"k","type":"compensation_failed","attempt":1,"error":"reversal refused: already settled"}`
	compHeartbeat1 = `{"key":"k","type":"heartbeat","attempt":1,"timeout":120}`
)

// answer1 is a lookup_result for attempt 1 with evidence and, for
// happened, the downstream's reference and result.
func answer1(a record.Answer) string {
	return answerFor(1, a)
}

func answerFor(attempt int, a record.Answer) string {
	s := fmt.Sprintf(`{"key":"k","type":"lookup_result","attempt":%d,"answer":%q,"evidence":{"provider":"found %s"}`, attempt, a, a)
	if a == record.AnswerHappened {
		s += `,"external_ref":"re_7","result":{"refund":"re_7"}`
	}
	return s + "}"
}

// timedOutAs brings key "k" of an effect class (and key_ttl, if above 0)
// to timed_out at attempt 1, version 2.
func timedOutAs(effect record.Effect, keyTTL int) []op {
	in := intent(IntentOpts{Effect: effect})
	if keyTTL > 0 {
		in = in[:len(in)-1] + fmt.Sprintf(`,"key_ttl":%d}`, keyTTL)
	}
	return []op{send(in), wait(61 * time.Second), swept()}
}

var (
	toLookingUp     = then(toTimedOut, send(lookup1))                                          // v3 a1, lookup lease 60 s
	toLookupPassed  = then(toLookingUp, wait(61*time.Second))                                  // v3 a1
	toThreeLookups  = then(toLookupPassed, send(lookup1), wait(61*time.Second), send(lookup1)) // v5 a1, third lease live
	toTimedOut2     = then(toAttempt2, wait(61*time.Second), swept())                          // v4 a2
	toCompensating  = then(toCompRequested, send(intentK))                                     // v4 a1, lease 60 s
	toCompLeaseGone = then(toCompensating, wait(61*time.Second), swept())                      // v5 a1, held
)

func lookups(n int) func(t *testing.T, a *record.Action) {
	return func(t *testing.T, a *record.Action) {
		require.NotNil(t, a.Reconciliation)
		require.Equal(t, n, a.Reconciliation.Lookups, "lookups of the attempt")
		require.Equal(t, a.Attempt, a.Reconciliation.LookupAttempt)
	}
}

func lastAnswer(want record.Answer) func(t *testing.T, a *record.Action) {
	return func(t *testing.T, a *record.Action) {
		require.NotNil(t, a.Reconciliation)
		require.NotNil(t, a.Reconciliation.LastLookup)
		last := a.Reconciliation.LastLookup
		require.Equal(t, want, last.Answer)
		require.Equal(t, a.Attempt, last.Attempt)
		require.Equal(t, "refund-bot", last.By.Name)
		require.Equal(t, fmt.Sprintf(`{"provider":"found %s"}`, want), last.Said)
		require.Nil(t, a.Reconciliation.LookupUntil, "the answer releases the lookup lease")
		if want == record.AnswerHappened {
			require.Equal(t, "re_7", *a.ExternalRef)
		}
	}
}

func compensation(failures int, timedOut bool) func(t *testing.T, a *record.Action) {
	return compensationSaid(failures, timedOut, false)
}

func compensationSaid(failures int, timedOut, retriable bool) func(t *testing.T, a *record.Action) {
	return func(t *testing.T, a *record.Action) {
		rc := a.Reconciliation
		if failures == 0 && !timedOut {
			require.True(t, rc == nil || (rc.CompensationFailures == 0 && !rc.CompensationTimedOut))
			return
		}
		require.NotNil(t, rc)
		require.Equal(t, failures, rc.CompensationFailures)
		require.Equal(t, timedOut, rc.CompensationTimedOut)
		require.Equal(t, retriable, rc.CompensationRetriable)
	}
}

func reconcileCases() []entryCase {
	cases := []entryCase{
		// The lookup lease.
		{name: "lookup on timed_out proceeds with a 60 s lookup lease", setup: toTimedOut, entry: lookup1,
			want: entryWant{outcome: "proceed", status: "timed_out", attempt: 1, version: 3, lease: leaseKept, answerLease: 60 * time.Second,
				entries: []wantEntry{{"lookup", "agent", 1}}, check: lookups(1)}},
		{name: "lookup takes the timeout it names", setup: toTimedOut, entry: lookup1Short,
			want: entryWant{outcome: "proceed", status: "timed_out", attempt: 1, version: 3, lease: leaseKept, answerLease: 30 * time.Second,
				entries: []wantEntry{{"lookup", "agent", 1}}, check: lookups(1)}},
		{name: "lookup while another's lease is live is in_progress", setup: then(toLookingUp, wait(20*time.Second)), entry: lookup1,
			want: entryWant{outcome: "in_progress", status: "timed_out", attempt: 1, version: 3, lease: leaseKept, answerLease: 40 * time.Second,
				check: lookups(1)}},
		{name: "lookup after the lookup lease passed proceeds", setup: toLookupPassed, entry: lookup1,
			want: entryWant{outcome: "proceed", status: "timed_out", attempt: 1, version: 4, lease: leaseKept, answerLease: 60 * time.Second,
				entries: []wantEntry{{"lookup", "agent", 1}}, check: lookups(2)}},
		{name: "lookup after an answer proceeds", setup: then(toLookingUp, send(answer1(record.AnswerUnknown))), entry: lookup1,
			want: entryWant{outcome: "proceed", status: "timed_out", attempt: 1, version: 5, lease: leaseKept, answerLease: 60 * time.Second,
				entries: []wantEntry{{"lookup", "agent", 1}}, check: lookups(2)}},
		{name: "a fourth lookup of one attempt is held", setup: then(toThreeLookups, wait(61*time.Second)), entry: lookup1,
			want: entryWant{outcome: "held", status: "timed_out", attempt: 1, version: 5, lease: leaseKept, check: lookups(3)}},
		{name: "a new attempt gets its own three lookups", setup: toTimedOut2, entry: lookup2,
			want: entryWant{outcome: "proceed", status: "timed_out", attempt: 2, version: 5, lease: leaseKept, answerLease: 60 * time.Second,
				entries: []wantEntry{{"lookup", "agent", 2}}, check: lookups(1)}},
		{name: "lookup of an older attempt is stale_attempt", setup: toTimedOut2, entry: lookup1,
			want: entryWant{outcome: "rejected", code: "stale_attempt", status: "timed_out", attempt: 2, version: 4, lease: leaseKept}},
		{name: "lookup of an attempt that has not started is invalid_transition", setup: toTimedOut, entry: lookup2,
			want: entryWant{outcome: "rejected", code: "invalid_transition", status: "timed_out", attempt: 1, version: 2, lease: leaseKept,
				entries: []wantEntry{{"rejected", "agent", 2}}}},
		{name: "lookup while in progress is invalid_transition", setup: toInProgress, entry: lookup1,
			want: entryWant{outcome: "rejected", code: "invalid_transition", status: "in_progress", attempt: 1, version: 1, lease: leaseKept,
				entries: []wantEntry{{"rejected", "agent", 1}}}},
		{name: "lookup after an operator decided is invalid_transition", setup: toConfirmed, entry: lookup1,
			want: entryWant{outcome: "rejected", code: "invalid_transition", status: "confirmed", attempt: 1, version: 3, lease: leaseKept,
				result: `{"refund":"re_9"}`, entries: []wantEntry{{"rejected", "agent", 1}}}},

		// Answers that come late or for another attempt are recorded and
		// change nothing.
		{name: "an answer after an operator decided is recorded and changes nothing", setup: toConfirmed,
			entry: answer1(record.AnswerNotHappened),
			want: entryWant{outcome: "recorded", status: "confirmed", attempt: 1, version: 3, lease: leaseKept, result: `{"refund":"re_9"}`,
				entries: []wantEntry{{"lookup_result", "agent", 1}}}},
		{name: "an answer for an older attempt is recorded and changes nothing", setup: toTimedOut2,
			entry: answer1(record.AnswerHappened),
			want: entryWant{outcome: "recorded", status: "timed_out", attempt: 2, version: 4, lease: leaseKept,
				entries: []wantEntry{{"lookup_result", "agent", 1}}}},
		{name: "an answer for an attempt that has not started is invalid_transition", setup: toTimedOut,
			entry: answerFor(2, record.AnswerHappened),
			want: entryWant{outcome: "rejected", code: "invalid_transition", status: "timed_out", attempt: 1, version: 2, lease: leaseKept,
				entries: []wantEntry{{"rejected", "agent", 2}}}},
		{name: "an answer after the lookup lease passed still reconciles", setup: toLookupPassed,
			entry: answer1(record.AnswerHappened),
			want: entryWant{outcome: "recorded", status: "confirmed", attempt: 1, version: 5, lease: leaseKept, result: `{"refund":"re_7"}`,
				entries: []wantEntry{{"lookup_result", "agent", 1}, {"reconciled", "system", 1}}, check: lastAnswer(record.AnswerHappened)}},

		// key_ttl: a keyed action whose key outlived the downstream's
		// retention counts as unkeyed.
		{name: "not_happened on a keyed action whose key_ttl passed stays for a person", setup: timedOutAs(record.EffectKeyed, 30),
			entry: answer1(record.AnswerNotHappened),
			want: entryWant{outcome: "recorded", status: "timed_out", attempt: 1, version: 3, lease: leaseKept,
				entries: []wantEntry{{"lookup_result", "agent", 1}}, check: lastAnswer(record.AnswerNotHappened)}},
		{name: "not_happened on a keyed action within its key_ttl is retried", setup: timedOutAs(record.EffectKeyed, 3600),
			entry: answer1(record.AnswerNotHappened),
			want: entryWant{outcome: "recorded", status: "retry_requested", attempt: 1, version: 4, lease: leaseKept,
				entries: []wantEntry{{"lookup_result", "agent", 1}, {"reconciled", "system", 1}}, check: lastAnswer(record.AnswerNotHappened)}},
		{name: "the retry a lookup requested proceeds with the same key", setup: then(toTimedOut, send(answer1(record.AnswerNotHappened))),
			entry: intentK,
			want: entryWant{outcome: "proceed", status: "in_progress", attempt: 2, version: 5, lease: 60 * time.Second,
				entries: []wantEntry{{"intent", "agent", 2}}}},

		// The compensation lease.
		{name: "an intent while a compensation's lease is live is in_progress", setup: then(toCompensating, wait(30*time.Second)), entry: intentK,
			want: entryWant{outcome: "in_progress", status: "compensation_requested", attempt: 1, version: 4, lease: leaseKept,
				result: `{"refund":"re_1"}`}},
		{name: "a heartbeat extends a compensation's lease", setup: then(toCompensating, wait(30*time.Second)), entry: compHeartbeat1,
			want: entryWant{outcome: "recorded", status: "compensation_requested", attempt: 1, version: 5, lease: 120 * time.Second,
				result: `{"refund":"re_1"}`, entries: []wantEntry{{"heartbeat", "agent", 1}}}},
		{name: "compensated ends the compensation's lease", setup: toCompensating, entry: compensated1,
			want: entryWant{outcome: "recorded", status: "compensated", attempt: 1, version: 5, lease: leaseNone,
				result: `{"refund":"re_1"}`, entries: []wantEntry{{"compensated", "agent", 1}}}},
		{name: "compensation_failed releases the lease and keeps the request", setup: toCompensating, entry: compFailed1,
			want: entryWant{outcome: "recorded", status: "compensation_requested", attempt: 1, version: 5, lease: leaseNone,
				result: `{"refund":"re_1"}`, entries: []wantEntry{{"compensation_failed", "agent", 1}}, check: compensation(1, false)}},
		{name: "a retriable compensation_failed says so on the action", setup: toCompensating,
			entry: `{"key":"k","type":"compensation_failed","attempt":1,"error":"reversal API timed out","retriable":true}`,
			want: entryWant{outcome: "recorded", status: "compensation_requested", attempt: 1, version: 5, lease: leaseNone,
				result: `{"refund":"re_1"}`, entries: []wantEntry{{"compensation_failed", "agent", 1}}, check: compensationSaid(1, false, true)}},
		{name: "after a failed compensation the next intent compensates again", setup: then(toCompensating, send(compFailed1)), entry: intentK,
			want: entryWant{outcome: "compensate", status: "compensation_requested", attempt: 1, version: 6, lease: 60 * time.Second,
				result: `{"refund":"re_1"}`, entries: []wantEntry{{"intent", "agent", 1}}, check: compensation(1, false)}},
		{name: "after a compensation lease passed an intent is held", setup: toCompLeaseGone, entry: intentK,
			want: entryWant{outcome: "held", status: "compensation_requested", attempt: 1, version: 5, lease: leaseKept,
				result: `{"refund":"re_1"}`, check: compensation(0, true)}},
		{name: "compensated after the compensation lease passed is a late result", setup: toCompLeaseGone, entry: compensated1,
			want: entryWant{outcome: "recorded", status: "compensated", attempt: 1, version: 6, lease: leaseNone,
				result: `{"refund":"re_1"}`, entries: []wantEntry{{"compensated", "agent", 1}}}},
		{name: "a heartbeat after the compensation lease passed is lease_lost", setup: toCompLeaseGone, entry: compHeartbeat1,
			want: entryWant{outcome: "rejected", code: "lease_lost", status: "compensation_requested", attempt: 1, version: 5, lease: leaseKept,
				result: `{"refund":"re_1"}`, entries: []wantEntry{{"lease_lost", "agent", 1}}}},
		{name: "compensation_failed when no compensation was asked is invalid_transition", setup: toSucceeded, entry: compFailed1,
			want: entryWant{outcome: "rejected", code: "invalid_transition", status: "succeeded", attempt: 1, version: 2, lease: leaseNone,
				result: `{"refund":"re_1"}`, entries: []wantEntry{{"rejected", "agent", 1}}}},
	}
	// Each answer on each effect class, with a lookup lease held and
	// without one (an answer is never dropped for want of a lease).
	for _, effect := range record.Effects {
		for _, ans := range record.Answers {
			status, entries := record.StatusTimedOut, []wantEntry{{"lookup_result", "agent", 1}}
			result := ""
			switch {
			case ans == record.AnswerHappened:
				status, result = record.StatusConfirmed, `{"refund":"re_7"}`
			case ans == record.AnswerNotHappened && effect != record.EffectUnkeyed:
				status = record.StatusRetryRequested
			}
			if status != record.StatusTimedOut {
				entries = append(entries, wantEntry{"reconciled", "system", 1})
			}
			for _, leased := range []bool{true, false} {
				setup, version, how := timedOutAs(effect, 0), 2, "without a lookup lease"
				if leased {
					setup, version, how = then(setup, send(lookup1)), 3, "under a lookup lease"
				}
				version++ // the answer
				if status != record.StatusTimedOut {
					version++ // the change it made
				}
				cases = append(cases, entryCase{
					name: fmt.Sprintf("%s on %s %s: %s", ans, effect, how, status), setup: setup, entry: answer1(ans),
					want: entryWant{outcome: "recorded", status: status, attempt: 1, version: version, lease: leaseKept,
						result: result, entries: entries, check: lastAnswer(ans)}})
			}
		}
	}
	return cases
}

func TestReconcileTransitions(t *testing.T) {
	t.Parallel()
	runEntryCases(t, reconcileCases())
}

// TestReconciledEntryNamesTheLookup checks what the system entry and the
// alert of a reconciliation carry.
func TestReconciledEntryNamesTheLookup(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		f := newFixture(t, st, FixtureOpts{})
		for _, o := range then(toLookingUp) {
			o(t, f)
		}
		res := submit(t, f.l, f.agent, answer1(record.AnswerHappened))
		require.Equal(t, record.OutcomeRecorded, res.Outcome)
		require.Equal(t, record.StatusConfirmed, res.Action.Status)
		es := f.entries(t, res.Action.ID)
		answer, change := es[len(es)-2], es[len(es)-1]
		p, err := record.DecodePayload(answer)
		require.NoError(t, err)
		require.Equal(t, record.AnswerHappened, p.(*record.LookupResultPayload).Answer)
		require.JSONEq(t, `{"provider":"found happened"}`, string(p.(*record.LookupResultPayload).Evidence))
		p, err = record.DecodePayload(change)
		require.NoError(t, err)
		require.Equal(t, &record.ReconciledPayload{Answer: record.AnswerHappened, LookupSeq: answer.Seq,
			Status: record.StatusConfirmed}, p)
		require.Equal(t, record.Actor{Kind: record.ActorSystem, Name: "arbiter"}, change.Actor)
	})
}

// TestCompensationLeaseOneWinner races workers for one compensation: one
// is told to compensate, the others in_progress.
func TestCompensationLeaseOneWinner(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		f := newFixture(t, st, FixtureOpts{})
		for _, o := range toCompRequested {
			o(t, f)
		}
		const workers = 8
		outcomes := make(chan record.Outcome, workers)
		start := make(chan struct{})
		for range workers {
			go func() {
				<-start
				res, err := f.l.Submit(context.Background(), f.agent, [][]byte{[]byte(intentK)})
				if err != nil {
					outcomes <- record.OutcomeRejected
					return
				}
				outcomes <- res[0].Outcome
			}()
		}
		close(start)
		counts := map[record.Outcome]int{}
		for range workers {
			counts[<-outcomes]++
		}
		require.Equal(t, map[record.Outcome]int{record.OutcomeCompensate: 1, record.OutcomeInProgress: workers - 1}, counts)
		a := f.action(t, "k")
		require.Equal(t, 1, countEntries(t, st, a.ID, record.TypeIntent)-1, "one compensation intent recorded beside the first")
	})
}

// TestCompensationLeasePassingHoldsForAnOperator follows a compensation
// whose lease passes: the sweeper records it once, intents are held, and
// an operator's compensate starts it again.
func TestCompensationLeasePassingHoldsForAnOperator(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		ctx := context.Background()
		f := newFixture(t, st, FixtureOpts{})
		for _, o := range toCompensating {
			o(t, f)
		}
		f.clock.Advance(61 * time.Second)
		n, err := f.l.Sweep(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		n, err = f.l.Sweep(ctx)
		require.NoError(t, err)
		require.Zero(t, n, "a passed compensation lease is recorded once")
		a := f.action(t, "k")
		require.Equal(t, 1, countEntries(t, st, a.ID, record.TypeCompensationTimedOut))
		require.Equal(t, []record.Decision{record.DecisionCompensate, record.DecisionMarkCompensated, record.DecisionAbandon},
			services.AllowedDecisions(a))

		_, _, err = f.l.Decide(ctx, f.operator, a.ID, services.DecisionInput{Decision: record.DecisionCompensate,
			Reason: "the reversal API was down; try again"})
		require.NoError(t, err)
		a = f.action(t, "k")
		require.False(t, a.Reconciliation.CompensationTimedOut)
		require.Nil(t, a.LeaseUntil)
		require.Equal(t, []record.Decision{record.DecisionMarkCompensated, record.DecisionAbandon}, services.AllowedDecisions(a))
		res := submit(t, f.l, f.agent, intentK)
		require.Equal(t, record.OutcomeCompensate, res.Outcome)
	})
}

// TestReconciledAlerts: every answer on a timed-out action alerts
// action.reconciled once, with the entry that recorded what it did (the
// system's reconciled entry when the action changed, else the agent's
// lookup_result); a passed compensation lease alerts action.timed_out.
// Answers in one batch are reconciled in its one transaction.
func TestReconciledAlerts(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		ctx := context.Background()
		e := newHookEnv(t, st)
		rcv := webhookstest.NewReceiver(t)
		ep := e.endpoint(t, webhookstest.EndpointOpts{URL: rcv.URL, Events: []record.EventType{record.EventReconciled, record.EventTimedOut}})
		e.timeOut(t, "found")
		e.timeOut(t, "unsure")
		res := submitAll(t, e.l, e.agent,
			`{"key":"found","type":"lookup_result","attempt":1,"answer":"happened","external_ref":"re_1"}`,
			`{"key":"unsure","type":"lookup_result","attempt":1,"answer":"unknown"}`)
		require.Equal(t, record.StatusConfirmed, res[0].Action.Status)
		require.Equal(t, record.StatusTimedOut, res[1].Action.Status)

		comp := submit(t, e.l, e.agent, intent(IntentOpts{Key: "undo"}))
		submit(t, e.l, e.agent, `{"key":"undo","type":"succeeded","attempt":1}`)
		e.decide(t, "undo", record.DecisionCompensate)
		require.Equal(t, record.OutcomeCompensate, submit(t, e.l, e.agent, intent(IntentOpts{Key: "undo"})).Outcome)
		e.clock.Advance(61 * time.Second)
		_, err := e.l.Sweep(ctx)
		require.NoError(t, err)

		require.Equal(t, map[string][]record.EventType{
			"found":  {record.EventReconciled, record.EventTimedOut},
			"unsure": {record.EventReconciled, record.EventTimedOut},
			"undo":   {record.EventTimedOut},
		}, e.alertsByKey(t, ep.ID))

		webhookstest.StartDispatcher(t, st, webhookstest.DispatcherOpts{})
		byEntry := map[record.EntryType]*services.MessageBody{}
		for _, r := range rcv.WaitRequests(t, 5) {
			m := webhookstest.MessageOf(t, r)
			byEntry[m.Data.Entry.Type] = &m
		}
		found := byEntry[record.TypeReconciled]
		require.NotNil(t, found, "the change a lookup made is alerted with the system's entry")
		require.Equal(t, record.EventReconciled, found.Type)
		require.Equal(t, record.StatusConfirmed, found.Data.Action.Status)
		require.Equal(t, record.ActorSystem, found.Data.Entry.Actor.Kind)
		require.Equal(t, 4, found.Data.Entry.Seq)
		require.JSONEq(t, `{"answer":"happened","lookup_seq":3,"status":"confirmed"}`, string(found.Data.Entry.Payload))
		unsure := byEntry[record.TypeLookupResult]
		require.NotNil(t, unsure, "an answer that leaves the action for a person is alerted with the agent's entry")
		require.Equal(t, record.StatusTimedOut, unsure.Data.Action.Status)
		timedOut := byEntry[record.TypeCompensationTimedOut]
		require.NotNil(t, timedOut, "a passed compensation lease alerts action.timed_out")
		require.Equal(t, record.EventTimedOut, timedOut.Type)
		require.Equal(t, comp.Action.ID, timedOut.Data.Action.ID)
	})
}
