package services_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
	"github.com/arbiter-ledger/arbiter/services/record"
	"github.com/arbiter-ledger/arbiter/services/webhooks/webhookstest"
)

// Approval before execution: SPEC's approval table, row by row, on both
// databases.

var (
	intentApproval  = `{"key":"k","type":"intent","tool":"payments.refund","effect":"keyed","params":{"order":"8812","amount":10},"timeout":60,"require_approval":true}`
	intentSameAgain = `{"key":"k","type":"intent","tool":"payments.refund","effect":"keyed","params":{"amount":10,"order":"8812"},"timeout":60}`
	intentOther     = `{"key":"k","type":"intent","tool":"payments.refund","effect":"keyed","params":{"order":"8812","amount":5000}}`
)

// requireTwo is a test-only row: first intents that ask for approval need
// two people, and escalate after an hour.
func requireTwo(rules map[string]map[record.Status]func(services.TestStep) services.TestPlan,
	_ map[record.Status]func(*record.Action) *time.Time) {
	rules[string(record.TypeIntent)] = map[record.Status]func(services.TestStep) services.TestPlan{
		record.StatusNone: func(s services.TestStep) services.TestPlan {
			return services.RealRule(string(record.TypeIntent), record.StatusNone, s).WithPlan(record.OutcomePendingApproval,
				func(a *record.Action) {
					if a.Approval != nil {
						at := s.Now().Add(time.Hour)
						a.Approval.Required, a.Approval.EscalateAt = 2, &at
					}
				})
		},
	}
}

func approveAs(t *testing.T, f *fixture, p services.Principal, reason string) (*record.Action, error) {
	t.Helper()
	a, _, err := f.l.Decide(context.Background(), p, f.action(t, "k").ID,
		services.DecisionInput{Decision: record.DecisionApprove, Reason: reason})
	return a, err
}

func TestApprovalTable(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		ctx := context.Background()
		e := newHookEnv(t, st)
		e.endpoint(t, webhookstest.EndpointOpts{URL: "http://127.0.0.1:9/", Events: []record.EventType{record.EventApprovalRequested,
			record.EventApproved, record.EventDecided}})
		f := e.fixture

		// (new key), approval needed → awaiting_approval, attempt 0, 202.
		res := submit(t, f.l, f.agent, intentApproval)
		require.Equal(t, record.OutcomePendingApproval, res.Outcome)
		require.Nil(t, res.Error)
		require.Equal(t, record.StatusAwaitingApproval, res.Action.Status)
		require.Equal(t, 0, res.Action.Attempt)
		require.Nil(t, res.LeaseUntil)
		ap := res.Action.Approval
		require.NotNil(t, ap)
		require.Equal(t, 1, ap.Required)
		require.Empty(t, ap.Approvals)
		require.True(t, ap.ExpiresAt.Equal(t0.Add(24*time.Hour)), "default expiry, got %v", ap.ExpiresAt)
		require.Nil(t, ap.Rejection)
		require.NotNil(t, ap.Policies)
		id := res.Action.ID
		n, err := st.CountMessages(ctx, id, record.EventApprovalRequested)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		es := f.entries(t, id)
		require.Len(t, es, 1)
		require.Nil(t, es[0].Attempt, "no attempt is granted while waiting")
		p, err := record.DecodePayload(es[0])
		require.NoError(t, err)
		require.Equal(t, 1, p.(*record.IntentPayload).Approval.Required)

		// The same intent again: unchanged, pending_approval.
		again := submit(t, f.l, f.agent, intentSameAgain)
		require.Equal(t, record.OutcomePendingApproval, again.Outcome)
		require.Equal(t, 1, again.Action.Version)
		// Other params: key_reused, never a silently approved different action.
		other := submit(t, f.l, f.agent, intentOther)
		require.Equal(t, record.OutcomeRejected, other.Outcome)
		require.Equal(t, services.CodeKeyReused, other.Error.Code)

		// Only the decisions of the table are allowed.
		require.Equal(t, []record.Decision{record.DecisionApprove, record.DecisionReject},
			services.AllowedDecisions(res.Action))
		_, _, err = f.l.Decide(ctx, f.operator, id, services.DecisionInput{Decision: record.DecisionConfirm, Reason: "no"})
		require.ErrorIs(t, err, services.ErrInvalidTransition)

		// approve, the last person needed (reason optional) → approved.
		a, err := approveAs(t, f, f.operator, "")
		require.NoError(t, err)
		require.Equal(t, record.StatusApproved, a.Status)
		require.Len(t, a.Approval.Approvals, 1)
		require.Equal(t, actorOf(f.operator), a.Approval.Approvals[0].By)
		n, err = st.CountMessages(ctx, id, record.EventApproved)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		n, err = st.CountMessages(ctx, id, record.EventDecided)
		require.NoError(t, err)
		require.Equal(t, 1, n)

		// approved, intent → in_progress, attempt 1, lease starts, 201.
		f.clock.Advance(time.Minute)
		run := submit(t, f.l, f.agent, intentSameAgain)
		require.Equal(t, record.OutcomeProceed, run.Outcome)
		require.Equal(t, 1, *run.Attempt)
		require.Equal(t, record.StatusInProgress, run.Action.Status)
		require.True(t, run.LeaseUntil.Equal(f.clock.Now().Add(time.Minute)))
		require.Len(t, run.Action.Approval.Approvals, 1, "the action keeps its approval")
		// A report for attempt 1 is as for any action.
		done := submit(t, f.l, f.agent, succeeded1)
		require.Equal(t, record.OutcomeRecorded, done.Outcome)
		// The approved action's key with other params is still key_reused.
		require.Equal(t, services.CodeKeyReused, submit(t, f.l, f.agent, intentOther).Error.Code)
	})
}

