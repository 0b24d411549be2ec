package client_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/client"
	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
)

// TestGuardRequireApproval: a guarded call that asks for approval runs
// nothing until an operator approves, then runs once; a rejected one never
// runs.
func TestGuardRequireApproval(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newEnv(t, st)
		c, ops := e.agent("payments"), e.operator("payments")
		ctx := context.Background()
		var runs atomic.Int32

		spec := refundSpec("order-9001", 250000)
		spec.RequireApproval = true
		_, err := c.Guard(ctx, spec, counted(&runs))
		var pending *client.PendingApprovalError
		require.ErrorAs(t, err, &pending)
		require.Zero(t, runs.Load())
		a, err := c.ActionByKey(ctx, spec.Key)
		require.NoError(t, err)
		require.Equal(t, client.StatusAwaitingApproval, a.Status)
		require.Equal(t, a.ID, pending.ActionID)

		_, err = c.Guard(ctx, spec, counted(&runs))
		require.ErrorAs(t, err, &pending, "still pending")
		_, err = ops.Decide(ctx, a.ID, client.Decision{Decision: client.DecisionApprove})
		require.NoError(t, err)
		out, err := c.Guard(ctx, spec, counted(&runs))
		require.NoError(t, err)
		require.True(t, out.Ran)
		require.Equal(t, 1, out.Attempt)
		require.EqualValues(t, 1, runs.Load())

		denied := refundSpec("order-9002", 990000)
		denied.RequireApproval = true
		_, err = c.Guard(ctx, denied, counted(&runs))
		require.ErrorAs(t, err, &pending)
		_, err = ops.Decide(ctx, pending.ActionID, client.Decision{Decision: client.DecisionReject, Reason: "over the limit"})
		require.NoError(t, err)
		_, err = c.Guard(ctx, denied, counted(&runs))
		var no *client.DeniedError
		require.True(t, errors.As(err, &no), "%v", err)
		require.EqualValues(t, 1, runs.Load(), "a denied action never runs")
	})
}

// TestGuardWaitsForApproval: with ApprovalWait, Guard waits on the server
// and runs fn as soon as an operator approves; a rejection comes back as a
// *DeniedError naming who rejected and why.
func TestGuardWaitsForApproval(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newEnv(t, st)
		c, ops := e.agent("payments"), e.operator("payments")
		ctx := context.Background()
		var runs atomic.Int32
		decideWhenHeld := func(key string, d client.Decision) {
			go func() {
				for range 200 {
					time.Sleep(20 * time.Millisecond)
					if a, err := ops.ActionByKey(ctx, key); err == nil && a.Status == client.StatusAwaitingApproval {
						_, _ = ops.Decide(ctx, a.ID, d)
						return
					}
				}
			}()
		}

		spec := refundSpec("order-9101", 250000)
		spec.RequireApproval, spec.ApprovalWait = true, 20*time.Second
		decideWhenHeld(spec.Key, client.Decision{Decision: client.DecisionApprove})
		start := time.Now()
		out, err := c.Guard(ctx, spec, counted(&runs))
		require.NoError(t, err)
		require.True(t, out.Ran)
		require.Less(t, time.Since(start), 10*time.Second)
		require.Len(t, out.Action.Approval.Approvals, 1)

		spec = refundSpec("order-9102", 990000)
		spec.RequireApproval, spec.ApprovalWait = true, 20*time.Second
		decideWhenHeld(spec.Key, client.Decision{Decision: client.DecisionReject, Reason: "over the limit"})
		_, err = c.Guard(ctx, spec, counted(&runs))
		var no *client.DeniedError
		require.ErrorAs(t, err, &no)
		require.False(t, no.Expired)
		require.Equal(t, "oncall-payments@example.com", no.By)
		require.Equal(t, "over the limit", no.Reason)

		// The context's deadline bounds the wait.
		spec = refundSpec("order-9103", 990000)
		spec.RequireApproval, spec.ApprovalWait = true, time.Minute
		short, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
		defer cancel()
		_, err = c.Guard(short, spec, counted(&runs))
		var pending *client.PendingApprovalError
		require.ErrorAs(t, err, &pending)
		require.EqualValues(t, 1, runs.Load())
	})
}

// TestPendingApprovalNamesAPolicysRunTimeError: a policy whose condition
// cannot be evaluated for an intent (it has no params.amount) holds it, and
// the guard's error says which policy and why, as the action's approval
// does.
func TestPendingApprovalNamesAPolicysRunTimeError(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newEnv(t, st)
		ctx := context.Background()
		c := e.agent("payments")
		admin := e.client(e.key("", "admin", services.RoleAdmin))
		_, err := admin.CreatePolicy(ctx, client.PolicyInput{Name: client.Ptr("big refunds"), Namespace: client.Ptr("payments"),
			Tools: &[]string{"payments.refund"}, Condition: client.Ptr("params.amount > 100000"), ApprovalsRequired: client.Ptr(1)})
		require.NoError(t, err)
		spec := client.GuardSpec{Key: "refund:no-params", Tool: "payments.refund", Effect: client.EffectKeyed}
		_, err = c.Guard(ctx, spec, func(context.Context, client.Attempt) (any, string, error) {
			t.Error("ran while held for approval")
			return nil, "", nil
		})
		var pending *client.PendingApprovalError
		require.ErrorAs(t, err, &pending)
		require.Len(t, pending.PolicyErrors, 1)
		assert.Contains(t, err.Error(), `policy "big refunds" could not be evaluated`)
		a, err := c.ActionByKey(ctx, spec.Key)
		require.NoError(t, err)
		require.Len(t, a.Approval.Policies, 1)
		require.NotNil(t, a.Approval.Policies[0].Error)
		assert.Contains(t, pending.PolicyErrors[0], *a.Approval.Policies[0].Error)
	})
}
