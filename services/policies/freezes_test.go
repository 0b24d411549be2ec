package policies_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/models"
	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
	"github.com/arbiter-ledger/arbiter/services/policies"
	"github.com/arbiter-ledger/arbiter/services/record"
)

// The freezes and breakers suite (SPEC "Limits across actions"): new keys
// held, other intents frozen, outcomes still recorded, a lift that lets go
// and waiting agents that proceed; breakers that trip on a share of
// timeouts, not below min_actions, once.

type freezeEnv struct {
	*limitEnv
	fz *policies.Freezes
	br *policies.Breakers
}

func newFreezeEnv(t *testing.T, st *services.Store) *freezeEnv {
	t.Helper()
	base := newLimitEnv(t, st)
	e := &freezeEnv{limitEnv: base}
	e.l, e.fz, e.br = policies.NewBraked(st, services.LedgerConfig{Approver: base.pol, Limiter: base.lim, Now: base.clock.Now}, nil)
	policies.SetFreezesClock(e.fz, e.br, base.clock.Now)
	return e
}

func (e *freezeEnv) freeze(t *testing.T, tools ...string) *record.Freeze {
	t.Helper()
	f, err := e.fz.Start(context.Background(), e.operator, policies.FreezeInput{Namespace: &e.ns, Tools: &tools,
		Reason: ptr("provider incident")})
	require.NoError(t, err)
	return f
}

func (e *freezeEnv) lift(t *testing.T, f *record.Freeze) *record.Freeze {
	t.Helper()
	f, err := e.fz.Lift(context.Background(), e.operator, f.ID, policies.LiftInput{Reason: ptr("provider is back")})
	require.NoError(t, err)
	return f
}

func (e *freezeEnv) outcome(t *testing.T, key, typ string) services.EntryResult {
	t.Helper()
	extra := ""
	if typ != "succeeded" {
		extra = `,"error":"the provider did not answer"`
	}
	return e.send(t, fmt.Sprintf(`{"key":%q,"type":%q,"attempt":1%s}`, key, typ, extra))
}

