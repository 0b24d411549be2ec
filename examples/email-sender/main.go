// Command email-sender sends a customer an email through a provider that
// has no idempotency keys, with Arbiter guarding the send. The effect class
// is unkeyed: Arbiter cannot make a repeat safe, only make sure that nobody
// repeats it without deciding to.
//
// With -crash the process "dies" between the send and the report. The
// program then plays the restarted agent: the same job is held (was the
// email sent? nobody knows). The worker has a lookup for the tool, but the
// provider cannot be searched, so all it can answer is unknown: the ledger
// keeps that answer for the operator, the worker does not ask again, and it
// waits for the operator's decision. Confirming it (the provider's log
// shows the message) settles it with one email; retrying it is refused
// until the operator acknowledges the duplicate risk, and then the customer
// gets a second email, the risk they accepted.
//
//	ARBITER_URL=http://127.0.0.1:8080 ARBITER_API_KEY=ak_… go run ./examples/email-sender -crash
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
	customer    string
	template    string
	crash       bool
	lease       time.Duration
}

func main() {
	cfg := config{url: os.Getenv("ARBITER_URL"), apiKey: os.Getenv("ARBITER_API_KEY")}
	flag.StringVar(&cfg.customer, "customer", "cust-42", "the customer to write to")
	flag.StringVar(&cfg.template, "template", "welcome", "the email to send")
	flag.BoolVar(&cfg.crash, "crash", false, "die between the send and the report, then play the restarted agent")
	flag.DurationVar(&cfg.lease, "lease", 5*time.Second, "how long an attempt may run without a heartbeat")
	flag.Parse()
	if cfg.url == "" {
		cfg.url = "http://127.0.0.1:8080"
	}
	if cfg.apiKey == "" {
		log.Fatal("set ARBITER_API_KEY to an agent key: arbiter keys create --namespace support --name email-sender --role agent")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg, os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// provider is a fake email provider without idempotency keys: every call
// sends, so a retry after a lost answer sends twice.
type provider struct {
	sent []string
}

func (p *provider) send(to, template string) string {
	p.sent = append(p.sent, to+" "+template)
	return fmt.Sprintf("msg_%d", len(p.sent))
}

type emailParams struct {
	To       string `json:"to"`
	Template string `json:"template"`
}

func run(ctx context.Context, cfg config, out io.Writer) error {
	arbiter := client.New(cfg.url, cfg.apiKey, client.WithBackoff(100*time.Millisecond, time.Second))
	mail := &provider{}

	send := func(ctx context.Context, a client.Attempt) (any, string, error) {
		var p emailParams
		if err := json.Unmarshal(a.Params, &p); err != nil {
			return nil, "", err
		}
		id := mail.send(p.To, p.Template) // nothing to pass the key to
		return map[string]string{"message_id": id}, id, nil
	}
	spec := client.GuardSpec{
		// Which email to whom: a customer gets each kind once.
		Key:       client.Key("email", cfg.template, cfg.customer),
		Tool:      "email.send",
		Effect:    client.EffectUnkeyed, // the provider does not deduplicate
		Params:    emailParams{To: cfg.customer + "@example.com", Template: cfg.template},
		Timeout:   cfg.lease,
		Reference: cfg.customer,
	}

	// The provider has no API to search what it sent: a lookup can only
	// say so. Saying it is still worth it: the operator sees that the agent
	// could not tell, and why.
	lookup := func(ctx context.Context, q client.LookupRequest) (client.LookupAnswer, error) {
		fmt.Fprintf(out, "lookup: the provider cannot be searched; %s attempt %d stays unknown\n", q.Key, q.Attempt)
		return client.LookupAnswer{Answer: client.AnswerUnknown,
			Evidence: "the email provider has no API to search sent messages; check its dashboard or ask the customer"}, nil
	}

	if cfg.crash {
		process, die := context.WithCancel(ctx)
		_, err := arbiter.Guard(process, spec, func(ctx context.Context, a client.Attempt) (any, string, error) {
			_, id, _ := send(ctx, a)
			fmt.Fprintf(out, "attempt %d: the provider sent %s; now the process dies before reporting it\n", a.Number, id)
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
		spec.Wait = cfg.lease + 10*time.Second
	}

	res, err := arbiter.Guard(ctx, spec, send)
	var held *client.HeldError
	switch {
	case errors.As(err, &held):
		fmt.Fprintf(out, "held: did attempt %d send the email? Nobody knows, so nothing is sent until an operator decides:\n", held.Attempt)
		fmt.Fprintf(out, "  %s\n", held.URL)
		fmt.Fprintf(out, "  the provider's log shows it:  arbiter decide %s confirm --reason \"…\"\n", held.ActionID)
		fmt.Fprintf(out, "  send it (maybe) again:        arbiter decide %s retry --acknowledge-duplicate-risk --reason \"…\"\n", held.ActionID)
		return resolve(ctx, arbiter, held.ActionID, send, lookup, mail, out)
	case err != nil:
		return err
	case res.Ran:
		fmt.Fprintf(out, "sent %s, recorded as attempt %d\n", res.ExternalRef, res.Attempt)
	default:
		fmt.Fprintf(out, "already sent (%s): answered from the ledger, nothing sent\n", res.ExternalRef)
	}
	return nil
}

// resolve runs a worker, as the agent's process would, until an operator
// has decided and the action is settled.
func resolve(ctx context.Context, arbiter *client.Client, id string, send client.GuardFunc, lookup client.LookupFunc,
	mail *provider, out io.Writer) error {
	w := client.NewWorker(arbiter, client.WorkerOptions{Logger: slog.New(slog.NewTextHandler(out, nil))})
	w.Handle("email.send", send, nil)
	w.HandleLookup("email.send", lookup)
	for {
		a, err := arbiter.Action(ctx, id)
		if err != nil {
			return err
		}
		switch a.Status {
		case client.StatusTimedOut, client.StatusRetryRequested, client.StatusInProgress:
		default:
			fmt.Fprintf(out, "settled: the action is %s (attempt %d); the provider sent %d email(s): %v\n",
				a.Status, a.Attempt, len(mail.sent), mail.sent)
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
