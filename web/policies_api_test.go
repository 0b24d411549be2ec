package web_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
)

// TestPoliciesOnTheWire: the policy API of SPEC "Approval before
// execution", and a policy holding an intent end to end.
func TestPoliciesOnTheWire(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newEnv(t, st)
		agent := e.key("payments", "refund-bot", services.RoleAgent)
		reader := e.key("payments", "auditor", services.RoleReader)
		admin := e.key("", "root", services.RoleAdmin)

		for _, c := range []struct {
			name, key, body string
			status          int
			code            string
		}{
			{"unknown field", admin, `{"name":"p","namespace":"payments","tools":["payments.*"],"approvals":2}`, 400, "invalid"},
			{"invalid CEL", admin, `{"name":"p","namespace":"payments","tools":["payments.*"],"condition":"params.amount >"}`, 400, "invalid_policy"},
			{"not a bool", admin, `{"name":"p","namespace":"payments","tools":["payments.*"],"condition":"params.amount"}`, 400, "invalid_policy"},
			{"empty tools", admin, `{"name":"p","namespace":"payments","tools":[]}`, 400, "invalid"},
			{"approvals out of range", admin, `{"name":"p","namespace":"payments","tools":["*"],"approvals_required":6}`, 400, "invalid"},
			{"expiry out of range", admin, `{"name":"p","namespace":"payments","tools":["*"],"expires_after":30}`, 400, "invalid"},
			{"escalation out of range", admin, `{"name":"p","namespace":"payments","tools":["*"],"expires_after":600,"escalate_after":700}`, 400, "invalid"},
			{"a reader cannot manage", reader, `{"name":"p","namespace":"payments","tools":["*"]}`, 403, "forbidden"},
			{"an agent cannot manage", agent, `{"name":"p","namespace":"payments","tools":["*"]}`, 403, "forbidden"},
		} {
			status, m := e.do("POST", "/v1/policies", c.key, c.body)
			require.Equal(t, c.status, status, "%s: %v", c.name, m)
			require.Equal(t, c.code, errCode(m), c.name)
		}
		status, m := e.do("GET", "/v1/policies", admin, "")
		require.Equal(t, 200, status)
		require.Empty(t, m["policies"], "nothing written")

		status, m = e.do("POST", "/v1/policies", admin,
			`{"name":"large refunds","namespace":"payments","tools":["payments.*"],"condition":"params.amount > 100000","approvals_required":2}`)
		require.Equal(t, 201, status, "%v", m)
		id := m["id"].(string)
		require.EqualValues(t, 1, m["version"])
		require.EqualValues(t, 86400, m["expires_after"])
		require.Nil(t, m["escalate_after"])

		status, m = e.do("POST", "/v1/entries", agent,
			`{"key":"refund:order-1","type":"intent","tool":"payments.refund","params":{"amount":250000}}`)
		require.Equal(t, 202, status)
		pol := m["action"].(map[string]any)["approval"].(map[string]any)["policies"].([]any)
		require.Equal(t, map[string]any{"id": id, "name": "large refunds", "version": float64(1)}, pol[0])

		status, m = e.do("GET", "/v1/policies?namespace=payments", reader, "")
		require.Equal(t, 200, status)
		require.Len(t, m["policies"], 1)
		status, m = e.do("PATCH", "/v1/policies/"+id, admin, `{"enabled":false}`)
		require.Equal(t, 200, status)
		require.EqualValues(t, 2, m["version"])
		status, _ = e.do("DELETE", "/v1/policies/"+id, admin, "")
		require.Equal(t, 204, status)
		status, m = e.do("GET", "/v1/policies/"+id, admin, "")
		require.Equal(t, 404, status)
		require.Equal(t, "not_found", errCode(m))
		status, m = e.do("GET", "/v1/policies/"+id+"/versions", reader, "")
		require.Equal(t, 200, status)
		require.Len(t, m["versions"], 2)

		status, m = e.do("POST", "/v1/policies/test", admin,
			`{"namespace":"payments","tools":["payments.*"],"condition":"params.amount > 1000","limit":50}`)
		require.Equal(t, 200, status, "%v", m)
		require.EqualValues(t, 1, m["examined"])
		require.EqualValues(t, 1, m["matched"])
		require.Len(t, m["sample"], 1)
	})
}
