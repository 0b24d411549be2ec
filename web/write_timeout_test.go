package web_test

import (
	"bufio"
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/accounts"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
	"github.com/arbiter-ledger/arbiter/services/policies"
	"github.com/arbiter-ledger/arbiter/services/webhooks"
	"github.com/arbiter-ledger/arbiter/web"
)

// newEnvWriteTimeout starts a server whose write deadline is d, as serve
// sets it from ARBITER_WRITE_TIMEOUT.
func newEnvWriteTimeout(t *testing.T, st *services.Store, d time.Duration) *env {
	t.Helper()
	logs := &bytes.Buffer{}
	approvals := policies.New(st)
	ledger := services.NewLedger(st, services.LedgerConfig{Approver: approvals})
	h := web.New(web.Deps{Store: st, Ledger: ledger, Keys: accounts.NewKeys(st), Accounts: accounts.New(st),
		Webhooks: webhooks.New(st, webhooks.Config{Policy: webhooks.AddressPolicy{AllowPrivate: true}}), Policies: approvals,
		Metrics: web.NewMetrics(st.CountByStatus, nil), Log: slog.New(slog.NewTextHandler(&lockedWriter{w: logs}, nil)),
		WriteTimeout: d})
	srv := httptest.NewUnstartedServer(h)
	srv.Config.WriteTimeout = d
	srv.Start()
	t.Cleanup(srv.Close)
	return &env{t: t, srv: srv, st: st, log: logs}
}

// TestEventStreamOutlivesTheWriteTimeout: the triage stream pushes the
// server's write deadline back before each write, so a browser that reads
// keeps hearing of changes long after the deadline of its request.
func TestEventStreamOutlivesTheWriteTimeout(t *testing.T) {
	t.Parallel()
	st := dbtest.Open(t, services.SQLite)
	e := newEnvWriteTimeout(t, st, time.Second)
	q := &queueEnv{env: e, agent: e.key("shop", "refund-bot", services.RoleAgent), operator: e.key("shop", "ops", services.RoleOperator)}
	// Signing in hashes a password, which on a loaded machine can take
	// longer than this server's deadline: sign in on a server without one
	// over the same store (cookies go by host, not port) and go on here.
	b := newEnv(t, st).browser()
	b.signIn("ops@example.com", q.user("ops@example.com", services.RoleOperator))
	b.e = e
	events := b.get("/").testid("triage").AttrOr("sse-connect", "")
	s := openStream(t, b, events, "")
	s.next(t, "retry:", 2*time.Second)
	s.next(t, "id:", 3*time.Second)
	opened := time.Now()
	time.Sleep(1500 * time.Millisecond) // past the stream request's write deadline
	q.timeOut("slow", "order-9")
	require.Equal(t, "event: triage", s.next(t, "event: triage", 3*time.Second))
	require.Greater(t, time.Since(opened), 2*time.Second)
}

// TestParkedWaitOutlivesTheWriteTimeout: a request waiting for a decision
// (Prefer: wait) is answered when the decision comes, after the server's
// write deadline.
func TestParkedWaitOutlivesTheWriteTimeout(t *testing.T) {
	t.Parallel()
	st := dbtest.Open(t, services.SQLite)
	e := newEnvWriteTimeout(t, st, time.Second)
	agent := e.key("payments", "refund-bot", services.RoleAgent)
	e.user("alice@example.com", services.RoleOperator)
	alice := e.ownedKey("payments", "ops-alice", services.RoleOperator, "alice@example.com")
	conn := parkIntent(t, e, agent, "slow-yes")
	id := actionID(t, e, alice, "slow-yes")
	time.Sleep(1500 * time.Millisecond)
	status, m := e.do("POST", "/v1/actions/"+id+"/decisions", alice, `{"decision":"approve"}`)
	require.Equal(t, 201, status, "%v", m)
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(5*time.Second)))
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	defer res.Body.Close()
	require.Equal(t, http.StatusCreated, res.StatusCode)
}
