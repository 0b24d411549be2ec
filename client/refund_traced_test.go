package client_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/client"
	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
)

// paymentProvider is a fake payment provider that honours idempotency keys
// the way Stripe does: the first request with a key creates the refund and
// stores it under the key; a repeat returns the stored refund and creates
// nothing.
type paymentProvider struct {
	mu      sync.Mutex
	byKey   map[string]providerRefund
	created int
	calls   int
}

type providerRefund struct {
	ID     string `json:"id"`
	Order  string `json:"order"`
	Amount int    `json:"amount"`
}

func (p *paymentProvider) Refund(idempotencyKey, order string, amount int) providerRefund {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls++
	if r, ok := p.byKey[idempotencyKey]; ok {
		return r
	}
	p.created++
	r := providerRefund{ID: fmt.Sprintf("re_%d", p.created), Order: order, Amount: amount}
	p.byKey[idempotencyKey] = r
	return r
}

type refundParams struct {
	Order  string `json:"order"`
	Amount int    `json:"amount"`
}

// One refund, traced: the provider refunds, the agent dies before recording
// it, the action times out, an operator retries, the worker runs attempt 2
// with the same key, and the provider answers with the original refund.
func TestOneRefundTraced(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newEnv(t, st)
		ctx := context.Background()
		psp := &paymentProvider{byKey: map[string]providerRefund{}}
		agent := e.agent("payments")
		operator := e.operator("payments")

		refundFn := func(ctx context.Context, a client.Attempt) (any, string, error) {
			var p refundParams
			if err := json.Unmarshal(a.Params, &p); err != nil {
				return nil, "", err
			}
			r := psp.Refund(a.Key, p.Order, p.Amount)
			return r, r.ID, nil
		}
		spec := client.GuardSpec{Key: client.Key("refund", "order-8812"), Tool: "payments.refund", Effect: client.EffectKeyed,
			Params: refundParams{Order: "order-8812", Amount: 4200}, Timeout: time.Second, Reference: "order 8812"}

		// 1. The intent is recorded first; attempt 1 reaches the provider,
		//    which creates the refund. Then the agent's process dies before
		//    it records anything: its context ends, its heartbeats stop.
		process, die := context.WithCancel(ctx)
		refunded := make(chan struct{})
		go func() {
			<-refunded
			die()
		}()
		_, err := agent.Guard(process, spec, func(ctx context.Context, a client.Attempt) (any, string, error) {
			require.Equal(t, 1, a.Number)
			if _, _, err := refundFn(ctx, a); err != nil {
				return nil, "", err
			}
			close(refunded)
			<-ctx.Done()
			return nil, "", ctx.Err()
		})
		var unknown *client.OutcomeUnknownError
		require.ErrorAs(t, err, &unknown)
		assert.Equal(t, 1, psp.created)
		types, _ := timeline(t, agent, "refund:order-8812")
		assert.Equal(t, []string{"intent"}, types, "the dead process recorded no outcome")

		// 2. The lease passes; the sweeper times the action out. A restarted
		//    agent that runs the job again is held: nothing is sent twice.
		require.Eventually(t, func() bool { return e.sweep() == 1 }, 5*time.Second, 100*time.Millisecond)
		_, err = agent.Guard(ctx, spec, refundFn)
		var held *client.HeldError
		require.ErrorAs(t, err, &held)
		assert.Equal(t, unknown.ActionID, held.ActionID)
		assert.Equal(t, 1, psp.calls)

		// 3. An operator retries with the original key.
		a, err := operator.Action(ctx, held.ActionID)
		require.NoError(t, err)
		assert.Equal(t, client.StatusTimedOut, a.Status)
		_, err = operator.Decide(ctx, a.ID, client.Decision{Decision: client.DecisionRetry,
			Reason: "keyed refund: the provider deduplicates, retry with the original key", ExpectedVersion: &a.Version})
		require.NoError(t, err)

		// 4. The worker runs attempt 2 with the same key; the provider
		//    recognises the key and returns the original refund.
		w := newWorker(agent, nil)
		w.Handle("payments.refund", refundFn, nil)
		n, err := w.RunOnce(ctx)
		require.NoError(t, err)
		assert.Equal(t, 1, n)

		final, err := operator.Action(ctx, a.ID)
		require.NoError(t, err)
		assert.Equal(t, client.StatusSucceeded, final.Status)
		assert.Equal(t, 2, final.Attempt)
		assert.Equal(t, "re_1", *final.ExternalRef)
		assert.JSONEq(t, `{"id":"re_1","order":"order-8812","amount":4200}`, string(final.Result))
		assert.Equal(t, 1, psp.created, "the provider holds exactly one refund")
		assert.Equal(t, 2, psp.calls)
		assert.Len(t, psp.byKey, 1)
		assert.Contains(t, psp.byKey, "refund:order-8812")

		types, entries := timeline(t, agent, "refund:order-8812")
		assert.Equal(t, []string{"intent", "timed_out", "decision", "intent", "succeeded"}, types)
		assert.Equal(t, 2, *entries[4].Attempt)

		// 5. Any later run of the job is answered from the ledger.
		out, err := agent.Guard(ctx, spec, refundFn)
		require.NoError(t, err)
		assert.False(t, out.Ran)
		assert.Equal(t, "re_1", out.ExternalRef)
		assert.Equal(t, 2, psp.calls)
	})
}

