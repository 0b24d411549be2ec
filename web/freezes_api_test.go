package web_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
)

// TestFreezesOnTheWire: the freeze and breaker APIs of SPEC "Limits across
// actions" — bad input refused with a code and nothing written, who may
// freeze, a frozen intent answered 409 frozen with Retry-After, and a lift.
func TestFreezesOnTheWire(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newEnv(t, st)
		agent := e.key("payments", "refund-bot", services.RoleAgent)
		reader := e.key("payments", "auditor", services.RoleReader)
		operator := e.key("payments", "oncall", services.RoleOperator)
		otherOperator := e.key("mail", "oncall-mail", services.RoleOperator)
		admin := e.key("", "root", services.RoleAdmin)

		for _, c := range []struct {
			name, key, body string
			status          int
			code            string
		}{
			{"unknown field", operator, `{"namespace":"payments","reason":"x","until":"tomorrow"}`, 400, "invalid"},
			{"no reason", operator, `{"namespace":"payments"}`, 400, "invalid"},
			{"empty tools", operator, `{"namespace":"payments","tools":[],"reason":"x"}`, 400, "invalid"},
			{"tools not a list", operator, `{"namespace":"payments","tools":"*","reason":"x"}`, 400, "invalid"},
			{"no namespace", operator, `{"reason":"x"}`, 400, "invalid"},
			{"a reader", reader, `{"namespace":"payments","reason":"x"}`, 403, "forbidden"},
			{"an agent", agent, `{"namespace":"payments","reason":"x"}`, 403, "forbidden"},
			{"another namespace's operator", otherOperator, `{"namespace":"payments","reason":"x"}`, 404, "not_found"},
		} {
			status, m := e.do("POST", "/v1/freezes", c.key, c.body)
			require.Equal(t, c.status, status, "%s: %v", c.name, m)
			require.Equal(t, c.code, errCode(m), "%s: %v", c.name, m)
		}
		status, m := e.do("GET", "/v1/freezes", admin, "")
		require.Equal(t, 200, status)
		require.Empty(t, m["freezes"], "nothing written")
		for _, q := range []string{"active=maybe", "active="} {
			status, m = e.do("GET", "/v1/freezes?"+q, admin, "")
			require.Equal(t, 400, status, q)
			require.Equal(t, "invalid", errCode(m), q)
		}

		intent := func(key string) (int, map[string]any, http.Header) {
			req, err := http.NewRequest("POST", e.srv.URL+"/v1/entries", strings.NewReader(
				`{"key":"`+key+`","type":"intent","tool":"payments.refund","effect":"keyed","params":{"amount":1}}`))
			require.NoError(t, err)
			req.Header.Set("Authorization", "Bearer "+agent)
			req.Header.Set("Content-Type", "application/json")
			res, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			defer res.Body.Close()
			var out map[string]any
			require.NoError(t, json.NewDecoder(res.Body).Decode(&out))
			return res.StatusCode, out, res.Header
		}
		status, _, _ = intent("before")
		require.Equal(t, 201, status)
		status, _ = e.do("POST", "/v1/entries", agent, `{"key":"before","type":"failed","attempt":1,"error":"card declined","retriable":true}`)
		require.Equal(t, 200, status)

		status, f := e.do("POST", "/v1/freezes", operator, `{"namespace":"payments","reason":"refunds look wrong"}`)
		require.Equal(t, 201, status, "%v", f)
		require.Equal(t, []any{"*"}, f["tools"], "every tool unless told")
		require.Nil(t, f["lifted_at"])
		require.Nil(t, f["lifted_by"])
		require.Equal(t, "operator", f["by"].(map[string]any)["kind"])
		id := f["id"].(string)

		status, m, h := intent("before")
		require.Equal(t, 409, status, "%v", m)
		require.Equal(t, "frozen", m["outcome"])
		require.Equal(t, "frozen", errCode(m))
		require.Equal(t, "5", h.Get("Retry-After"))
		require.EqualValues(t, 5, m["error"].(map[string]any)["retry_after"])
		require.Equal(t, "failed", m["action"].(map[string]any)["status"], "nothing changed")

		status, m, _ = intent("after")
		require.Equal(t, 202, status, "%v", m)
		require.Equal(t, "pending_approval", m["outcome"])
		frozenBy := m["action"].(map[string]any)["approval"].(map[string]any)["frozen_by"].([]any)
		require.Equal(t, id, frozenBy[0].(map[string]any)["id"])

		status, m = e.do("GET", "/v1/freezes?namespace=payments&active=true", reader, "")
		require.Equal(t, 200, status)
		require.Len(t, m["freezes"], 1)
		status, m = e.do("POST", "/v1/freezes/"+id+"/lift", operator, `{}`)
		require.Equal(t, 400, status, "a lift needs a reason: %v", m)
		status, m = e.do("POST", "/v1/freezes/"+id+"/lift", reader, `{"reason":"ok"}`)
		require.Equal(t, 403, status, "%v", m)
		status, m = e.do("POST", "/v1/freezes/"+id+"/lift", operator, `{"reason":"checked with finance"}`)
		require.Equal(t, 200, status, "%v", m)
		require.NotNil(t, m["lifted_at"])
		require.Equal(t, "checked with finance", m["lift_reason"])
		status, m = e.do("POST", "/v1/freezes/"+id+"/lift", operator, `{"reason":"again"}`)
		require.Equal(t, 409, status, "%v", m)
		require.Equal(t, "conflict", errCode(m))

		status, m, _ = intent("after")
		require.Equal(t, 201, status, "the key the freeze held proceeds: %v", m)
		status, m, _ = intent("before")
		require.Equal(t, 201, status, "and the retriable failure retries: %v", m)

		status, m = e.do("GET", "/v1/freezes/"+id, reader, "")
		require.Equal(t, 200, status)
		require.Equal(t, id, m["id"])
		status, _ = e.do("GET", "/v1/freezes/"+id, otherOperator, "")
		require.Equal(t, 404, status, "another namespace's freeze is not there")
	})
}

