package web_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
)

// The answers in this file were found by fuzzing the contract from outside
// (sdk/contract/run): requests the document calls invalid that the server
// used to accept, or answered with a status the document does not list.

// TestRequestBodyMustBeAnObject: a body of null, a string or a number is
// refused on every route that takes a JSON object. encoding/json decodes
// null into nothing at all, so PATCH /v1/webhooks/{id} with null used to
// answer 200 as an empty change.
func TestRequestBodyMustBeAnObject(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newEnv(t, st)
		admin := e.key("", "root", services.RoleAdmin)
		agent := e.key("payments", "refund-bot", services.RoleAgent)
		_, m := e.do("POST", "/v1/entries", agent, `{"key":"k","type":"intent","tool":"t"}`)
		action := m["action"].(map[string]any)["id"].(string)
		status, m := e.do("POST", "/v1/webhooks", admin, `{"url":"http://127.0.0.1:9/hook","event_types":["action.timed_out"]}`)
		require.Equal(t, 201, status, "%v", m)
		hook := m["id"].(string)
		status, m = e.do("POST", "/v1/policies", admin, `{"name":"p","namespace":"payments","tools":["x.*"]}`)
		require.Equal(t, 201, status, "%v", m)
		policy := m["id"].(string)

		for _, route := range []struct{ method, path string }{
			{"POST", "/v1/actions/" + action + "/decisions"},
			{"POST", "/v1/decisions"},
			{"POST", "/v1/webhooks"},
			{"PATCH", "/v1/webhooks/" + hook},
			{"POST", "/v1/policies"},
			{"PATCH", "/v1/policies/" + policy},
			{"POST", "/v1/policies/test"},
		} {
			for _, body := range []string{`null`, ` null `, `"abandon"`, `1`, `true`} {
				status, m := e.do(route.method, route.path, admin, body)
				require.Equal(t, 400, status, "%s %s %s: %v", route.method, route.path, body, m)
				require.Equal(t, "invalid", errCode(m), "%s %s %s", route.method, route.path, body)
				require.Contains(t, m["error"].(map[string]any)["message"], "expected a JSON object")
			}
		}
		status, m = e.do("GET", "/v1/webhooks/"+hook, admin, "")
		require.Equal(t, 200, status)
		require.EqualValues(t, 1, len(m["event_types"].([]any)), "the endpoint is unchanged")
		status, m = e.do("GET", "/v1/policies/"+policy, admin, "")
		require.Equal(t, 200, status)
		require.EqualValues(t, 1, m["version"], "the policy is unchanged")
		status, m = e.do("GET", "/v1/actions/"+action, admin, "")
		require.Equal(t, 200, status)
		require.Equal(t, "in_progress", m["status"], "the action is undecided")
	})
}

// TestNullForATypedFieldIsRefused: null is not a value of a boolean, string
// or integer field, and is refused rather than read as "left out" (which
// silently created an enabled endpoint from "enabled": null). Fields that
// hold any JSON (a decision's result) take null as a value.
func TestNullForATypedFieldIsRefused(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newEnv(t, st)
		admin := e.key("", "root", services.RoleAdmin)
		agent := e.key("payments", "refund-bot", services.RoleAgent)
		operator := e.key("payments", "ops", services.RoleOperator)
		_, m := e.do("POST", "/v1/entries", agent, `{"key":"k","type":"intent","tool":"t"}`)
		action := m["action"].(map[string]any)["id"].(string)

		for _, c := range []struct {
			name, key, method, path, body, field string
		}{
			{"webhook enabled", admin, "POST", "/v1/webhooks", `{"url":"http://127.0.0.1:9/hook","event_types":["action.timed_out"],"enabled":null}`, "enabled"},
			{"webhook url", admin, "POST", "/v1/webhooks", `{"url":null,"event_types":["action.timed_out"]}`, "url"},
			{"policy escalation", admin, "POST", "/v1/policies", `{"name":"p","namespace":"payments","tools":["x.*"],"escalate_after":null}`, "escalate_after"},
			{"decision external_ref", operator, "POST", "/v1/actions/" + action + "/decisions", `{"decision":"confirm","reason":"r","external_ref":null}`, "external_ref"},
			{"decision expected_version", operator, "POST", "/v1/actions/" + action + "/decisions", `{"decision":"confirm","reason":"r","expected_version":null}`, "expected_version"},
			{"bulk dry_run", operator, "POST", "/v1/decisions", `{"decision":"abandon","reason":"r","dry_run":null,"filter":{"ids":["` + action + `"]}}`, "dry_run"},
			{"bulk filter", operator, "POST", "/v1/decisions", `{"decision":"abandon","reason":"r","filter":null}`, "filter"},
			{"bulk filter field", operator, "POST", "/v1/decisions", `{"decision":"abandon","reason":"r","filter":{"ids":["` + action + `"],"tool":null}}`, "tool"},
		} {
			status, m := e.do(c.method, c.path, c.key, c.body)
			require.Equal(t, 400, status, "%s: %v", c.name, m)
			require.Equal(t, "invalid", errCode(m), c.name)
			require.Contains(t, m["error"].(map[string]any)["message"], `"`+c.field+`" must not be null`, c.name)
		}
		status, m := e.do("GET", "/v1/webhooks", admin, "")
		require.Equal(t, 200, status)
		require.Empty(t, m["webhooks"], "no endpoint was created")
		status, m = e.do("GET", "/v1/policies", admin, "")
		require.Equal(t, 200, status)
		require.Empty(t, m["policies"], "no policy was created")

		status, m = e.do("POST", "/v1/actions/"+action+"/decisions", operator, `{"decision":"confirm","reason":"r","result":null}`)
		require.Equal(t, 201, status, "a result may be null: %v", m)
		require.Equal(t, "confirmed", m["action"].(map[string]any)["status"])
	})
}

