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

// TestLimitsFromTheClient: an admin keeps a budget per order with the
// client's limit calls, and a guarded refund over it comes back as a
// *LimitExceededError (a *DeniedError too) with the limit and its group's
// use, fn not run — also for a retry of the denied key.
func TestLimitsFromTheClient(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newEnv(t, st)
		ctx := context.Background()
		admin := e.client(e.key("", "root", services.RoleAdmin))
		agent := e.agent("payments")

		_, err := admin.CreateLimit(ctx, client.LimitInput{Name: client.Ptr("bad"), Namespace: client.Ptr("payments"),
			Tools: &[]string{"payments.refund"}, Window: client.Ptr(60), Max: client.Ptr(1.0), Amount: client.Ptr(`params.order + "!"`)})
		require.True(t, client.IsCode(err, "invalid_limit"), "%v", err)

		l, err := admin.CreateLimit(ctx, client.LimitInput{Name: client.Ptr("refunds per order"), Namespace: client.Ptr("payments"),
			Tools: &[]string{"payments.refund"}, Amount: client.Ptr("params.amount"), GroupBy: client.Ptr("params.order"),
			Window: client.Ptr(3600), Max: client.Ptr(100.0), Over: client.Ptr(client.LimitDeny)})
		require.NoError(t, err)
		require.Equal(t, 1, l.Version)
		require.Equal(t, client.ModeEnforce, l.Mode)

		var runs atomic.Int32
		first := refundSpec("order-1", 60)
		first.Key = "refund:order-1:a"
		out, err := agent.Guard(ctx, first, counted(&runs))
		require.NoError(t, err)
		require.Equal(t, []client.LimitCharge{{ID: l.ID, Name: "refunds per order", Version: 1, Group: "order-1", Amount: 60}},
			out.Action.Limits)

		over := refundSpec("order-1", 50)
		over.Key = "refund:order-1:b"
		for _, try := range []string{"first intent", "retry of the denied key"} {
			_, err = agent.Guard(ctx, over, counted(&runs))
			var lim *client.LimitExceededError
			require.ErrorAs(t, err, &lim, try)
			var denied *client.DeniedError
			require.True(t, errors.As(err, &denied), "%s: a limit's denial is a denial", try)
			require.Equal(t, []client.ApprovalLimit{{ID: l.ID, Name: "refunds per order", Version: 1, Group: "order-1",
				Used: 60, Amount: 50, Max: 100}}, lim.Limits, try)
			require.Contains(t, err.Error(), `"refunds per order" (version 1)`, try)
			require.Contains(t, err.Error(), "nothing was run", try)
		}
		require.EqualValues(t, 1, runs.Load(), "the refund over the budget never ran")

		u, err := admin.LimitUsage(ctx, l.ID, "")
		require.NoError(t, err)
		require.Equal(t, 3600, u.Window)
		require.Len(t, u.Groups, 1)
		require.Equal(t, client.GroupUsage{Group: "order-1", Used: 60, Actions: 1, OldestAt: u.Groups[0].OldestAt}, u.Groups[0])
		require.WithinDuration(t, time.Now(), u.Groups[0].OldestAt, time.Minute)

		l, err = admin.UpdateLimit(ctx, l.ID, client.LimitInput{Mode: client.Ptr(client.ModeShadow)})
		require.NoError(t, err)
		require.Equal(t, 2, l.Version)
		shadowed := refundSpec("order-1", 70)
		shadowed.Key = "refund:order-1:c"
		out, err = agent.Guard(ctx, shadowed, counted(&runs))
		require.NoError(t, err, "a shadow limit enforces nothing")
		require.True(t, out.Ran)
		require.True(t, out.Action.Limits[0].Exceeded, "and says what it would have done")
		vs, err := admin.LimitVersions(ctx, l.ID)
		require.NoError(t, err)
		require.Len(t, vs, 2)
		ls, err := admin.Limits(ctx, "payments")
		require.NoError(t, err)
		require.Len(t, ls, 1)
		require.NoError(t, admin.DeleteLimit(ctx, l.ID))
		_, err = admin.Limit(ctx, l.ID)
		require.True(t, client.IsCode(err, "not_found"), "%v", err)
	})
}