// TestBreakersOnTheWire: breakers are admins' to manage; bad numbers are
// refused with invalid_breaker and nothing is written.
func TestBreakersOnTheWire(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newEnv(t, st)
		operator := e.key("payments", "oncall", services.RoleOperator)
		agent := e.key("payments", "bot", services.RoleAgent)
		admin := e.key("", "root", services.RoleAdmin)
		const good = `"name":"b","namespace":"payments","tools":["mail.*"]`
		for _, c := range []struct {
			name, key, body string
			status          int
			code            string
		}{
			{"unknown field", admin, `{` + good + `,"max_unknown_ratio":0.5,"ratio":1}`, 400, "invalid"},
			{"no ratio", admin, `{` + good + `}`, 400, "invalid_breaker"},
			{"ratio above 1", admin, `{` + good + `,"max_failure_ratio":2}`, 400, "invalid_breaker"},
			{"window zero", admin, `{` + good + `,"max_unknown_ratio":0.5,"window":0}`, 400, "invalid_breaker"},
			{"min_actions negative", admin, `{` + good + `,"max_unknown_ratio":0.5,"min_actions":-3}`, 400, "invalid_breaker"},
			{"empty tools", admin, `{"name":"b","namespace":"payments","tools":[],"max_unknown_ratio":0.5}`, 400, "invalid"},
			{"an operator", operator, `{` + good + `,"max_unknown_ratio":0.5}`, 403, "forbidden"},
			{"no such namespace", admin, `{"name":"b","namespace":"nowhere","tools":["*"],"max_unknown_ratio":0.5}`, 404, "not_found"},
		} {
			status, m := e.do("POST", "/v1/breakers", c.key, c.body)
			require.Equal(t, c.status, status, "%s: %v", c.name, m)
			require.Equal(t, c.code, errCode(m), "%s: %v", c.name, m)
		}
		status, m := e.do("GET", "/v1/breakers", admin, "")
		require.Equal(t, 200, status)
		require.Empty(t, m["breakers"], "nothing written")

		status, b := e.do("POST", "/v1/breakers", admin, `{`+good+`,"max_unknown_ratio":0.4,"min_actions":20}`)
		require.Equal(t, 201, status, "%v", b)
		id := b["id"].(string)
		status, m = e.do("GET", "/v1/breakers/"+id, operator, "")
		require.Equal(t, 200, status, "%v", m)
		require.EqualValues(t, 0, m["state"].(map[string]any)["actions"])
		status, _ = e.do("GET", "/v1/breakers/"+id, agent, "")
		require.Equal(t, 403, status)
		status, m = e.do("PATCH", "/v1/breakers/"+id, admin, `{"min_actions":0}`)
		require.Equal(t, 400, status, "%v", m)
		status, m = e.do("PATCH", "/v1/breakers/"+id, admin, `{"enabled":false}`)
		require.Equal(t, 200, status, "%v", m)
		require.EqualValues(t, 2, m["version"])
		status, _ = e.do("DELETE", "/v1/breakers/"+id, admin, "")
		require.Equal(t, 204, status)
		status, m = e.do("GET", "/v1/breakers/"+id+"/versions", admin, "")
		require.Equal(t, 200, status)
		require.Len(t, m["versions"], 2)
	})
}
