package demo

import (
	"context"
	"errors"
	"time"

	"github.com/arbiter-ledger/arbiter/client"
	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/policies"
)

// demoPolicy is the demo's approval policy: refunds over 1,000.00 EUR wait
// for a person.
const (
	demoPolicyName      = "large refunds"
	demoPolicyCondition = "params.amount_cents > 100000"
)

// demoPolicies creates the demo's approval policy in namespace payments,
// unless a kept --dir has it already.
func demoPolicies(ctx context.Context, st *services.Store) error {
	svc := policies.New(st)
	admin := services.Principal{Kind: "api_key", ID: "demo", Name: "demo", Role: services.RoleAdmin}
	existing, err := svc.List(ctx, admin, "payments")
	if err != nil {
		return err
	}
	for _, p := range existing {
		if p.Name == demoPolicyName {
			return nil
		}
	}
	name, ns, cond := demoPolicyName, "payments", demoPolicyCondition
	_, err = svc.Create(ctx, admin, policies.Input{Name: &name, Namespace: &ns, Tools: &[]string{"payments.refund"},
		Condition: &cond, ExpiresAfter: new(3600), EscalateAfter: new(600)})
	return err
}

// approvals are two large refunds the policy holds: the on-call approves the
// first a few seconds in, while refund-bot waits for the decision; the
// second waits for you on the triage page (approve or reject it there) and
// refund-bot, still waiting, carries out what you decide at once.
func (f *demoFleet) approvals(ctx context.Context) {
	auto := f.refundSpec(f.next(), 180000)
	yours := f.refundSpec(f.next(), 250000)
	for _, s := range []*client.GuardSpec{&auto, &yours} {
		s.ApprovalWait = 10 * time.Minute
	}
	go func() {
		for range 100 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(200 * time.Millisecond):
			}
			if a, err := f.paymentsOncall.ActionByKey(ctx, auto.Key); err == nil && a.Status == client.StatusAwaitingApproval {
				select {
				case <-ctx.Done():
					return
				case <-time.After(3 * time.Second): // long enough to see it waiting on triage
				}
				if _, err := f.paymentsOncall.Decide(ctx, a.ID, client.Decision{Decision: client.DecisionApprove,
					Reason: "customer verified by phone"}); err == nil {
					f.say("payments-oncall", "approved %s (%s): customer verified by phone", auto.Key, euros(180000))
				}
				return
			}
		}
	}()
	go f.waitForApproval(ctx, auto, 180000)
	f.say("demo", "try it: %s asks to refund %s; policy %q holds it for approval: approve or reject it on the triage page",
		yours.Key, euros(250000), demoPolicyName)
	f.waitForApproval(ctx, yours, 250000)
}

// waitForApproval is refund-bot asking for a held refund and waiting for
// the decision.
func (f *demoFleet) waitForApproval(ctx context.Context, spec client.GuardSpec, cents int) {
	f.say("refund-bot", "%s %s for %s: held for approval by policy %q; waiting for a person", spec.Tool, spec.Key,
		euros(cents), demoPolicyName)
	out, err := f.refundBot.Guard(ctx, spec, f.refund)
	var denied *client.DeniedError
	var pending *client.PendingApprovalError
	switch {
	case err == nil && out.Ran:
		f.say("refund-bot", "%s %s: approved, refunded %s (%s)", spec.Tool, spec.Key, euros(cents), out.ExternalRef)
	case errors.As(err, &denied) && denied.Expired:
		f.say("refund-bot", "%s %s: nobody approved it in time: denied, nothing refunded", spec.Tool, spec.Key)
	case errors.As(err, &denied):
		f.say("refund-bot", "%s %s: rejected by %s (%q): nothing refunded", spec.Tool, spec.Key, denied.By, denied.Reason)
	case errors.As(err, &pending), ctx.Err() != nil:
	case err != nil:
		f.say("refund-bot", "%s %s: %v", spec.Tool, spec.Key, err)
	}
}
