package web_test

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/accounts"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
	"github.com/arbiter-ledger/arbiter/services/policies"
	"github.com/arbiter-ledger/arbiter/services/webhooks"
	"github.com/arbiter-ledger/arbiter/web"
)

// The security table: one test per finding of the outside review that
// attacked a running server, named after the finding. Each failed on the
// code before its fix.

// Finding 1: params nested thousands deep made one action page hundreds of
// megabytes. Every JSON field an entry or a decision carries is limited in
// depth and size, with a 400 that names the field, and nothing is written.
func TestSecurityDeeplyNestedJSONIsRefused(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newEnv(t, st)
		agent := e.key("payments", "refund-bot", services.RoleAgent)
		deep := strings.Repeat("[", 5000) + strings.Repeat("]", 5000)
		wide := "[" + strings.TrimSuffix(strings.Repeat("0,", 12000), ",") + "]"
		for _, c := range []struct{ body, says string }{
			{`{"key":"k","type":"intent","tool":"t","params":{"a":` + deep + `}}`, `field "params" nests 5001 levels deep; the limit is 32`},
			{`{"key":"k","type":"intent","tool":"t","params":{"a":` + wide + `}}`, `field "params" holds 12003 values; the limit is 10000`},
			{`{"key":"k","type":"intent","tool":"t","params":{"a":` + strings.Repeat("[", 40) + strings.Repeat("]", 40) + `}}`, `nests 41 levels deep`},
		} {
			status, m := e.do("POST", "/v1/entries", agent, c.body)
			require.Equal(t, http.StatusBadRequest, status)
			require.Equal(t, "invalid", m["error"].(map[string]any)["code"])
			require.Contains(t, m["error"].(map[string]any)["message"], c.says)
		}
		status, _ := e.do("GET", "/v1/actions?key=k", agent, "")
		require.Equal(t, http.StatusNotFound, status, "nothing written")

		status, m := e.do("POST", "/v1/entries", agent, `{"key":"k","type":"intent","tool":"t","params":{"a":[[1]]}}`)
		require.Equal(t, http.StatusCreated, status, "%v", m)
		status, m = e.do("POST", "/v1/entries", agent, `{"key":"k","type":"succeeded","attempt":1,"result":`+deep+`}`)
		require.Equal(t, http.StatusBadRequest, status)
		require.Contains(t, m["error"].(map[string]any)["message"], `field "result" nests`)
	})
}

// Finding 4: a rejected entry's raw type became a metric label, so one
// batch added 500 series. Labels come from the vocabulary only.
func TestSecurityMetricLabelsAreBounded(t *testing.T) {
	t.Parallel()
	e := newEnv(t, dbtest.Open(t, services.SQLite))
	agent := e.key("payments", "refund-bot", services.RoleAgent)
	var entries []string
	for i := range 200 {
		entries = append(entries, fmt.Sprintf(`{"key":"k%d","type":"series-%d"}`, i, i))
	}
	status, _ := e.do("POST", "/v1/entries", agent, `{"entries":[`+strings.Join(entries, ",")+`]}`)
	require.Equal(t, http.StatusOK, status)
	req, err := http.NewRequest("BREW", e.srv.URL+"/v1/entries", nil)
	require.NoError(t, err)
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	res.Body.Close()
	_, raw := e.doRaw("GET", "/metrics", "", "")
	body := string(raw)
	require.NotContains(t, body, "series-")
	require.NotContains(t, body, `method="BREW"`)
	require.Contains(t, body, `arbiter_entries_total{outcome="rejected",type="other"} 200`)
}

