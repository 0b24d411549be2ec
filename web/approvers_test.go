package web_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/accounts"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
)

// ownedKey creates an API key that belongs to the user with email (who
// must exist) and returns its secret.
func (e *env) ownedKey(ns, name string, role services.Role, owner string) string {
	e.t.Helper()
	_, secret, err := accounts.NewKeys(e.st).CreateKey(context.Background(),
		accounts.CreateKeyRequest{Namespace: ns, Name: name, Role: role, Owner: owner})
	require.NoError(e.t, err)
	return secret
}

// TestApprovalsCountPeopleOnTheWire: a key created in the dashboard belongs
// to the admin who made it; their approval in the dashboard and one with
// that key are one person, however the key is named; two keys of one name
// with different owners are two; a key without an owner cannot approve.
func TestApprovalsCountPeopleOnTheWire(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newEnv(t, st)
		agent := e.key("payments", "refund-bot", services.RoleAgent)
		nobody := e.key("payments", "on-call", services.RoleOperator)
		b := e.admin("carol@example.com")

		p := b.post("/admin/keys", url.Values{"namespace": {""}, "name": {"bob@example.com"}, "role": {"admin"}})
		require.Equal(t, http.StatusCreated, p.status, p.body)
		carolsKey := p.testid("new-api-key").AttrOr("value", "")
		p = b.get("/admin/keys")
		row := p.doc.Find(`[data-testid=key-row][data-prefix="` + carolsKey[:11] + `"]`)
		require.Equal(t, "carol@example.com", strings.TrimSpace(row.Find(`[data-testid=key-owner]`).Text()), "the key list shows the owner")
		row = p.doc.Find(`[data-testid=key-row][data-prefix="` + nobody[:11] + `"]`)
		require.Equal(t, "none: cannot approve", strings.TrimSpace(row.Find(`[data-testid=key-owner]`).Text()))

		status, m := e.do("POST", "/v1/policies", carolsKey,
			`{"name":"big refunds","namespace":"payments","tools":["payments.refund"],"approvals_required":2}`)
		require.Equal(t, http.StatusCreated, status, "%v", m)
		status, m = e.do("POST", "/v1/entries", agent, `{"key":"r1","type":"intent","tool":"payments.refund","effect":"keyed","params":{"amount":9000}}`)
		require.Equal(t, http.StatusAccepted, status, "%v", m)
		id := m["action"].(map[string]any)["id"].(string)
		entries := func() int {
			_, m := e.do("GET", "/v1/actions/"+id+"/entries", carolsKey, "")
			return len(m["entries"].([]any))
		}

		// A key without an owner: 403 approver_unknown, nothing written.
		n := entries()
		status, m = e.do("POST", "/v1/actions/"+id+"/decisions", nobody, `{"decision":"approve"}`)
		require.Equal(t, http.StatusForbidden, status, "%v", m)
		require.Equal(t, "approver_unknown", errCode(m))
		require.Contains(t, m["error"].(map[string]any)["message"], "--owner EMAIL")
		status, m = e.do("POST", "/v1/decisions", nobody, `{"filter":{"ids":["`+id+`"]},"decision":"approve","max_count":1}`)
		require.Equal(t, http.StatusForbidden, status, "%v", m)
		require.Equal(t, "approver_unknown", errCode(m))
		require.Equal(t, n, entries())

		// Carol in the dashboard, then her key named after Bob: one person.
		p = detailDecide(t, b, id, "approve", url.Values{"reason": {""}})
		require.Equal(t, http.StatusSeeOther, p.status, p.body)
		n = entries()
		status, m = e.do("POST", "/v1/actions/"+id+"/decisions", carolsKey, `{"decision":"approve"}`)
		require.Equal(t, http.StatusConflict, status, "%v", m)
		require.Equal(t, "already_approved", errCode(m))
		require.Equal(t, n, entries(), "nothing written")
		_, a := e.do("GET", "/v1/actions/"+id, carolsKey, "")
		votes := a["approval"].(map[string]any)["approvals"].([]any)
		require.Len(t, votes, 1)
		require.Equal(t, map[string]any{"kind": "operator", "name": "carol@example.com", "via": "dashboard"}, votes[0].(map[string]any)["by"])
		require.NotContains(t, e.pageText(b, id), "bob@example.com approved")

		// Two keys named on-call with different owners: two people.
		e.user("dave@example.com", services.RoleOperator)
		e.user("erin@example.com", services.RoleOperator)
		dave := e.ownedKey("payments", "on-call", services.RoleOperator, "dave@example.com")
		erin := e.ownedKey("payments", "on-call", services.RoleOperator, "erin@example.com")
		daveToo := e.ownedKey("payments", "on-call", services.RoleOperator, "dave@example.com")
		status, m = e.do("POST", "/v1/entries", agent, `{"key":"r2","type":"intent","tool":"payments.refund","effect":"keyed","params":{"amount":9000}}`)
		require.Equal(t, http.StatusAccepted, status, "%v", m)
		id2 := m["action"].(map[string]any)["id"].(string)
		status, m = e.do("POST", "/v1/actions/"+id2+"/decisions", dave, `{"decision":"approve"}`)
		require.Equal(t, http.StatusCreated, status, "%v", m)
		require.Equal(t, map[string]any{"kind": "operator", "name": "dave@example.com", "via": "api_key:on-call"},
			m["entry"].(map[string]any)["actor"])
		status, m = e.do("POST", "/v1/actions/"+id2+"/decisions", daveToo, `{"decision":"approve"}`)
		require.Equal(t, http.StatusConflict, status, "%v", m)
		require.Equal(t, "already_approved", errCode(m), "two keys of one owner are one person")
		status, m = e.do("POST", "/v1/actions/"+id2+"/decisions", erin, `{"decision":"approve"}`)
		require.Equal(t, http.StatusCreated, status, "%v", m)
		require.Equal(t, "approved", m["action"].(map[string]any)["status"])
		_, es := e.do("GET", "/v1/actions/"+id2+"/entries", erin, "")
		list := es["entries"].([]any)
		require.Equal(t, map[string]any{"kind": "operator", "name": "erin@example.com", "via": "api_key:on-call"},
			list[len(list)-1].(map[string]any)["actor"], "the timeline keeps via")
		require.Contains(t, e.pageText(b, id2), "dave@example.com via API key on-call")
	})
}

// pageText is the text of the action's page as b sees it.
func (e *env) pageText(b *browser, id string) string {
	e.t.Helper()
	p := b.get("/actions/" + id)
	require.Equal(e.t, http.StatusOK, p.status)
	return strings.Join(strings.Fields(p.doc.Find("main").Text()), " ")
}
