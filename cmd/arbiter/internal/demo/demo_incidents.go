package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/arbiter-ledger/arbiter/client"
)

// The scripted part of the demo: each incident is one story the triage page
// should tell a new user within seconds of starting.

// ordinaryWork is what most of the day looks like: effects that happen and
// are recorded, a final failure, a transient one the agent retries itself,
// and a repeat of a finished job answered from the ledger.
func (f *demoFleet) ordinaryWork(ctx context.Context) {
	first := f.refundSpec(f.next(), 1999)
	f.guard(ctx, "refund-bot", f.refundBot, first, f.refund)
	f.guard(ctx, "refund-bot", f.refundBot, f.refundSpec(f.next(), 4500), f.refund)
	f.guard(ctx, "billing-bot", f.billingBot, f.chargeSpec(f.next(), "pro"), f.charge)
	f.guard(ctx, "mail-bot", f.mailBot, f.emailSpec(f.next(), "order-shipped"), f.email)
	f.guard(ctx, "crm-bot", f.crmBot, f.tierSpec(f.next(), "gold"), f.setTier)
	f.guard(ctx, "crm-bot", f.crmBot, f.lookupSpec(f.next(), f.next()), f.lookup)

	f.guard(ctx, "refund-bot", f.refundBot, f.refundSpec(f.next(), 8900),
		func(context.Context, client.Attempt) (any, string, error) {
			return nil, "", &client.NotDone{Err: errCardDeclined}
		})

	invoice := f.emailSpec(f.next(), "invoice")
	f.guard(ctx, "mail-bot", f.mailBot, invoice,
		func(context.Context, client.Attempt) (any, string, error) {
			return nil, "", client.Retriable(errMailerBusy)
		})
	f.guard(ctx, "mail-bot", f.mailBot, invoice, f.email) // attempt 2: a retriable failure may run again

	f.guard(ctx, "refund-bot", f.refundBot, first, f.refund) // the same job run twice: nothing is refunded twice
}

// crashes are workers that die between the effect and the report where no
// lookup can tell what happened: the mailer cannot be searched (its lookup
// answers unknown) and the CRM's worker has no lookup. Each action times
// out and waits for a person. (The refunds' crashes, which the PSP's lookup
// resolves, are in lookups.)
func (f *demoFleet) crashes(ctx context.Context) {
	var wg sync.WaitGroup
	email := f.emailSpec(f.next(), "welcome")
	wg.Go(func() { f.crash(ctx, "mail-bot", f.mailBot, email, f.email) })
	tier := f.tierSpec(f.next(), "platinum")
	wg.Go(func() { f.crash(ctx, "crm-bot", f.crmBot, tier, f.setTier) })
	wg.Wait()
	if ctx.Err() != nil {
		return
	}
	f.say("demo", "try it: retry %s on the dashboard; the mailer has no keys, so Arbiter asks you to accept the duplicate risk", email.Key)
	f.say("demo", "try it: retry %s; setting a tier is idempotent, so a retry is safe", tier.Key)
}

// keyReused is a second run that offers other params under a finished
// action's key: refused, nothing happens, and the offer is kept for people.
func (f *demoFleet) keyReused(ctx context.Context) {
	spec := f.refundSpec(f.next(), 2500)
	f.guard(ctx, "refund-bot", f.refundBot, spec, f.refund)
	bad := spec
	p := spec.Params.(refundParams)
	p.AmountCents *= 10
	bad.Params = p
	_, err := f.refundBot.Guard(ctx, bad, f.refund)
	if client.IsCode(err, "key_reused") {
		f.say("refund-bot", "%s %s: a buggy run asked for %s under the key of a %s refund: refused (key_reused), nothing refunded",
			spec.Tool, spec.Key, euros(p.AmountCents), euros(p.AmountCents/10))
	}
}

func euros(cents int) string { return fmt.Sprintf("%d.%02d EUR", cents/100, cents%100) }

// lateResult is an agent that stalls after the effect (a long pause, a
// partition) and reports after its lease passed: the outcome is recorded as
// late and resolves the timed-out action.
func (f *demoFleet) lateResult(ctx context.Context) {
	spec := f.chargeSpec(f.next(), "team")
	id, attempt, ok := f.intent(ctx, "billing-bot", f.billingBot, spec)
	if !ok {
		return
	}
	charge := f.psp.charge(ctx, spec.Key)
	f.say("billing-bot", "%s %s: charged (%s), then stalled before reporting it", spec.Tool, spec.Key, charge)
	if _, err := waitFor(ctx, f.billingBot, id, statusIs(client.StatusTimedOut)); err != nil {
		return
	}
	res, err := f.billingBot.Submit(ctx, client.Entry{Key: spec.Key, Type: client.TypeSucceeded, Attempt: &attempt,
		ExternalRef: &charge, Result: []byte(fmt.Sprintf(`{"charge_id":%q}`, charge))})
	if err == nil && res.Action != nil {
		f.say("billing-bot", "%s %s: reported after the lease passed: a late result, the action is %s", spec.Tool, spec.Key, res.Action.Status)
	}
}

