package services_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
	"github.com/arbiter-ledger/arbiter/services/record"
)

// specDecisions is SPEC's decision table ("Action states"), written out
// independently of the state machine so the two are checked against each
// other.
var specDecisions = map[record.Decision]struct {
	from []record.Status
	to   record.Status
}{
	"confirm":          {[]record.Status{"timed_out", "in_progress", "failed", "retry_requested"}, "confirmed"},
	"retry":            {[]record.Status{"timed_out", "failed"}, "retry_requested"},
	"compensate":       {[]record.Status{"timed_out", "succeeded", "confirmed"}, "compensation_requested"},
	"mark_compensated": {[]record.Status{"compensation_requested"}, "compensated"},
	"abandon":          {[]record.Status{"timed_out", "failed", "retry_requested", "compensation_requested"}, "abandoned"},
	"approve":          {[]record.Status{"awaiting_approval"}, "approved"}, // the last person needed
	"reject":           {[]record.Status{"awaiting_approval", "approved"}, "denied"},
	// Any status, but only while a review alert shows, which none of
	// statusPaths leaves: TestAcknowledgeClearsReviewAlerts.
	"acknowledge": {nil, ""},
}

// statusPaths bring key "k" to each status, with the version it ends at.
var statusPaths = map[record.Status]struct {
	ops     []op
	version int
}{
	"in_progress":            {toInProgress, 1},
	"succeeded":              {toSucceeded, 2},
	"failed":                 {toFailed, 2},
	"timed_out":              {toTimedOut, 2},
	"retry_requested":        {toRetryRequested, 3},
	"confirmed":              {toConfirmed, 3},
	"compensation_requested": {toCompRequested, 3},
	"compensated":            {toCompensated, 4},
	"abandoned":              {toAbandoned, 3},
	"awaiting_approval":      {toAwaitingApproval, 1},
	"approved":               {toApproved, 2},
	"denied":                 {toDenied, 2},
}

func specAllows(decision record.Decision, st record.Status) bool {
	for _, s := range specDecisions[decision].from {
		if s == st {
			return true
		}
	}
	return false
}

func TestAllowedDecisionsMatchSpec(t *testing.T) {
	t.Parallel()
	require.ElementsMatch(t, []record.Decision{"confirm", "retry", "compensate", "mark_compensated", "abandon",
		"approve", "reject", "acknowledge"}, record.Decisions)
	require.Len(t, record.Statuses, len(statusPaths))
	for _, st := range record.Statuses {
		var want []record.Decision
		for _, d := range record.Decisions {
			if specAllows(d, st) {
				want = append(want, d)
			}
		}
		a := &record.Action{ID: "a", Status: st, Effect: record.EffectKeyed, Attempt: 1, Approval: &record.Approval{Required: 1}}
		require.Equal(t, want, services.AllowedDecisions(a), "decisions allowed from %s", st)
	}
	// compensate is allowed from compensation_requested only after a
	// compensation lease passed without a report.
	a := &record.Action{ID: "a", Status: record.StatusCompensationRequested, Attempt: 1,
		Reconciliation: &record.Reconciliation{CompensationTimedOut: true}}
	require.Equal(t, []record.Decision{"compensate", "mark_compensated", "abandon"}, services.AllowedDecisions(a))
}

// TestDecisionTable takes every decision from every status: the allowed ones
// move the action as SPEC says, the others are invalid_transition and write
// nothing.
func TestDecisionTable(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		ctx := context.Background()
		c := newClock()
		for _, from := range record.Statuses {
			for _, decision := range record.Decisions {
				allowed := specAllows(decision, from)
				name := fmt.Sprintf("%s from %s refused", decision, from)
				if allowed {
					name = fmt.Sprintf("%s from %s", decision, from)
				}
				t.Run(name, func(t *testing.T) {
					c.Advance(24 * time.Hour)
					f := newFixture(t, st, FixtureOpts{Clock: c})
					path := statusPaths[from]
					for _, o := range path.ops {
						o(t, f)
					}
					before := f.action(t, "k")
					require.Equal(t, from, before.Status)
					require.Equal(t, path.version, before.Version)
					n := countEntries(t, st, "", "")
					c.Advance(time.Minute)

					d := services.DecisionInput{Decision: decision, Reason: "checked the PSP dashboard"}
					act, entry, err := f.l.Decide(ctx, f.operator, before.ID, d)

					stored := f.action(t, "k")
					if !allowed {
						require.ErrorIs(t, err, services.ErrInvalidTransition)
						require.Contains(t, err.Error(), string(from))
						require.Nil(t, act)
						require.Nil(t, entry)
						require.JSONEq(t, actionJSON(t, before), actionJSON(t, stored), "nothing written")
						require.Equal(t, n, countEntries(t, st, "", ""), "nothing written")
						return
					}
					require.NoError(t, err)
					want := specDecisions[decision].to
					for _, a := range []*record.Action{act, stored} {
						require.Equal(t, want, a.Status)
						require.Equal(t, before.Version+1, a.Version)
						require.Equal(t, before.Attempt, a.Attempt)
						require.True(t, a.UpdatedAt.Equal(c.Now()))
						if from == record.StatusInProgress || from == record.StatusCompensationRequested ||
							want == record.StatusCompensationRequested {
							require.Nil(t, a.LeaseUntil, "a decision ends the lease; a compensation takes its own")
						} else {
							require.Equal(t, before.LeaseUntil, a.LeaseUntil)
						}
						require.Equal(t, string(before.Result), string(a.Result))
					}
					es := f.entries(t, before.ID)
					require.Equal(t, n+1, countEntries(t, st, "", ""))
					requireEntries(t, []wantEntry{{"decision", "operator", before.Attempt}}, es[len(es)-1:], c.Now())
					last := es[len(es)-1]
					require.Equal(t, last.ID, entry.ID)
					require.Equal(t, last.Seq, entry.Seq)
					require.Equal(t, len(es), entry.Seq)
					require.Equal(t, actorOf(f.operator), entry.Actor)
					require.JSONEq(t, `{"decision":"`+string(decision)+`","reason":"checked the PSP dashboard"}`, sansVia(t, last.Payload))
				})
			}
		}
	})
}

