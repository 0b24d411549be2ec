package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/client"
	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
)

type refund struct {
	ID     string `json:"id"`
	Amount int    `json:"amount"`
}

func refundSpec(order string, amount int) client.GuardSpec {
	return client.GuardSpec{Key: client.Key("refund", order), Tool: "payments.refund", Effect: client.EffectKeyed,
		Params: map[string]any{"order": order, "amount": amount}, Timeout: 30 * time.Second, Reference: "order " + order}
}

// counted returns a guarded function that counts its runs and returns a
// refund.
func counted(runs *atomic.Int32) client.GuardFunc {
	return func(ctx context.Context, a client.Attempt) (any, string, error) {
		runs.Add(1)
		id := "re_" + strings.ReplaceAll(a.Key, ":", "_")
		return refund{ID: id, Amount: 1999}, id, nil
	}
}

func TestGuardProceedThenReplay(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newEnv(t, st)
		c := e.agent("payments")
		ctx := context.Background()
		var runs atomic.Int32
		var seen client.Attempt
		fn := func(ctx context.Context, a client.Attempt) (any, string, error) {
			seen = a
			return counted(&runs)(ctx, a)
		}

		out, err := c.Guard(ctx, refundSpec("order-8812", 1999), fn)
		require.NoError(t, err)
		assert.True(t, out.Ran)
		assert.False(t, out.Compensated)
		assert.Equal(t, 1, out.Attempt)
		assert.Equal(t, "re_refund_order-8812", out.ExternalRef)
		assert.Equal(t, client.StatusSucceeded, out.Action.Status)
		assert.Equal(t, "re_refund_order-8812", *out.Action.ExternalRef)
		var r refund
		require.NoError(t, out.DecodeResult(&r))
		assert.Equal(t, refund{ID: "re_refund_order-8812", Amount: 1999}, r)
		assert.Equal(t, "refund:order-8812", seen.Key)
		assert.Equal(t, "payments.refund", seen.Tool)
		assert.Equal(t, 1, seen.Number)
		assert.Equal(t, out.Action.ID, seen.ActionID)
		assert.JSONEq(t, `{"order":"order-8812","amount":1999}`, string(seen.Params))

		// A second run of the same job is answered from the ledger.
		again, err := c.Guard(ctx, refundSpec("order-8812", 1999), fn)
		require.NoError(t, err)
		assert.False(t, again.Ran)
		assert.Equal(t, 1, again.Attempt)
		assert.Equal(t, "re_refund_order-8812", again.ExternalRef)
		var r2 refund
		require.NoError(t, again.DecodeResult(&r2))
		assert.Equal(t, r, r2)
		assert.Equal(t, int32(1), runs.Load())

		types, _ := timeline(t, c, "refund:order-8812")
		assert.Equal(t, []string{"intent", "succeeded"}, types)
	})
}

func TestGuardRecordsFailures(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newEnv(t, st)
		c := e.agent("payments")
		ctx := context.Background()
		errDeclined := errors.New("card declined")
		var runs atomic.Int32

		// A failure known to have had no effect may be tried again.
		out, err := c.Guard(ctx, refundSpec("1", 10), func(context.Context, client.Attempt) (any, string, error) {
			runs.Add(1)
			return nil, "", client.Retriable(errors.New("provider busy"))
		})
		require.Error(t, err)
		assert.True(t, client.IsRetriable(err))
		assert.True(t, out.Ran)
		assert.Equal(t, client.StatusFailed, out.Action.Status)
		out, err = c.Guard(ctx, refundSpec("1", 10), counted(&runs))
		require.NoError(t, err)
		assert.Equal(t, 2, out.Attempt)
		assert.Equal(t, int32(2), runs.Load())

		// A failure that proves nothing happened is final: the next call
		// replays it as an error.
		out, err = c.Guard(ctx, refundSpec("2", 10), func(context.Context, client.Attempt) (any, string, error) {
			return nil, "", &client.NotDone{Err: errDeclined}
		})
		assert.ErrorIs(t, err, errDeclined)
		assert.Equal(t, client.StatusFailed, out.Action.Status)
		_, entries := timeline(t, c, "refund:2")
		require.Len(t, entries, 2)
		assert.JSONEq(t, `{"type":"failed","error":"card declined","retriable":false}`, string(entries[1].Payload))

		out, err = c.Guard(ctx, refundSpec("2", 10), counted(&runs))
		var finished *client.FinishedError
		require.ErrorAs(t, err, &finished)
		assert.Equal(t, client.StatusFailed, finished.Action.Status)
		assert.False(t, out.Ran)
		assert.Equal(t, int32(2), runs.Load(), "a failed action is not run again")
	})
}

