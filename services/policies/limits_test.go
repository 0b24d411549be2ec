package policies_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/accounts"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
	"github.com/arbiter-ledger/arbiter/services/driver"
	"github.com/arbiter-ledger/arbiter/services/policies"
	"github.com/arbiter-ledger/arbiter/services/record"
)

// The limits suite (SPEC "Limits across actions"): each counting rule, the
// sliding window, deny and hold, approval over the cap, fail-closed
// amounts and shadow mode, on both databases.

// clock is a fake clock the tests move instead of sleeping.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d).UTC().Truncate(time.Microsecond)
}

// limitEnv is env with limits, a clock and an operator who is a person.
type limitEnv struct {
	*env
	lim      *policies.Limits
	clock    *clock
	operator services.Principal
}

func newLimitEnv(t *testing.T, st *services.Store) *limitEnv {
	t.Helper()
	base := newEnv(t, st)
	c := &clock{now: time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)}
	lim := policies.NewLimits(st)
	policies.SetLimitsClock(lim, c.Now)
	base.l = services.NewLedger(st, services.LedgerConfig{Approver: base.pol, Limiter: lim, Now: c.Now})
	e := &limitEnv{env: base, lim: lim, clock: c}
	ctx := context.Background()
	email := fmt.Sprintf("ops-%s@example.com", e.ns)
	_, err := accounts.New(st).CreateUser(ctx, email, services.RoleOperator, "correct horse battery staple")
	require.NoError(t, err)
	keys := accounts.NewKeys(st)
	_, secret, err := keys.CreateKey(ctx, accounts.CreateKeyRequest{Namespace: e.ns, Name: "ops", Role: services.RoleOperator, Owner: email})
	require.NoError(t, err)
	e.operator, err = keys.Authenticate(ctx, secret)
	require.NoError(t, err)
	return e
}

func (e *limitEnv) limit(t *testing.T, in policies.LimitInput) *policies.Limit {
	t.Helper()
	in.Namespace = &e.ns
	if in.Name == nil {
		in.Name = ptr("refunds per customer")
	}
	if in.Tools == nil {
		in.Tools = &[]string{"payments.refund"}
	}
	l, err := e.lim.Create(context.Background(), admin, in)
	require.NoError(t, err)
	return l
}

// refund is the first intent of a refund of amount to customer.
func (e *limitEnv) refund(t *testing.T, key, customer string, amount int) services.EntryResult {
	t.Helper()
	return e.intent(t, key, "payments.refund", fmt.Sprintf(`{"customer":%q,"amount":%d}`, customer, amount))
}

func (e *limitEnv) send(t *testing.T, raw string) services.EntryResult {
	t.Helper()
	res, err := e.l.Submit(context.Background(), e.agent, [][]byte{[]byte(raw)})
	require.NoError(t, err)
	require.NotEqual(t, record.OutcomeRejected, res[0].Outcome, "%s: %+v", raw, res[0].Error)
	return res[0]
}

func (e *limitEnv) decide(t *testing.T, id string, d record.Decision) {
	t.Helper()
	_, _, err := e.l.Decide(context.Background(), e.operator, id, services.DecisionInput{Decision: d, Reason: "checked"})
	require.NoError(t, err)
}

// used is the group's counted use, as the usage API sums it from the
// charges; the use the ledger keeps for judging intents must agree.
func (e *limitEnv) used(t *testing.T, l *policies.Limit, group string) float64 {
	t.Helper()
	u, err := e.lim.Usage(context.Background(), e.reader, l.ID, group)
	require.NoError(t, err)
	summed := 0.0
	if len(u.Groups) > 0 {
		require.Len(t, u.Groups, 1)
		summed = u.Groups[0].Used
	}
	require.InDelta(t, summed, e.kept(t, l, group), 1e-9, "the kept use of group %q differs from its charges' sum", group)
	return summed
}

