package main

import (
	"bytes"
	"context"
	"log/slog"
	"net/http/httptest"
	"strings"
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
	ledger := services.NewLedger(st)
	log := slog.New(slog.DiscardHandler)
	srv := httptest.NewServer(web.New(web.Deps{Store: st, Ledger: ledger, Keys: accounts.NewKeys(st),
		Accounts: accounts.New(st), Webhooks: webhooks.New(st, webhooks.AddressPolicy{}),
		Metrics: web.NewMetrics(nil), Log: log}))
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
// restarted agent is held, an operator retries, and the worker's attempt 2
// gets the original refund back from the provider.
func TestRefundAgentCrashThenRetry(t *testing.T) {
	t.Parallel()
	url, key := startArbiter(t)
	operator := client.New(url, key("payments", "on-call", services.RoleOperator))
	var out syncBuffer
	cfg := config{url: url, apiKey: key("payments", "refund-agent", services.RoleAgent), order: "order-8812", amountCents: 4200,
		crash: true, lease: time.Second}
	done := make(chan error, 1)
	go func() { done <- run(context.Background(), cfg, &out) }()

	require.Eventually(t, func() bool { return strings.Contains(out.String(), "held:") }, 20*time.Second, 50*time.Millisecond, out.String())
	ctx := context.Background()
	// Held as soon as the lease passed; timed out once the sweeper noticed.
	var a *client.Action
	require.Eventually(t, func() bool {
		var err error
		a, err = operator.ActionByKey(ctx, "refund:order-8812")
		require.NoError(t, err)
		return a.Status == client.StatusTimedOut
	}, 5*time.Second, 50*time.Millisecond)
	_, err := operator.Decide(ctx, a.ID, client.Decision{Decision: client.DecisionRetry, Reason: "the provider deduplicates by key",
		ExpectedVersion: &a.Version})
	require.NoError(t, err)

	select {
	case err := <-done:
		require.NoError(t, err, out.String())
	case <-time.After(20 * time.Second):
		t.Fatalf("the agent did not settle:\n%s", out.String())
	}
	got := out.String()
	require.Contains(t, got, "attempt 1: the provider refunded re_1; now the process dies before reporting it\n")
	require.Contains(t, got, "arbiter decide "+a.ID+" retry")
	require.Contains(t, got, "settled: the action is succeeded (attempt 2); the provider created 1 refund(s) for refund:order-8812\n")
	final, err := operator.Action(ctx, a.ID)
	require.NoError(t, err)
	require.Equal(t, "re_1", *final.ExternalRef)
}
