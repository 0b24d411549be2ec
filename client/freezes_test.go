package client_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/client"
	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
)

// TestFreezesFromTheClient: the person on call freezes refunds with an
// operator key; a guarded refund on a new key waits for approval with the
// freeze named, a retry an operator asked for answers a *FrozenError with
// Retry-After, and Guard asked to wait out the freeze runs fn once the
// freeze is lifted.
func TestFreezesFromTheClient(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newEnv(t, st)
		ctx := context.Background()
		agent, oncall := e.agent("payments"), e.operator("payments")
		reader := e.client(e.key("payments", "dash", services.RoleReader))

		var runs atomic.Int32
		lost := refundSpec("order-1", 10)
		_, err := agent.Guard(ctx, lost, func(context.Context, client.Attempt) (any, string, error) {
			return nil, "", client.Unknown(errors.New("the provider timed out"))
		})
		require.Error(t, err)
		a, err := agent.ActionByKey(ctx, lost.Key)
		require.NoError(t, err)
		_, err = oncall.Decide(ctx, a.ID, client.Decision{Decision: client.DecisionRetry, Reason: "the provider lost it",
			AcknowledgeDuplicateRisk: true})
		require.NoError(t, err)

		_, err = reader.StartFreeze(ctx, client.FreezeInput{Namespace: "payments", Reason: "incident"})
		require.True(t, client.IsCode(err, "forbidden"), "a reader may not freeze: %v", err)
		_, err = oncall.StartFreeze(ctx, client.FreezeInput{Namespace: "payments"})
		require.True(t, client.IsCode(err, "invalid"), "a freeze needs a reason: %v", err)

		f, err := oncall.StartFreeze(ctx, client.FreezeInput{Namespace: "payments", Tools: []string{"payments.*"},
			Reason: "provider incident"})
		require.NoError(t, err)
		require.Nil(t, f.LiftedAt)
		active, err := reader.Freezes(ctx, client.FreezeFilter{Namespace: "payments", Active: true})
		require.NoError(t, err)
		require.Len(t, active, 1)

		_, err = agent.Guard(ctx, refundSpec("order-2", 10), counted(&runs))
		var pending *client.PendingApprovalError
		require.ErrorAs(t, err, &pending)
		require.Equal(t, []client.FreezeRef{{ID: f.ID, Reason: "provider incident"}}, pending.FrozenBy)
		require.Contains(t, err.Error(), "provider incident")

		_, err = agent.Guard(ctx, lost, counted(&runs))
		var frozen *client.FrozenError
		require.ErrorAs(t, err, &frozen)
		require.Equal(t, 5*time.Second, frozen.RetryAfter)
		require.Contains(t, frozen.Why, f.ID)
		require.Zero(t, runs.Load(), "nothing ran while frozen")

		go func() {
			time.Sleep(300 * time.Millisecond)
			_, _ = oncall.LiftFreeze(context.Background(), f.ID, "provider is back")
		}()
		wait := lost
		wait.FrozenWait = 30 * time.Second
		out, err := agent.Guard(ctx, wait, counted(&runs))
		require.NoError(t, err, "Guard waits out the freeze")
		require.True(t, out.Ran)
		require.Equal(t, 2, out.Attempt)

		out, err = agent.Guard(ctx, refundSpec("order-2", 10), counted(&runs))
		require.NoError(t, err, "the key the freeze held runs once it is lifted")
		require.True(t, out.Ran)
		got, err := reader.Freeze(ctx, f.ID)
		require.NoError(t, err)
		require.NotNil(t, got.LiftedAt)
		require.Equal(t, "provider is back", *got.LiftReason)
	})
}

// TestBreakersFromTheClient: an admin's breaker on a flaky tool, read
// back with what it counts.
func TestBreakersFromTheClient(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newEnv(t, st)
		ctx := context.Background()
		admin := e.client(e.key("", "root", services.RoleAdmin))
		e.agent("payments") // the namespace
		_, err := admin.CreateBreaker(ctx, client.BreakerInput{Name: client.Ptr("mailer"), Namespace: client.Ptr("payments"),
			Tools: &[]string{"mail.*"}, MaxUnknownRatio: client.Ptr(1.5)})
		require.True(t, client.IsCode(err, "invalid_breaker"), "%v", err)
		b, err := admin.CreateBreaker(ctx, client.BreakerInput{Name: client.Ptr("mailer"), Namespace: client.Ptr("payments"),
			Tools: &[]string{"mail.*"}, MaxUnknownRatio: client.Ptr(0.3), MinActions: client.Ptr(5)})
		require.NoError(t, err)
		require.Equal(t, 300, b.Window)
		b, err = admin.UpdateBreaker(ctx, b.ID, client.BreakerInput{Window: client.Ptr(600)})
		require.NoError(t, err)
		require.Equal(t, 2, b.Version)
		got, err := admin.Breaker(ctx, b.ID)
		require.NoError(t, err)
		require.NotNil(t, got.State)
		require.Zero(t, got.State.Actions)
		require.Nil(t, got.State.Freeze)
		vs, err := admin.BreakerVersions(ctx, b.ID)
		require.NoError(t, err)
		require.Len(t, vs, 2)
		require.NoError(t, admin.DeleteBreaker(ctx, b.ID))
		bs, err := admin.Breakers(ctx, "payments")
		require.NoError(t, err)
		require.Empty(t, bs)
	})
}