// kept is the group's use as the ledger keeps it (limit_groups), read as
// an intent would be judged now, in a transaction rolled back after.
func (e *limitEnv) kept(t *testing.T, l *policies.Limit, group string) float64 {
	t.Helper()
	ctx := context.Background()
	tx, err := e.st.Driver().Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback()
	w := time.Duration(l.Window) * time.Second
	used, err := tx.LimitUse(ctx, []driver.LimitUseParams{{LimitID: l.ID, Group: group, Since: e.clock.Now().Add(-w),
		Window: w, Lock: driver.GroupLock(l.ID, group)}})
	require.NoError(t, err)
	return used[0]
}

func perCustomer(over string, max float64) policies.LimitInput {
	return policies.LimitInput{Amount: ptr("params.amount"), GroupBy: ptr("params.customer"), Window: ptr(3600),
		Max: &max, Over: &over}
}

func TestLimitDeniesOverItsMaxPerGroup(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newLimitEnv(t, st)
		l := e.limit(t, perCustomer(record.LimitDeny, 30))
		for i := range 3 {
			res := e.refund(t, fmt.Sprintf("r%d", i), "cus_1", 10)
			require.Equal(t, record.OutcomeProceed, res.Outcome)
			require.Equal(t, []record.LimitCharge{{ID: l.ID, Name: "refunds per customer", Version: 1, Group: "cus_1", Amount: 10,
				Used: float64(10 * i), Max: 30}}, res.Action.Limits)
		}
		res := e.refund(t, "r3", "cus_1", 10)
		require.Equal(t, record.OutcomeDenied, res.Outcome)
		require.Equal(t, services.CodeLimitExceeded, res.Error.Code)
		require.Contains(t, res.Error.Message, `allows 30 in group "cus_1"; 30 is used and this intent adds 10`)
		require.Equal(t, record.StatusDenied, res.Action.Status)
		require.True(t, res.Action.Limits[0].Exceeded)
		p, err := record.DecodePayload(res.Entry)
		require.NoError(t, err)
		check := p.(*record.IntentPayload).Limits[0]
		require.Equal(t, record.LimitCheck{ID: l.ID, Name: "refunds per customer", Version: 1, Group: "cus_1", Amount: 10,
			Used: 30, Max: 30, Over: "deny", Mode: "enforce", Exceeded: true}, check)
		// The denied action does not count; its retry is still denied; a
		// smaller amount that fits, and another customer, proceed.
		require.Equal(t, 30.0, e.used(t, l, "cus_1"))
		require.Equal(t, record.OutcomeDenied, e.refund(t, "r3", "cus_1", 10).Outcome)
		require.Equal(t, record.OutcomeProceed, e.refund(t, "other", "cus_2", 30).Outcome)
		require.Equal(t, record.OutcomeDenied, e.refund(t, "tiny", "cus_1", 1).Outcome, "30 + 1 > 30")
		// Tools the limit does not cover are not charged.
		other := e.intent(t, "mail", "email.send", `{"customer":"cus_1","amount":500}`)
		require.Equal(t, record.OutcomeProceed, other.Outcome)
		require.Nil(t, other.Action.Limits)
	})
}

