package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/client"
	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
)

// searchablePSP is a fake payment provider that honours idempotency keys
// and can be searched by them, as Stripe can. A request may be in flight:
// sent, but not yet arrived (it lands later, as a delayed packet does).
type searchablePSP struct {
	mu       sync.Mutex
	byKey    map[string]string
	created  int
	inFlight []string
}

func newPSP() *searchablePSP { return &searchablePSP{byKey: map[string]string{}} }

func (p *searchablePSP) refund(key string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if id, ok := p.byKey[key]; ok {
		return id
	}
	p.created++
	id := fmt.Sprintf("re_%d", p.created)
	p.byKey[key] = id
	return id
}

func (p *searchablePSP) send(key string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.inFlight = append(p.inFlight, key)
}

// land delivers the requests in flight.
func (p *searchablePSP) land() {
	p.mu.Lock()
	keys := p.inFlight
	p.inFlight = nil
	p.mu.Unlock()
	for _, k := range keys {
		p.refund(k)
	}
}

func (p *searchablePSP) find(key string) (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	id, ok := p.byKey[key]
	return id, ok
}

func (p *searchablePSP) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.created
}

// run is the refund tool: the action's key is the provider's idempotency
// key.
func (p *searchablePSP) run(runs *atomic.Int32) client.GuardFunc {
	return func(ctx context.Context, a client.Attempt) (any, string, error) {
		runs.Add(1)
		id := p.refund(a.Key)
		return map[string]string{"refund_id": id}, id, nil
	}
}

// lookup searches the provider's refunds by idempotency key.
func (p *searchablePSP) lookup(asked *[]client.LookupRequest) client.LookupFunc {
	return func(ctx context.Context, q client.LookupRequest) (client.LookupAnswer, error) {
		*asked = append(*asked, q)
		id, ok := p.find(q.Key)
		if !ok {
			return client.LookupAnswer{Answer: client.AnswerNotHappened,
				Evidence: map[string]any{"search": q.Key, "refunds": []string{}}}, nil
		}
		return client.LookupAnswer{Answer: client.AnswerHappened, ExternalRef: id,
			Result: map[string]string{"refund_id": id}, Evidence: map[string]any{"search": q.Key, "refunds": []string{id}}}, nil
	}
}

// crashed runs spec as a process that calls effect and dies before it
// can report, then lets the sweeper time the action out.
func crashed(t *testing.T, e *env, c *client.Client, spec client.GuardSpec, effect func(key string)) *client.Action {
	t.Helper()
	ctx := context.Background()
	spec.Timeout = time.Second
	dying, die := context.WithCancel(ctx)
	_, err := c.Guard(dying, spec, func(ctx context.Context, a client.Attempt) (any, string, error) {
		effect(a.Key)
		die()
		<-ctx.Done()
		return nil, "", ctx.Err()
	})
	var unknown *client.OutcomeUnknownError
	require.ErrorAs(t, err, &unknown)
	require.Eventually(t, func() bool { return e.sweep() == 1 }, 5*time.Second, 100*time.Millisecond)
	a, err := c.ActionByKey(ctx, spec.Key)
	require.NoError(t, err)
	require.Equal(t, client.StatusTimedOut, a.Status)
	return a
}

// lookupWorker is newWorker with lookup options.
func lookupWorker(c *client.Client, opts client.WorkerOptions) *client.Worker {
	opts.Logger = slog.New(slog.DiscardHandler)
	opts.Poll, opts.MaxPoll, opts.Agent = 50*time.Millisecond, 200*time.Millisecond, "worker-1"
	return client.NewWorker(c, opts)
}

