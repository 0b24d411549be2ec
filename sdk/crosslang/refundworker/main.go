// Command refundworker is the Go side of the Python SDK's cross-language
// test (sdk/python/tests/test_crosslang.py): a worker built on the Go SDK
// that carries out the retry an operator asked for on a refund a Python
// agent started, with the action's original key, at the fake provider the
// test runs.
//
// Usage: refundworker -tool TOOL -key KEY -provider URL [-within 60s]
// with ARBITER_URL and ARBITER_API_KEY (an agent key). It runs the worker
// until the action of KEY has succeeded, prints "succeeded ATTEMPT REF",
// and exits 0; 1 if that does not happen within the limit.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/arbiter-ledger/arbiter/client"
)

func main() {
	tool := flag.String("tool", "", "the tool whose retries this worker runs")
	key := flag.String("key", "", "the action to wait for")
	provider := flag.String("provider", "", "the fake provider's base URL")
	within := flag.Duration("within", time.Minute, "how long to wait for the action to succeed")
	flag.Parse()
	if *tool == "" || *key == "" || *provider == "" {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(*tool, *key, *provider, *within); err != nil {
		fmt.Fprintln(os.Stderr, "refundworker:", err)
		os.Exit(1)
	}
}

func run(tool, key, provider string, within time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	c := client.New(os.Getenv("ARBITER_URL"), os.Getenv("ARBITER_API_KEY"),
		client.WithBackoff(50*time.Millisecond, 500*time.Millisecond))
	w := client.NewWorker(c, client.WorkerOptions{Poll: 50 * time.Millisecond, MaxPoll: 200 * time.Millisecond,
		Agent: "go-refund-worker", Logger: slog.New(slog.NewTextHandler(os.Stderr, nil))})
	w.Handle(tool, func(ctx context.Context, a client.Attempt) (any, string, error) {
		id, err := refund(ctx, provider, a)
		if err != nil {
			return nil, "", err
		}
		return map[string]string{"refund_id": id}, id, nil
	}, nil)
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()

	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return fmt.Errorf("action %q did not succeed within %s", key, within)
		case err := <-done:
			if err != nil && !errors.Is(err, context.Canceled) {
				return fmt.Errorf("worker: %w", err)
			}
		case <-tick.C:
			a, err := c.ActionByKey(ctx, key)
			if err != nil {
				continue // not yet, or the server is busy: ask again
			}
			if a.Status == client.StatusSucceeded {
				ref := ""
				if a.ExternalRef != nil {
					ref = *a.ExternalRef
				}
				fmt.Printf("succeeded %d %s\n", a.Attempt, ref)
				return nil
			}
		}
	}
}

// refund asks the provider for the refund under the attempt's key, as a
// provider that honours idempotency keys (Stripe) is asked.
func refund(ctx context.Context, provider string, a client.Attempt) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, provider+"/refunds", nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Idempotency-Key", a.Key)
	req.Header.Set("X-Attempt", strconv.Itoa(a.Number))
	req.Header.Set("X-Caller", "go")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("provider answered %s", resp.Status)
	}
	var body struct {
		ID string `json:"id"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return "", err
	}
	return body.ID, nil
}