func TestLimitCountingRules(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newLimitEnv(t, st)
		l := e.limit(t, perCustomer(record.LimitDeny, 30))
		for i := range 3 {
			require.Equal(t, record.OutcomeProceed, e.refund(t, fmt.Sprintf("r%d", i), "c", 10).Outcome)
		}
		// failed stops counting.
		e.send(t, `{"key":"r0","type":"failed","attempt":1,"error":"card declined"}`)
		require.Equal(t, 20.0, e.used(t, l, "c"))
		require.Equal(t, record.OutcomeProceed, e.refund(t, "r3", "c", 10).Outcome)
		require.Equal(t, record.OutcomeDenied, e.refund(t, "r4", "c", 10).Outcome)

		// An unknown outcome keeps counting: timed out by its lease, or
		// reported outcome_unknown.
		e.clock.advance(10 * time.Minute)
		_, err := e.l.Sweep(context.Background())
		require.NoError(t, err)
		a, err := e.l.ActionByKey(context.Background(), e.agent, "", "r1")
		require.NoError(t, err)
		require.Equal(t, record.StatusTimedOut, a.Status)
		require.Equal(t, 30.0, e.used(t, l, "c"))

		// abandoned keeps counting (nobody knows what happened).
		e.decide(t, a.ID, record.DecisionAbandon)
		require.Equal(t, 30.0, e.used(t, l, "c"))

		// succeeded counts; compensated stops, compensation_requested does
		// not yet.
		e.send(t, `{"key":"r2","type":"succeeded","attempt":1,"result":{"ok":true}}`)
		r2, err := e.l.ActionByKey(context.Background(), e.agent, "", "r2")
		require.NoError(t, err)
		e.decide(t, r2.ID, record.DecisionCompensate)
		require.Equal(t, 30.0, e.used(t, l, "c"))
		require.Equal(t, record.OutcomeCompensate, e.send(t, `{"key":"r2","type":"intent","tool":"payments.refund","effect":"keyed","params":{"customer":"c","amount":10}}`).Outcome)
		e.send(t, `{"key":"r2","type":"compensated","attempt":1,"external_ref":"rev_1"}`)
		require.Equal(t, 20.0, e.used(t, l, "c"))
		require.Equal(t, record.OutcomeProceed, e.refund(t, "r5", "c", 10).Outcome)

		// The actions behind the group's use, newest first, each saying
		// whether it counts by the same rule as the use.
		cs, err := e.lim.GroupCharges(context.Background(), e.reader, l.ID, "c")
		require.NoError(t, err)
		counts, sum := map[string]bool{}, 0.0
		var keys []string
		for _, c := range cs {
			keys, counts[c.Key] = append(keys, c.Key), c.Counts
			if c.Counts {
				sum += c.Amount
			}
		}
		require.Equal(t, []string{"r5", "r4", "r3", "r2", "r1", "r0"}, keys)
		require.Equal(t, map[string]bool{"r0": false, "r1": true, "r2": false, "r3": true, "r4": false, "r5": true}, counts)
		require.Equal(t, e.used(t, l, "c"), sum)
		cs, err = e.lim.GroupCharges(context.Background(), e.reader, l.ID, "nobody")
		require.NoError(t, err)
		require.Empty(t, cs)
	})
}

func TestLimitWindowSlides(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newLimitEnv(t, st)
		in := perCustomer(record.LimitDeny, 20)
		in.Window = ptr(60)
		l := e.limit(t, in)
		require.Equal(t, record.OutcomeProceed, e.refund(t, "a", "c", 10).Outcome)
		e.clock.advance(30 * time.Second)
		require.Equal(t, record.OutcomeProceed, e.refund(t, "b", "c", 10).Outcome)
		require.Equal(t, record.OutcomeDenied, e.refund(t, "c", "c", 10).Outcome)
		// 60 s after the first charge it no longer counts; the second still
		// does.
		e.clock.advance(30 * time.Second)
		require.Equal(t, 10.0, e.used(t, l, "c"))
		require.Equal(t, record.OutcomeProceed, e.refund(t, "d", "c", 10).Outcome)
		require.Equal(t, record.OutcomeDenied, e.refund(t, "e", "c", 10).Outcome)
	})
}

