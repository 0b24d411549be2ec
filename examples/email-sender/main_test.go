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

func TestEmailSenderSendsOnce(t *testing.T) {
	t.Parallel()
	url, key := startArbiter(t)
	cfg := config{url: url, apiKey: key("support", "email-sender", services.RoleAgent), customer: "cust-1", template: "welcome", lease: time.Minute}
	var out syncBuffer
	require.NoError(t, run(context.Background(), cfg, &out))
	require.Equal(t, "sent msg_1, recorded as attempt 1\n", out.String())
	out = syncBuffer{}
	require.NoError(t, run(context.Background(), cfg, &out))
	require.Equal(t, "already sent (msg_1): answered from the ledger, nothing sent\n", out.String())
}

// crashed runs the sender with -crash until it is held, and returns the
// held action as the operator sees it and the run's result and output.
func crashed(t *testing.T) (*client.Client, *client.Action, chan error, *syncBuffer) {
	t.Helper()
	url, key := startArbiter(t)
	operator := client.New(url, key("support", "on-call", services.RoleOperator))
	out := &syncBuffer{}
	cfg := config{url: url, apiKey: key("support", "email-sender", services.RoleAgent), customer: "cust-42", template: "welcome",
		crash: true, lease: time.Second}
	done := make(chan error, 1)
	go func() { done <- run(context.Background(), cfg, out) }()
	require.Eventually(t, func() bool { return strings.Contains(out.String(), "held:") }, 20*time.Second, 50*time.Millisecond, out.String())
	// Held as soon as the lease passed; timed out once the sweeper noticed,
	// and then looked up by the worker, which could not tell.
	var a *client.Action
	require.Eventually(t, func() bool {
		var err error
		a, err = operator.ActionByKey(context.Background(), "email:welcome:cust-42")
		require.NoError(t, err)
		return a.Status == client.StatusTimedOut && a.Reconciliation != nil && a.Reconciliation.LastLookup != nil
	}, 10*time.Second, 50*time.Millisecond, out.String())
	require.Equal(t, client.EffectUnkeyed, a.Effect)
	require.Equal(t, client.AnswerUnknown, a.Reconciliation.LastLookup.Answer)
	require.Equal(t, "email-sender", a.Reconciliation.LastLookup.By.Name)
	require.Contains(t, a.Reconciliation.LastLookup.Said, "the email provider has no API to search sent messages")
	return operator, a, done, out
}

func settled(t *testing.T, done chan error, out *syncBuffer) string {
	t.Helper()
	select {
	case err := <-done:
		require.NoError(t, err, out.String())
	case <-time.After(20 * time.Second):
		t.Fatalf("the sender did not settle:\n%s", out.String())
	}
	return out.String()
}

// A retry of an unkeyed send is refused until the operator accepts the
// duplicate risk; then the customer gets the email twice.
func TestEmailSenderRetryNeedsTheDuplicateRiskAcknowledged(t *testing.T) {
	t.Parallel()
	operator, a, done, out := crashed(t)
	ctx := context.Background()
	_, err := operator.Decide(ctx, a.ID, client.Decision{Decision: client.DecisionRetry, Reason: "customer says nothing arrived"})
	require.True(t, client.IsCode(err, "duplicate_risk_unacknowledged"), "%v", err)
	_, err = operator.Decide(ctx, a.ID, client.Decision{Decision: client.DecisionRetry, Reason: "customer says nothing arrived",
		AcknowledgeDuplicateRisk: true})
	require.NoError(t, err)
	got := settled(t, done, out)
	require.Contains(t, got, "attempt 1: the provider sent msg_1; now the process dies before reporting it\n")
	require.Contains(t, got, "arbiter decide "+a.ID+" retry --acknowledge-duplicate-risk")
	require.Contains(t, got, "settled: the action is succeeded (attempt 2); the provider sent 2 email(s)")
}

// A lookup that can only answer unknown is asked once: the worker keeps
// polling, and the action waits for the operator with the answer shown.
// Confirming settles it with the one email that was sent.
func TestEmailSenderConfirmed(t *testing.T) {
	t.Parallel()
	operator, a, done, out := crashed(t)
	time.Sleep(1500 * time.Millisecond) // the worker polls every 500 ms
	again, err := operator.Action(context.Background(), a.ID)
	require.NoError(t, err)
	require.Equal(t, client.StatusTimedOut, again.Status)
	require.Equal(t, 1, again.Reconciliation.Lookups, "an unknown from a provider that cannot be searched is not asked again")
	require.Equal(t, 1, strings.Count(out.String(), "lookup: the provider cannot be searched; email:welcome:cust-42 attempt 1 stays unknown\n"))
	_, err = operator.Decide(context.Background(), a.ID, client.Decision{Decision: client.DecisionConfirm,
		Reason: "the provider's log shows msg_1 delivered", ExternalRef: client.Ptr("msg_1")})
	require.NoError(t, err)
	require.Contains(t, settled(t, done, out), "settled: the action is confirmed (attempt 1); the provider sent 1 email(s)")
}