func TestApprovalRejectedOrExpired(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		ctx := context.Background()
		for _, c := range []struct {
			name string
			ops  []op
			// what the timeline ends with
			last record.EntryType
		}{
			{"rejected while awaiting", []op{send(intentApproval), decided(record.DecisionReject)}, record.TypeDecision},
			{"rejected once approved", []op{send(intentApproval), decided(record.DecisionApprove), decided(record.DecisionReject)}, record.TypeDecision},
			{"expired while awaiting", []op{send(intentApproval), wait(24*time.Hour + time.Second), swept()}, record.TypeApprovalExpired},
			{"expired once approved", []op{send(intentApproval), decided(record.DecisionApprove), wait(24*time.Hour + time.Second), swept()}, record.TypeApprovalExpired},
		} {
			f := newFixture(t, st, FixtureOpts{})
			for _, o := range c.ops {
				o(t, f)
			}
			a := f.action(t, "k")
			require.Equal(t, record.StatusDenied, a.Status, c.name)
			require.True(t, a.Status.Terminal(), c.name)
			es := f.entries(t, a.ID)
			require.Equal(t, c.last, es[len(es)-1].Type, c.name)
			if c.last == record.TypeDecision {
				require.NotNil(t, a.Approval.Rejection, c.name)
				require.Equal(t, "setup: reject", a.Approval.Rejection.Reason, c.name)
			}
			// Later intents: denied, 409, error null; nothing written.
			res := submit(t, f.l, f.agent, intentSameAgain)
			require.Equal(t, record.OutcomeDenied, res.Outcome, c.name)
			require.Nil(t, res.Error, c.name)
			require.Len(t, f.entries(t, a.ID), len(es), c.name)
			// No decision moves a denied action.
			require.Empty(t, services.AllowedDecisions(&record.Action{Status: record.StatusDenied}))
			n, err := f.l.Sweep(ctx)
			require.NoError(t, err)
			require.Zero(t, n, "%s: a denied action has no deadline", c.name)
		}
	})
}