// staleOutcome is the dangerous one: an email whose worker stalled, an
// operator who retried it (accepting the duplicate risk), the retry sent,
// and then the first attempt's report arriving. The customer got two.
func (f *demoFleet) staleOutcome(ctx context.Context) {
	spec := f.emailSpec(f.next(), "password-reset")
	id, attempt, ok := f.intent(ctx, "mail-bot", f.mailBot, spec)
	if !ok {
		return
	}
	p := spec.Params.(emailParams)
	msg := f.mailer.send(ctx, p.To)
	f.say("mail-bot", "%s %s: sent (%s), then stalled before reporting it", spec.Tool, spec.Key, msg)
	// The on-call looks once the worker's lookup has answered (unknown: the
	// mailer cannot be searched).
	a, err := waitFor(ctx, f.mailBot, id, func(a *client.Action) bool { return a.Status == client.StatusTimedOut && lookedUp(a) })
	if err != nil {
		return
	}
	_, err = f.supportOncall.Decide(ctx, id, client.Decision{Decision: client.DecisionRetry, ExpectedVersion: &a.Version,
		Reason: "customer is locked out and says no reset email arrived", AcknowledgeDuplicateRisk: true})
	if err != nil {
		f.say("support-oncall", "%s %s: could not retry: %v", spec.Tool, spec.Key, err)
		return
	}
	f.say("support-oncall", "%s %s: retry, accepting the duplicate risk", spec.Tool, spec.Key)
	retried := func(a *client.Action) bool { return a.Attempt > attempt && a.Status != client.StatusInProgress }
	if _, err := waitFor(ctx, f.mailBot, id, retried); err != nil {
		return
	}
	_, err = f.mailBot.Submit(ctx, client.Entry{Key: spec.Key, Type: client.TypeSucceeded, Attempt: &attempt, ExternalRef: &msg})
	if client.IsCode(err, "stale_attempt") {
		f.say("mail-bot", "%s %s: attempt %d reported after the retry ran: a stale outcome, the customer got %d emails",
			spec.Tool, spec.Key, attempt, f.mailer.count(p.To))
	}
}

// compensation is a charge an operator asks to undo; the worker refunds it.
func (f *demoFleet) compensation(ctx context.Context) {
	spec := f.chargeSpec(f.next(), "pro")
	out, err := f.billingBot.Guard(ctx, spec, f.charge)
	if err != nil || out.Action == nil {
		return
	}
	f.say("billing-bot", "%s %s: succeeded%s", spec.Tool, spec.Key, refText(out.ExternalRef))
	_, err = f.paymentsOncall.Decide(ctx, out.Action.ID, client.Decision{Decision: client.DecisionCompensate,
		Reason: "customer was charged for a plan they cancelled; refund it", ExpectedVersion: &out.Action.Version})
	if err != nil {
		f.say("payments-oncall", "%s %s: could not ask for compensation: %v", spec.Tool, spec.Key, err)
		return
	}
	f.say("payments-oncall", "%s %s: compensate (the worker will refund the charge)", spec.Tool, spec.Key)
}

// intent records an intent by hand, without Guard, for the agents that are
// about to misbehave in ways Guard would not.
func (f *demoFleet) intent(ctx context.Context, who string, c *client.Client, spec client.GuardSpec) (id string, attempt int, ok bool) {
	params, err := json.Marshal(spec.Params)
	if err != nil {
		return "", 0, false
	}
	res, err := c.Submit(ctx, client.Entry{Key: spec.Key, Type: client.TypeIntent, Tool: &spec.Tool, Effect: &spec.Effect,
		Params: params, Timeout: client.Ptr(spec.Timeout.Seconds()), Reference: &spec.Reference})
	if err != nil || res.Outcome != client.OutcomeProceed {
		if ctx.Err() == nil {
			f.say(who, "%s %s: intent not granted: %v", spec.Tool, spec.Key, err)
		}
		return "", 0, false
	}
	return res.Action.ID, res.AttemptNumber(), true
}

// trickle is ordinary traffic until ctx ends, with the occasional crash so
// the queue keeps moving.
func (f *demoFleet) trickle(ctx context.Context) {
	for {
		t := time.NewTimer(time.Second + rand.N(1500*time.Millisecond))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		n := f.next()
		switch r := rand.N(100); {
		case r < 35:
			f.guard(ctx, "refund-bot", f.refundBot, f.refundSpec(n, 500+rand.N(20000)), f.refund)
		case r < 50:
			f.guard(ctx, "mail-bot", f.mailBot, f.emailSpec(n, "order-shipped"), f.email)
		case r < 62:
			f.guard(ctx, "crm-bot", f.crmBot, f.tierSpec(n, []string{"silver", "gold"}[rand.N(2)]), f.setTier)
		case r < 75:
			f.guard(ctx, "crm-bot", f.crmBot, f.lookupSpec(n, f.next()), f.lookup)
		case r < 85:
			f.guard(ctx, "billing-bot", f.billingBot, f.chargeSpec(n, "pro"), f.charge)
		case r < 90:
			f.guard(ctx, "refund-bot", f.refundBot, f.refundSpec(n, 8900),
				func(context.Context, client.Attempt) (any, string, error) {
					return nil, "", &client.NotDone{Err: errCardDeclined}
				})
		case r < 95:
			f.crash(ctx, "refund-bot", f.refundBot, f.refundSpec(n, 500+rand.N(20000)), f.refund)
		default:
			f.crash(ctx, "mail-bot", f.mailBot, f.emailSpec(n, "order-shipped"), f.email)
		}
	}
}
