package services_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/arbiter-ledger/arbiter/services/record"

	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
)

// TestQueryPlansAtScale seeds a million actions (10,000 timed out) on
// PostgreSQL and checks that the dashboard's queries use indexes: no
// sequential scan on actions or entries; so do the sweeper's read of due
// leases and retention's batch. Seeding takes a minute or two on a small
// machine, so it runs in `make test-scale` (part of .ci/run), not in
// `make test`.
func TestQueryPlansAtScale(t *testing.T) {
	t.Parallel()
	if os.Getenv("ARBITER_TEST_SCALE") != "1" {
		t.Skip("set ARBITER_TEST_SCALE=1 (make test-scale) to seed a million actions")
	}
	ctx := context.Background()
	st := dbtest.Open(t, services.Postgres)
	res, err := st.Seed(ctx, services.SeedRequest{Actions: 1_000_000, TimedOut: 10_000, LongTimeline: 1000})
	require.NoError(t, err)
	t.Logf("seeded 1,000,000 actions in %s", res.Took)

	l := services.NewLedger(st, services.LedgerConfig{})
	p := services.Principal{Kind: "user", Name: "ops@example.com", Role: services.RoleOperator,
		Memberships: map[string]services.Role{services.Everywhere: services.RoleOperator}}
	plans := services.CapturePlans(st, func() {
		_, err := l.Triage(ctx, p, 0)
		require.NoError(t, err)
		_, err = l.TriageStamp(ctx, services.Principal{Role: services.RoleAdmin})
		require.NoError(t, err)
		for _, f := range []services.ActionFilter{
			{},
			{Namespace: "seed"},
			{Statuses: []record.Status{record.StatusTimedOut}},
			{Search: "seed:4242"},
			{Search: "ref-4242"},
			{Search: "seed:4242*"},
			{Search: "ref-42424*"},
			{Tool: "tool.1*"},
			{Agent: "agent-4*"},
			{Tool: "tool.7"},
			{Agent: "agent-3"},
		} {
			page, err := l.List(ctx, p, f)
			require.NoError(t, err)
			require.NotEmpty(t, page.Actions, "%+v", f)
			if page.NextCursor != nil {
				f.Cursor = *page.NextCursor
				_, err = l.List(ctx, p, f)
				require.NoError(t, err)
			}
		}
		a, tl, err := l.ActionWithTimeline(ctx, p, res.LongActionID, 0, 100)
		require.NoError(t, err)
		require.Len(t, tl.Entries, 100)
		_, tl, err = l.ActionWithTimeline(ctx, p, res.LongActionID, tl.Older, 100)
		require.NoError(t, err)
		require.Len(t, tl.Entries, 100)
		page, err := l.Timeline(ctx, p, res.LongActionID, services.TimelineQuery{Limit: 500})
		require.NoError(t, err)
		require.Len(t, page.Entries, 500)
		require.NotNil(t, page.NextCursor)
		_, err = l.Timeline(ctx, p, res.LongActionID, services.TimelineQuery{Cursor: *page.NextCursor})
		require.NoError(t, err)
		_, err = l.ActionByKey(ctx, p, "seed", a.Key)
		require.NoError(t, err)
		require.NoError(t, l.ReadDueActions(ctx))
		// Retention's batch, with a horizon before every seeded action:
		// its plan is captured, nothing is deleted.
		n, err := l.Prune(ctx, time.Now().Add(-365*24*time.Hour))
		require.NoError(t, err)
		require.Zero(t, n)
	})
	require.NotEmpty(t, plans)
	pruned := false
	for q := range plans {
		pruned = pruned || strings.Contains(q, "DELETE FROM entries")
	}
	require.True(t, pruned, "retention's batch is among the plans")
	for q, plan := range plans {
		for _, table := range []string{"actions", "entries"} {
			require.NotContains(t, plan, "Seq Scan on "+table, "query:\n%s\nplan:\n%s", q, plan)
		}
		require.False(t, strings.Contains(plan, "Parallel Seq Scan"), "query:\n%s\nplan:\n%s", q, plan)
	}
}