// The provider has the refund the crashed attempt made: the worker's
// lookup finds it and the action is confirmed with it; nothing runs again.
func TestWorkerLookupConfirmsWhatTheProviderHas(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newEnv(t, st)
		ctx := context.Background()
		agent := e.agent("payments")
		psp := newPSP()
		a := crashed(t, e, agent, refundSpec("found", 10), func(key string) { psp.refund(key) })

		w := lookupWorker(agent, client.WorkerOptions{})
		var runs atomic.Int32
		var asked []client.LookupRequest
		w.Handle("payments.refund", psp.run(&runs), nil)
		w.HandleLookup("payments.refund", psp.lookup(&asked))
		n, err := w.RunOnce(ctx)
		require.NoError(t, err)
		assert.Equal(t, 1, n)

		require.Len(t, asked, 1)
		assert.Equal(t, client.LookupRequest{ActionID: a.ID, Key: "refund:found", Tool: "payments.refund", Effect: client.EffectKeyed,
			Reference: "order found", Params: a.Params, Attempt: 1, CreatedAt: a.CreatedAt}, asked[0])
		after, err := agent.Action(ctx, a.ID)
		require.NoError(t, err)
		assert.Equal(t, client.StatusConfirmed, after.Status)
		assert.Equal(t, 1, after.Attempt)
		assert.Equal(t, "re_1", *after.ExternalRef)
		assert.JSONEq(t, `{"refund_id":"re_1"}`, string(after.Result))
		require.NotNil(t, after.Reconciliation.LastLookup)
		assert.Equal(t, client.AnswerHappened, after.Reconciliation.LastLookup.Answer)
		assert.Equal(t, "worker-1", after.Reconciliation.LastLookup.By.Name)

		types, entries := timeline(t, agent, "refund:found")
		assert.Equal(t, []string{"intent", "timed_out", "lookup", "lookup_result", "reconciled"}, types)
		assert.JSONEq(t, `{"timeout":40}`, string(entries[2].Payload), "the lookup's lease: its timeout and time to report")
		assert.JSONEq(t, `{"answer":"happened","evidence":{"search":"refund:found","refunds":["re_1"]},
			"external_ref":"re_1","result":{"refund_id":"re_1"}}`, string(entries[3].Payload))
		assert.Equal(t, client.Actor{Kind: "agent", Name: "worker-1"}, entries[3].Actor)

		assert.Zero(t, runs.Load(), "a confirmed refund is not run again")
		assert.Equal(t, 1, psp.count(), "one refund at the provider")
		n, err = w.RunOnce(ctx)
		require.NoError(t, err)
		assert.Zero(t, n)
		assert.Len(t, asked, 1)
	})
}

// The provider has no refund: the lookup says so, the ledger requests a
// retry of the keyed action, and the worker runs attempt 2 with the same
// key. Whether the lost request never arrived or lands after the lookup,
// the provider makes one refund: it deduplicates by the key.
func TestWorkerLookupRetriesWhatTheProviderLacks(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		lands bool // the first request arrives after the lookup, before the retry
	}{
		{"the request was lost", false},
		{"the request lands after the lookup", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dbtest.Each(t, func(t *testing.T, st *services.Store) {
				e := newEnv(t, st)
				ctx := context.Background()
				agent := e.agent("payments")
				psp := newPSP()
				a := crashed(t, e, agent, refundSpec("lost", 10), psp.send)

				w := lookupWorker(agent, client.WorkerOptions{})
				var runs atomic.Int32
				var asked []client.LookupRequest
				run := psp.run(&runs)
				var retried client.Attempt
				w.Handle("payments.refund", func(ctx context.Context, at client.Attempt) (any, string, error) {
					retried = at
					if tc.lands {
						psp.land()
					}
					return run(ctx, at)
				}, nil)
				w.HandleLookup("payments.refund", psp.lookup(&asked))
				n, err := w.RunOnce(ctx)
				require.NoError(t, err)
				assert.Equal(t, 1, n)

				require.Len(t, asked, 1)
				assert.Equal(t, int32(1), runs.Load())
				assert.Equal(t, client.Attempt{ActionID: a.ID, Key: "refund:lost", Tool: "payments.refund", Number: 2, Params: a.Params}, retried)
				after, err := agent.Action(ctx, a.ID)
				require.NoError(t, err)
				assert.Equal(t, client.StatusSucceeded, after.Status)
				assert.Equal(t, 2, after.Attempt)
				assert.Equal(t, "re_1", *after.ExternalRef)
				assert.Equal(t, 1, psp.count(), "one refund at the provider")

				types, entries := timeline(t, agent, "refund:lost")
				assert.Equal(t, []string{"intent", "timed_out", "lookup", "lookup_result", "reconciled", "intent", "succeeded"}, types)
				assert.JSONEq(t, `{"answer":"not_happened","evidence":{"search":"refund:lost","refunds":[]}}`, string(entries[3].Payload))
				assert.JSONEq(t, `{"tool":"payments.refund","effect":"keyed","timeout":1,"reference":"order lost"}`, string(entries[5].Payload),
					"the retry runs under the lease the agent asked for")
				n, err = w.RunOnce(ctx)
				require.NoError(t, err)
				assert.Zero(t, n)
			})
		})
	}
}

