package web_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
)

// TestOutcomeUnknownOnTheWire: an outcome_unknown is answered 200
// recorded, the action is timed_out at once, and the worker's lookup of the
// attempt proceeds as after a passed lease.
func TestOutcomeUnknownOnTheWire(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newEnv(t, st)
		agent := e.key("payments", "refund-bot", services.RoleAgent)
		status, m := e.do("POST", "/v1/entries", agent, `{"key":"u1","type":"intent","tool":"payments.refund","timeout":600}`)
		require.Equal(t, 201, status, "%v", m)

		status, m = e.do("POST", "/v1/entries", agent, `{"key":"u1","type":"outcome_unknown","attempt":1}`)
		require.Equal(t, 400, status, "%v", m)
		require.Equal(t, "invalid", errCode(m))

		status, m = e.do("POST", "/v1/entries", agent,
			`{"key":"u1","type":"outcome_unknown","attempt":1,"error":"timeout after 30 s calling the provider"}`)
		require.Equal(t, 200, status, "%v", m)
		require.Equal(t, "recorded", m["outcome"])
		require.Nil(t, m["error"])
		require.Equal(t, "timed_out", m["action"].(map[string]any)["status"])
		id := m["action"].(map[string]any)["id"].(string)
		status, m = e.do("GET", "/v1/actions/"+id+"/entries", agent, "")
		require.Equal(t, 200, status, "%v", m)
		es := m["entries"].([]any)
		entry := es[len(es)-1].(map[string]any)
		require.Equal(t, "outcome_unknown", entry["type"])
		require.Equal(t, "timeout after 30 s calling the provider", entry["payload"].(map[string]any)["error"])

		status, m = e.do("POST", "/v1/entries", agent, `{"key":"u1","type":"lookup","attempt":1}`)
		require.Equal(t, 200, status, "%v", m)
		require.Equal(t, "proceed", m["outcome"])
	})
}