func TestLimitHoldsOverItsMaxUntilApproved(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newLimitEnv(t, st)
		l := e.limit(t, perCustomer(record.LimitHold, 20))
		require.Equal(t, record.OutcomeProceed, e.refund(t, "a", "c", 15).Outcome)
		held := e.refund(t, "b", "c", 10)
		require.Equal(t, record.OutcomePendingApproval, held.Outcome)
		require.Equal(t, record.StatusAwaitingApproval, held.Action.Status)
		require.Equal(t, 1, held.Action.Approval.Required)
		require.Equal(t, []record.ApprovalLimit{{ID: l.ID, Name: "refunds per customer", Version: 1, Group: "c", Used: 15,
			Amount: 10, Max: 20}}, held.Action.Approval.Limits)
		// Held because of this limit, it does not count: an intent that fits
		// proceeds meanwhile.
		require.Equal(t, 15.0, e.used(t, l, "c"))
		require.Equal(t, record.OutcomeProceed, e.refund(t, "c", "c", 5).Outcome)
		// People may let it run over the cap; then it counts.
		e.decide(t, held.Action.ID, record.DecisionApprove)
		require.Equal(t, 30.0, e.used(t, l, "c"))
		require.Equal(t, record.OutcomeProceed, e.refund(t, "b", "c", 10).Outcome)
		require.Equal(t, record.OutcomePendingApproval, e.refund(t, "d", "c", 1).Outcome)
		// A held action that is rejected never counts.
		d, err := e.l.ActionByKey(context.Background(), e.agent, "", "d")
		require.NoError(t, err)
		_, _, err = e.l.Decide(context.Background(), e.operator, d.ID, services.DecisionInput{Decision: record.DecisionReject, Reason: "no"})
		require.NoError(t, err)
		require.Equal(t, 30.0, e.used(t, l, "c"))
	})
}

func TestLimitAmountThatFailsExceeds(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newLimitEnv(t, st)
		e.limit(t, perCustomer(record.LimitDeny, 1000))
		res := e.intent(t, "x", "payments.refund", `{"customer":"c","currency":"EUR"}`)
		require.Equal(t, record.OutcomeDenied, res.Outcome, "no amount: fail closed")
		p, err := record.DecodePayload(res.Entry)
		require.NoError(t, err)
		require.Contains(t, p.(*record.IntentPayload).Limits[0].Error, "amount:")
		res = e.intent(t, "y", "payments.refund", `{"customer":"c","amount":-5}`)
		require.Equal(t, record.OutcomeDenied, res.Outcome, "a negative amount: fail closed")
		res = e.intent(t, "z", "payments.refund", `{"customer":7,"amount":5}`)
		require.Equal(t, record.OutcomeDenied, res.Outcome, "a group that is not a string: fail closed")
	})
}

func TestShadowLimitAndPolicyRecordWithoutEnforcing(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newLimitEnv(t, st)
		in := perCustomer(record.LimitDeny, 10)
		in.Mode = ptr(record.LimitShadow)
		l := e.limit(t, in)
		pol := e.create(t, policies.Input{Name: ptr("large refunds"), Tools: &[]string{"payments.*"},
			Condition: ptr(`params.amount > 5`), Mode: ptr(record.LimitShadow)})
		require.Equal(t, record.OutcomeProceed, e.refund(t, "a", "c", 10).Outcome)
		res := e.refund(t, "b", "c", 10)
		require.Equal(t, record.OutcomeProceed, res.Outcome, "a shadow limit and a shadow policy hold nothing")
		require.Nil(t, res.Action.Approval)
		p, err := record.DecodePayload(res.Entry)
		require.NoError(t, err)
		ip := p.(*record.IntentPayload)
		require.Equal(t, []record.PolicyRef{{ID: pol.ID, Name: "large refunds", Version: 1}}, ip.ShadowPolicies)
		require.Len(t, ip.Limits, 1)
		require.True(t, ip.Limits[0].Exceeded, "the entry says it would have denied")
		require.Equal(t, record.LimitShadow, ip.Limits[0].Mode)
		require.Equal(t, 20.0, e.used(t, l, "c"), "its usage counts what ran")
	})
}