func TestGuardKeyReused(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newEnv(t, st)
		c := e.agent("payments")
		ctx := context.Background()
		var runs atomic.Int32
		_, err := c.Guard(ctx, refundSpec("7", 10), counted(&runs))
		require.NoError(t, err)

		out, err := c.Guard(ctx, refundSpec("7", 5000), counted(&runs))
		assert.Nil(t, out)
		var apiErr *client.Error
		require.ErrorAs(t, err, &apiErr)
		assert.Equal(t, "key_reused", apiErr.Code)
		assert.Equal(t, int32(1), runs.Load())
		types, _ := timeline(t, c, "refund:7")
		assert.Equal(t, []string{"intent", "succeeded", "key_reused"}, types)
	})
}

func TestGuardWaitsForAnotherAttempt(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newEnv(t, st)
		c := e.agent("payments")
		other := e.agent("payments")
		ctx := context.Background()
		spec := refundSpec("3", 10)
		spec.Params = json.RawMessage(`{"order":"3","amount":10}`)
		intent := client.Entry{Key: spec.Key, Type: client.TypeIntent, Tool: &spec.Tool, Effect: &spec.Effect,
			Params: spec.Params.(json.RawMessage), Timeout: client.Ptr(60.0)}
		res, err := other.Submit(ctx, intent)
		require.NoError(t, err)
		require.Equal(t, client.OutcomeProceed, res.Outcome)

		// Nothing runs while another attempt holds the lease...
		var runs atomic.Int32
		spec.Wait = 300 * time.Millisecond
		began := time.Now()
		_, err = c.Guard(ctx, spec, counted(&runs))
		var busy *client.InProgressError
		require.ErrorAs(t, err, &busy)
		assert.GreaterOrEqual(t, time.Since(began), 300*time.Millisecond)
		assert.Equal(t, res.Action.ID, busy.ActionID)
		assert.Equal(t, 1, busy.Attempt)
		require.NotNil(t, busy.LeaseUntil)
		assert.Equal(t, int32(0), runs.Load())

		// ... and within the wait budget, the guard takes over when it fails
		// retriably.
		go func() {
			time.Sleep(300 * time.Millisecond)
			_, _ = other.Submit(ctx, client.Entry{Key: spec.Key, Type: client.TypeFailed, Attempt: client.Ptr(1),
				Error: client.Ptr("timeout talking to the PSP before sending"), Retriable: client.Ptr(true)})
		}()
		spec.Wait = 10 * time.Second
		out, err := c.Guard(ctx, spec, counted(&runs))
		require.NoError(t, err)
		assert.True(t, out.Ran)
		assert.Equal(t, 2, out.Attempt)
		assert.Equal(t, int32(1), runs.Load())
	})
}

func TestGuardHeld(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newEnv(t, st)
		c := e.agent("payments")
		ctx := context.Background()
		spec := refundSpec("4", 10)
		spec.Timeout = time.Second
		// A process that dies after its intent: the lease passes.
		dying, stop := context.WithCancel(ctx)
		started := make(chan struct{})
		go func() {
			<-started
			stop()
		}()
		_, err := c.Guard(dying, spec, func(ctx context.Context, a client.Attempt) (any, string, error) {
			close(started)
			<-ctx.Done()
			return nil, "", ctx.Err()
		})
		var unknown *client.OutcomeUnknownError
		require.ErrorAs(t, err, &unknown)
		assert.ErrorIs(t, err, context.Canceled)
		time.Sleep(1100 * time.Millisecond)

		// Held even before the sweeper noticed, and after it.
		var runs atomic.Int32
		for _, sweep := range []bool{false, true} {
			if sweep {
				require.Equal(t, 1, e.sweep())
			}
			_, err = c.Guard(ctx, spec, counted(&runs))
			var held *client.HeldError
			require.ErrorAs(t, err, &held)
			assert.Equal(t, unknown.ActionID, held.ActionID)
			assert.Equal(t, "refund:4", held.Key)
			assert.Equal(t, 1, held.Attempt)
			assert.Equal(t, e.URL()+"/actions/"+held.ActionID, held.URL)
			assert.Contains(t, err.Error(), held.URL)
		}
		assert.Equal(t, int32(0), runs.Load())

		dash := e.agent("payments", client.WithDashboardURL("https://arbiter.example.com/"))
		_, err = dash.Guard(ctx, spec, counted(&runs))
		var held *client.HeldError
		require.ErrorAs(t, err, &held)
		assert.Equal(t, "https://arbiter.example.com/actions/"+held.ActionID, held.URL)
	})
}

