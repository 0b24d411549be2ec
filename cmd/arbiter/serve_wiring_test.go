package main_test

import (
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services/dbtest"
)

// serve builds the ledger with the metrics as its observers: an entry's
// group commit shows at /metrics.
func TestServeWiresLedgerToMetrics(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	env := []string{"ARBITER_DATABASE_URL=" + dbtest.SQLiteURL(t)}
	p := serve(t, dir, env)
	agent := createKey(t, dir, env, "--namespace", "payments", "--name", "refund-bot", "--role", "agent")
	status, m := post(t, p.url+"/v1/entries", agent, `{"key":"refund:1","type":"intent","tool":"payments.refund"}`)
	require.Equal(t, http.StatusCreated, status, "%v", m)
	res, err := http.Get(p.url + "/metrics")
	require.NoError(t, err)
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, string(body), "arbiter_ledger_group_entries_count 1")
}