func TestLimitsRefuseBadInput(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newLimitEnv(t, st)
		ctx := context.Background()
		bad := []struct {
			in   policies.LimitInput
			code string
		}{
			{perCustomer("hold", 10), ""},
			{policies.LimitInput{Amount: ptr(`tool`), Window: ptr(60), Max: ptr(1.0)}, services.CodeInvalidLimit},
			{policies.LimitInput{GroupBy: ptr(`params.amount > 1`), Window: ptr(60), Max: ptr(1.0)}, services.CodeInvalidLimit},
			{policies.LimitInput{Condition: ptr(`params.amount`), Window: ptr(60), Max: ptr(1.0)}, services.CodeInvalidLimit},
			{policies.LimitInput{Amount: ptr(`params.amount +`), Window: ptr(60), Max: ptr(1.0)}, services.CodeInvalidLimit},
			{policies.LimitInput{Window: ptr(0), Max: ptr(1.0)}, services.CodeInvalid},
			{policies.LimitInput{Window: ptr(2592001), Max: ptr(1.0)}, services.CodeInvalid},
			{policies.LimitInput{Window: ptr(60), Max: ptr(-1.0)}, services.CodeInvalid},
			{policies.LimitInput{Window: ptr(60)}, services.CodeInvalid},
			{policies.LimitInput{Window: ptr(60), Max: ptr(1.0), Over: ptr("warn")}, services.CodeInvalid},
			{policies.LimitInput{Window: ptr(60), Max: ptr(1.0), Mode: ptr("dry")}, services.CodeInvalid},
			{policies.LimitInput{Window: ptr(60), Max: ptr(1.0), ApprovalsRequired: ptr(6)}, services.CodeInvalid},
			{policies.LimitInput{Window: ptr(60), Max: ptr(1.0), Tools: &[]string{}}, services.CodeInvalid},
		}
		for i, c := range bad {
			in := c.in
			in.Namespace, in.Name = &e.ns, ptr(fmt.Sprintf("limit %d", i))
			if in.Tools == nil {
				in.Tools = &[]string{"*"}
			}
			_, err := e.lim.Create(ctx, admin, in)
			if c.code == "" {
				require.NoError(t, err, "case %d", i)
				continue
			}
			se, ok := services.AsError(err)
			require.True(t, ok, "case %d: %v", i, err)
			require.Equal(t, c.code, se.Code, "case %d: %s", i, se.Message)
		}
		list, err := e.lim.List(ctx, e.reader, "")
		require.NoError(t, err)
		require.Len(t, list, 1, "nothing else was written")
		_, err = e.lim.Create(ctx, e.reader, perCustomer("hold", 1))
		require.ErrorIs(t, err, services.ErrForbidden)
		_, err = e.lim.List(ctx, e.agent, "")
		require.ErrorIs(t, err, services.ErrForbidden)
	})
}

// TestLimitHoldsUnderConcurrency: 200 intents of 10 against a max of 500 in
// one group, sent at once, leave exactly 50 counted; the charges of other
// groups meanwhile are not held up by it. Repeated, so a race that loses
// only sometimes shows.
func TestLimitHoldsUnderConcurrency(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newLimitEnv(t, st)
		l := e.limit(t, perCustomer(record.LimitDeny, 500))
		for round := range 3 {
			customer := fmt.Sprintf("hot-%d", round)
			outcomes := make([]record.Outcome, 200)
			var wg sync.WaitGroup
			for i := range outcomes {
				wg.Go(func() {
					res, err := e.l.Submit(context.Background(), e.agent, [][]byte{[]byte(fmt.Sprintf(
						`{"key":"%s-%d","type":"intent","tool":"payments.refund","effect":"keyed","params":{"customer":%q,"amount":10}}`,
						customer, i, customer))})
					if err != nil {
						t.Error(err)
						return
					}
					outcomes[i] = res[0].Outcome
				})
			}
			wg.Wait()
			count := map[record.Outcome]int{}
			for _, o := range outcomes {
				count[o]++
			}
			require.Equal(t, map[record.Outcome]int{record.OutcomeProceed: 50, record.OutcomeDenied: 150}, count, "round %d", round)
			require.Equal(t, 500.0, e.used(t, l, customer))
		}

		// Each key sent twice at once: a key that comes twice in one group
		// of intents, or exists by the time its group is written, is
		// decided on the stored action, and is charged once.
		customer := "hot-twice"
		outcomes := make([]record.Outcome, 400)
		var wg sync.WaitGroup
		for i := range outcomes {
			wg.Go(func() {
				res, err := e.l.Submit(context.Background(), e.agent, [][]byte{[]byte(fmt.Sprintf(
					`{"key":"%s-%d","type":"intent","tool":"payments.refund","effect":"keyed","params":{"customer":%q,"amount":10}}`,
					customer, i/2, customer))})
				if err != nil {
					t.Error(err)
					return
				}
				outcomes[i] = res[0].Outcome
			})
		}
		wg.Wait()
		ran := 0
		for k := range 200 {
			a, b := outcomes[2*k], outcomes[2*k+1]
			if a == record.OutcomeDenied || b == record.OutcomeDenied {
				require.Equal(t, a, b, "key %d: one denied, so both", k)
				continue
			}
			require.ElementsMatch(t, []record.Outcome{record.OutcomeProceed, record.OutcomeInProgress}, []record.Outcome{a, b}, "key %d", k)
			ran++
		}
		require.Equal(t, 50, ran)
		require.Equal(t, 500.0, e.used(t, l, customer))
	})
}