func TestGuardCompensates(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newEnv(t, st)
		c := e.agent("payments")
		op := e.operator("payments")
		ctx := context.Background()
		var runs atomic.Int32
		spec := refundSpec("5", 10)
		out, err := c.Guard(ctx, spec, counted(&runs))
		require.NoError(t, err)
		_, err = op.Decide(ctx, out.Action.ID, client.Decision{Decision: client.DecisionCompensate, Reason: "refunded the wrong order"})
		require.NoError(t, err)

		// A caller that cannot undo it says so, which releases the
		// compensation's lease at once for one that can.
		_, err = c.Guard(ctx, spec, counted(&runs))
		assert.ErrorIs(t, err, client.ErrCompensationRequested)

		// A failing compensation is reported: the lease is released, the
		// action stays compensation_requested, and the next call compensates
		// again instead of waiting for the lease to pass.
		var tries atomic.Int32
		spec.Compensate = func(ctx context.Context, a client.Attempt) (string, error) {
			tries.Add(1)
			return "", client.Retriable(errors.New("provider refused the reversal"))
		}
		_, err = c.Guard(ctx, spec, counted(&runs))
		assert.EqualError(t, err, "provider refused the reversal")
		assert.True(t, client.IsRetriable(err))
		a, err := c.Action(ctx, out.Action.ID)
		require.NoError(t, err)
		assert.Equal(t, client.StatusCompensationRequested, a.Status)
		require.NotNil(t, a.Reconciliation)
		assert.Equal(t, 2, a.Reconciliation.CompensationFailures)
		assert.Equal(t, "provider refused the reversal", *a.Reconciliation.CompensationError)
		assert.False(t, a.Reconciliation.CompensationTimedOut)

		var undone client.Attempt
		spec.Compensate = func(ctx context.Context, a client.Attempt) (string, error) {
			undone = a
			return "rev_5", nil
		}
		out, err = c.Guard(ctx, spec, counted(&runs))
		require.NoError(t, err)
		assert.True(t, out.Compensated)
		assert.False(t, out.Ran)
		assert.Equal(t, "rev_5", out.ExternalRef)
		assert.Equal(t, client.StatusCompensated, out.Action.Status)
		assert.Equal(t, "rev_5", *out.Action.ExternalRef)
		assert.Equal(t, 1, undone.Number)
		assert.Equal(t, "refund:5", undone.Key)
		assert.Equal(t, int32(1), tries.Load())
		assert.Equal(t, int32(1), runs.Load())

		types, entries := timeline(t, c, "refund:5")
		assert.Equal(t, []string{"intent", "succeeded", "decision", "intent", "compensation_failed", "intent",
			"compensation_failed", "intent", "compensated"}, types)
		assert.JSONEq(t, `{"type":"compensation_failed","error":"this caller of Guard has no Compensate function for payments.refund","retriable":true}`,
			string(entries[4].Payload))
		assert.JSONEq(t, `{"type":"compensation_failed","error":"provider refused the reversal","retriable":true}`, string(entries[6].Payload))

		// Compensated is an ending: the action is not run again.
		_, err = c.Guard(ctx, spec, counted(&runs))
		var finished *client.FinishedError
		require.ErrorAs(t, err, &finished)
		assert.Equal(t, client.StatusCompensated, finished.Action.Status)
	})
}

