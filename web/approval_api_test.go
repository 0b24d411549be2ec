package web_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
)

// TestApprovalOnTheWire: the statuses, codes and shapes SPEC gives approval
// before execution, over HTTP.
func TestApprovalOnTheWire(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newEnv(t, st)
		agent := e.key("payments", "refund-bot", services.RoleAgent)
		e.user("alice@example.com", services.RoleOperator)
		alice := e.ownedKey("payments", "ops-alice", services.RoleOperator, "alice@example.com")
		intent := `{"key":"refund:order-9001","type":"intent","tool":"payments.refund","effect":"keyed","params":{"amount":250000},"require_approval":true}`

		status, m := e.do("POST", "/v1/entries", agent, intent)
		require.Equal(t, 202, status)
		require.Equal(t, "pending_approval", m["outcome"])
		require.Nil(t, m["error"])
		a := m["action"].(map[string]any)
		require.Equal(t, "awaiting_approval", a["status"])
		require.EqualValues(t, 0, a["attempt"])
		ap := a["approval"].(map[string]any)
		require.EqualValues(t, 1, ap["required"])
		require.Empty(t, ap["approvals"])
		require.Nil(t, ap["rejection"])
		require.Nil(t, ap["escalate_at"])
		require.NotEmpty(t, ap["expires_at"])
		require.NotContains(t, ap, "escalated", "internal fields stay inside")
		id := a["id"].(string)

		// An agent key can never approve.
		status, m = e.do("POST", "/v1/actions/"+id+"/decisions", agent, `{"decision":"approve"}`)
		require.Equal(t, 403, status)
		require.Equal(t, "forbidden", errCode(m))
		// require_approval belongs to intents.
		status, m = e.do("POST", "/v1/entries", agent, `{"key":"refund:order-9001","type":"note","message":"x","require_approval":true}`)
		require.Equal(t, 400, status)
		require.Equal(t, "invalid", errCode(m))

		// approve needs no reason; the result shows who approved.
		status, m = e.do("POST", "/v1/actions/"+id+"/decisions", alice, `{"decision":"approve"}`)
		require.Equal(t, 201, status, "%v", m)
		a = m["action"].(map[string]any)
		require.Equal(t, "approved", a["status"])
		votes := a["approval"].(map[string]any)["approvals"].([]any)
		require.Len(t, votes, 1)
		require.Equal(t, map[string]any{"kind": "operator", "name": "alice@example.com", "via": "api_key:ops-alice"}, votes[0].(map[string]any)["by"])
		require.NotContains(t, votes[0], "identity")
		require.Equal(t, "decision", m["entry"].(map[string]any)["type"])
		_, metrics := e.doRaw("GET", "/metrics", "", "")
		require.Contains(t, string(metrics), `arbiter_approval_decision_seconds_count{result="approved"} 1`)
		require.Contains(t, string(metrics), `arbiter_actions{status="approved"} 1`)
		// Only from awaiting_approval.
		status, m = e.do("POST", "/v1/actions/"+id+"/decisions", alice, `{"decision":"approve"}`)
		require.Equal(t, 409, status)
		require.Equal(t, "invalid_transition", errCode(m))

		// reject needs a reason, then denies; later intents are denied, 409, error null.
		status, m = e.do("POST", "/v1/actions/"+id+"/decisions", alice, `{"decision":"reject"}`)
		require.Equal(t, 400, status)
		require.Equal(t, "invalid", errCode(m))
		status, _ = e.do("POST", "/v1/actions/"+id+"/decisions", alice, `{"decision":"reject","reason":"over the limit"}`)
		require.Equal(t, 201, status)
		status, m = e.do("POST", "/v1/entries", agent, intent)
		require.Equal(t, 409, status)
		require.Equal(t, "denied", m["outcome"])
		require.Nil(t, m["error"])
		rej := m["action"].(map[string]any)["approval"].(map[string]any)["rejection"].(map[string]any)
		require.Equal(t, "over the limit", rej["reason"])

		// Actions that needed no approval carry approval: null.
		status, m = e.do("POST", "/v1/entries", agent, `{"key":"refund:order-1","type":"intent","tool":"payments.refund"}`)
		require.Equal(t, 201, status)
		a = m["action"].(map[string]any)
		require.Contains(t, a, "approval")
		require.Nil(t, a["approval"])
	})
}

// TestPreferWait: a waiting intent is answered as soon as the action is
// approved (proceed) or denied (denied), and pending_approval when nobody
// decides in time; Preference-Applied says the wait was honoured.
func TestPreferWait(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newEnv(t, st)
		agent := e.key("payments", "refund-bot", services.RoleAgent)
		e.user("alice@example.com", services.RoleOperator)
		alice := e.ownedKey("payments", "ops-alice", services.RoleOperator, "alice@example.com")
		intent := func(key string) string {
			return `{"key":"` + key + `","type":"intent","tool":"payments.refund","params":{"amount":1},"require_approval":true}`
		}
		waitFor := func(key string, wait string) (int, map[string]any, http.Header, time.Duration) {
			req, err := http.NewRequest("POST", e.srv.URL+"/v1/entries", strings.NewReader(intent(key)))
			require.NoError(t, err)
			req.Header.Set("Authorization", "Bearer "+agent)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Prefer", wait)
			start := time.Now()
			res, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			defer res.Body.Close()
			var m map[string]any
			require.NoError(t, json.NewDecoder(res.Body).Decode(&m))
			return res.StatusCode, m, res.Header, time.Since(start)
		}
		decideSoon := func(key, body string) {
			go func() {
				for range 100 {
					time.Sleep(50 * time.Millisecond)
					status, m := e.do("GET", "/v1/actions?key="+key, alice, "")
					if status == 200 {
						e.do("POST", "/v1/actions/"+m["id"].(string)+"/decisions", alice, body)
						return
					}
				}
			}()
		}

		decideSoon("approved-meanwhile", `{"decision":"approve"}`)
		status, m, h, took := waitFor("approved-meanwhile", "wait=10")
		require.Equal(t, 201, status, "%v", m)
		require.Equal(t, "proceed", m["outcome"])
		require.EqualValues(t, 1, m["attempt"])
		require.Equal(t, "wait=10", h.Get("Preference-Applied"))
		require.Less(t, took, 5*time.Second)

		decideSoon("denied-meanwhile", `{"decision":"reject","reason":"no"}`)
		status, m, _, _ = waitFor("denied-meanwhile", "respond-async, wait=10")
		require.Equal(t, 409, status)
		require.Equal(t, "denied", m["outcome"])

		status, m, h, took = waitFor("nobody-decides", "wait=1")
		require.Equal(t, 202, status)
		require.Equal(t, "pending_approval", m["outcome"])
		require.Equal(t, "wait=1", h.Get("Preference-Applied"))
		require.GreaterOrEqual(t, took, time.Second)
	})
}
