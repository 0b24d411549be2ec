package web_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
)

// Look before you resend over HTTP: the status codes of lookups, the lookup
// lease in lease_until, bad input refused with a code and nothing written,
// and the metrics of answers and of timeouts resolved without a person.
func TestLookupsOverHTTP(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newEnv(t, st)
		agent := e.key("payments", "refund-bot", services.RoleAgent)
		operator := e.key("payments", "ops", services.RoleOperator)
		start := func(key string) {
			status, m := e.do("POST", "/v1/entries", agent, fmt.Sprintf(
				`{"key":%q,"type":"intent","tool":"payments.refund","effect":"keyed","timeout":1,"key_ttl":86400}`, key))
			require.Equal(t, http.StatusCreated, status, "%v", m)
		}
		start("refund:1")
		start("refund:2")
		time.Sleep(1100 * time.Millisecond)
		n, err := services.NewLedger(st, services.LedgerConfig{}).Sweep(context.Background())
		require.NoError(t, err)
		require.Equal(t, 2, n)

		status, m := e.do("POST", "/v1/entries", agent, `{"key":"refund:1","type":"lookup","attempt":1,"timeout":30}`)
		require.Equal(t, http.StatusOK, status, "%v", m)
		require.Equal(t, "proceed", m["outcome"])
		lease, err := time.Parse(time.RFC3339Nano, m["lease_until"].(string))
		require.NoError(t, err)
		require.WithinDuration(t, time.Now().Add(30*time.Second), lease, 5*time.Second, "the lookup lease")
		rc := m["action"].(map[string]any)["reconciliation"].(map[string]any)
		require.Equal(t, float64(1), rc["lookups"])
		require.NotNil(t, rc["key_expires_at"])

		status, m = e.do("POST", "/v1/entries", agent, `{"key":"refund:1","type":"lookup","attempt":1}`)
		require.Equal(t, http.StatusConflict, status, "%v", m)
		require.Equal(t, "in_progress", m["outcome"])

		// Bad input: each a 400 with a code, nothing written.
		id := m["action"].(map[string]any)["id"].(string)
		_, before := e.do("GET", "/v1/actions/"+id+"/entries", agent, "")
		for _, bad := range []struct{ body, says string }{
			{`{"key":"refund:1","type":"lookup_result","attempt":1,"answer":"maybe"}`, `unknown answer "maybe"`},
			{`{"key":"refund:1","type":"lookup_result","answer":"happened"}`, `field "attempt" is required`},
			{`{"key":"refund:1","type":"lookup_result","attempt":1}`, `field "answer" is required`},
			{`{"key":"refund:3","type":"intent","tool":"t","key_ttl":0}`, `field "key_ttl" must be between 1 and 31536000`},
			{`{"key":"refund:3","type":"intent","tool":"t","key_ttl":31536001}`, `field "key_ttl" must be between 1 and 31536000`},
			{`{"key":"refund:1","type":"lookup","attempt":1,"timeout":3601}`, `field "timeout" must be between 1 and 3600`},
			{`{"key":"refund:1","type":"lookup","attempt":1,"answer":"happened"}`, `field "answer" does not apply to lookup entries`},
			{`{"key":"refund:1","type":"compensation_failed","attempt":1}`, `field "error" is required`},
			{`{"key":"refund:1","type":"lookup_result","attempt":1,"answer":"happened","evidence2":1}`, `unknown field "evidence2"`},
		} {
			status, m := e.do("POST", "/v1/entries", agent, bad.body)
			require.Equal(t, http.StatusBadRequest, status, "%s: %v", bad.body, m)
			require.Equal(t, "invalid", m["error"].(map[string]any)["code"], bad.body)
			require.Contains(t, m["error"].(map[string]any)["message"], bad.says, bad.body)
		}
		_, after := e.do("GET", "/v1/actions/"+id+"/entries", agent, "")
		require.Equal(t, len(before["entries"].([]any)), len(after["entries"].([]any)), "nothing written")
		status, _ = e.do("GET", "/v1/actions?key=refund:3", agent, "")
		require.Equal(t, http.StatusNotFound, status, "no action created by a refused intent")

		// The provider has refund 1: confirmed without a person, the
		// evidence kept. Refund 2 cannot be found: a person decides.
		status, m = e.do("POST", "/v1/entries", agent,
			`{"key":"refund:1","type":"lookup_result","attempt":1,"answer":"happened","external_ref":"re_1","evidence":{"refund":"re_1","status":"succeeded"}}`)
		require.Equal(t, http.StatusOK, status, "%v", m)
		require.Equal(t, "recorded", m["outcome"])
		require.Equal(t, "confirmed", m["action"].(map[string]any)["status"])
		require.Equal(t, "re_1", m["action"].(map[string]any)["external_ref"])
		status, m = e.do("POST", "/v1/entries", agent, `{"key":"refund:2","type":"lookup_result","attempt":1,"answer":"unknown","evidence":"provider search is down"}`)
		require.Equal(t, http.StatusOK, status, "%v", m)
		a2 := m["action"].(map[string]any)
		require.Equal(t, "timed_out", a2["status"])
		last := a2["reconciliation"].(map[string]any)["last_lookup"].(map[string]any)
		require.Equal(t, "unknown", last["answer"])
		require.Equal(t, "provider search is down", last["said"])
		status, m = e.do("POST", "/v1/actions/"+a2["id"].(string)+"/decisions", operator, `{"decision":"abandon","reason":"never reached the provider"}`)
		require.Equal(t, http.StatusCreated, status, "%v", m)

		status, raw := e.doRaw("GET", "/metrics", "", "")
		require.Equal(t, http.StatusOK, status)
		for _, want := range []string{
			`arbiter_lookup_answers_total{answer="happened"} 1`,
			`arbiter_lookup_answers_total{answer="unknown"} 1`,
			`arbiter_lookup_answers_total{answer="not_happened"} 0`,
			`arbiter_timeouts_resolved_total{by="lookup"} 1`,
			`arbiter_timeouts_resolved_total{by="operator"} 1`,
			`arbiter_timeouts_resolved_total{by="late_result"} 0`,
			`arbiter_entries_total{outcome="proceed",type="lookup"} 1`,
			`arbiter_entries_total{outcome="in_progress",type="lookup"} 1`,
		} {
			require.Contains(t, string(raw), want)
		}
	})
}