// TestEmptyQueryValueIsRefused: a typed query parameter given with no value
// (since=, until=, limit=, status=) is a mistake, not "no filter".
func TestEmptyQueryValueIsRefused(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newEnv(t, st)
		admin := e.key("", "root", services.RoleAdmin)
		reader := e.key("payments", "viewer", services.RoleReader)
		for _, q := range []string{"?since=", "?until=", "?limit=", "?status=", "?status=failed,", "?status=failed&status="} {
			status, m := e.do("GET", "/v1/actions"+q, reader, "")
			require.Equal(t, 400, status, "%s: %v", q, m)
			require.Equal(t, "invalid", errCode(m), q)
		}
		status, m := e.do("GET", "/v1/actions?status=failed,timed_out&tool=&agent=&q=&cursor=", reader, "")
		require.Equal(t, 200, status, "empty strings are still strings: %v", m)

		status, m = e.do("POST", "/v1/webhooks", admin, `{"url":"http://127.0.0.1:9/hook","event_types":["action.timed_out"]}`)
		require.Equal(t, 201, status, "%v", m)
		status, m = e.do("GET", "/v1/webhooks/"+m["id"].(string)+"/deliveries?limit=", admin, "")
		require.Equal(t, 400, status, "%v", m)
		require.Equal(t, "invalid", errCode(m))
	})
}

// TestPolicyTestTakesOnlyPost: /v1/policies/test is the dry run, never a
// policy id, so other methods are 405 with Allow: POST (a PATCH used to be
// read as an update of a policy called "test" and refused for its body).
func TestPolicyTestTakesOnlyPost(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newEnv(t, st)
		admin := e.key("", "root", services.RoleAdmin)
		for _, method := range []string{"GET", "PATCH", "DELETE"} {
			req, err := http.NewRequest(method, e.srv.URL+"/v1/policies/test", strings.NewReader(`{"namespace":"payments","tools":["*"]}`))
			require.NoError(t, err)
			req.Header.Set("Authorization", "Bearer "+admin)
			res, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			res.Body.Close()
			require.Equal(t, 405, res.StatusCode, method)
			require.Equal(t, "OPTIONS, POST", res.Header.Get("Allow"), method)
		}
		status, m := e.do("PATCH", "/v1/policies/test", admin, "")
		require.Equal(t, 405, status)
		require.Equal(t, "method_not_allowed", errCode(m))
		status, m = e.do("POST", "/v1/policies/test", admin, `{"namespace":"payments","tools":["*"]}`)
		require.Equal(t, 200, status, "%v", m)
	})
}

// TestPolicyDryRunLimitZeroIsRefused: the document bounds a dry run's limit
// to 1–10,000; an explicit 0 used to be read as "the default" and answered
// 200. Left out, the default (1,000) applies.
func TestPolicyDryRunLimitZeroIsRefused(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newEnv(t, st)
		admin := e.key("", "root", services.RoleAdmin)
		e.key("payments", "refund-bot", services.RoleAgent)
		for _, limit := range []string{`0`, `-1`, `10001`} {
			status, m := e.do("POST", "/v1/policies/test", admin, `{"namespace":"payments","tools":["*"],"limit":`+limit+`}`)
			require.Equal(t, 400, status, "limit %s: %v", limit, m)
			require.Equal(t, "invalid", errCode(m), limit)
		}
		for _, body := range []string{`{"namespace":"payments","tools":["*"]}`, `{"namespace":"payments","tools":["*"],"limit":1}`} {
			status, m := e.do("POST", "/v1/policies/test", admin, body)
			require.Equal(t, 200, status, "%s: %v", body, m)
		}
	})
}

