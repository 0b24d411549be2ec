package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/arbiter-ledger/arbiter/services/policies"

	"github.com/arbiter-ledger/arbiter/services/accounts"
	"github.com/arbiter-ledger/arbiter/services/webhooks"

	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
	"github.com/arbiter-ledger/arbiter/services/evidence"
	"github.com/arbiter-ledger/arbiter/web"
)

// env is a running API server on a fresh database.
type env struct {
	t   *testing.T
	srv *httptest.Server
	st  *services.Store
	// keys is the server's key service: a key revoked through it stops
	// working at once, through another within the authentication cache's
	// lifetime.
	keys *accounts.Keys
	log  *bytes.Buffer
	// logKey signs the evidence log's checkpoints (the tests run the
	// sequencer themselves: sequence).
	logKey *evidence.Key
}

func newEnv(t *testing.T, st *services.Store) *env {
	return newEnvWith(t, st, nil)
}

// newEnvWith starts a server whose account service is adjusted by tune.
func newEnvWith(t *testing.T, st *services.Store, tune func(*accounts.Accounts)) *env {
	t.Helper()
	logs := &bytes.Buffer{}
	approvals := policies.New(st)
	limits := policies.NewLimits(st)
	metrics := web.NewMetrics(st.CountByStatus, nil)
	ledger, freezes, breakers := policies.NewBraked(st, services.LedgerConfig{Approver: approvals, Limiter: limits,
		OnGroup: metrics.ObserveGroup, OnApprovalDecided: metrics.ObserveApproval, OnLookupAnswered: metrics.ObserveLookup,
		OnTimeoutResolved: metrics.ObserveTimeoutResolved}, nil)
	accts := accounts.New(st)
	if tune != nil {
		tune(accts)
	}
	keys := accounts.NewKeys(st)
	logKey := dbtest.LogKey(t)
	slogger := slog.New(slog.NewTextHandler(&lockedWriter{w: logs}, nil))
	h := web.New(web.Deps{Store: st, Evidence: evidence.NewLog(st.Driver(), logKey), SelfCheck: evidence.NewSelfChecker(st.Driver(), slogger, nil), Ledger: ledger, Keys: keys, Accounts: accts, Webhooks: webhooks.New(st, webhooks.Config{Policy: webhooks.AddressPolicy{AllowPrivate: true}}), Policies: approvals, Limits: limits,
		Freezes: freezes, Breakers: breakers, Metrics: metrics, Log: slogger})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &env{t: t, srv: srv, st: st, keys: keys, log: logs, logKey: logKey}
}

// key creates an API key and returns its secret.
func (e *env) key(ns, name string, role services.Role) string {
	e.t.Helper()
	_, secret, err := accounts.NewKeys(e.st).CreateKey(context.Background(), accounts.CreateKeyRequest{Namespace: ns, Name: name, Role: role})
	require.NoError(e.t, err)
	return secret
}

// do sends a request and returns the status and the decoded JSON body.
func (e *env) do(method, path, key, body string) (int, map[string]any) {
	e.t.Helper()
	status, raw := e.doRaw(method, path, key, body)
	var m map[string]any
	if len(raw) > 0 {
		require.NoError(e.t, json.Unmarshal(raw, &m), "body: %s", raw)
	}
	return status, m
}

func (e *env) doRaw(method, path, key, body string) (int, []byte) {
	e.t.Helper()
	req, err := http.NewRequest(method, e.srv.URL+path, strings.NewReader(body))
	require.NoError(e.t, err)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	require.NoError(e.t, err)
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	require.NoError(e.t, err)
	return res.StatusCode, raw
}

func errCode(m map[string]any) string {
	if e, ok := m["error"].(map[string]any); ok {
		return e["code"].(string)
	}
	return ""
}

func TestEntriesStatusByOutcome(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newEnv(t, st)
		agent := e.key("payments", "refund-bot", services.RoleAgent)
		intent := `{"key":"refund:order-8812","type":"intent","tool":"payments.refund","effect":"keyed","params":{"amount":1999}}`

		status, m := e.do("POST", "/v1/entries", agent, intent)
		require.Equal(t, 201, status)
		require.Equal(t, "proceed", m["outcome"])
		require.EqualValues(t, 1, m["attempt"])
		require.Nil(t, m["error"])
		act := m["action"].(map[string]any)
		require.Equal(t, "in_progress", act["status"])
		require.Equal(t, "refund-bot", act["agent"], "agent defaults to the key's name")
		id := act["id"].(string)

		status, m = e.do("POST", "/v1/entries", agent, intent)
		require.Equal(t, 409, status)
		require.Equal(t, "in_progress", m["outcome"])

		status, m = e.do("POST", "/v1/entries", agent, `{"key":"refund:order-8812","type":"intent","tool":"payments.refund","params":{"amount":5}}`)
		require.Equal(t, 422, status)
		require.Equal(t, "rejected", m["outcome"])
		require.Equal(t, "key_reused", errCode(m))

		status, m = e.do("POST", "/v1/entries", agent, `{"key":"refund:order-8812","type":"succeeded","attempt":1,"result":{"refund":"re_1"},"external_ref":"re_1"}`)
		require.Equal(t, 200, status)
		require.Equal(t, "recorded", m["outcome"])

		status, m = e.do("POST", "/v1/entries", agent, `{"key":"refund:order-8812","type":"succeeded","attempt":1,"result":{"refund":"re_1"}}`)
		require.Equal(t, 200, status)
		require.Equal(t, "duplicate", m["outcome"])

		status, m = e.do("POST", "/v1/entries", agent, intent)
		require.Equal(t, 200, status)
		require.Equal(t, "replay", m["outcome"])
		require.Equal(t, map[string]any{"refund": "re_1"}, m["action"].(map[string]any)["result"])

		status, m = e.do("POST", "/v1/entries", agent, `{"key":"refund:order-8812","type":"heartbeat","attempt":1}`)
		require.Equal(t, 409, status)
		require.Equal(t, "lease_lost", errCode(m))

		status, m = e.do("POST", "/v1/entries", agent, `{"key":"nope","type":"succeeded","attempt":1}`)
		require.Equal(t, 404, status)
		require.Equal(t, "not_found", errCode(m))

		status, m = e.do("GET", "/v1/actions/"+id+"/entries", agent, "")
		require.Equal(t, 200, status)
		types := []string{}
		for _, en := range m["entries"].([]any) {
			types = append(types, en.(map[string]any)["type"].(string))
		}
		require.Equal(t, []string{"intent", "key_reused", "succeeded", "lease_lost"}, types)

		status, m = e.do("GET", "/v1/actions?key=refund:order-8812", agent, "")
		require.Equal(t, 200, status)
		require.Equal(t, id, m["id"])
		require.Equal(t, "succeeded", m["status"])
	})
}