func TestFreezeHoldsNewKeysFreezesOtherIntentsAndLiftLetsGo(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newFreezeEnv(t, st)
		ctx := context.Background()
		running := e.intent(t, "running", "mail.send", `{}`)
		require.Equal(t, record.OutcomeProceed, running.Outcome)
		timedOut := e.intent(t, "unknown", "mail.send", `{}`)
		e.outcome(t, "unknown", "outcome_unknown")
		_, _, err := e.l.Decide(ctx, e.operator, timedOut.Action.ID, services.DecisionInput{Decision: record.DecisionRetry,
			Reason: "the mailer lost it", AcknowledgeDuplicateRisk: true})
		require.NoError(t, err)

		f := e.freeze(t, "mail.*")
		require.Equal(t, record.Actor{Kind: record.ActorOperator, Name: e.operator.OwnerEmail, Via: "api_key:ops"}, f.By)
		require.True(t, f.Active())

		held := e.intent(t, "new", "mail.send", `{}`)
		require.Equal(t, record.OutcomePendingApproval, held.Outcome)
		require.Equal(t, record.StatusAwaitingApproval, held.Action.Status)
		require.Equal(t, []record.FreezeRef{{ID: f.ID, Reason: "provider incident"}}, held.Action.Approval.FrozenBy)
		require.Zero(t, held.Action.Approval.Required, "no policy asks for people: only the freeze holds it")
		require.Equal(t, record.OutcomePendingApproval, e.intent(t, "new", "mail.send", `{}`).Outcome, "a retry of the held key waits too")

		other := e.intent(t, "refund", "payments.refund", `{"customer":"c","amount":1}`)
		require.Equal(t, record.OutcomeProceed, other.Outcome, "the freeze covers mail.* only")

		retry := e.intent(t, "unknown", "mail.send", `{}`)
		require.Equal(t, record.OutcomeFrozen, retry.Outcome, "a requested retry does not run while frozen")
		require.Equal(t, services.CodeFrozen, retry.Error.Code)
		require.Contains(t, retry.Error.Message, f.ID)
		require.Equal(t, record.StatusRetryRequested, retry.Action.Status, "nothing changed")

		require.Equal(t, record.OutcomeInProgress, e.intent(t, "running", "mail.send", `{}`).Outcome)
		done := e.outcome(t, "running", "succeeded")
		require.Equal(t, record.OutcomeRecorded, done.Outcome, "work already running is recorded")
		require.Equal(t, record.StatusSucceeded, done.Action.Status)

		lifted := e.lift(t, f)
		require.False(t, lifted.Active())
		require.Equal(t, "provider is back", *lifted.LiftReason)
		stored, err := e.fz.Get(ctx, e.reader, f.ID)
		require.NoError(t, err)
		require.Equal(t, f.By, stored.By, "who started it, and how, is read back as written")
		require.Equal(t, lifted.LiftedBy, stored.LiftedBy)
		require.Equal(t, "api_key:ops", stored.LiftedBy.Via)

		a, err := e.l.Action(ctx, e.reader, held.Action.ID)
		require.NoError(t, err)
		require.Equal(t, record.StatusApproved, a.Status, "the lift approves what only the freeze held")
		require.Empty(t, a.Approval.FrozenBy)
		es, err := e.l.Entries(ctx, e.reader, a.ID)
		require.NoError(t, err)
		last := es[len(es)-1]
		require.Equal(t, record.TypeUnfrozen, last.Type)
		require.Equal(t, record.ActorSystem, last.Actor.Kind)
		require.JSONEq(t, fmt.Sprintf(`{"freeze":{"id":%q,"reason":"provider incident"},"lifted_by":{"kind":"operator","name":%q,"via":"api_key:ops"},
			"reason":"provider is back","frozen_by":[],"approved":true}`, f.ID, e.operator.OwnerEmail), string(last.Payload))

		run := e.intent(t, "new", "mail.send", `{}`)
		require.Equal(t, record.OutcomeProceed, run.Outcome, "the held key runs once lifted")
		require.Equal(t, 1, *run.Attempt)
		require.Equal(t, record.OutcomeProceed, e.intent(t, "unknown", "mail.send", `{}`).Outcome, "and so does the retry")
	})
}

func TestFreezeAndPeopleBothHold(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newFreezeEnv(t, st)
		e.create(t, policies.Input{Name: ptr("every refund"), Tools: &[]string{"payments.refund"}})
		f1, f2 := e.freeze(t, "*"), e.freeze(t, "payments.*")
		held := e.refund(t, "r1", "c", 10)
		require.Equal(t, record.OutcomePendingApproval, held.Outcome)
		require.Equal(t, 1, held.Action.Approval.Required)
		require.Len(t, held.Action.Approval.FrozenBy, 2)

		e.decide(t, held.Action.ID, record.DecisionApprove)
		a, err := e.l.Action(context.Background(), e.reader, held.Action.ID)
		require.NoError(t, err)
		require.Equal(t, record.StatusAwaitingApproval, a.Status, "approved by its person, still frozen")

		e.lift(t, f1)
		a, err = e.l.Action(context.Background(), e.reader, held.Action.ID)
		require.NoError(t, err)
		require.Equal(t, record.StatusAwaitingApproval, a.Status, "one freeze still holds it")
		require.Equal(t, []record.FreezeRef{f2.Ref()}, a.Approval.FrozenBy)

		e.lift(t, f2)
		a, err = e.l.Action(context.Background(), e.reader, held.Action.ID)
		require.NoError(t, err)
		require.Equal(t, record.StatusApproved, a.Status)
	})
}