// While one compensation holds the lease another caller does not run it,
// and a compensation whose process died holds the action for a person:
// whether the undo happened is unknown.
func TestGuardCompensationLease(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newEnv(t, st)
		c := e.agent("payments")
		ctx := context.Background()
		spec := refundSpec("lease", 10)
		spec.Timeout = 2 * time.Second
		out, err := c.Guard(ctx, spec, counted(new(atomic.Int32)))
		require.NoError(t, err)
		_, err = e.operator("payments").Decide(ctx, out.Action.ID, client.Decision{Decision: client.DecisionCompensate, Reason: "wrong order"})
		require.NoError(t, err)

		var undos atomic.Int32
		dying, die := context.WithCancel(ctx)
		spec.Compensate = func(ctx context.Context, a client.Attempt) (string, error) {
			undos.Add(1)
			// Meanwhile a second process asks: in progress, nothing runs.
			other := spec
			other.Compensate = func(context.Context, client.Attempt) (string, error) {
				undos.Add(1)
				return "rev_other", nil
			}
			_, err := c.Guard(context.Background(), other, counted(new(atomic.Int32)))
			var busy *client.InProgressError
			if !errors.As(err, &busy) {
				return "", fmt.Errorf("the second caller got %v", err)
			}
			die() // the process dies in the middle of the undo
			<-ctx.Done()
			return "", ctx.Err()
		}
		_, err = c.Guard(dying, spec, counted(new(atomic.Int32)))
		var unknown *client.OutcomeUnknownError
		require.ErrorAs(t, err, &unknown)
		assert.True(t, unknown.Compensation)
		assert.Equal(t, int32(1), undos.Load())

		require.Eventually(t, func() bool { return e.sweep() == 1 }, 5*time.Second, 100*time.Millisecond)
		_, err = c.Guard(ctx, spec, counted(new(atomic.Int32)))
		var held *client.HeldError
		require.ErrorAs(t, err, &held)
		assert.True(t, held.Compensation)
		assert.Contains(t, err.Error(), "whether the compensation of attempt 1 undid the effect is unknown")
		// A worker leaves it to the person too.
		w := newWorker(c, nil)
		w.Handle(spec.Tool, counted(new(atomic.Int32)), func(context.Context, client.Attempt) (string, error) {
			undos.Add(1)
			return "rev_worker", nil
		})
		n, err := w.RunOnce(ctx)
		require.NoError(t, err)
		assert.Zero(t, n)
		assert.Equal(t, int32(1), undos.Load())
		types, _ := timeline(t, c, spec.Key)
		// On a busy machine the compensation may live long enough for a
		// heartbeat: it extends the compensation's lease like an attempt's.
		types = slices.DeleteFunc(types, func(typ string) bool { return typ == "heartbeat" })
		assert.Equal(t, []string{"intent", "succeeded", "decision", "intent", "compensation_timed_out"}, types)
	})
}

func TestGuardHeartbeatsKeepALongCallAlive(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newEnv(t, st)
		c := e.agent("payments")
		ctx := context.Background()
		spec := refundSpec("6", 10)
		// A lease of 4 s with heartbeats every third of it leaves about 2.5 s
		// of slack for a busy machine; the call runs past the first lease.
		spec.Timeout = 4 * time.Second
		out, err := c.Guard(ctx, spec, func(ctx context.Context, a client.Attempt) (any, string, error) {
			time.Sleep(4500 * time.Millisecond)
			// Past the first lease: the sweeper finds nothing to time out.
			if n := e.sweep(); n != 0 {
				return nil, "", errors.New("the sweeper timed the action out")
			}
			time.Sleep(500 * time.Millisecond)
			return map[string]string{"id": "re_6"}, "re_6", nil
		})
		require.NoError(t, err)
		assert.Equal(t, client.StatusSucceeded, out.Action.Status)
		types, _ := timeline(t, c, "refund:6")
		assert.GreaterOrEqual(t, count(types, "heartbeat"), 3, "%v", types)
		assert.Equal(t, "intent", types[0])
		assert.Equal(t, "succeeded", types[len(types)-1])
		assert.Zero(t, count(types, "timed_out")+count(types, "late_result")+count(types, "lease_lost"), "%v", types)
	})
}

