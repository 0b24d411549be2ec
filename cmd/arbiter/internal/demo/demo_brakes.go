package demo

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/arbiter-ledger/arbiter/client"
	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/policies"
)

// The demo's limits across actions: a daily refund budget per customer in
// payments, and a breaker on the mailer in support.
const (
	demoBudgetName   = "refunds per customer"
	demoBudgetMax    = 3000.0 // EUR a day; the large refunds the policy holds fit in it
	demoBreakerName  = "mailer"
	demoBreakerRatio = 0.3
	demoBreakerMin   = 10
	demoBreakerSpan  = 30 // seconds: the trickle's occasional crash never makes 10 emails in it
)

// demoBrakes creates the budget and the breaker, unless a kept --dir has
// them already.
func demoBrakes(ctx context.Context, st *services.Store) error {
	admin := services.Principal{Kind: "api_key", ID: "demo", Name: "demo", Role: services.RoleAdmin}
	limits := policies.NewLimits(st)
	have, err := limits.List(ctx, admin, "payments")
	if err != nil {
		return err
	}
	if !hasName(have, func(l *policies.Limit) string { return l.Name }, demoBudgetName) {
		_, err = limits.Create(ctx, admin, policies.LimitInput{Name: new(demoBudgetName), Namespace: new("payments"),
			Tools: &[]string{"payments.refund"}, Amount: new("double(params.amount_cents) / 100.0"),
			GroupBy: new("params.customer"), Window: new(86400), Max: new(demoBudgetMax), Over: new("deny")})
		if err != nil {
			return err
		}
	}
	breakers := policies.NewBreakers(st, policies.NewFreezes(st, policies.FreezesConfig{}))
	bs, err := breakers.List(ctx, admin, "support")
	if err != nil {
		return err
	}
	if hasName(bs, func(b *policies.Breaker) string { return b.Name }, demoBreakerName) {
		return nil
	}
	_, err = breakers.Create(ctx, admin, policies.BreakerInput{Name: new(demoBreakerName), Namespace: new("support"),
		Tools: &[]string{"email.send"}, Window: new(demoBreakerSpan), MinActions: new(demoBreakerMin),
		MaxUnknownRatio: new(demoBreakerRatio), Enabled: new(true)})
	return err
}

func hasName[T any](rules []*T, name func(*T) string, want string) bool {
	for _, r := range rules {
		if name(r) == want {
			return true
		}
	}
	return false
}

// runawayLoop is refund-bot stuck in a loop: it refunds the same customer
// 250.00 EUR on every pass, under a new key each time (the bug: the pass
// number is part of its identity), so no idempotency key can stop it. The
// customer's daily budget does: twelve refunds use its 3000.00 EUR, and the
// thirteenth is denied before anything runs.
func (f *demoFleet) runawayLoop(ctx context.Context) {
	if !sleep(ctx, 2*time.Second) {
		return
	}
	order := f.next()
	o, c := fmt.Sprintf("order-%d", order), fmt.Sprintf("cust-%d", order)
	f.say("refund-bot", "payments.refund: a loop refunds %s to %s on every pass, under a new key each time", euros(25000), c)
	for pass := 1; pass <= 40; pass++ {
		spec := client.GuardSpec{Key: client.Key("refund", o, fmt.Sprint(pass)), Tool: "payments.refund",
			Effect: client.EffectKeyed, Params: refundParams{Order: o, Customer: c, AmountCents: 25000, Currency: "EUR"},
			Timeout: demoLease, Reference: o}
		_, err := f.refundBot.Guard(ctx, spec, f.refund)
		var over *client.LimitExceededError
		switch {
		case ctx.Err() != nil:
			return
		case errors.As(err, &over):
			l := over.Limits[0]
			f.say("refund-bot", "%s %s: denied by limit %q (%.2f of %.2f EUR used, %.2f more would exceed it): nothing refunded; the loop stops after %d refunds",
				spec.Tool, spec.Key, l.Name, l.Used, l.Max, l.Amount, pass-1)
			f.say("demo", "see it on the Limits page: %s's bar is full; every other customer's refunds go on", c)
			return
		case err != nil:
			f.say("refund-bot", "%s %s: %v", spec.Tool, spec.Key, err)
			return
		}
	}
}