func TestFreezeLiftWakesAWaitingAgent(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newFreezeEnv(t, st)
		f := e.freeze(t, "*")
		held := e.intent(t, "k", "mail.send", `{}`)
		require.Equal(t, record.OutcomePendingApproval, held.Outcome)
		got := make(chan *record.Action, 1)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		go func() {
			a, err := e.l.AwaitDecision(ctx, e.agent, held.Action.ID)
			if err != nil {
				a = nil
			}
			got <- a
		}()
		time.Sleep(50 * time.Millisecond)
		e.lift(t, f)
		a := <-got
		require.NotNil(t, a)
		require.Equal(t, record.StatusApproved, a.Status)
	})
}

func TestFreezesRefuseBadInput(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newFreezeEnv(t, st)
		ctx := context.Background()
		for _, c := range []struct {
			name string
			p    services.Principal
			in   policies.FreezeInput
			code string
		}{
			{"no namespace", e.operator, policies.FreezeInput{Reason: ptr("x")}, services.CodeInvalid},
			{"no reason", e.operator, policies.FreezeInput{Namespace: &e.ns}, services.CodeInvalid},
			{"blank reason", e.operator, policies.FreezeInput{Namespace: &e.ns, Reason: ptr("  ")}, services.CodeInvalid},
			{"empty tools", e.operator, policies.FreezeInput{Namespace: &e.ns, Tools: &[]string{}, Reason: ptr("x")}, services.CodeInvalid},
			{"a reader", e.reader, policies.FreezeInput{Namespace: &e.ns, Reason: ptr("x")}, services.CodeForbidden},
			{"an agent", e.agent, policies.FreezeInput{Namespace: &e.ns, Reason: ptr("x")}, services.CodeForbidden},
			{"another namespace", e.operator, policies.FreezeInput{Namespace: ptr("elsewhere"), Reason: ptr("x")}, services.CodeNotFound},
			{"no such namespace", admin, policies.FreezeInput{Namespace: ptr("nowhere-at-all"), Reason: ptr("x")}, services.CodeNotFound},
		} {
			_, err := e.fz.Start(ctx, c.p, c.in)
			require.Error(t, err, c.name)
			se, ok := services.AsError(err)
			require.True(t, ok, c.name)
			require.Equal(t, c.code, se.Code, "%s: %v", c.name, err)
		}
		fs, err := e.fz.List(ctx, admin, e.ns, false)
		require.NoError(t, err)
		require.Empty(t, fs, "nothing was written")

		f := e.freeze(t, "*")
		_, err = e.fz.Lift(ctx, e.operator, f.ID, policies.LiftInput{})
		require.ErrorContains(t, err, "reason")
		e.lift(t, f)
		_, err = e.fz.Lift(ctx, e.operator, f.ID, policies.LiftInput{Reason: ptr("again")})
		se, _ := services.AsError(err)
		require.Equal(t, services.CodeConflict, se.Code)
		_, err = e.fz.Lift(ctx, e.reader, f.ID, policies.LiftInput{Reason: ptr("again")})
		se, _ = services.AsError(err)
		require.Equal(t, services.CodeForbidden, se.Code)

		active, err := e.fz.List(ctx, e.reader, e.ns, true)
		require.NoError(t, err)
		require.Empty(t, active)
		all, err := e.fz.List(ctx, e.reader, "", false)
		require.NoError(t, err)
		require.Len(t, all, 1)
	})
}

// mailer sends n first intents of mail.send, every unknown-th one timing
// out and the others succeeding, interleaved.
func (e *freezeEnv) mailer(t *testing.T, prefix string, n, every int) {
	t.Helper()
	for i := range n {
		key := fmt.Sprintf("%s-%d", prefix, i)
		require.Equal(t, record.OutcomeProceed, e.intent(t, key, "mail.send", `{}`).Outcome)
		if every > 0 && i%every == 0 {
			e.outcome(t, key, "outcome_unknown")
		} else {
			e.outcome(t, key, "succeeded")
		}
	}
}

func (e *freezeEnv) breaker(t *testing.T, minActions int) *policies.Breaker {
	t.Helper()
	b, err := e.br.Create(context.Background(), admin, policies.BreakerInput{Name: ptr("flaky mailer"), Namespace: &e.ns,
		Tools: &[]string{"mail.*"}, Window: ptr(300), MinActions: &minActions, MaxUnknownRatio: ptr(0.3)})
	require.NoError(t, err)
	return b
}