// TestFilterTextPostgreSQLCannotCompare: a NUL or invalid UTF-8 in a filter
// (?tool=, ?agent=, ?q=, ?namespace= with or without ?key=, a bulk decision's filter.tool or
// filter.agent) is 400 invalid on both databases; PostgreSQL used to fail
// the query with 500.
func TestFilterTextPostgreSQLCannotCompare(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newEnv(t, st)
		admin := e.key("", "root", services.RoleAdmin)
		reader := e.key("payments", "viewer", services.RoleReader)
		operator := e.key("payments", "ops", services.RoleOperator)
		for _, key := range []string{admin, reader} {
			for _, q := range []string{"/v1/actions?tool=a%00b", "/v1/actions?agent=a%00b", "/v1/actions?q=a%00b",
				"/v1/actions?namespace=a%00b", "/v1/actions?tool=a%FFb", "/v1/policies?namespace=a%00b",
				"/v1/actions?namespace=a%00b&key=k", "/v1/actions?namespace=a%FFb&key=k"} {
				status, m := e.do("GET", q, key, "")
				require.Equal(t, 400, status, "%s: %v", q, m)
				require.Equal(t, "invalid", errCode(m), q)
			}
		}
		for _, key := range []string{admin, operator} {
			for _, field := range []string{"tool", "agent"} {
				body := `{"decision":"abandon","reason":"r","dry_run":true,"filter":{"` + field + `":"a\u0000b"}}`
				status, m := e.do("POST", "/v1/decisions", key, body)
				require.Equal(t, 400, status, "%s: %v", field, m)
				require.Equal(t, "invalid", errCode(m), field)
			}
		}
	})
}

// TestPolicyConditionWithNULIsRefused: a NUL inside a CEL string literal
// compiles, but PostgreSQL cannot store it: creating such a policy answered
// 500. It is 400 invalid on both databases, and the dry run refuses it too.
func TestPolicyConditionWithNULIsRefused(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newEnv(t, st)
		admin := e.key("", "root", services.RoleAdmin)
		e.key("payments", "refund-bot", services.RoleAgent)
		for path, body := range map[string]string{
			"/v1/policies":      `{"name":"p","namespace":"payments","tools":["*"],"condition":"tool == \"\u0000\""}`,
			"/v1/policies/test": `{"namespace":"payments","tools":["*"],"condition":"tool == \"\u0000\""}`,
		} {
			status, m := e.do("POST", path, admin, body)
			require.Equal(t, 400, status, "%s: %v", path, m)
			require.Equal(t, "invalid", errCode(m), path)
		}
		status, m := e.do("GET", "/v1/policies", admin, "")
		require.Equal(t, 200, status)
		require.Empty(t, m["policies"], "nothing was created")
	})
}

// TestLoneSurrogateIsRefused: encoding/json turns a lone UTF-16 surrogate
// escape into U+FFFD, so a decision's reason, an endpoint's description or a
// policy's name was stored other than sent. Every JSON body is held to the
// rule entries follow: refused with 400, naming the field; a surrogate pair
// (an emoji) is text like any other.
func TestLoneSurrogateIsRefused(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newEnv(t, st)
		admin := e.key("", "root", services.RoleAdmin)
		agent := e.key("payments", "refund-bot", services.RoleAgent)
		operator := e.key("payments", "ops", services.RoleOperator)
		_, m := e.do("POST", "/v1/entries", agent, `{"key":"k","type":"intent","tool":"t"}`)
		action := m["action"].(map[string]any)["id"].(string)
		for _, c := range []struct{ key, path, body, field string }{
			{operator, "/v1/actions/" + action + "/decisions", `{"decision":"confirm","reason":"r\ud800"}`, "reason"},
			{admin, "/v1/webhooks", `{"url":"http://127.0.0.1:9/hook","event_types":["action.timed_out"],"description":"\udc00"}`, "description"},
			{admin, "/v1/policies", `{"name":"p\ud800x","namespace":"payments","tools":["*"]}`, "name"},
		} {
			status, m := e.do("POST", c.path, c.key, c.body)
			require.Equal(t, 400, status, "%s: %v", c.path, m)
			require.Equal(t, "invalid", errCode(m), c.path)
			require.Equal(t, `field "`+c.field+`" must not contain a lone UTF-16 surrogate escape`, m["error"].(map[string]any)["message"])
		}
		status, m := e.do("GET", "/v1/actions/"+action, operator, "")
		require.Equal(t, 200, status)
		require.Equal(t, "in_progress", m["status"], "the action is undecided")

		status, m = e.do("POST", "/v1/webhooks", admin, `{"url":"http://127.0.0.1:9/hook","event_types":["action.timed_out"],"description":"on call \ud83d\ude00"}`)
		require.Equal(t, 201, status, "%v", m)
		require.Equal(t, "on call \U0001F600", m["description"])
	})
}