// TestLimitKeptRowsFollowOtherReplicas: on PostgreSQL a replica judges a
// group it has read before from the row as it keeps it, and writes only if
// the row is still so. Charges another replica made meanwhile, and charges
// that left the window since, send it back to the row under its lock: the
// group's use is never judged from a row that has changed.
func TestLimitKeptRowsFollowOtherReplicas(t *testing.T) {
	t.Parallel()
	u := dbtest.MigratedPostgresURL(t)
	open := func() *services.Store {
		st, err := services.Open(context.Background(), u)
		require.NoError(t, err)
		t.Cleanup(func() { st.Close() })
		return st
	}
	e := newLimitEnv(t, open())
	st2 := open()
	lim2 := policies.NewLimits(st2)
	policies.SetLimitsClock(lim2, e.clock.Now)
	other := &limitEnv{env: &env{st: st2, agent: e.agent, reader: e.reader, ns: e.ns,
		l: services.NewLedger(st2, services.LedgerConfig{Approver: policies.New(st2), Limiter: lim2, Now: e.clock.Now})},
		lim: lim2, clock: e.clock}
	l := e.limit(t, perCustomer(record.LimitDeny, 30))

	require.Equal(t, record.OutcomeProceed, e.refund(t, "r1", "c", 10).Outcome)     // read under the lock, then kept
	require.Equal(t, record.OutcomeProceed, e.refund(t, "r2", "c", 10).Outcome)     // judged from the kept row
	require.Equal(t, record.OutcomeProceed, other.refund(t, "r3", "c", 10).Outcome) // the other replica
	require.Equal(t, 30.0, e.used(t, l, "c"))
	// The first replica's kept row says 20: it must not be judged on.
	require.Equal(t, record.OutcomeDenied, e.refund(t, "r4", "c", 10).Outcome)
	require.Equal(t, record.OutcomeDenied, other.refund(t, "r5", "c", 10).Outcome)
	require.Equal(t, 30.0, e.used(t, l, "c"))

	// The window passes: the kept row still says 30, but its charges have
	// left the window.
	e.clock.advance(time.Hour)
	require.Equal(t, record.OutcomeProceed, e.refund(t, "r6", "c", 10).Outcome)
	require.Equal(t, record.OutcomeProceed, e.refund(t, "r7", "c", 10).Outcome)
	require.Equal(t, record.OutcomeProceed, other.refund(t, "r8", "c", 10).Outcome)
	require.Equal(t, record.OutcomeDenied, e.refund(t, "r9", "c", 10).Outcome)
	require.Equal(t, 30.0, e.used(t, l, "c"))

	// A charge that stops counting (its action failed) frees its amount on
	// both replicas.
	a, err := e.l.ActionByKey(context.Background(), e.agent, e.ns, "r6")
	require.NoError(t, err)
	e.send(t, `{"key":"r6","type":"failed","attempt":1,"error":"card declined"}`)
	require.Equal(t, 20.0, e.used(t, l, "c"), "action %s", a.ID)
	require.Equal(t, record.OutcomeProceed, other.refund(t, "r10", "c", 10).Outcome)
	require.Equal(t, record.OutcomeDenied, e.refund(t, "r11", "c", 10).Outcome)
	require.Equal(t, 30.0, e.used(t, l, "c"))
}