func TestBreakerTripsOnAShareOfTimeouts(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newFreezeEnv(t, st)
		ctx := context.Background()
		b := e.breaker(t, 10)
		e.mailer(t, "a", 5, 2) // 3 of 5 time out: too few to judge
		started, err := e.br.Check(ctx)
		require.NoError(t, err)
		require.Empty(t, started, "below min_actions a breaker does not trip")
		e.mailer(t, "b", 5, 5) // 1 more of 5: 4 of 10 timed out, 40%
		e.clock.advance(time.Second)
		started, err = e.br.Check(ctx)
		require.NoError(t, err)
		require.Len(t, started, 1)
		f := started[0]
		require.Equal(t, record.Actor{Kind: record.ActorSystem, Name: "breaker:flaky mailer"}, f.By)
		require.Equal(t, []string{"mail.*"}, f.Tools)
		require.Equal(t, b.ID, *f.BreakerID)
		require.Contains(t, f.Reason, "4 of 10 timed out in the last 300 s")

		again, err := e.br.Check(ctx)
		require.NoError(t, err)
		require.Empty(t, again, "not again while its freeze is active")
		got, err := e.br.Get(ctx, e.reader, b.ID)
		require.NoError(t, err)
		require.Equal(t, 10, got.State.Actions)
		require.Equal(t, 4, got.State.TimedOut)
		require.Equal(t, f.ID, got.State.Freeze.ID)

		require.Equal(t, record.OutcomePendingApproval, e.intent(t, "c-0", "mail.send", `{}`).Outcome, "its freeze holds new mail")

		e.clock.advance(time.Second)
		e.lift(t, f)
		e.clock.advance(time.Second)
		again, err = e.br.Check(ctx)
		require.NoError(t, err)
		require.Empty(t, again, "after a lift it counts only what came since")
		got, err = e.br.Get(ctx, e.reader, b.ID)
		require.NoError(t, err)
		require.Nil(t, got.State.Freeze)
		require.Zero(t, got.State.Actions, "what came since the lift: the action its freeze held, approved but not yet run")
		e.mailer(t, "d", 2, 0)
		got, err = e.br.Get(ctx, e.reader, b.ID)
		require.NoError(t, err)
		require.Equal(t, 2, got.State.Actions)
		require.Zero(t, got.State.TimedOut)
	})
}

func TestBreakerIgnoresRunningActionsAndTripsOnFailures(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newFreezeEnv(t, st)
		ctx := context.Background()
		_, err := e.br.Create(ctx, admin, policies.BreakerInput{Name: ptr("failing refunds"), Namespace: &e.ns,
			Tools: &[]string{"payments.refund"}, MinActions: ptr(4), MaxFailureRatio: ptr(0.5)})
		require.NoError(t, err)
		for i := range 6 {
			e.refund(t, fmt.Sprintf("r%d", i), "c", 1) // running, within their leases
		}
		started, err := e.br.Check(ctx)
		require.NoError(t, err)
		require.Empty(t, started, "actions still running within their lease are not counted")
		for i := range 4 {
			typ := "succeeded"
			if i%2 == 0 {
				typ = "failed"
			}
			e.outcome(t, fmt.Sprintf("r%d", i), typ)
		}
		started, err = e.br.Check(ctx)
		require.NoError(t, err)
		require.Empty(t, started, "2 of 4 failed is not above 0.5")
		e.outcome(t, "r4", "failed")
		started, err = e.br.Check(ctx)
		require.NoError(t, err)
		require.Len(t, started, 1)
		require.Contains(t, started[0].Reason, "3 of 5 failed")
	})
}

