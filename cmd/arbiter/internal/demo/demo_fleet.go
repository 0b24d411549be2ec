package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/arbiter-ledger/arbiter/client"
)

// demoLease is the lease of the fleet's actions: short, so that a crashed
// worker's action times out while the person watching still remembers why.
const demoLease = 2 * time.Second

// demoFleet is a few agents with their tools, working against the demo
// server through the SDK as real agents would: Guard around every side
// effect, workers for operators' decisions. Some of them misbehave on
// purpose so that the triage page has something to show.
type demoFleet struct {
	out io.Writer // the story, one line per event
	log *slog.Logger

	psp    *demoPSP
	mailer *demoMailer
	crm    *demoCRM

	// Agents, one API key each, and the on-call operators' keys the fleet
	// uses to take the decisions a person would.
	refundBot, billingBot, mailBot, crmBot *client.Client
	paymentsOncall, supportOncall          *client.Client

	// transport is the fleet's own, so that its connections can be closed
	// when it stops: a connection dialled for a request that was then
	// cancelled sits idle in the pool, and the server's graceful shutdown
	// waits seconds for such silent new connections.
	transport *http.Transport

	mu  sync.Mutex // serialises the story's lines
	seq atomic.Int64
}

// demoKeys are the API keys the fleet works with.
type demoKeys struct {
	refundBot, billingBot, mailBot, crmBot string
	paymentsOncall, supportOncall          string
}

func newDemoFleet(url string, k demoKeys, out io.Writer, log *slog.Logger) *demoFleet {
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.MaxIdleConnsPerHost = 32 // the agents share it; keep their connections instead of dialling anew
	hc := &http.Client{Transport: transport}
	cl := func(key string) *client.Client {
		return client.New(url, key, client.WithHTTPClient(hc), client.WithUserAgent("arbiter-demo"), client.WithTimeout(10*time.Second),
			client.WithBackoff(50*time.Millisecond, 2*time.Second), client.WithReportBudget(15*time.Second))
	}
	f := &demoFleet{out: out, log: log, transport: transport, psp: newDemoPSP(), mailer: newDemoMailer(), crm: newDemoCRM(),
		refundBot: cl(k.refundBot), billingBot: cl(k.billingBot), mailBot: cl(k.mailBot), crmBot: cl(k.crmBot),
		paymentsOncall: cl(k.paymentsOncall), supportOncall: cl(k.supportOncall)}
	// Order and customer numbers start at a random block, so a second demo
	// on the same --dir makes new actions instead of replaying the old ones.
	f.seq.Store(int64(1000 * (1 + rand.N(89))))
	return f
}

// say tells one line of the story.
func (f *demoFleet) say(who, format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fmt.Fprintf(f.out, "%s  %-15s %s\n", time.Now().Format("15:04:05"), who, fmt.Sprintf(format, args...))
}

func (f *demoFleet) next() int64 { return f.seq.Add(1) }

// run plays the fleet until ctx ends: the workers, the scripted incidents
// (all at once, so the triage page fills within seconds), then a steady
// trickle of ordinary work with the occasional crash.
func (f *demoFleet) run(ctx context.Context) {
	var wg sync.WaitGroup
	for _, w := range f.workers() {
		wg.Go(func() { _ = w.Run(ctx) })
	}
	for _, incident := range []func(context.Context){
		f.ordinaryWork, f.crashes, f.lookups, f.keyReused, f.lateResult, f.staleOutcome, f.compensation, f.approvals,
		f.runawayLoop, f.flakyMailer,
	} {
		wg.Go(func() { incident(ctx) })
	}
	wg.Go(func() { f.trickle(ctx) })
	wg.Wait()
	f.transport.CloseIdleConnections()
}

