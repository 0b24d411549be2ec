package demo

import (
	"context"
	"errors"
	"time"

	"github.com/arbiter-ledger/arbiter/client"
)

// Look before you resend, in the demo: the fleet's workers have lookups for
// the tools whose downstream can be asked what happened. The payment
// provider can be searched by idempotency key, so a timed-out refund is
// confirmed when the refund is there and retried with its key when it is
// not; the mailer cannot be searched, so its lookup answers unknown and the
// email waits for a person with that answer shown.

// demoKeyTTL is how long the demo's forgetful PSP honours a key: short, so
// that the story of a key that outlived it plays within seconds (Stripe's
// is 24 hours).
const demoKeyTTL = time.Second

// lookups are refunds whose workers crashed, each resolved differently by
// the lookup at the PSP: found (confirmed), not found (retried with the
// key: one refund), and not found under a key the PSP no longer honours
// (a retry might refund twice, so a person decides).
func (f *demoFleet) lookups(ctx context.Context) {
	found := f.refundSpec(f.next(), 3100)
	lost := f.refundSpec(f.next(), 2700)
	forgotten := f.refundSpec(f.next(), 5200)
	forgotten.KeyTTL = demoKeyTTL
	f.crash(ctx, "refund-bot", f.refundBot, found, f.refund)
	f.crashBefore(ctx, "refund-bot", f.refundBot, lost)
	f.crashBefore(ctx, "refund-bot", f.refundBot, forgotten)
	a, err := f.refundBot.ActionByKey(ctx, forgotten.Key)
	if err != nil {
		return
	}
	if a, err := waitFor(ctx, f.refundBot, a.ID, lookedUp); err == nil && a.Status == client.StatusTimedOut {
		f.say("demo", "%s %s: the PSP honours keys for %s here (Stripe: 24 h), so its not_happened no longer makes a retry "+
			"safe: it waits for you on the triage page", forgotten.Tool, forgotten.Key, demoKeyTTL)
	}
}

// lookedUp is true once the action has a lookup's answer for its attempt,
// or has moved on.
func lookedUp(a *client.Action) bool {
	rc := a.Reconciliation
	return a.Status != client.StatusTimedOut && a.Status != client.StatusInProgress ||
		rc != nil && rc.LastLookup != nil && rc.LastLookup.Attempt == a.Attempt
}

// crashBefore runs spec as a process that dies before its request reaches
// the downstream: nothing happened, but nobody knows that yet.
func (f *demoFleet) crashBefore(ctx context.Context, who string, c *client.Client, spec client.GuardSpec) {
	process, die := context.WithCancel(ctx)
	defer die()
	_, err := c.Guard(process, spec, func(ctx context.Context, a client.Attempt) (any, string, error) {
		die()
		<-ctx.Done()
		return nil, "", ctx.Err()
	})
	var unknown *client.OutcomeUnknownError
	if ctx.Err() == nil && errors.As(err, &unknown) {
		f.say(who, "%s %s: CRASHED before the request reached the provider; the action times out in %s",
			spec.Tool, spec.Key, demoLease)
	}
}

// lookupRefund searches the PSP's refunds by the key the attempt sent.
func (f *demoFleet) lookupRefund(ctx context.Context, q client.LookupRequest) (client.LookupAnswer, error) {
	id, ok := f.psp.find(ctx, q.Key)
	if !ok {
		f.say("payments-worker", "%s %s: looked up attempt %d at the PSP by its key: no refund (not_happened)", q.Tool, q.Key, q.Attempt)
		return client.LookupAnswer{Answer: client.AnswerNotHappened,
			Evidence: map[string]any{"idempotency_key": q.Key, "refunds": []string{}}}, nil
	}
	f.say("payments-worker", "%s %s: looked up attempt %d at the PSP by its key: found %s (happened), the ledger confirms it",
		q.Tool, q.Key, q.Attempt, id)
	return client.LookupAnswer{Answer: client.AnswerHappened, ExternalRef: id, Result: map[string]any{"refund_id": id},
		Evidence: map[string]any{"idempotency_key": q.Key, "refunds": []string{id}}}, nil
}

// lookupEmail can only say that the mailer cannot be searched.
func (f *demoFleet) lookupEmail(_ context.Context, q client.LookupRequest) (client.LookupAnswer, error) {
	f.say("support-worker", "%s %s: the mailer cannot be searched: the lookup answers unknown, and the email waits for you",
		q.Tool, q.Key)
	return client.LookupAnswer{Answer: client.AnswerUnknown,
		Evidence: "the mailer has no API to search sent messages; its delivery log is in the provider's dashboard"}, nil
}