func TestBatch(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newEnv(t, st)
		agent := e.key("mail", "mailer", services.RoleAgent)
		status, m := e.do("POST", "/v1/entries", agent, `{"entries":[
			{"key":"email:1","type":"intent","tool":"email.send"},
			{"key":"email:1","type":"succeeded","attempt":1},
			{"key":"email:2","type":"intent","tool":"email.send","bogus":1},
			{"key":"email:3","type":"intent","tool":"email.send","timeout":0},
			{"key":"email:2","type":"intent","tool":"email.send"}
		]}`)
		require.Equal(t, 200, status)
		rs := m["results"].([]any)
		require.Len(t, rs, 5)
		want := []struct{ outcome, code string }{{"proceed", ""}, {"recorded", ""}, {"rejected", "invalid"}, {"rejected", "invalid"}, {"proceed", ""}}
		for i, w := range want {
			r := rs[i].(map[string]any)
			require.Equal(t, w.outcome, r["outcome"], "entry %d", i)
			require.Equal(t, w.code, errCode(r), "entry %d", i)
		}
	})
}

func TestAuthAndIsolation(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newEnv(t, st)
		agent := e.key("payments", "refund-bot", services.RoleAgent)
		reader := e.key("payments", "dashboards", services.RoleReader)
		foreign := e.key("support", "ticket-bot", services.RoleAgent)
		foreignOp := e.key("support", "support-ops", services.RoleOperator)
		admin := e.key("", "root", services.RoleAdmin)
		intent := `{"key":"refund:1","type":"intent","tool":"payments.refund"}`
		_, m := e.do("POST", "/v1/entries", agent, intent)
		id := m["action"].(map[string]any)["id"].(string)

		cases := []struct {
			name, method, path, key, body string
			status                        int
			code                          string
		}{
			{"no key", "GET", "/v1/actions/" + id, "", "", 401, "unauthorized"},
			{"unknown key", "GET", "/v1/actions/" + id, "ak_0000000000000000000000000000000", "", 401, "unauthorized"},
			{"reader writes", "POST", "/v1/entries", reader, intent, 403, "forbidden"},
			{"admin writes entries", "POST", "/v1/entries", admin, intent, 403, "forbidden"},
			{"agent decides", "POST", "/v1/actions/" + id + "/decisions", agent, `{"decision":"abandon","reason":"x"}`, 403, "forbidden"},
			{"reader decides", "POST", "/v1/actions/" + id + "/decisions", reader, `{"decision":"abandon","reason":"x"}`, 403, "forbidden"},
			{"foreign read", "GET", "/v1/actions/" + id, foreign, "", 404, "not_found"},
			{"foreign entries", "GET", "/v1/actions/" + id + "/entries", foreign, "", 404, "not_found"},
			{"foreign decision", "POST", "/v1/actions/" + id + "/decisions", foreignOp, `{"decision":"confirm","reason":"x"}`, 404, "not_found"},
			{"foreign key lookup", "GET", "/v1/actions?key=refund:1", foreign, "", 404, "not_found"},
			{"not a uuid", "GET", "/v1/actions/xyz", agent, "", 404, "not_found"},
		}
		for _, c := range cases {
			status, m := e.do(c.method, c.path, c.key, c.body)
			require.Equal(t, c.status, status, c.name)
			require.Equal(t, c.code, errCode(m), c.name)
		}

		status, m := e.do("GET", "/v1/actions/"+id, reader, "")
		require.Equal(t, 200, status)
		require.Equal(t, id, m["id"])
		status, m = e.do("GET", "/v1/actions/"+id, admin, "")
		require.Equal(t, 200, status)
		require.Equal(t, id, m["id"], "an admin key reads every namespace")
		status, m = e.do("GET", "/v1/actions", foreign, "")
		require.Equal(t, 200, status)
		require.Empty(t, m["actions"])

		_, err := e.keys.RevokeKey(context.Background(), agent[:11])
		require.NoError(t, err)
		status, m = e.do("GET", "/v1/actions/"+id, agent, "")
		require.Equal(t, 401, status)
		require.Equal(t, "unauthorized", errCode(m))

		require.NotContains(t, e.log.String(), agent, "plaintext keys never reach the logs")
	})
}

// lockedWriter lets the server's goroutines log into one buffer.
type lockedWriter struct {
	mu chanMutex
	w  *bytes.Buffer
}

type chanMutex struct{ c chan struct{} }

func (l *lockedWriter) Write(p []byte) (int, error) {
	if l.mu.c == nil {
		l.mu.c = make(chan struct{}, 1)
	}
	l.mu.c <- struct{}{}
	defer func() { <-l.mu.c }()
	return l.w.Write(p)
}
