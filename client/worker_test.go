package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
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

// timedOut records an intent whose worker dies (a 1 s lease and no report)
// and lets the sweeper time it out. It returns the action.
func timedOut(t *testing.T, e *env, c *client.Client, key, tool, effect string, params string) *client.Action {
	t.Helper()
	ctx := context.Background()
	res, err := c.Submit(ctx, client.Entry{Key: key, Type: client.TypeIntent, Tool: &tool, Effect: &effect,
		Params: json.RawMessage(params), Timeout: client.Ptr(1.0)})
	require.NoError(t, err)
	require.Equal(t, client.OutcomeProceed, res.Outcome)
	require.Eventually(t, func() bool { return e.sweep() == 1 }, 5*time.Second, 100*time.Millisecond)
	a, err := c.Action(ctx, res.Action.ID)
	require.NoError(t, err)
	require.Equal(t, client.StatusTimedOut, a.Status)
	return a
}

func newWorker(c *client.Client, logs *logBuffer) *client.Worker {
	h := slog.DiscardHandler
	if logs != nil {
		h = slog.NewTextHandler(logs, nil)
	}
	return client.NewWorker(c, client.WorkerOptions{Poll: 50 * time.Millisecond, MaxPoll: 200 * time.Millisecond,
		Agent: "worker-1", Logger: slog.New(h)})
}

// logBuffer collects the logs of several workers.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestWorkerRunsARetryWithTheSameKey(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newEnv(t, st)
		ctx := context.Background()
		agent := e.agent("payments")
		op := e.operator("payments")
		// Params with characters JSON encoders escape differently still match
		// the stored fingerprint on the retry.
		a := timedOut(t, e, agent, "refund:order-1", "payments.refund", client.EffectKeyed, `{"order":"1","amount":1999,"note":"<b>&amp;\u00e9</b>"}`)

		var logs logBuffer
		w := newWorker(agent, &logs)
		var got []client.Attempt
		w.Handle("payments.refund", func(ctx context.Context, at client.Attempt) (any, string, error) {
			got = append(got, at)
			return map[string]string{"refund": "re_1"}, "re_1", nil
		}, nil)
		w.Handle("email.send", func(context.Context, client.Attempt) (any, string, error) {
			t.Error("no email was asked for")
			return nil, "", nil
		}, nil)

		n, err := w.RunOnce(ctx)
		require.NoError(t, err)
		assert.Zero(t, n, "a timed-out action waits for an operator")

		_, err = op.Decide(ctx, a.ID, client.Decision{Decision: client.DecisionRetry, Reason: "the PSP shows no refund"})
		require.NoError(t, err)
		n, err = w.RunOnce(ctx)
		require.NoError(t, err)
		assert.Equal(t, 1, n)
		require.Len(t, got, 1)
		assert.Equal(t, client.Attempt{ActionID: a.ID, Key: "refund:order-1", Tool: "payments.refund", Number: 2, Params: a.Params}, got[0])

		after, err := agent.Action(ctx, a.ID)
		require.NoError(t, err)
		assert.Equal(t, client.StatusSucceeded, after.Status)
		assert.Equal(t, 2, after.Attempt)
		assert.Equal(t, "re_1", *after.ExternalRef)
		types, entries := timeline(t, agent, "refund:order-1")
		assert.Equal(t, []string{"intent", "timed_out", "decision", "intent", "succeeded"}, types)
		assert.Equal(t, client.Actor{Kind: "agent", Name: "worker-1"}, entries[3].Actor)
		assert.JSONEq(t, `{"tool":"payments.refund","effect":"keyed","timeout":1}`, string(entries[3].Payload),
			"the retry runs under the lease the agent asked for")
		assert.Contains(t, logs.String(), "arbiter worker: ran and recorded succeeded")
		assert.Contains(t, logs.String(), "key=refund:order-1")

		n, err = w.RunOnce(ctx)
		require.NoError(t, err)
		assert.Zero(t, n)
	})
}

func TestWorkerCompensates(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newEnv(t, st)
		ctx := context.Background()
		agent := e.agent("payments")
		op := e.operator("payments")
		out, err := agent.Guard(ctx, refundSpec("2", 10), counted(new(atomic.Int32)))
		require.NoError(t, err)
		_, err = op.Decide(ctx, out.Action.ID, client.Decision{Decision: client.DecisionCompensate, Reason: "customer cancelled the return"})
		require.NoError(t, err)

		w := newWorker(agent, nil)
		w.Handle("payments.refund", func(context.Context, client.Attempt) (any, string, error) {
			t.Error("a compensation does not run the effect")
			return nil, "", nil
		}, func(ctx context.Context, a client.Attempt) (string, error) {
			return "rev_" + a.Key, nil
		})
		n, err := w.RunOnce(ctx)
		require.NoError(t, err)
		assert.Equal(t, 1, n)
		after, err := agent.Action(ctx, out.Action.ID)
		require.NoError(t, err)
		assert.Equal(t, client.StatusCompensated, after.Status)
		assert.Equal(t, "rev_refund:2", *after.ExternalRef)
	})
}

