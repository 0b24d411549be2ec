// Command refund-agent refunds an order through a payment provider that
// honours idempotency keys, with Arbiter guarding the refund: the intent is
// recorded first, the action's key goes to the provider as its idempotency
// key, and the outcome is recorded after.
//
// With -crash the process "dies" between the refund and the report. The
// program then plays the restarted agent: the same job is held (the outcome
// is unknown, so nothing runs again blindly), and a worker looks before it
// resends: it searches the provider's refunds by the action's key, finds
// the refund, and the ledger confirms the action. Nobody had to decide.
//
// With -crash-before the process dies before the provider got the request.
// The lookup finds nothing; the action is keyed, so the ledger retries it:
// the worker runs attempt 2 with the same key, and the customer is
// refunded once (had the lost request arrived meanwhile, the provider would
// have returned that refund for the key).
//
//	ARBITER_URL=http://127.0.0.1:8080 ARBITER_API_KEY=ak_… go run ./examples/refund-agent -crash
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/arbiter-ledger/arbiter/client"
)

type config struct {
	url, apiKey string
	order       string
	amountCents int
	crash       bool // die after the refund, before reporting it
	crashBefore bool // die before the provider got the request
	lease       time.Duration
}

func main() {
	cfg := config{url: os.Getenv("ARBITER_URL"), apiKey: os.Getenv("ARBITER_API_KEY")}
	flag.StringVar(&cfg.order, "order", "order-8812", "the order to refund")
	flag.IntVar(&cfg.amountCents, "amount", 4200, "the amount to refund, in cents")
	flag.BoolVar(&cfg.crash, "crash", false, "die between the refund and the report, then play the restarted agent")
	flag.BoolVar(&cfg.crashBefore, "crash-before", false, "die before the provider got the refund, then play the restarted agent")
	flag.DurationVar(&cfg.lease, "lease", 5*time.Second, "how long an attempt may run without a heartbeat")
	flag.Parse()
	if cfg.url == "" {
		cfg.url = "http://127.0.0.1:8080"
	}
	if cfg.apiKey == "" {
		log.Fatal("set ARBITER_API_KEY to an agent key: arbiter keys create --namespace payments --name refund-agent --role agent")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg, os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// provider is a fake payment provider that deduplicates by idempotency key,
// as Stripe and Adyen do: a repeat of a key returns the first refund. Its
// refunds can be searched by the key they were made with.
type provider struct {
	byKey map[string]string
	count int
}

func (p *provider) refund(idempotencyKey string) string {
	if id, ok := p.byKey[idempotencyKey]; ok {
		return id
	}
	p.count++
	id := fmt.Sprintf("re_%d", p.count)
	p.byKey[idempotencyKey] = id
	return id
}

// find returns the refund made with idempotencyKey, if any.
func (p *provider) find(idempotencyKey string) (string, bool) {
	id, ok := p.byKey[idempotencyKey]
	return id, ok
}

type refundParams struct {
	Order       string `json:"order"`
	AmountCents int    `json:"amount_cents"`
}

func run(ctx context.Context, cfg config, out io.Writer) error {
	// Short pauses between asks, so the restarted agent notices the held
	// action soon after the lease passes.
	arbiter := client.New(cfg.url, cfg.apiKey, client.WithBackoff(100*time.Millisecond, time.Second))
	psp := &provider{byKey: map[string]string{}}

	// The refund, as the first attempt and any retry run it. The guarded
	// function and the worker run one at a time here, so the provider needs
	// no lock.
	refund := func(ctx context.Context, a client.Attempt) (any, string, error) {
		var p refundParams
		if err := json.Unmarshal(a.Params, &p); err != nil {
			return nil, "", err
		}
		id := psp.refund(a.Key) // the action's key is the provider's idempotency key
		return map[string]any{"refund_id": id, "amount_cents": p.AmountCents}, id, nil
	}
	spec := client.GuardSpec{
		Key:       client.Key("refund", cfg.order), // the business identity, the same on every run
		Tool:      "payments.refund",
		Effect:    client.EffectKeyed, // the provider deduplicates by key: a retry is safe
		Params:    refundParams{Order: cfg.order, AmountCents: cfg.amountCents},
		Timeout:   cfg.lease,
		Reference: cfg.order,
	}

	// How the worker finds out what a timed-out attempt did: search the
	// provider's refunds by the key the attempt sent.
	lookup := func(ctx context.Context, q client.LookupRequest) (client.LookupAnswer, error) {
		id, ok := psp.find(q.Key)
		if !ok {
			fmt.Fprintf(out, "lookup: the provider has no refund for key %s\n", q.Key)
			return client.LookupAnswer{Answer: client.AnswerNotHappened, Evidence: map[string]any{"idempotency_key": q.Key, "refunds": []string{}}}, nil
		}
		fmt.Fprintf(out, "lookup: the provider has refund %s for key %s\n", id, q.Key)
		return client.LookupAnswer{Answer: client.AnswerHappened, ExternalRef: id, Result: map[string]any{"refund_id": id},
			Evidence: map[string]any{"idempotency_key": q.Key, "refunds": []string{id}}}, nil
	}

	if cfg.crash || cfg.crashBefore {
		process, die := context.WithCancel(ctx)
		_, err := arbiter.Guard(process, spec, func(ctx context.Context, a client.Attempt) (any, string, error) {
			if cfg.crashBefore {
				fmt.Fprintf(out, "attempt %d: the process dies before the provider gets the refund\n", a.Number)
			} else {
				_, id, _ := refund(ctx, a)
				fmt.Fprintf(out, "attempt %d: the provider refunded %s; now the process dies before reporting it\n", a.Number, id)
			}
			die()
			<-ctx.Done()
			return nil, "", ctx.Err()
		})
		die()
		var unknown *client.OutcomeUnknownError
		if !errors.As(err, &unknown) {
			return fmt.Errorf("the simulated crash: %w", err)
		}
		fmt.Fprintf(out, "restarting: the same job runs again (the action times out in %s)\n", cfg.lease)
		spec.Wait = cfg.lease + 10*time.Second // for the lease to pass and the sweeper to notice
	}

	res, err := arbiter.Guard(ctx, spec, refund)
	var held *client.HeldError
	switch {
	case errors.As(err, &held):
		fmt.Fprintf(out, "held: the outcome of attempt %d is unknown, so nothing runs again blindly; the worker looks it up at the provider\n",
			held.Attempt)
		fmt.Fprintf(out, "  (if the lookup cannot tell, an operator decides: %s)\n", held.URL)
		return resolve(ctx, arbiter, held.ActionID, refund, lookup, psp, out)
	case err != nil:
		return err
	case res.Ran:
		fmt.Fprintf(out, "refunded %s, recorded as attempt %d\n", res.ExternalRef, res.Attempt)
	default:
		fmt.Fprintf(out, "already refunded (%s): answered from the ledger, nothing ran\n", res.ExternalRef)
	}
	// A second run of the same job, as after a restart: the ledger answers.
	again, err := arbiter.Guard(ctx, spec, refund)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "the same job again: %s from the ledger (ran: %v); the provider created %d refund(s)\n",
		again.ExternalRef, again.Ran, psp.count)
	return nil
}

// resolve runs a worker, as the agent's process would, until the action is
// settled: by the worker's lookup, or by an operator's decision it carries
// out.
func resolve(ctx context.Context, arbiter *client.Client, id string, refund client.GuardFunc, lookup client.LookupFunc,
	psp *provider, out io.Writer) error {
	w := client.NewWorker(arbiter, client.WorkerOptions{Logger: slog.New(slog.NewTextHandler(out, nil))})
	w.Handle("payments.refund", refund, nil)
	w.HandleLookup("payments.refund", lookup)
	for {
		a, err := arbiter.Action(ctx, id)
		if err != nil {
			return err
		}
		switch a.Status {
		case client.StatusTimedOut, client.StatusRetryRequested, client.StatusInProgress:
		default:
			fmt.Fprintf(out, "settled: the action is %s (attempt %d); the provider created %d refund(s) for %s\n",
				a.Status, a.Attempt, psp.count, a.Key)
			return nil
		}
		if _, err := w.RunOnce(ctx); err != nil && !client.IsUnavailable(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}