// flakyMailer is the mailer falling over: it stops answering every other
// message, so mail-bot cannot tell whether they went out (outcome unknown).
// Breaker "mailer" trips on the share of unknown outcomes and freezes
// email.send: new emails wait, held by the freeze, until the on-call person
// lifts it; then they go out.
func (f *demoFleet) flakyMailer(ctx context.Context) {
	if !sleep(ctx, 10*time.Second) {
		return
	}
	unknown, sent := 0, 0
	for i := range 12 {
		spec := f.emailSpec(f.next(), "weekly-digest")
		fn := f.email
		if i%2 == 0 {
			fn = func(context.Context, client.Attempt) (any, string, error) {
				return nil, "", errMailerSilent
			}
		}
		_, err := f.mailBot.Guard(ctx, spec, fn)
		var lost *client.OutcomeUnknownError
		switch {
		case ctx.Err() != nil:
			return
		case errors.As(err, &lost):
			unknown++
		case err == nil:
			sent++
		}
	}
	f.say("mail-bot", "email.send: the mailer did not answer for %d of %d weekly digests (outcome unknown); %d went out",
		unknown, unknown+sent, sent)

	var freeze *client.Freeze
	for deadline := time.Now().Add(5 * time.Second); freeze == nil && time.Now().Before(deadline); {
		if !sleep(ctx, 200*time.Millisecond) {
			return
		}
		fs, err := f.supportOncall.Freezes(ctx, client.FreezeFilter{Namespace: "support", Active: true})
		for i := range fs {
			if err == nil && fs[i].By.Name == "breaker:"+demoBreakerName {
				freeze = &fs[i]
			}
		}
	}
	if freeze == nil {
		f.say("demo", "breaker %q did not trip", demoBreakerName)
		return
	}
	f.say("arbiter", "breaker %q tripped: %s; email.send is frozen (%s)", demoBreakerName, freeze.Reason, freeze.ID)
	f.say("demo", "see it on the Freezes page; new emails wait on triage, frozen by the breaker")

	done := make(chan struct{}, 2)
	for range 2 {
		spec := f.emailSpec(f.next(), "order-shipped")
		spec.ApprovalWait = time.Minute
		go func() {
			defer func() { done <- struct{}{} }()
			f.say("mail-bot", "%s %s: asks to send; email.send is frozen, so it waits for the lift", spec.Tool, spec.Key)
			out, err := f.mailBot.Guard(ctx, spec, f.email)
			switch {
			case ctx.Err() != nil:
			case err == nil && out.Ran:
				f.say("mail-bot", "%s %s: the freeze is lifted: sent%s", spec.Tool, spec.Key, refText(out.ExternalRef))
			case err != nil:
				f.say("mail-bot", "%s %s: %v", spec.Tool, spec.Key, err)
			}
		}()
	}
	if !sleep(ctx, 6*time.Second) {
		return
	}
	const why = "the mail provider fixed its relay"
	if _, err := f.supportOncall.LiftFreeze(ctx, freeze.ID, why); err != nil {
		if ctx.Err() == nil {
			f.say("support-oncall", "could not lift freeze %s: %v", freeze.ID, err)
		}
		return
	}
	f.say("support-oncall", "lifted the freeze of email.send: %s", why)
	for range 2 {
		select {
		case <-ctx.Done():
			return
		case <-done:
		}
	}
	f.say("demo", "the digests whose outcome is unknown wait on triage: the mailer cannot be searched, so a person decides")
}

// errMailerSilent is a mailer that took the message and never answered: it
// may have sent it.
var errMailerSilent = errors.New("the mail relay did not answer within 2s")

// sleep waits d, or until ctx ends (false).
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
