package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
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

// newH2Env starts a server that speaks HTTP/1.1 and unencrypted HTTP/2
// (h2c) on one port, and returns it with a client that speaks only HTTP/2.
// An HTTP/2 request cannot be parked (its connection is shared): it waits
// in the handler.
func newH2Env(t *testing.T, st *services.Store) (*env, *http.Client) {
	t.Helper()
	approvals := policies.New(st)
	ledger := services.NewLedger(st, services.LedgerConfig{Approver: approvals})
	keys := accounts.NewKeys(st)
	h := web.New(web.Deps{Store: st, Ledger: ledger, Keys: keys, Accounts: accounts.New(st),
		Webhooks: webhooks.New(st, webhooks.Config{Policy: webhooks.AddressPolicy{AllowPrivate: true}}), Policies: approvals,
		Metrics: web.NewMetrics(st.CountByStatus, nil), Log: slog.New(slog.DiscardHandler)})
	srv := httptest.NewUnstartedServer(h)
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetHTTP1(true)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	t.Cleanup(srv.Close)
	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	t.Cleanup(tr.CloseIdleConnections)
	return &env{t: t, srv: srv, st: st, keys: keys, log: &bytes.Buffer{}}, &http.Client{Transport: tr}
}

// waitOverH2 sends a held intent with Prefer: wait=30 over HTTP/2 and
// returns a channel that gets its answer.
func waitOverH2(t *testing.T, e *env, client *http.Client, secret, key string) <-chan h2Answer {
	t.Helper()
	out := make(chan h2Answer, 1)
	go func() {
		req, err := http.NewRequest("POST", e.srv.URL+"/v1/entries", strings.NewReader(fmt.Sprintf(heldIntent, key)))
		if err != nil {
			out <- h2Answer{err: err}
			return
		}
		req.Header.Set("Authorization", "Bearer "+secret)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Prefer", "wait=30")
		res, err := client.Do(req)
		if err != nil {
			out <- h2Answer{err: err}
			return
		}
		defer res.Body.Close()
		raw, _ := io.ReadAll(res.Body)
		a := h2Answer{proto: res.ProtoMajor, status: res.StatusCode}
		a.err = json.Unmarshal(raw, &a.body)
		out <- a
	}()
	return out
}

type h2Answer struct {
	proto, status int
	body          map[string]any
	err           error
}

// TestH2WaitKeyRevokedStartsNothing: over HTTP/2, a Prefer: wait request
// whose key is revoked while it waits is not released into attempt 1 when
// the action is approved: it is refused 401, and the next intent (another
// key of the namespace) gets proceed with attempt 1.
func TestH2WaitKeyRevokedStartsNothing(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e, h2 := newH2Env(t, st)
		k, agent, err := e.keys.CreateKey(context.Background(), accounts.CreateKeyRequest{Namespace: "payments", Name: "refund-bot", Role: services.RoleAgent})
		require.NoError(t, err)
		other := e.key("payments", "refund-bot-2", services.RoleAgent)
		e.user("alice@example.com", services.RoleOperator)
		alice := e.ownedKey("payments", "ops-alice", services.RoleOperator, "alice@example.com")

		answer := waitOverH2(t, e, h2, agent, "revoked-h2")
		id := actionID(t, e, alice, "revoked-h2")
		time.Sleep(100 * time.Millisecond) // waiting
		_, err = e.keys.RevokeKey(context.Background(), k.ID)
		require.NoError(t, err)
		status, m := e.do("POST", "/v1/actions/"+id+"/decisions", alice, `{"decision":"approve"}`)
		require.Equal(t, 201, status, "%v", m)

		var a h2Answer
		select {
		case a = <-answer:
		case <-time.After(10 * time.Second):
			t.Fatal("the waiting request was never answered")
		}
		require.NoError(t, a.err)
		require.Equal(t, 2, a.proto, "the request went over HTTP/2")
		require.Equal(t, 401, a.status, "%v", a.body)
		require.Equal(t, "unauthorized", errCode(a.body))

		status, m = e.do("POST", "/v1/entries", other, fmt.Sprintf(heldIntent, "revoked-h2"))
		require.Equal(t, 201, status, "%v", m)
		require.Equal(t, "proceed", m["outcome"])
		require.EqualValues(t, 1, m["attempt"])
	})
}

// TestH2WaitStillReleasesAValidKey: the same wait with a key that stays
// valid is answered proceed at attempt 1 once approved.
func TestH2WaitStillReleasesAValidKey(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e, h2 := newH2Env(t, st)
		agent := e.key("payments", "refund-bot", services.RoleAgent)
		e.user("alice@example.com", services.RoleOperator)
		alice := e.ownedKey("payments", "ops-alice", services.RoleOperator, "alice@example.com")
		answer := waitOverH2(t, e, h2, agent, "kept-h2")
		id := actionID(t, e, alice, "kept-h2")
		time.Sleep(100 * time.Millisecond)
		status, m := e.do("POST", "/v1/actions/"+id+"/decisions", alice, `{"decision":"approve"}`)
		require.Equal(t, 201, status, "%v", m)
		a := <-answer
		require.NoError(t, a.err)
		require.Equal(t, 2, a.proto)
		require.Equal(t, 201, a.status, "%v", a.body)
		require.Equal(t, "proceed", a.body["outcome"])
		require.EqualValues(t, 1, a.body["attempt"])
	})
}
