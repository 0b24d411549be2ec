package web_test

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/PuerkitoBio/goquery"
	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
)

// TestPolicyPages: an admin adds a policy from the dashboard, sees the
// compiler's message next to a bad condition, tries a rule on recent
// intents, changes the policy (a new version) and deletes it.
func TestPolicyPages(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newEnv(t, st)
		agent := e.key("payments", "refund-bot", services.RoleAgent)
		for i, amount := range []string{"250000", "500"} {
			status, m := e.do("POST", "/v1/entries", agent, `{"key":"refund:`+string(rune('a'+i))+`","type":"intent","tool":"payments.refund","params":{"amount":`+amount+`}}`)
			require.Equal(t, 201, status, "%v", m)
		}
		pw := e.user("admin@example.com", services.RoleAdmin)
		b := e.browser()
		b.signIn("admin@example.com", pw)

		p := b.get("/admin/policies")
		require.Equal(t, http.StatusOK, p.status)
		require.Equal(t, 1, p.testid("policies-empty").Length())
		form := url.Values{"name": {"large refunds"}, "namespace": {"payments"}, "tools": {"payments.*"},
			"condition": {"params.amount >"}, "approvals_required": {"2"}, "expires_after": {"3600"}, "escalate_after": {""},
			"enabled": {"true"}, "do": {"save"}}
		p = b.post("/admin/policies", form)
		require.Equal(t, http.StatusBadRequest, p.status)
		require.Contains(t, flatText(p.testid("policy-condition-error")), "the condition does not compile")
		celErr := p.testid("policy-condition-error")
		require.Equal(t, "pre", goquery.NodeName(celErr), "monospace, lines kept: the caret stands under the column")
		require.Contains(t, celErr.Text(), "\n | params.amount >\n | ...............^")
		require.Equal(t, "params.amount >", p.testid("policy-form-condition").Text(), "what was typed is kept")

		form.Set("condition", "params.amount > 100000")
		form.Set("do", "test")
		p = b.post("/admin/policies", form)
		require.Equal(t, http.StatusOK, p.status, p.body)
		require.Equal(t, "Would have caught 1 of the last 2 first intents", flatText(p.testid("policy-preview-count")))
		require.Equal(t, 1, p.testid("policy-sample").Length())
		require.Equal(t, 1, p.testid("policies-empty").Length(), "trying saves nothing")

		form.Set("do", "save")
		p = b.post("/admin/policies", form)
		require.Equal(t, http.StatusSeeOther, p.status, p.body)
		id := p.header.Get("Location")[len("/admin/policies/"):]
		p = b.get("/admin/policies/" + id)
		require.Equal(t, "Policy created: large refunds (version 1).", flatText(p.testid("flash")))
		require.Equal(t, "large refunds", flatText(p.testid("policy-title")))
		require.Equal(t, 1, p.testid("policy-version-row").Length())

		edit := url.Values{"name": {"large refunds"}, "tools": {"payments.refund"}, "condition": {"params.amount > 200000"},
			"approvals_required": {"3"}, "expires_after": {"3600"}, "escalate_after": {"600"}, "enabled": {"true"}, "do": {"save"}}
		p = b.post("/admin/policies/"+id, edit)
		require.Equal(t, http.StatusSeeOther, p.status, p.body)
		p = b.get(p.header.Get("Location"))
		require.Equal(t, "Saved as version 2.", flatText(p.testid("policy-notice")))
		require.Equal(t, 2, p.testid("policy-version-row").Length())
		status, m := e.do("POST", "/v1/entries", agent, `{"key":"refund:c","type":"intent","tool":"payments.refund","params":{"amount":300000}}`)
		require.Equal(t, 202, status, "%v", m)
		require.EqualValues(t, 3, m["action"].(map[string]any)["approval"].(map[string]any)["required"])

		p = b.get("/admin/policies")
		require.Equal(t, "3", flatText(p.testid("policy-approvals")))
		require.Equal(t, "after 10 min", flatText(p.testid("policy-escalates")))
		p = b.post("/admin/policies/"+id+"/delete", url.Values{})
		require.Equal(t, http.StatusSeeOther, p.status)
		p = b.get("/admin/policies")
		require.Equal(t, 1, p.testid("policies-empty").Length())

		// Operators do not manage policies.
		opw := e.user("ops@example.com", services.RoleOperator)
		ob := e.browser()
		ob.signIn("ops@example.com", opw)
		require.Equal(t, http.StatusForbidden, ob.get("/admin/policies").status)
	})
}