// TestDecisionRules checks the rules around a decision: its input, the
// expected version, duplicate risk, evidence and who may decide.
func TestDecisionRules(t *testing.T) {
	t.Parallel()
	ptr := func(n int) *int { return &n }
	type want struct {
		code    string        // "" for success
		status  record.Status // after the decision
		version int
		payload string // the decision entry's payload, when one is written
	}
	cases := []struct {
		name   string
		effect record.Effect // of the intent; default keyed, "-" sends none (unkeyed)
		setup  []op
		who    services.Role // default operator of the namespace
		other  bool          // an operator of another namespace
		d      services.DecisionInput
		want   want
	}{
		{name: "reason is required", setup: toTimedOut,
			d:    services.DecisionInput{Decision: "abandon"},
			want: want{code: "invalid", status: "timed_out", version: 2}},
		{name: "blank reason is refused", setup: toTimedOut,
			d:    services.DecisionInput{Decision: "abandon", Reason: " \t\n"},
			want: want{code: "invalid", status: "timed_out", version: 2}},
		{name: "unknown decision is invalid", setup: toTimedOut,
			d:    services.DecisionInput{Decision: "undo", Reason: "r"},
			want: want{code: "invalid", status: "timed_out", version: 2}},
		{name: "expected_version mismatch is version_conflict", setup: toTimedOut,
			d:    services.DecisionInput{Decision: "abandon", Reason: "r", ExpectedVersion: ptr(1)},
			want: want{code: "version_conflict", status: "timed_out", version: 2}},
		{name: "expected_version ahead is version_conflict", setup: toTimedOut,
			d:    services.DecisionInput{Decision: "abandon", Reason: "r", ExpectedVersion: ptr(3)},
			want: want{code: "version_conflict", status: "timed_out", version: 2}},
		{name: "expected_version that matches", setup: toTimedOut,
			d: services.DecisionInput{Decision: "abandon", Reason: "r", ExpectedVersion: ptr(2)},
			want: want{status: "abandoned", version: 3,
				payload: `{"decision":"abandon","reason":"r","expected_version":2}`}},
		{name: "unkeyed retry without acknowledgement", effect: "-", setup: toTimedOut,
			d:    services.DecisionInput{Decision: "retry", Reason: "r"},
			want: want{code: "duplicate_risk_unacknowledged", status: "timed_out", version: 2}},
		{name: "unkeyed retry of a failure without acknowledgement", effect: "unkeyed", setup: toFailed,
			d:    services.DecisionInput{Decision: "retry", Reason: "r"},
			want: want{code: "duplicate_risk_unacknowledged", status: "failed", version: 2}},
		{name: "unkeyed retry with acknowledgement", effect: "-", setup: toTimedOut,
			d: services.DecisionInput{Decision: "retry", Reason: "r", AcknowledgeDuplicateRisk: true},
			want: want{status: "retry_requested", version: 3,
				payload: `{"decision":"retry","reason":"r","acknowledge_duplicate_risk":true}`}},
		{name: "keyed retry needs no acknowledgement", effect: "keyed", setup: toTimedOut,
			d:    services.DecisionInput{Decision: "retry", Reason: "r"},
			want: want{status: "retry_requested", version: 3, payload: `{"decision":"retry","reason":"r"}`}},
		{name: "idempotent retry needs no acknowledgement", effect: "idempotent", setup: toFailed,
			d:    services.DecisionInput{Decision: "retry", Reason: "r"},
			want: want{status: "retry_requested", version: 3, payload: `{"decision":"retry","reason":"r"}`}},
		{name: "read_only retry needs no acknowledgement", effect: "read_only", setup: toTimedOut,
			d:    services.DecisionInput{Decision: "retry", Reason: "r"},
			want: want{status: "retry_requested", version: 3, payload: `{"decision":"retry","reason":"r"}`}},
		{name: "acknowledgement on another decision is invalid", setup: toTimedOut,
			d:    services.DecisionInput{Decision: "abandon", Reason: "r", AcknowledgeDuplicateRisk: true},
			want: want{code: "invalid", status: "timed_out", version: 2}},
		{name: "reader may not decide", setup: toTimedOut, who: services.RoleReader,
			d:    services.DecisionInput{Decision: "abandon", Reason: "r"},
			want: want{code: "forbidden", status: "timed_out", version: 2}},
		{name: "agent may not decide", setup: toTimedOut, who: services.RoleAgent,
			d:    services.DecisionInput{Decision: "abandon", Reason: "r"},
			want: want{code: "forbidden", status: "timed_out", version: 2}},
		{name: "operator of another namespace gets not_found", setup: toTimedOut, other: true,
			d:    services.DecisionInput{Decision: "abandon", Reason: "r"},
			want: want{code: "not_found", status: "timed_out", version: 2}},
		{name: "admin decides anywhere", setup: toTimedOut, who: services.RoleAdmin,
			d:    services.DecisionInput{Decision: "abandon", Reason: "r"},
			want: want{status: "abandoned", version: 3, payload: `{"decision":"abandon","reason":"r"}`}},
	}
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		ctx := context.Background()
		c := newClock()
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				c.Advance(24 * time.Hour)
				f := newFixture(t, st, FixtureOpts{Clock: c})
				// The setup path starts with an intent; send it with this
				// case's effect class instead.
				first := submit(t, f.l, f.agent, intent(IntentOpts{Effect: tc.effect}))
				require.Equal(t, record.OutcomeProceed, first.Outcome)
				for _, o := range tc.setup[1:] {
					o(t, f)
				}
				wantEffect := tc.effect
				if wantEffect == "" {
					wantEffect = "keyed"
				}
				if wantEffect == "-" {
					wantEffect = "unkeyed"
				}
				before := f.action(t, "k")
				require.Equal(t, wantEffect, before.Effect)
				n := countEntries(t, st, "", "")

				p := f.operator
				switch {
				case tc.other:
					p = principal(t, st, PrincipalOpts{Role: services.RoleOperator})
				case tc.who == services.RoleAdmin:
					p = principal(t, st, PrincipalOpts{Role: services.RoleAdmin, Name: "root"})
				case tc.who != "":
					p = principal(t, st, PrincipalOpts{Namespace: f.ns, Role: tc.who})
				}
				act, entry, err := f.l.Decide(ctx, p, before.ID, tc.d)

				stored := f.action(t, "k")
				require.Equal(t, tc.want.status, stored.Status)
				require.Equal(t, tc.want.version, stored.Version)
				if tc.want.code != "" {
					e, ok := services.AsError(err)
					require.True(t, ok, "error %v", err)
					require.Equal(t, tc.want.code, e.Code, e.Message)
					require.Nil(t, act)
					require.Nil(t, entry)
					require.Equal(t, n, countEntries(t, st, "", ""), "nothing written")
					return
				}
				require.NoError(t, err)
				require.Equal(t, tc.want.status, act.Status)
				require.Equal(t, tc.want.version, act.Version)
				require.Equal(t, n+1, countEntries(t, st, "", ""))
				require.Equal(t, record.TypeDecision, entry.Type)
				require.Equal(t, actorOf(p), entry.Actor)
				require.JSONEq(t, tc.want.payload, sansVia(t, entry.Payload))
			})
		}
	})
}