// The unkeyed variant: the email provider does not deduplicate, so the
// retry is refused until the operator acknowledges the duplicate risk.
func TestOneEmailTracedUnkeyed(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newEnv(t, st)
		ctx := context.Background()
		agent := e.agent("support")
		operator := e.operator("support")
		var mu sync.Mutex
		var sent []string
		send := func(ctx context.Context, a client.Attempt) (any, string, error) {
			mu.Lock()
			defer mu.Unlock()
			sent = append(sent, a.Key)
			return nil, fmt.Sprintf("msg_%d", len(sent)), nil
		}
		spec := client.GuardSpec{Key: client.Key("email", "welcome", "cust-42"), Tool: "email.send",
			Params: map[string]string{"to": "cust-42@example.com", "template": "welcome"}, Timeout: time.Second}

		process, die := context.WithCancel(ctx)
		_, err := agent.Guard(process, spec, func(ctx context.Context, a client.Attempt) (any, string, error) {
			_, _, _ = send(ctx, a)
			die()
			<-ctx.Done()
			return nil, "", ctx.Err()
		})
		var unknown *client.OutcomeUnknownError
		require.ErrorAs(t, err, &unknown)
		require.Eventually(t, func() bool { return e.sweep() == 1 }, 5*time.Second, 100*time.Millisecond)
		a, err := operator.Action(ctx, unknown.ActionID)
		require.NoError(t, err)
		assert.Equal(t, client.EffectUnkeyed, a.Effect)

		_, err = operator.Decide(ctx, a.ID, client.Decision{Decision: client.DecisionRetry, Reason: "customer says no email arrived"})
		var apiErr *client.Error
		require.ErrorAs(t, err, &apiErr)
		assert.Equal(t, "duplicate_risk_unacknowledged", apiErr.Code)
		assert.Equal(t, 422, apiErr.StatusCode)
		still, err := operator.Action(ctx, a.ID)
		require.NoError(t, err)
		assert.Equal(t, client.StatusTimedOut, still.Status, "a refused decision changes nothing")

		w := newWorker(agent, nil)
		w.Handle("email.send", send, nil)
		n, err := w.RunOnce(ctx)
		require.NoError(t, err)
		assert.Zero(t, n)

		_, err = operator.Decide(ctx, a.ID, client.Decision{Decision: client.DecisionRetry, Reason: "customer says no email arrived",
			AcknowledgeDuplicateRisk: true})
		require.NoError(t, err)
		n, err = w.RunOnce(ctx)
		require.NoError(t, err)
		assert.Equal(t, 1, n)
		final, err := operator.Action(ctx, a.ID)
		require.NoError(t, err)
		assert.Equal(t, client.StatusSucceeded, final.Status)
		assert.Equal(t, 2, final.Attempt)
		// The risk was real: the first email had gone out. That is what the
		// operator acknowledged.
		assert.Equal(t, []string{"email:welcome:cust-42", "email:welcome:cust-42"}, sent)
	})
}