func TestFourEyesAndEscalation(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		ctx := context.Background()
		f := newFixture(t, st, FixtureOpts{})
		f.l.WithRules(requireTwo)
		bob := principal(t, st, PrincipalOpts{Namespace: f.ns, Name: "ops-bob", Role: services.RoleOperator, Owner: "bob@example.com"})
		send(intentApproval)(t, f)

		a, err := approveAs(t, f, f.operator, "looks right")
		require.NoError(t, err)
		require.Equal(t, record.StatusAwaitingApproval, a.Status, "1 of 2")
		require.Len(t, a.Approval.Approvals, 1)
		before := len(f.entries(t, a.ID))
		_, err = approveAs(t, f, f.operator, "again")
		require.ErrorIs(t, err, &services.Error{Code: services.CodeAlreadyApproved})
		require.Len(t, f.entries(t, a.ID), before, "a second yes from one person writes nothing")

		// The escalation passes once, then the expiry stays the deadline.
		f.clock.Advance(time.Hour + time.Second)
		n, err := f.l.Sweep(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		n, err = f.l.Sweep(ctx)
		require.NoError(t, err)
		require.Zero(t, n, "escalated once")
		require.Equal(t, 1, countEntries(t, st, a.ID, record.TypeApprovalEscalated))
		require.Equal(t, record.StatusAwaitingApproval, f.action(t, "k").Status)

		a, err = approveAs(t, f, bob, "second pair of eyes")
		require.NoError(t, err)
		require.Equal(t, record.StatusApproved, a.Status)
		require.Equal(t, []string{"alice@example.com", "bob@example.com"}, []string{a.Approval.Approvals[0].By.Name, a.Approval.Approvals[1].By.Name})
		_, err = approveAs(t, f, bob, "")
		require.ErrorIs(t, err, services.ErrInvalidTransition, "approve only from awaiting_approval")
	})
}

// TestApprovalsRace: two people approving at once approve the action
// exactly once; one person approving twice at once is counted once; an
// approval racing a rejection ends in one consistent state.
func TestApprovalsRace(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		ctx := context.Background()
		for round := range 5 {
			f := newFixture(t, st, FixtureOpts{})
			f.l.WithRules(requireTwo)
			bob := principal(t, st, PrincipalOpts{Namespace: f.ns, Name: "ops-bob", Role: services.RoleOperator, Owner: "bob@example.com"})
			send(intentApproval)(t, f)
			id := f.action(t, "k").ID
			var wg sync.WaitGroup
			errs := make([]error, 4)
			for i, p := range []services.Principal{f.operator, bob, f.operator, bob} {
				wg.Go(func() {
					_, _, errs[i] = f.l.Decide(ctx, p, id, services.DecisionInput{Decision: record.DecisionApprove})
				})
			}
			wg.Wait()
			a := f.action(t, "k")
			require.Equal(t, record.StatusApproved, a.Status, "round %d", round)
			require.Len(t, a.Approval.Approvals, 2, "round %d: each person counted once", round)
			ok := 0
			for _, err := range errs {
				if err == nil {
					ok++
					continue
				}
				require.Contains(t, []string{services.CodeAlreadyApproved, services.CodeInvalidTransition},
					mustCode(t, err), "round %d", round)
			}
			require.Equal(t, 2, ok, "round %d", round)
			require.Equal(t, 2, countEntries(t, st, id, record.TypeDecision))

			// An approval racing a rejection: denied, or approved then
			// denied — never approved with the rejection lost.
			g := newFixture(t, st, FixtureOpts{})
			send(intentApproval)(t, g)
			gid := g.action(t, "k").ID
			var r1, r2 error
			wg.Go(func() {
				_, _, r1 = g.l.Decide(ctx, g.operator, gid, services.DecisionInput{Decision: record.DecisionApprove})
			})
			wg.Go(func() {
				_, _, r2 = g.l.Decide(ctx, g.operator, gid, services.DecisionInput{Decision: record.DecisionReject, Reason: "no"})
			})
			wg.Wait()
			ga := g.action(t, "k")
			if r2 == nil {
				require.Equal(t, record.StatusDenied, ga.Status)
			} else {
				require.Equal(t, services.CodeVersionConflict, mustCode(t, r2))
				require.NoError(t, r1)
				require.Equal(t, record.StatusApproved, ga.Status)
			}
		}
	})
}

func mustCode(t *testing.T, err error) string {
	t.Helper()
	e, ok := services.AsError(err)
	require.True(t, ok, "%v", err)
	return e.Code
}