// Finding 6: no HSTS behind a TLS-terminating proxy. With an https public
// URL every answer carries it.
func TestSecurityHSTSFromThePublicURL(t *testing.T) {
	t.Parallel()
	st := dbtest.Open(t, services.SQLite)
	for _, c := range []struct {
		public string
		hsts   bool
	}{{"https://arbiter.example.com", true}, {"http://arbiter.internal", false}, {"", false}} {
		ledger := services.NewLedger(st, services.LedgerConfig{})
		h := web.New(web.Deps{Store: st, Ledger: ledger, Keys: accounts.NewKeys(st), Accounts: accounts.New(st),
			Webhooks: webhooks.New(st, webhooks.Config{Policy: webhooks.AddressPolicy{}}), Policies: policies.New(st),
			Metrics: web.NewMetrics(st.CountByStatus, nil), Log: slog.New(slog.NewTextHandler(io.Discard, nil)), PublicURL: c.public})
		for _, path := range []string{"/signin", "/healthz", "/v1/actions"} {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
			got := rec.Header().Get("Strict-Transport-Security")
			if c.hsts {
				require.Equal(t, "max-age=63072000; includeSubDomains", got, "%s %s", c.public, path)
			} else {
				require.Empty(t, got, "%s %s", c.public, path)
			}
		}
	}
}

// Finding 7: IPv4-compatible, NAT64 and 6to4 addresses were saved and
// dialled. Every special-purpose range of the IANA registries is refused.
func TestSecuritySSRFSpecialPurposeRanges(t *testing.T) {
	t.Parallel()
	st := dbtest.Open(t, services.SQLite)
	ledger := services.NewLedger(st, services.LedgerConfig{})
	srv := httptest.NewServer(web.New(web.Deps{Store: st, Ledger: ledger, Keys: accounts.NewKeys(st), Accounts: accounts.New(st),
		Webhooks: webhooks.New(st, webhooks.Config{Policy: webhooks.AddressPolicy{}}), Policies: policies.New(st),
		Metrics: web.NewMetrics(st.CountByStatus, nil), Log: slog.New(slog.NewTextHandler(io.Discard, nil))}))
	t.Cleanup(srv.Close)
	e := &env{t: t, srv: srv, st: st, log: &bytes.Buffer{}}
	admin := e.key("", "root", services.RoleAdmin)
	for _, host := range []string{"[::7f00:1]", "[::a00:1]", "[64:ff9b::7f00:1]", "[64:ff9b:1::a00:1]", "[2002:7f00:1::]",
		"[2001:db8::1]", "[100::1]", "[2001::1]", "192.0.2.1", "198.51.100.1", "203.0.113.1", "255.255.255.255",
		"[::ffff:10.0.0.1]", "[fec0::1]"} {
		status, m := e.do("POST", "/v1/webhooks", admin, fmt.Sprintf(`{"url":"http://%s/hook","event_types":["action.timed_out"]}`, host))
		require.Equal(t, http.StatusBadRequest, status, "%s: %v", host, m)
		require.Contains(t, m["error"].(map[string]any)["message"], "address", host)
	}
	status, m := e.do("POST", "/v1/webhooks", admin, `{"url":"http://[2606:2800:220:1::1]/hook","event_types":["action.timed_out"]}`)
	require.Equal(t, http.StatusCreated, status, "a public IPv6 address: %v", m)
}

// Finding 8: integers beyond 2^53 were compared as doubles, so a changed
// amount was not key_reused.
func TestSecurityLargeNumbersAreComparedExactly(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newEnv(t, st)
		agent := e.key("payments", "refund-bot", services.RoleAgent)
		status, m := e.do("POST", "/v1/entries", agent, `{"key":"refund:1","type":"intent","tool":"t","params":{"amount":12345678901234567890}}`)
		require.Equal(t, http.StatusCreated, status, "%v", m)
		require.Equal(t, map[string]any{"amount": 12345678901234567890.0}, m["action"].(map[string]any)["params"])
		_, raw := e.doRaw("GET", "/v1/actions?key=refund:1", agent, "")
		require.Contains(t, string(raw), `"params":{"amount":12345678901234567890}`, "stored as sent, every digit")
		status, m = e.do("POST", "/v1/entries", agent, `{"key":"refund:1","type":"intent","tool":"t","params":{"amount":12345678901234567891}}`)
		require.Equal(t, http.StatusUnprocessableEntity, status, "%v", m)
		require.Equal(t, "key_reused", m["error"].(map[string]any)["code"])
		status, m = e.do("POST", "/v1/entries", agent, `{"key":"refund:1","type":"intent","tool":"t","params":{ "amount" : 12345678901234567890 }}`)
		require.Equal(t, http.StatusConflict, status, "the same amount is the same action: %v", m)
	})
}