// Answers that leave the action for a person are asked once: a provider
// that cannot be searched, a send that did not happen but has no key to
// make a repeat safe, a key the provider no longer honours. Nothing runs
// until an operator decides.
func TestWorkerLookupLeavesTheRestToAPerson(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		spec   client.GuardSpec
		answer client.LookupAnswer
		said   string
	}{
		{"the provider cannot be searched", client.GuardSpec{Key: "email:welcome:1", Tool: "email.send", Effect: client.EffectKeyed},
			client.LookupAnswer{Answer: client.AnswerUnknown, Evidence: "the mailer has no search API"}, "the mailer has no search API"},
		{"unkeyed and not found", client.GuardSpec{Key: "email:welcome:2", Tool: "email.send", Effect: client.EffectUnkeyed},
			client.LookupAnswer{Answer: client.AnswerNotHappened, Evidence: map[string]int{"messages": 0}}, `{"messages":0}`},
		{"keyed, but the key expired", client.GuardSpec{Key: "email:welcome:3", Tool: "email.send", Effect: client.EffectKeyed, KeyTTL: time.Second},
			client.LookupAnswer{Answer: client.AnswerNotHappened}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dbtest.Each(t, func(t *testing.T, st *services.Store) {
				e := newEnv(t, st)
				ctx := context.Background()
				agent := e.agent("support")
				var sent atomic.Int32
				a := crashed(t, e, agent, tc.spec, func(string) { sent.Add(1) })
				if tc.spec.KeyTTL > 0 {
					require.NotNil(t, a.Reconciliation)
					assert.Equal(t, a.CreatedAt.Add(time.Second), *a.Reconciliation.KeyExpiresAt)
				}

				var asked atomic.Int32
				var runs atomic.Int32
				workers := []*client.Worker{lookupWorker(agent, client.WorkerOptions{}), lookupWorker(agent, client.WorkerOptions{})}
				for _, w := range workers {
					w.Handle("email.send", func(context.Context, client.Attempt) (any, string, error) {
						runs.Add(1)
						sent.Add(1)
						return nil, "msg_2", nil
					}, nil)
					w.HandleLookup("email.send", func(context.Context, client.LookupRequest) (client.LookupAnswer, error) {
						asked.Add(1)
						return tc.answer, nil
					})
				}
				for i := range 3 {
					for _, w := range workers {
						n, err := w.RunOnce(ctx)
						require.NoError(t, err)
						if i > 0 {
							assert.Zero(t, n)
						}
					}
				}
				assert.Equal(t, int32(1), asked.Load(), "asked once, by one worker")
				assert.Zero(t, runs.Load())
				after, err := agent.Action(ctx, a.ID)
				require.NoError(t, err)
				assert.Equal(t, client.StatusTimedOut, after.Status)
				rc := after.Reconciliation
				require.NotNil(t, rc)
				assert.Equal(t, 1, rc.Lookups)
				assert.Nil(t, rc.LookupUntil, "the answer released the lookup's lease")
				require.NotNil(t, rc.LastLookup)
				assert.Equal(t, 1, rc.LastLookup.Attempt)
				assert.Equal(t, tc.answer.Answer, rc.LastLookup.Answer)
				assert.Equal(t, tc.said, rc.LastLookup.Said)
				types, _ := timeline(t, agent, tc.spec.Key)
				assert.Equal(t, []string{"intent", "timed_out", "lookup", "lookup_result"}, types)

				// The person decides; the worker carries it out.
				_, err = e.operator("support").Decide(ctx, a.ID, client.Decision{Decision: client.DecisionRetry,
					Reason: "customer says nothing arrived", AcknowledgeDuplicateRisk: true})
				require.NoError(t, err)
				n, err := workers[0].RunOnce(ctx)
				require.NoError(t, err)
				assert.Equal(t, 1, n)
				assert.Equal(t, int32(1), runs.Load())
				assert.Equal(t, int32(2), sent.Load(), "the duplicate risk the operator accepted")
			})
		})
	}
}