// TestRetryDecisionLeadsToNextAttempt follows a retry through to the agent's
// next intent and outcome.
func TestRetryDecisionLeadsToNextAttempt(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		ctx := context.Background()
		f := newFixture(t, st, FixtureOpts{})
		for _, o := range then([]op{send(intent(IntentOpts{Effect: "-"}))}, wait(61*time.Second), swept()) {
			o(t, f)
		}
		a := f.action(t, "k")
		_, _, err := f.l.Decide(ctx, f.operator, a.ID, services.DecisionInput{Decision: "retry", Reason: "PSP shows nothing", AcknowledgeDuplicateRisk: true})
		require.NoError(t, err)

		f.clock.Advance(time.Minute)
		res := submit(t, f.l, f.agent, intent(IntentOpts{Effect: "-"}))
		require.Equal(t, record.OutcomeProceed, res.Outcome)
		require.Equal(t, 2, *res.Attempt)
		require.Equal(t, a.ID, res.Action.ID, "same key, same action")
		require.True(t, f.clock.Now().Add(time.Minute).Equal(*res.LeaseUntil))

		require.Equal(t, record.OutcomeInProgress, submit(t, f.l, f.agent, intent(IntentOpts{Effect: "-"})).Outcome)
		require.Equal(t, record.OutcomeRejected, submit(t, f.l, f.agent, succeeded1).Outcome, "attempt 1 is fenced off")
		res = submit(t, f.l, f.agent, succeeded2)
		require.Equal(t, record.OutcomeRecorded, res.Outcome)
		require.Equal(t, record.StatusSucceeded, res.Action.Status)
		require.Equal(t, []record.EntryType{"intent", "timed_out", "decision", "intent", "stale_outcome", "succeeded"}, entryTypes(f.entries(t, a.ID)))
	})
}

