package web_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
)

// TestPolicyAgentIsTheKeyName: a condition on agent sees the API key's
// name, whatever the entry calls its agent; the entry's agent stays the
// label it sent.
func TestPolicyAgentIsTheKeyName(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newEnv(t, st)
		agent := e.key("payments", "refund-bot", services.RoleAgent)
		admin := e.key("", "root", services.RoleAdmin)
		status, m := e.do("POST", "/v1/policies", admin,
			`{"name":"refund bot","namespace":"payments","tools":["payments.*"],"condition":"agent == \"refund-bot\""}`)
		require.Equal(t, 201, status, "%v", m)

		status, m = e.do("POST", "/v1/entries", agent,
			`{"key":"r1","type":"intent","tool":"payments.refund","agent":"innocent-reporter","params":{"amount":5}}`)
		require.Equal(t, 202, status, "an agent naming itself differently is still caught: %v", m)
		require.Equal(t, "pending_approval", m["outcome"])
		require.Equal(t, "innocent-reporter", m["action"].(map[string]any)["agent"], "the label is kept")

		// A condition naming the label the entry chose catches nothing.
		status, m = e.do("POST", "/v1/policies", admin,
			`{"name":"label","namespace":"payments","tools":["other.*"],"condition":"agent == \"innocent-reporter\""}`)
		require.Equal(t, 201, status, "%v", m)
		status, m = e.do("POST", "/v1/entries", agent,
			`{"key":"r2","type":"intent","tool":"other.thing","agent":"innocent-reporter"}`)
		require.Equal(t, 201, status, "%v", m)
		require.Equal(t, "proceed", m["outcome"])
	})
}

// TestPolicyEndpointRoles: admins manage and test policies; operators and
// readers read their namespace's; agent keys read none.
func TestPolicyEndpointRoles(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newEnv(t, st)
		agent := e.key("payments", "refund-bot", services.RoleAgent)
		reader := e.key("payments", "auditor", services.RoleReader)
		operator := e.key("payments", "oncall", services.RoleOperator)
		admin := e.key("", "root", services.RoleAdmin)
		status, m := e.do("POST", "/v1/policies", admin,
			`{"name":"all","namespace":"payments","tools":["payments.*"]}`)
		require.Equal(t, 201, status, "%v", m)
		id := m["id"].(string)
		test := `{"namespace":"payments","tools":["payments.*"],"condition":"params.amount > 1000","limit":50}`

		for _, c := range []struct {
			name, key, method, path, body string
			status                        int
		}{
			{"agent lists", agent, "GET", "/v1/policies", "", 403},
			{"agent lists its namespace", agent, "GET", "/v1/policies?namespace=payments", "", 403},
			{"agent reads one", agent, "GET", "/v1/policies/" + id, "", 403},
			{"agent reads versions", agent, "GET", "/v1/policies/" + id + "/versions", "", 403},
			{"agent tests", agent, "POST", "/v1/policies/test", test, 403},
			{"reader tests", reader, "POST", "/v1/policies/test", test, 403},
			{"operator tests", operator, "POST", "/v1/policies/test", test, 403},
			{"reader lists", reader, "GET", "/v1/policies", "", 200},
			{"reader reads one", reader, "GET", "/v1/policies/" + id, "", 200},
			{"reader reads versions", reader, "GET", "/v1/policies/" + id + "/versions", "", 200},
			{"operator lists", operator, "GET", "/v1/policies", "", 200},
			{"operator reads one", operator, "GET", "/v1/policies/" + id, "", 200},
			{"operator reads versions", operator, "GET", "/v1/policies/" + id + "/versions", "", 200},
			{"admin tests", admin, "POST", "/v1/policies/test", test, 200},
		} {
			status, m := e.do(c.method, c.path, c.key, c.body)
			require.Equal(t, c.status, status, "%s: %v", c.name, m)
			if c.status == 403 {
				require.Equal(t, "forbidden", errCode(m), c.name)
			}
		}
	})
}

// TestApprovalShowsPolicyError: a condition that failed at run time is
// shown in the action's approval, beside the policy it belongs to; a
// condition that evaluated carries no error.
func TestApprovalShowsPolicyError(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newEnv(t, st)
		agent := e.key("payments", "refund-bot", services.RoleAgent)
		admin := e.key("", "root", services.RoleAdmin)
		status, m := e.do("POST", "/v1/policies", admin,
			`{"name":"large refunds","namespace":"payments","tools":["payments.*"],"condition":"params.amount > 100000"}`)
		require.Equal(t, 201, status, "%v", m)
		status, m = e.do("POST", "/v1/policies", admin,
			`{"name":"every refund","namespace":"payments","tools":["payments.*"],"condition":"tool == \"payments.refund\""}`)
		require.Equal(t, 201, status, "%v", m)

		status, m = e.do("POST", "/v1/entries", agent, `{"key":"no-params","type":"intent","tool":"payments.refund"}`)
		require.Equal(t, 202, status, "%v", m)
		act := m["action"].(map[string]any)
		status, stored := e.do("GET", "/v1/actions/"+act["id"].(string), admin, "")
		require.Equal(t, 200, status, "%v", stored)
		for _, got := range []map[string]any{act, stored} {
			pols := got["approval"].(map[string]any)["policies"].([]any)
			require.Len(t, pols, 2)
			failed, evaluated := pols[0].(map[string]any), pols[1].(map[string]any)
			require.Equal(t, "large refunds", failed["name"])
			msg, ok := failed["error"].(string)
			require.True(t, ok, "the failed condition's error is shown: %v", failed)
			require.Contains(t, msg, "amount")
			require.Equal(t, "every refund", evaluated["name"])
			require.Nil(t, evaluated["error"], "a condition that evaluated has no error")
		}
	})
}
