package services_test

import (
	"context"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
)

// TestSeedBigScriptFillsAMigratedLedger runs bench/seed-big.sql, which
// spells the columns of actions and entries itself, on a small count
// against a database the migrations made, then reads what it wrote through
// the ledger: a column added to actions without a default, or renamed,
// breaks it here rather than in the hour-long big-ledger benchmark.
func TestSeedBigScriptFillsAMigratedLedger(t *testing.T) {
	t.Parallel()
	psql, err := exec.LookPath("psql")
	require.NoError(t, err, "psql runs bench/seed-big.sql; make test installs PostgreSQL's client with the server")
	url := dbtest.MigratedPostgresURL(t)
	out, err := exec.Command(psql, url, "-q", "-v", "actions=2000", "-v", "chunk=1000",
		"-f", "../bench/seed-big.sql").CombinedOutput()
	require.NoError(t, err, "bench/seed-big.sql: %s", out)

	ctx := context.Background()
	st, err := services.Open(ctx, url)
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	counts, err := st.CountByStatus(ctx)
	require.NoError(t, err)
	total := int64(0)
	for _, n := range counts {
		total += n
	}
	require.EqualValues(t, 2000, total, "the script seeds as many actions as asked: %v", counts)

	l := services.NewLedger(st, services.LedgerConfig{})
	admin := services.Principal{Kind: "api_key", ID: "seed-check", Name: "seed-check", Role: services.RoleAdmin}
	page, err := l.List(ctx, admin, services.ActionFilter{Namespace: "big-00", Limit: 20})
	require.NoError(t, err)
	require.NotEmpty(t, page.Actions, "the seeded namespace big-00 has actions the ledger reads")
	for _, a := range page.Actions {
		tl, err := l.Entries(ctx, admin, a.ID)
		require.NoError(t, err)
		require.GreaterOrEqual(t, len(tl), 3, "action %s has its entries", a.ID)
	}
}