// A lookup that cannot ask the provider (an error, a search that outlives
// LookupTimeout) is reported unknown with the error as evidence and asked
// again after LookupRetry, doubling, until the ledger's lookups for the
// attempt are spent.
func TestWorkerLookupFailuresAreAskedAgainWithinTheBudget(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newEnv(t, st)
		ctx := context.Background()
		agent := e.agent("payments")
		a := crashed(t, e, agent, refundSpec("flaky", 10), func(string) {})

		w := lookupWorker(agent, client.WorkerOptions{LookupTimeout: 200 * time.Millisecond, LookupRetry: 500 * time.Millisecond})
		var runs atomic.Int32
		w.Handle("payments.refund", counted(&runs), nil)
		var asked atomic.Int32
		w.HandleLookup("payments.refund", func(ctx context.Context, q client.LookupRequest) (client.LookupAnswer, error) {
			if asked.Add(1) == 2 {
				<-ctx.Done() // the search hangs past LookupTimeout
				return client.LookupAnswer{}, ctx.Err()
			}
			return client.LookupAnswer{}, errors.New("search API: 503 service unavailable")
		})
		began := time.Now()
		for _, want := range []int32{1, 2, 3} {
			require.Eventually(t, func() bool {
				_, err := w.RunOnce(ctx)
				require.NoError(t, err)
				return asked.Load() >= want
			}, 10*time.Second, 20*time.Millisecond)
			assert.Equal(t, want, asked.Load())
		}
		// 500 ms after the first failure, 1 s after the second.
		assert.GreaterOrEqual(t, time.Since(began), 1500*time.Millisecond)
		for range 3 {
			n, err := w.RunOnce(ctx)
			require.NoError(t, err)
			assert.Zero(t, n, "the attempt's lookups are spent")
		}
		assert.Equal(t, int32(3), asked.Load())
		assert.Zero(t, runs.Load())

		after, err := agent.Action(ctx, a.ID)
		require.NoError(t, err)
		assert.Equal(t, client.StatusTimedOut, after.Status)
		assert.Equal(t, client.MaxLookups, after.Reconciliation.Lookups)
		types, entries := timeline(t, agent, "refund:flaky")
		assert.Equal(t, []string{"intent", "timed_out", "lookup", "lookup_result", "lookup", "lookup_result", "lookup", "lookup_result"}, types)
		for i, want := range []string{"search API: 503 service unavailable", "context deadline exceeded", "search API: 503 service unavailable"} {
			var p struct {
				Answer   client.Answer   `json:"answer"`
				Evidence json.RawMessage `json:"evidence"`
			}
			require.NoError(t, json.Unmarshal(entries[3+2*i].Payload, &p))
			assert.Equal(t, client.AnswerUnknown, p.Answer)
			assert.JSONEq(t, fmt.Sprintf(`{"lookup_error":%q}`, want), string(p.Evidence))
		}
		res, err := agent.Submit(ctx, client.Entry{Key: "refund:flaky", Type: client.TypeLookup, Attempt: client.Ptr(1)})
		require.NoError(t, err)
		assert.Equal(t, client.OutcomeHeld, res.Outcome, "a fourth lookup is refused: a person decides")
	})
}

