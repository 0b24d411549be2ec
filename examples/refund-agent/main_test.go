package main

import (
	"bytes"
	"context"
	"log/slog"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/arbiter-ledger/arbiter/services/accounts"
	"github.com/arbiter-ledger/arbiter/services/webhooks"

	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/client"
	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
	"github.com/arbiter-ledger/arbiter/web"
)

// The example runs against a real Arbiter, started in the test on a fresh
// SQLite database with its sweeper, and the test plays the operator.

func startArbiter(t *testing.T) (url string, key func(ns, name string, role services.Role) string) {
	t.Helper()
	st := dbtest.Open(t, services.SQLite)
	ledger := services.NewLedger(st, services.LedgerConfig{})
	log := slog.New(slog.DiscardHandler)
	srv := httptest.NewServer(web.New(web.Deps{Store: st, Ledger: ledger, Keys: accounts.NewKeys(st),
		Accounts: accounts.New(st), Webhooks: webhooks.New(st, webhooks.Config{Policy: webhooks.AddressPolicy{}}),
		Metrics: web.NewMetrics(nil, nil), Log: log}))
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithCancel(context.Background())
	swept := make(chan struct{})
	go func() {
		defer close(swept)
		ledger.RunSweeper(ctx, log, 100*time.Millisecond, 0, nil)
	}()
	t.Cleanup(func() { cancel(); <-swept })
	return srv.URL, func(ns, name string, role services.Role) string {
		_, secret, err := accounts.NewKeys(st).CreateKey(context.Background(), accounts.CreateKeyRequest{Namespace: ns, Name: name, Role: role})
		require.NoError(t, err)
		return secret
	}
}

// syncBuffer is the program's output, read by the test while it runs.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestRefundAgentAnswersRepeatsFromTheLedger(t *testing.T) {
	t.Parallel()
	url, key := startArbiter(t)
	var out syncBuffer
	cfg := config{url: url, apiKey: key("payments", "refund-agent", services.RoleAgent), order: "order-1", amountCents: 4200, lease: time.Minute}
	require.NoError(t, run(context.Background(), cfg, &out))
	require.Equal(t, "refunded re_1, recorded as attempt 1\n"+
		"the same job again: re_1 from the ledger (ran: false); the provider created 1 refund(s)\n", out.String())
}

// One refund, traced: the agent dies after the provider refunded, the
// restarted agent is held, and the worker's lookup finds the refund at the
// provider: the action is confirmed with it, and nobody had to decide.
func TestRefundAgentCrashThenLookupConfirms(t *testing.T) {
	t.Parallel()
	url, key := startArbiter(t)
	reader := client.New(url, key("payments", "auditor", services.RoleReader))
	var out syncBuffer
	cfg := config{url: url, apiKey: key("payments", "refund-agent", services.RoleAgent), order: "order-8812", amountCents: 4200,
		crash: true, lease: time.Second}
	require.NoError(t, run(context.Background(), cfg, &out), out.String())
	got := out.String()
	require.Contains(t, got, "attempt 1: the provider refunded re_1; now the process dies before reporting it\n")
	require.Contains(t, got, "held: the outcome of attempt 1 is unknown")
	require.Contains(t, got, "lookup: the provider has refund re_1 for key refund:order-8812\n")
	require.Contains(t, got, "settled: the action is confirmed (attempt 1); the provider created 1 refund(s) for refund:order-8812\n")

	a, err := reader.ActionByKey(context.Background(), "refund:order-8812")
	require.NoError(t, err)
	require.Equal(t, client.StatusConfirmed, a.Status)
	require.Equal(t, "re_1", *a.ExternalRef)
	require.JSONEq(t, `{"refund_id":"re_1"}`, string(a.Result))
	require.Equal(t, client.AnswerHappened, a.Reconciliation.LastLookup.Answer)
}

// The agent dies before the provider got the refund: the lookup finds
// nothing, the ledger retries the keyed action, and the worker's attempt 2
// refunds once with the same key.
func TestRefundAgentLostRequestThenRetry(t *testing.T) {
	t.Parallel()
	url, key := startArbiter(t)
	reader := client.New(url, key("payments", "auditor", services.RoleReader))
	var out syncBuffer
	cfg := config{url: url, apiKey: key("payments", "refund-agent", services.RoleAgent), order: "order-9001", amountCents: 4200,
		crashBefore: true, lease: time.Second}
	require.NoError(t, run(context.Background(), cfg, &out), out.String())
	got := out.String()
	require.Contains(t, got, "attempt 1: the process dies before the provider gets the refund\n")
	require.Contains(t, got, "lookup: the provider has no refund for key refund:order-9001\n")
	require.Contains(t, got, "settled: the action is succeeded (attempt 2); the provider created 1 refund(s) for refund:order-9001\n")

	a, err := reader.ActionByKey(context.Background(), "refund:order-9001")
	require.NoError(t, err)
	require.Equal(t, "re_1", *a.ExternalRef)
	entries, err := reader.Entries(context.Background(), a.ID)
	require.NoError(t, err)
	var types []string
	for _, e := range entries {
		types = append(types, e.Type)
	}
	require.Equal(t, []string{"intent", "timed_out", "lookup", "lookup_result", "reconciled", "intent", "succeeded"}, types)
}
