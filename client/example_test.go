package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"log"
	"os"
	"time"

	"github.com/arbiter-ledger/arbiter/client"
)

// payments stands for a payment provider's SDK that takes idempotency keys.
var payments = struct {
	Refund func(ctx context.Context, orderID string, cents int, idempotencyKey string) (string, error)
	// FindRefund searches refunds by the idempotency key they were made
	// with; "" if there is none.
	FindRefund func(ctx context.Context, idempotencyKey string) (string, error)
}{
	Refund:     func(context.Context, string, int, string) (string, error) { return "re_123", nil },
	FindRefund: func(context.Context, string) (string, error) { return "re_123", nil },
}

// An agent wraps each side effect in Guard. The intent is recorded before
// the refund; a retry, a restart or a second run of the same job gets the
// saved result instead of a second refund; and if the process dies halfway,
// the action is held for an operator instead of being run again blindly.
func ExampleClient_Guard() {
	arbiter := client.New("http://127.0.0.1:8080", os.Getenv("ARBITER_API_KEY"))
	orderID := "order-8812"

	out, err := arbiter.Guard(context.Background(), client.GuardSpec{
		Key:     client.Key("refund", orderID), // "refund:order-8812": the business identity
		Tool:    "payments.refund",
		Effect:  client.EffectKeyed, // the provider deduplicates by key
		Params:  map[string]any{"order": orderID, "amount_cents": 4200},
		Timeout: time.Minute,
	}, func(ctx context.Context, a client.Attempt) (any, string, error) {
		refundID, err := payments.Refund(ctx, orderID, 4200, a.Key) // same key on every attempt
		if err != nil {
			return nil, "", err
		}
		return map[string]string{"refund_id": refundID}, refundID, nil
	})

	// An error of payments.Refund is recorded outcome_unknown (a timeout
	// may come after the refund was made) unless it proves the refund was
	// not made: return &client.NotDone{Err: err} for those, or list the
	// provider's refusals in GuardSpec.NotDoneStatuses.
	var held *client.HeldError
	var unknown *client.OutcomeUnknownError
	switch {
	case errors.As(err, &held):
		log.Printf("outcome unknown, an operator decides: %s", held.URL)
	case errors.As(err, &unknown):
		log.Printf("outcome unknown, recorded for a lookup and an operator: %v", err)
	case err != nil:
		log.Printf("refund not done: %v", err)
	default:
		log.Printf("refund %s (ran now: %v)", out.ExternalRef, out.Ran)
	}
}

// A worker carries out operators' decisions: it retries (attempt 2, same
// key, same params) or compensates the actions of the tools it handles.
func ExampleWorker() {
	arbiter := client.New("http://127.0.0.1:8080", os.Getenv("ARBITER_API_KEY"))
	w := client.NewWorker(arbiter, client.WorkerOptions{})
	w.Handle("payments.refund",
		func(ctx context.Context, a client.Attempt) (any, string, error) {
			var p struct {
				Order       string `json:"order"`
				AmountCents int    `json:"amount_cents"`
			}
			if err := json.Unmarshal(a.Params, &p); err != nil {
				return nil, "", err
			}
			refundID, err := payments.Refund(ctx, p.Order, p.AmountCents, a.Key)
			return map[string]string{"refund_id": refundID}, refundID, err
		},
		nil, // refunds are not compensated by the agent
	)
	go func() { _ = w.Run(context.Background()) }()
}

// A lookup tells the worker how to find out whether a timed-out attempt's
// refund happened: search the provider by the key the attempt sent. A
// refund found confirms the action; none found makes the ledger retry it
// with the same key (safe: the provider deduplicates); an error is
// reported as unknown and asked again later.
func ExampleWorker_HandleLookup() {
	arbiter := client.New("http://127.0.0.1:8080", os.Getenv("ARBITER_API_KEY"))
	w := client.NewWorker(arbiter, client.WorkerOptions{LookupTimeout: 10 * time.Second})
	w.HandleLookup("payments.refund", func(ctx context.Context, q client.LookupRequest) (client.LookupAnswer, error) {
		refundID, err := payments.FindRefund(ctx, q.Key)
		switch {
		case err != nil:
			return client.LookupAnswer{}, err
		case refundID == "":
			return client.LookupAnswer{Answer: client.AnswerNotHappened, Evidence: map[string]any{"searched": q.Key, "refunds": 0}}, nil
		}
		return client.LookupAnswer{Answer: client.AnswerHappened, ExternalRef: refundID,
			Result: map[string]string{"refund_id": refundID}, Evidence: map[string]any{"searched": q.Key, "refund": refundID}}, nil
	})
	go func() { _ = w.Run(context.Background()) }()
}
