package web_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
)

// An action held for approval that nobody approved yet carries
// "approvals": [] (and "policies": []), never null, in every answer that
// shows it: the first intent's, a batch's, a repeated intent's, the pretty
// form and a read.
func TestPendingApprovalHasEmptyApprovalsList(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newEnv(t, st)
		agent := e.key("payments", "refund-bot", services.RoleAgent)
		intent := func(key string) string {
			return `{"key":"` + key + `","type":"intent","tool":"payments.refund","params":{"amount":1},"require_approval":true}`
		}
		lists := func(raw []byte) map[string]json.RawMessage {
			t.Helper()
			var m struct {
				Action struct {
					ID       string                     `json:"id"`
					Approval map[string]json.RawMessage `json:"approval"`
				} `json:"action"`
			}
			require.NoError(t, json.Unmarshal(raw, &m), "%s", raw)
			require.NotNil(t, m.Action.Approval, "%s", raw)
			return m.Action.Approval
		}
		check := func(what string, raw []byte) {
			t.Helper()
			ap := lists(raw)
			require.JSONEq(t, `[]`, string(ap["approvals"]), "%s: %s", what, raw)
			require.JSONEq(t, `[]`, string(ap["policies"]), "%s: %s", what, raw)
		}

		status, raw := e.doRaw("POST", "/v1/entries", agent, intent("k1"))
		require.Equal(t, 202, status, "%s", raw)
		check("first intent", raw)
		status, raw = e.doRaw("POST", "/v1/entries?pretty", agent, intent("k2"))
		require.Equal(t, 202, status, "%s", raw)
		check("first intent, pretty", raw)
		status, raw = e.doRaw("POST", "/v1/entries", agent, intent("k1"))
		require.Equal(t, 202, status, "%s", raw)
		check("the same intent again", raw)

		status, raw = e.doRaw("POST", "/v1/entries", agent, `{"entries":[`+intent("k3")+`]}`)
		require.Equal(t, 200, status, "%s", raw)
		var batch struct{ Results []json.RawMessage }
		require.NoError(t, json.Unmarshal(raw, &batch))
		require.Len(t, batch.Results, 1)
		check("batch", batch.Results[0])

		var first struct{ Action struct{ ID string } }
		_, raw = e.doRaw("POST", "/v1/entries", agent, intent("k1"))
		require.NoError(t, json.Unmarshal(raw, &first))
		status, raw = e.doRaw("GET", "/v1/actions/"+first.Action.ID, agent, "")
		require.Equal(t, 200, status, "%s", raw)
		check("read", []byte(`{"action":`+string(raw)+`}`))
	})
}
