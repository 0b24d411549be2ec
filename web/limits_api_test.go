package web_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
)

// TestLimitsOnTheWire: the limit API of SPEC "Limits across actions" — bad
// input refused with a code and nothing written, the roles, versions and
// usage — and a deny limit and a hold limit acting on intents.
func TestLimitsOnTheWire(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newEnv(t, st)
		agent := e.key("payments", "refund-bot", services.RoleAgent)
		reader := e.key("payments", "auditor", services.RoleReader)
		operator := e.key("payments", "oncall", services.RoleOperator)
		admin := e.key("", "root", services.RoleAdmin)

		const good = `"name":"l","namespace":"payments","tools":["payments.*"],"window":3600`
		for _, c := range []struct {
			name, key, body string
			status          int
			code            string
		}{
			{"unknown field", admin, `{` + good + `,"max":5,"limit":5}`, 400, "invalid"},
			{"no max", admin, `{` + good + `}`, 400, "invalid"},
			{"no window", admin, `{"name":"l","namespace":"payments","tools":["*"],"max":5}`, 400, "invalid"},
			{"amount not a number", admin, `{` + good + `,"max":5,"amount":"params.customer + \"x\""}`, 400, "invalid_limit"},
			{"amount does not compile", admin, `{` + good + `,"max":5,"amount":"params.amount +"}`, 400, "invalid_limit"},
			{"group_by not a string", admin, `{` + good + `,"max":5,"group_by":"params.amount > 3"}`, 400, "invalid_limit"},
			{"condition not a bool", admin, `{` + good + `,"max":5,"condition":"params.amount"}`, 400, "invalid_limit"},
			{"window too long", admin, `{"name":"l","namespace":"payments","tools":["*"],"window":2592001,"max":5}`, 400, "invalid"},
			{"window zero", admin, `{"name":"l","namespace":"payments","tools":["*"],"window":0,"max":5}`, 400, "invalid"},
			{"negative max", admin, `{` + good + `,"max":-1}`, 400, "invalid"},
			{"unknown over", admin, `{` + good + `,"max":5,"over":"warn"}`, 400, "invalid"},
			{"unknown mode", admin, `{` + good + `,"max":5,"mode":"dry_run"}`, 400, "invalid"},
			{"approvals out of range", admin, `{` + good + `,"max":5,"approvals_required":6}`, 400, "invalid"},
			{"empty tools", admin, `{"name":"l","namespace":"payments","tools":[],"window":60,"max":5}`, 400, "invalid"},
			{"an operator cannot manage", operator, `{` + good + `,"max":5}`, 403, "forbidden"},
			{"a reader cannot manage", reader, `{` + good + `,"max":5}`, 403, "forbidden"},
			{"an agent cannot manage", agent, `{` + good + `,"max":5}`, 403, "forbidden"},
		} {
			status, m := e.do("POST", "/v1/limits", c.key, c.body)
			require.Equal(t, c.status, status, "%s: %v", c.name, m)
			require.Equal(t, c.code, errCode(m), "%s: %v", c.name, m)
		}
		status, m := e.do("GET", "/v1/limits", admin, "")
		require.Equal(t, 200, status)
		require.Empty(t, m["limits"], "nothing written")

		// Two refunds of at most 100 per customer an hour are denied past it.
		status, m = e.do("POST", "/v1/limits", admin, `{"name":"refunds per customer","namespace":"payments",
			"tools":["payments.refund"],"amount":"params.amount","group_by":"params.customer","window":3600,"max":100,"over":"deny"}`)
		require.Equal(t, 201, status, "%v", m)
		deny := m["id"].(string)
		require.EqualValues(t, 1, m["version"])
		require.Equal(t, "enforce", m["mode"])
		require.EqualValues(t, 1, m["approvals_required"])

		refund := func(key, customer string, amount int) (int, map[string]any) {
			return e.do("POST", "/v1/entries", agent, fmt.Sprintf(
				`{"key":%q,"type":"intent","tool":"payments.refund","params":{"amount":%d,"customer":%q}}`, key, amount, customer))
		}
		status, m = refund("r1", "c_1", 60)
		require.Equal(t, 201, status, "%v", m)
		require.Equal(t, "proceed", m["outcome"])
		require.Equal(t, []any{map[string]any{"id": deny, "name": "refunds per customer", "version": float64(1),
			"group": "c_1", "amount": float64(60), "exceeded": false}}, m["action"].(map[string]any)["limits"])
		status, m = refund("r2", "c_1", 50)
		require.Equal(t, 409, status, "%v", m)
		require.Equal(t, "denied", m["outcome"])
		require.Equal(t, "limit_exceeded", errCode(m))
		require.Equal(t, "denied", m["action"].(map[string]any)["status"])
		status, m = refund("r2", "c_1", 50)
		require.Equal(t, 409, status, "a retry of the denied key learns why: %v", m)
		require.Equal(t, "denied", m["outcome"])
		require.Equal(t, "limit_exceeded", errCode(m))
		require.Contains(t, m["error"].(map[string]any)["message"], `"refunds per customer" (version 1) allowed 100 in group "c_1"`)
		status, m = refund("r3", "c_2", 50)
		require.Equal(t, 201, status, "another customer has its own budget: %v", m)

		status, m = e.do("GET", "/v1/limits/"+deny+"/usage", reader, "")
		require.Equal(t, 200, status, "%v", m)
		require.EqualValues(t, 3600, m["window"])
		require.EqualValues(t, 100, m["max"])
		groups := m["groups"].([]any)
		require.Len(t, groups, 2, "the denied refund counts nothing: %v", groups)
		top := groups[0].(map[string]any)
		require.Equal(t, "c_1", top["group"])
		require.EqualValues(t, 60, top["used"])
		require.EqualValues(t, 1, top["actions"])
		status, m = e.do("GET", "/v1/limits/"+deny+"/usage?group=c_2", operator, "")
		require.Equal(t, 200, status, "%v", m)
		require.Len(t, m["groups"], 1)
		require.Equal(t, "c_2", m["groups"].([]any)[0].(map[string]any)["group"])

		// A hold limit parks the intent over the cap for two people.
		status, m = e.do("PATCH", "/v1/limits/"+deny, admin, `{"over":"hold","approvals_required":2}`)
		require.Equal(t, 200, status, "%v", m)
		require.EqualValues(t, 2, m["version"])
		status, m = refund("r4", "c_1", 50)
		require.Equal(t, 202, status, "%v", m)
		require.Equal(t, "pending_approval", m["outcome"])
		ap := m["action"].(map[string]any)["approval"].(map[string]any)
		require.EqualValues(t, 2, ap["required"])
		require.Equal(t, []any{map[string]any{"id": deny, "name": "refunds per customer", "version": float64(2),
			"group": "c_1", "used": float64(60), "amount": float64(50), "max": float64(100)}}, ap["limits"])

		for _, c := range []struct {
			name, key, method, path string
			status                  int
		}{
			{"agent lists", agent, "GET", "/v1/limits", 403},
			{"agent reads one", agent, "GET", "/v1/limits/" + deny, 403},
			{"agent reads usage", agent, "GET", "/v1/limits/" + deny + "/usage", 403},
			{"operator changes", operator, "PATCH", "/v1/limits/" + deny, 403},
			{"operator deletes", operator, "DELETE", "/v1/limits/" + deny, 403},
			{"reader lists", reader, "GET", "/v1/limits?namespace=payments", 200},
			{"operator reads versions", operator, "GET", "/v1/limits/" + deny + "/versions", 200},
		} {
			body := ""
			if c.method == "PATCH" {
				body = `{"enabled":false}`
			}
			status, m := e.do(c.method, c.path, c.key, body)
			require.Equal(t, c.status, status, "%s: %v", c.name, m)
		}
		status, m = e.do("PATCH", "/v1/limits/"+deny, admin, `{"amount":"params.customer + \"!\""}`)
		require.Equal(t, 400, status, "%v", m)
		require.Equal(t, "invalid_limit", errCode(m))
		status, m = e.do("GET", "/v1/limits/"+deny, admin, "")
		require.Equal(t, 200, status)
		require.EqualValues(t, 2, m["version"], "a refused change writes nothing")

		status, _ = e.do("DELETE", "/v1/limits/"+deny, admin, "")
		require.Equal(t, 204, status)
		status, m = e.do("GET", "/v1/limits/"+deny, admin, "")
		require.Equal(t, 404, status)
		require.Equal(t, "not_found", errCode(m))
		status, m = e.do("GET", "/v1/limits/"+deny+"/versions", reader, "")
		require.Equal(t, 200, status)
		require.Len(t, m["versions"], 2)
		status, m = refund("r5", "c_1", 500)
		require.Equal(t, 201, status, "a deleted limit no longer applies: %v", m)
		require.Nil(t, m["action"].(map[string]any)["limits"])
	})
}