// workers carry out operators' decisions, the demo's and the person's at
// the dashboard, and look up timed-out refunds and emails before a person
// has to: one per agent key, as each agent's process would run one.
func (f *demoFleet) workers() []*client.Worker {
	opts := func(name string) client.WorkerOptions {
		return client.WorkerOptions{Poll: 500 * time.Millisecond, MaxPoll: 2 * time.Second, Logger: f.log, Agent: name}
	}
	payments := client.NewWorker(f.refundBot, opts("payments-worker"))
	payments.Handle("payments.refund", f.retried("payments-worker", f.refund), nil)
	payments.HandleLookup("payments.refund", f.lookupRefund)
	payments.Handle("payments.charge", f.retried("payments-worker", f.charge), f.undoCharge)
	support := client.NewWorker(f.mailBot, opts("support-worker"))
	support.Handle("email.send", f.retried("support-worker", f.email), nil)
	support.HandleLookup("email.send", f.lookupEmail)
	crm := client.NewWorker(f.crmBot, opts("crm-worker"))
	crm.Handle("crm.set_tier", f.retried("crm-worker", f.setTier), nil)
	crm.Handle("crm.lookup_customer", f.retried("crm-worker", f.lookup), nil)
	return []*client.Worker{payments, support, crm}
}

// retried tells the story of a worker running a retry an operator or a
// lookup asked for.
func (f *demoFleet) retried(who string, fn client.GuardFunc) client.GuardFunc {
	return func(ctx context.Context, a client.Attempt) (any, string, error) {
		res, ref, err := fn(ctx, a)
		if err == nil {
			f.say(who, "%s %s: retried: ran attempt %d with the same key%s", a.Tool, a.Key, a.Number, refText(ref))
		}
		return res, ref, err
	}
}

// The tools' params, as the ledger stores them.
type (
	refundParams struct {
		Order       string `json:"order"`
		Customer    string `json:"customer"`
		AmountCents int    `json:"amount_cents"`
		Currency    string `json:"currency"`
	}
	chargeParams struct {
		Customer    string `json:"customer"`
		AmountCents int    `json:"amount_cents"`
		Plan        string `json:"plan"`
	}
	emailParams struct {
		To       string `json:"to"`
		Template string `json:"template"`
	}
	tierParams struct {
		Customer string `json:"customer"`
		Tier     string `json:"tier,omitempty"`
	}
)

// The tools. Each is a client.GuardFunc, so the first attempt (under Guard)
// and a retry (under a worker) run the same code with the same params.

func (f *demoFleet) refund(ctx context.Context, a client.Attempt) (any, string, error) {
	var p refundParams
	if err := json.Unmarshal(a.Params, &p); err != nil {
		return nil, "", err
	}
	id := f.psp.refund(ctx, a.Key) // the action's key is the provider's idempotency key
	return map[string]any{"refund_id": id, "amount_cents": p.AmountCents}, id, nil
}

func (f *demoFleet) charge(ctx context.Context, a client.Attempt) (any, string, error) {
	id := f.psp.charge(ctx, a.Key)
	return map[string]any{"charge_id": id}, id, nil
}

func (f *demoFleet) undoCharge(ctx context.Context, a client.Attempt) (string, error) {
	id := f.psp.refund(ctx, client.Key("undo", a.Key))
	f.say("payments-worker", "compensated %s: refunded the charge (%s) as the operator asked", a.Key, id)
	return id, nil
}

func (f *demoFleet) email(ctx context.Context, a client.Attempt) (any, string, error) {
	var p emailParams
	if err := json.Unmarshal(a.Params, &p); err != nil {
		return nil, "", err
	}
	id := f.mailer.send(ctx, p.To)
	return map[string]any{"message_id": id}, id, nil
}

func (f *demoFleet) setTier(ctx context.Context, a client.Attempt) (any, string, error) {
	var p tierParams
	if err := json.Unmarshal(a.Params, &p); err != nil {
		return nil, "", err
	}
	f.crm.setTier(ctx, p.Customer, p.Tier)
	return map[string]any{"tier": p.Tier}, "", nil
}

func (f *demoFleet) lookup(ctx context.Context, a client.Attempt) (any, string, error) {
	var p tierParams
	if err := json.Unmarshal(a.Params, &p); err != nil {
		return nil, "", err
	}
	return map[string]any{"customer": p.Customer, "tier": f.crm.tier(ctx, p.Customer)}, "", nil
}

// Specs for the tools, keyed by the business identity of the action.

// refundSpec refunds an order of its own customer (cust-<order>).
func (f *demoFleet) refundSpec(order int64, cents int) client.GuardSpec {
	o := fmt.Sprintf("order-%d", order)
	return client.GuardSpec{Key: client.Key("refund", o), Tool: "payments.refund", Effect: client.EffectKeyed,
		Params:  refundParams{Order: o, Customer: fmt.Sprintf("cust-%d", order), AmountCents: cents, Currency: "EUR"},
		Timeout: demoLease, Reference: o}
}

