package main_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
)

// TestBenchTimesBulkDecisions: `arbiter bench --bulk N` decides every
// timed-out action in bulk decisions of --bulk-batch, each with one
// decision entry and one action.decided alert, on both databases.
func TestBenchTimesBulkDecisions(t *testing.T) {
	t.Parallel()
	for _, d := range dbtest.Dialects {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			url := dbtest.SQLiteURL(t)
			if d == services.Postgres {
				url = dbtest.PostgresURL(t)
			}
			dir := t.TempDir()
			env := []string{"ARBITER_DATABASE_URL=" + url}
			if d == services.Postgres {
				_, stderr, err := runArbiter(t, dir, env, "", "migrate")
				require.NoError(t, err, stderr)
			}
			out, stderr, err := runArbiter(t, dir, env, "", "bench", "--bulk", "1200", "--bulk-batch", "500",
				"--bulk-singles", "20", "--json")
			require.NoError(t, err, stderr)
			var r struct {
				TimedOut        int     `json:"timed_out"`
				BatchSize       int     `json:"batch_size"`
				Batches         int     `json:"batches"`
				Applied         int     `json:"applied"`
				Seconds         float64 `json:"seconds"`
				DecisionEntries int     `json:"decision_entries"`
				DecidedAlerts   int     `json:"decided_alerts"`
				Singles         int     `json:"singles"`
				SingleSeconds   float64 `json:"single_seconds"`
			}
			require.NoError(t, json.Unmarshal([]byte(out), &r), out)
			require.Equal(t, 1200, r.TimedOut)
			require.Equal(t, 500, r.BatchSize)
			require.Equal(t, 3, r.Batches)
			require.Equal(t, 1200, r.Applied)
			require.Equal(t, 1200, r.DecisionEntries)
			require.Equal(t, 1200, r.DecidedAlerts)
			require.Equal(t, 20, r.Singles)
			require.Positive(t, r.Seconds)
			require.Positive(t, r.SingleSeconds)

			_, stderr, err = runArbiter(t, dir, env, "", "bench", "--bulk", "10", "--bulk-batch", "1001")
			require.Error(t, err)
			require.Contains(t, stderr, "--bulk-batch must be between 1 and 1000")
		})
	}
}