// TestConfirmCarriesEvidence checks that a confirm's external_ref and result
// land on the action, in the entry and in later replays.
func TestConfirmCarriesEvidence(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		ctx := context.Background()
		f := newFixture(t, st, FixtureOpts{})
		for _, o := range toTimedOut {
			o(t, f)
		}
		a := f.action(t, "k")
		require.Nil(t, a.ExternalRef)
		ref := "re_42"
		v := a.Version
		act, entry, err := f.l.Decide(ctx, f.operator, a.ID, services.DecisionInput{
			Decision: "confirm", Reason: "refund visible in the PSP", ExpectedVersion: &v,
			ExternalRef: &ref, Result: json.RawMessage(`{"refund":"re_42","amount":10}`),
		})
		require.NoError(t, err)
		for _, got := range []*record.Action{act, f.action(t, "k")} {
			require.Equal(t, record.StatusConfirmed, got.Status)
			require.Equal(t, "re_42", *got.ExternalRef)
			require.JSONEq(t, `{"refund":"re_42","amount":10}`, string(got.Result))
		}
		require.JSONEq(t, `{"decision":"confirm","reason":"refund visible in the PSP","expected_version":2,
			"external_ref":"re_42","result":{"refund":"re_42","amount":10}}`, sansVia(t, entry.Payload))

		res := submit(t, f.l, f.agent, intentK)
		require.Equal(t, record.OutcomeReplay, res.Outcome)
		require.Equal(t, "re_42", *res.Action.ExternalRef)
		require.JSONEq(t, `{"refund":"re_42","amount":10}`, string(res.Action.Result))

		// Evidence is for confirm only.
		_, _, err = f.l.Decide(ctx, f.operator, a.ID, services.DecisionInput{Decision: "compensate", Reason: "r", ExternalRef: &ref})
		require.ErrorIs(t, err, services.ErrInvalid)
		require.Equal(t, record.StatusConfirmed, f.action(t, "k").Status)
	})
}

// TestMarkCompensated checks the operator's way to finish a compensation.
func TestMarkCompensated(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		f := newFixture(t, st, FixtureOpts{})
		for _, o := range then(toCompRequested, decided("mark_compensated")) {
			o(t, f)
		}
		a := f.action(t, "k")
		require.Equal(t, record.StatusCompensated, a.Status)
		require.Equal(t, record.OutcomeReplay, submit(t, f.l, f.agent, intentK).Outcome)
		es := f.entries(t, a.ID)
		require.Equal(t, []record.EntryType{"intent", "succeeded", "decision", "decision"}, entryTypes(es))
	})
}

// TestDecisionWithNULIsNotAServerError checks that input PostgreSQL cannot
// store is refused as invalid on both databases, not failed as a database
// error.
func TestDecisionWithNULIsNotAServerError(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		ctx := context.Background()
		f := newFixture(t, st, FixtureOpts{})
		for _, o := range toTimedOut {
			o(t, f)
		}
		a := f.action(t, "k")
		for _, d := range []services.DecisionInput{
			{Decision: "abandon", Reason: "nul \x00 here"},
			{Decision: "confirm", Reason: "r", Result: json.RawMessage(`{"a":"\u0000"}`)},
			{Decision: "confirm", Reason: "r", Result: json.RawMessage(`{"\u0000":1}`)},
			{Decision: "confirm", Reason: "r", Result: json.RawMessage(`{"a":"\ud800"}`)},
		} {
			_, _, err := f.l.Decide(ctx, f.operator, a.ID, d)
			require.ErrorIs(t, err, services.ErrInvalid, "%+v", d)
		}
		require.Equal(t, record.StatusTimedOut, f.action(t, "k").Status)
	})
}