// Two workers that both see the timed-out action race for its lookup:
// the ledger grants the lease to one, and the provider is asked once.
func TestTwoWorkersLookUpOnce(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newEnv(t, st)
		ctx := context.Background()
		agent := e.agent("payments")
		psp := newPSP()
		a := crashed(t, e, agent, refundSpec("race", 10), func(key string) { psp.refund(key) })

		var asked atomic.Int32
		var logs logBuffer
		var wg sync.WaitGroup
		for range 2 {
			w := newWorker(agent, &logs)
			w.HandleLookup("payments.refund", func(ctx context.Context, q client.LookupRequest) (client.LookupAnswer, error) {
				asked.Add(1)
				time.Sleep(300 * time.Millisecond)
				id, _ := psp.find(q.Key)
				return client.LookupAnswer{Answer: client.AnswerHappened, ExternalRef: id}, nil
			})
			wg.Go(func() {
				_, err := w.RunOnce(ctx)
				assert.NoError(t, err)
			})
		}
		wg.Wait()
		assert.Equal(t, int32(1), asked.Load())
		after, err := agent.Action(ctx, a.ID)
		require.NoError(t, err)
		assert.Equal(t, client.StatusConfirmed, after.Status)
		assert.Equal(t, 1, psp.count())
		types, _ := timeline(t, agent, "refund:race")
		assert.Equal(t, []string{"intent", "timed_out", "lookup", "lookup_result", "reconciled"}, types)
	})
}

// A lookup sees the downstream ids the ledger heard of: here attempt 1's
// report, which came after an operator's retry had started attempt 2
// (a stale outcome), when attempt 2 times out too.
func TestWorkerLookupSeesTheExternalRefsTheLedgerHeardOf(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newEnv(t, st)
		ctx := context.Background()
		agent := e.agent("payments")
		a := timedOut(t, e, agent, "refund:refs", "payments.refund", client.EffectKeyed, `{"order":"refs"}`)
		_, err := e.operator("payments").Decide(ctx, a.ID, client.Decision{Decision: client.DecisionRetry, Reason: "retry it"})
		require.NoError(t, err)
		tool := "payments.refund"
		res, err := agent.Submit(ctx, client.Entry{Key: "refund:refs", Type: client.TypeIntent, Tool: &tool,
			Effect: client.Ptr(client.EffectKeyed), Params: json.RawMessage(`{"order":"refs"}`), Timeout: client.Ptr(1.0)})
		require.NoError(t, err)
		require.Equal(t, 2, res.AttemptNumber())
		_, err = agent.Submit(ctx, client.Entry{Key: "refund:refs", Type: client.TypeSucceeded, Attempt: client.Ptr(1),
			ExternalRef: client.Ptr("re_from_attempt_1")})
		require.True(t, client.IsCode(err, "stale_attempt"), "%v", err)
		require.Eventually(t, func() bool { return e.sweep() == 1 }, 5*time.Second, 100*time.Millisecond)

		w := lookupWorker(agent, client.WorkerOptions{})
		var asked []client.LookupRequest
		w.HandleLookup(tool, func(ctx context.Context, q client.LookupRequest) (client.LookupAnswer, error) {
			asked = append(asked, q)
			return client.LookupAnswer{Answer: client.AnswerHappened, ExternalRef: q.ExternalRefs[0]}, nil
		})
		n, err := w.RunOnce(ctx)
		require.NoError(t, err)
		assert.Equal(t, 1, n)
		require.Len(t, asked, 1)
		assert.Equal(t, 2, asked[0].Attempt)
		assert.Equal(t, []string{"re_from_attempt_1"}, asked[0].ExternalRefs)
		after, err := agent.Action(ctx, a.ID)
		require.NoError(t, err)
		assert.Equal(t, client.StatusConfirmed, after.Status)
		assert.Equal(t, "re_from_attempt_1", *after.ExternalRef)
	})
}