func (f *demoFleet) chargeSpec(customer int64, plan string) client.GuardSpec {
	c := fmt.Sprintf("cust-%d", customer)
	return client.GuardSpec{Key: client.Key("charge", c, plan, time.Now().UTC().Format("2006-01")), Tool: "payments.charge",
		Effect: client.EffectKeyed, Params: chargeParams{Customer: c, AmountCents: 4900, Plan: plan}, Timeout: demoLease,
		Reference: c}
}

func (f *demoFleet) emailSpec(customer int64, template string) client.GuardSpec {
	c := fmt.Sprintf("cust-%d", customer)
	return client.GuardSpec{Key: client.Key("email", template, c), Tool: "email.send", Effect: client.EffectUnkeyed,
		Params: emailParams{To: c + "@example.com", Template: template}, Timeout: demoLease, Reference: c}
}

func (f *demoFleet) tierSpec(customer int64, tier string) client.GuardSpec {
	c := fmt.Sprintf("cust-%d", customer)
	return client.GuardSpec{Key: client.Key("tier", c, tier), Tool: "crm.set_tier", Effect: client.EffectIdempotent,
		Params: tierParams{Customer: c, Tier: tier}, Timeout: demoLease, Reference: c}
}

// lookupSpec is a read for a support ticket: the ticket is part of its
// identity, so each ticket reads afresh while a repeat for one ticket does
// not.
func (f *demoFleet) lookupSpec(customer, ticket int64) client.GuardSpec {
	c, t := fmt.Sprintf("cust-%d", customer), fmt.Sprintf("ticket-%d", ticket)
	return client.GuardSpec{Key: client.Key("lookup", c, t), Tool: "crm.lookup_customer",
		Effect: client.EffectReadOnly, Params: tierParams{Customer: c}, Timeout: demoLease, Reference: t}
}

// guard runs one action under Guard and tells what came of it.
func (f *demoFleet) guard(ctx context.Context, who string, c *client.Client, spec client.GuardSpec, fn client.GuardFunc) {
	out, err := c.Guard(ctx, spec, fn)
	switch {
	case ctx.Err() != nil:
	case err == nil && out.Ran:
		f.say(who, "%s %s: succeeded%s", spec.Tool, spec.Key, refText(out.ExternalRef))
	case err == nil:
		f.say(who, "%s %s: already done, answered from the ledger (nothing ran)", spec.Tool, spec.Key)
	case out != nil && out.Ran:
		f.say(who, "%s %s: failed: %v", spec.Tool, spec.Key, err)
	default:
		f.say(who, "%s %s: %v", spec.Tool, spec.Key, err)
	}
}

func refText(ref string) string {
	if ref == "" {
		return ""
	}
	return " (" + ref + ")"
}

// crash runs spec as a process that dies right after the side effect,
// before it can report it: its heartbeats stop with it, the lease passes,
// and the action times out with its outcome unknown.
func (f *demoFleet) crash(ctx context.Context, who string, c *client.Client, spec client.GuardSpec, fn client.GuardFunc) {
	process, die := context.WithCancel(ctx)
	defer die()
	var ref string
	_, err := c.Guard(process, spec, func(ctx context.Context, a client.Attempt) (any, string, error) {
		_, ref, _ = fn(ctx, a)
		die()
		<-ctx.Done()
		return nil, "", ctx.Err()
	})
	var unknown *client.OutcomeUnknownError
	if ctx.Err() == nil && errors.As(err, &unknown) {
		f.say(who, "%s %s: CRASHED after the effect%s, before reporting it; the action times out in %s",
			spec.Tool, spec.Key, refText(ref), demoLease)
	}
}

// waitFor polls the action until ok says so, or ctx ends.
func waitFor(ctx context.Context, c *client.Client, id string, ok func(*client.Action) bool) (*client.Action, error) {
	for {
		a, err := c.Action(ctx, id)
		if err == nil && ok(a) {
			return a, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		t := time.NewTimer(100 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}

func statusIs(s client.Status) func(*client.Action) bool {
	return func(a *client.Action) bool { return a.Status == s }
}