func TestGuardStopsWhenTheLeaseIsLost(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newEnv(t, st)
		c := e.agent("payments")
		op := e.operator("payments")
		ctx := context.Background()
		spec := refundSpec("9", 10)
		spec.Timeout = time.Second
		var cause error
		_, err := c.Guard(ctx, spec, func(ctx context.Context, a client.Attempt) (any, string, error) {
			// An operator settles the action while the attempt runs.
			_, err := op.Decide(context.Background(), a.ActionID, client.Decision{Decision: client.DecisionConfirm, Reason: "done by hand"})
			if err != nil {
				return nil, "", err
			}
			select {
			case <-ctx.Done():
				cause = context.Cause(ctx)
				return nil, "", ctx.Err()
			case <-time.After(5 * time.Second):
				return nil, "", errors.New("the guard did not stop the function")
			}
		})
		var unknown *client.OutcomeUnknownError
		require.ErrorAs(t, err, &unknown)
		assert.ErrorIs(t, cause, client.ErrLeaseLost)
		assert.True(t, client.IsCode(cause, "lease_lost"), "%v", cause)
		types, _ := timeline(t, c, "refund:9")
		assert.Equal(t, []string{"intent", "decision", "lease_lost"}, types, "no failure is reported for an interrupted attempt")
	})
}

// The effect happened, so it is recorded even when the caller stopped
// waiting meanwhile.
func TestGuardRecordsASuccessAfterTheCallerGaveUp(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newEnv(t, st)
		c := e.agent("payments")
		ctx, cancel := context.WithCancel(context.Background())
		out, err := c.Guard(ctx, refundSpec("late", 10), func(context.Context, client.Attempt) (any, string, error) {
			cancel()
			return "ok", "re_late", nil
		})
		require.NoError(t, err)
		assert.Equal(t, client.StatusSucceeded, out.Action.Status)
		types, _ := timeline(t, c, "refund:late")
		assert.Equal(t, []string{"intent", "succeeded"}, types)
	})
}

// A timeout talking to the provider leaves the outcome unknown: nothing is
// recorded as failed, and the action is held once its lease passes.
func TestGuardLeavesAnUnknownOutcomeToAPerson(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newEnv(t, st)
		c := e.agent("payments")
		ctx := context.Background()
		spec := refundSpec("unknown", 10)
		spec.Timeout = time.Minute
		_, err := c.Guard(ctx, spec, func(context.Context, client.Attempt) (any, string, error) {
			// Unknown wins over an error that would otherwise prove nothing
			// happened.
			return nil, "", client.Unknown(&client.NotDone{Err: errors.New("provider said no, then the line dropped")})
		})
		var unknown *client.OutcomeUnknownError
		require.ErrorAs(t, err, &unknown)
		assert.True(t, unknown.Reported)
		types, entries := timeline(t, c, "refund:unknown")
		assert.Equal(t, []string{"intent", "outcome_unknown"}, types)
		assert.JSONEq(t, `{"type":"outcome_unknown","error":"provider said no, then the line dropped"}`, string(entries[1].Payload))

		// Held at once, long before the lease would have passed.
		var runs atomic.Int32
		_, err = c.Guard(ctx, spec, counted(&runs))
		var held *client.HeldError
		require.ErrorAs(t, err, &held)
		assert.Zero(t, runs.Load())
	})
}

// A failure whose message the ledger would refuse, and a result too large
// to keep, are still recorded.
func TestGuardReportsAreNeverRefusedForTheirSize(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newEnv(t, st)
		c := e.agent("payments")
		ctx := context.Background()
		out, err := c.Guard(ctx, refundSpec("big-error", 10), func(context.Context, client.Attempt) (any, string, error) {
			return nil, "", &client.NotDone{Err: errors.New("bad\x00byte\xff" + strings.Repeat("x", 100<<10))}
		})
		require.Error(t, err)
		assert.Equal(t, client.StatusFailed, out.Action.Status)

		out, err = c.Guard(ctx, refundSpec("big-result", 10), func(context.Context, client.Attempt) (any, string, error) {
			return strings.Repeat("y", 70<<10), "re_big", nil
		})
		assert.ErrorContains(t, err, "it was not saved")
		assert.Equal(t, client.StatusSucceeded, out.Action.Status)
		assert.Equal(t, "re_big", *out.Action.ExternalRef)
	})
}