func TestBreakersRefuseBadInput(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newFreezeEnv(t, st)
		ctx := context.Background()
		good := func() policies.BreakerInput {
			return policies.BreakerInput{Name: ptr("b"), Namespace: &e.ns, Tools: &[]string{"*"}, MaxUnknownRatio: ptr(0.5)}
		}
		for _, c := range []struct {
			name string
			p    services.Principal
			edit func(*policies.BreakerInput)
			code string
		}{
			{"an operator", e.operator, func(*policies.BreakerInput) {}, services.CodeForbidden},
			{"empty tools", admin, func(in *policies.BreakerInput) { in.Tools = &[]string{} }, services.CodeInvalid},
			{"window 0", admin, func(in *policies.BreakerInput) { in.Window = ptr(0) }, services.CodeInvalidBreaker},
			{"window too long", admin, func(in *policies.BreakerInput) { in.Window = ptr(86401) }, services.CodeInvalidBreaker},
			{"min_actions 0", admin, func(in *policies.BreakerInput) { in.MinActions = ptr(0) }, services.CodeInvalidBreaker},
			{"ratio above 1", admin, func(in *policies.BreakerInput) { in.MaxUnknownRatio = ptr(1.5) }, services.CodeInvalidBreaker},
			{"negative ratio", admin, func(in *policies.BreakerInput) { in.MaxFailureRatio = ptr(-0.1) }, services.CodeInvalidBreaker},
			{"no ratio", admin, func(in *policies.BreakerInput) { in.MaxUnknownRatio = nil }, services.CodeInvalidBreaker},
			{"no such namespace", admin, func(in *policies.BreakerInput) { in.Namespace = ptr("nowhere-at-all") }, services.CodeNotFound},
		} {
			in := good()
			c.edit(&in)
			_, err := e.br.Create(ctx, c.p, in)
			se, ok := services.AsError(err)
			require.True(t, ok, "%s: %v", c.name, err)
			require.Equal(t, c.code, se.Code, "%s: %v", c.name, err)
		}
		bs, err := e.br.List(ctx, admin, e.ns)
		require.NoError(t, err)
		require.Empty(t, bs, "nothing was written")
	})
}

// TestFreezeAlerts: freeze.started and freeze.lifted are written for the
// endpoints that subscribe to them and the namespace, with the freeze as
// data, in the freeze's own transaction.
func TestFreezeAlerts(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newFreezeEnv(t, st)
		now := time.Now()
		for i, ep := range []struct{ events, namespaces string }{
			{`["freeze.started","freeze.lifted"]`, `[]`},
			{`["freeze.started"]`, fmt.Sprintf(`[%q]`, e.ns)},
			{`["action.timed_out"]`, `[]`},
			{`["freeze.started"]`, `["elsewhere"]`},
		} {
			require.NoError(t, st.GormWriter().Create(&models.WebhookEndpoint{ID: fmt.Sprintf("0193a7c2-0000-7000-8000-%012d", seq.Add(1)),
				URL: fmt.Sprintf("https://hooks.example.com/%d", i), EventTypes: ep.events, Namespaces: ep.namespaces, Format: "standard",
				Enabled: true, Secret: "whsec_test", CreatedAt: now, UpdatedAt: now}).Error)
		}
		f := e.freeze(t, "*")
		e.lift(t, f)
		var msgs []models.WebhookMessage
		require.NoError(t, st.Gorm().Where("namespace = ?", e.ns).Order("created_at").Find(&msgs).Error)
		require.Len(t, msgs, 2)
		require.Equal(t, string(record.EventFreezeStarted), msgs[0].EventType)
		require.Equal(t, string(record.EventFreezeLifted), msgs[1].EventType)
		var body services.MessageBody
		require.NoError(t, json.Unmarshal(msgs[1].Payload, &body))
		require.Equal(t, f.ID, body.Data.Freeze.ID)
		require.Equal(t, "provider is back", *body.Data.Freeze.LiftReason)
		for i, want := range []int64{2, 1} {
			var n int64
			require.NoError(t, st.Gorm().Model(&models.WebhookDelivery{}).Where("message_id = ?", msgs[i].ID).Count(&n).Error)
			require.Equal(t, want, n, "deliveries of %s", msgs[i].EventType)
		}
	})
}