// Two workers that both saw the retry request race for it: the ledger
// grants proceed to one, and the handler runs once.
func TestTwoWorkersRunAnActionOnce(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newEnv(t, st)
		ctx := context.Background()
		agent := e.agent("payments")
		a := timedOut(t, e, agent, "refund:order-3", "payments.refund", client.EffectKeyed, `{"order":"3"}`)
		_, err := e.operator("payments").Decide(ctx, a.ID, client.Decision{Decision: client.DecisionRetry, Reason: "retry it"})
		require.NoError(t, err)

		// Both workers list the action before either sends its intent.
		var listed sync.WaitGroup
		listed.Add(2)
		var runs atomic.Int32
		var logs logBuffer
		workers := make([]*client.Worker, 2)
		recs := make([]*recorder, 2)
		for i := range workers {
			rec := newRecorder()
			recs[i] = rec
			var once sync.Once
			rec.after = func(method, path string) {
				if path == "/v1/actions" {
					once.Do(func() {
						listed.Done()
						listed.Wait()
					})
				}
			}
			c := e.client(e.key("payments", "worker", services.RoleAgent), client.WithHTTPClient(&http.Client{Transport: rec}))
			workers[i] = newWorker(c, &logs)
			workers[i].Handle("payments.refund", func(ctx context.Context, at client.Attempt) (any, string, error) {
				runs.Add(1)
				time.Sleep(200 * time.Millisecond)
				return nil, "re_3", nil
			}, nil)
		}
		var wg sync.WaitGroup
		for _, w := range workers {
			wg.Go(func() {
				_, err := w.RunOnce(ctx)
				assert.NoError(t, err)
			})
		}
		wg.Wait()
		assert.Equal(t, int32(1), runs.Load())
		for i, rec := range recs {
			assert.Len(t, rec.entries(`"type":"intent"`), 1, "worker %d asked the ledger", i)
		}
		assert.Contains(t, logs.String(), "arbiter worker: ran and recorded succeeded")
		assert.Regexp(t, `another worker is running it|already finished`, logs.String())
		types, _ := timeline(t, agent, "refund:order-3")
		assert.Equal(t, []string{"intent", "timed_out", "decision", "intent", "succeeded"}, types)
	})
}

func TestWorkerRunPollsUntilCancelled(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newEnv(t, st)
		agent := e.agent("payments")
		a := timedOut(t, e, agent, "email:welcome:42", "email.send", client.EffectUnkeyed, `{"to":"c42@example.com"}`)
		w := newWorker(agent, nil)
		var runs atomic.Int32
		w.Handle("email.send", func(context.Context, client.Attempt) (any, string, error) {
			runs.Add(1)
			return nil, "msg_1", nil
		}, nil)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- w.Run(ctx) }()

		time.Sleep(300 * time.Millisecond)
		_, err := e.operator("payments").Decide(context.Background(), a.ID, client.Decision{Decision: client.DecisionRetry,
			Reason: "no email arrived", AcknowledgeDuplicateRisk: true})
		require.NoError(t, err)
		require.Eventually(t, func() bool {
			got, err := agent.Action(context.Background(), a.ID)
			return err == nil && got.Status == client.StatusSucceeded
		}, 5*time.Second, 50*time.Millisecond)
		cancel()
		select {
		case err := <-done:
			assert.NoError(t, err)
		case <-time.After(5 * time.Second):
			t.Fatal("Run did not return after its context ended")
		}
		assert.Equal(t, int32(1), runs.Load())
	})
}

// TestWorkerClassifiesAsItsToolSays: a retry the worker runs follows the
// tool's own rule: a status the tool maps as not done is failed, and an
// error it cannot read is outcome_unknown, for a lookup and a person.
func TestWorkerClassifiesAsItsToolSays(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newEnv(t, st)
		ctx := context.Background()
		agent := e.agent("payments")
		op := e.operator("payments")
		w := newWorker(agent, nil)
		status := 422
		w.Handle("payments.refund", func(context.Context, client.Attempt) (any, string, error) {
			return nil, "", &client.HTTPStatusError{StatusCode: status, Message: "order closed"}
		}, nil)
		w.Classify("payments.refund", []int{400, 422}, nil)
		for _, c := range []struct {
			status int
			last   string
		}{{422, "failed"}, {500, "outcome_unknown"}} {
			status = c.status
			key := fmt.Sprintf("refund:order-%d", c.status)
			a := timedOut(t, e, agent, key, "payments.refund", client.EffectKeyed, `{"order":"x"}`)
			_, err := op.Decide(ctx, a.ID, client.Decision{Decision: client.DecisionRetry, Reason: "retry it"})
			require.NoError(t, err)
			_, err = w.RunOnce(ctx)
			require.NoError(t, err)
			types, _ := timeline(t, agent, key)
			assert.Equal(t, c.last, types[len(types)-1], "HTTP %d", c.status)
		}
	})
}
