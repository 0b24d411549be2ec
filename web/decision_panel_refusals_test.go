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

// htmxPost posts a form as htmx does: the HX-Request header and the CSRF
// token in X-CSRF-Token.
func htmxPost(t *testing.T, b *browser, path string, v url.Values) page {
	t.Helper()
	if v.Get("csrf_token") == "" {
		v.Set("csrf_token", b.csrf)
	}
	req, err := http.NewRequest("POST", b.e.srv.URL+path, strings.NewReader(v.Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("HX-Request", "true")
	req.Header.Set("X-CSRF-Token", v.Get("csrf_token"))
	return b.do(req)
}

// requirePanelFragment checks that an htmx answer is the decision panel
// alone (what the form targets), saying why, and never a page.
func requirePanelFragment(t *testing.T, p page, want string) {
	t.Helper()
	require.NotContains(t, p.body, "<html", "a fragment, not a page")
	require.Equal(t, 0, p.doc.Find("header.topbar").Length(), "not a page")
	require.Equal(t, 0, p.testid("error-page").Length(), "not the error page")
	panel := p.testid("decision-panel")
	require.Equal(t, 1, panel.Length(), p.body)
	require.Equal(t, "decision-panel", panel.AttrOr("id", ""))
	require.Contains(t, flatText(panel.Find(`[data-testid=decision-error]`)), want)
}

// requireRefusal checks how a refusal is answered to htmx: 200 (a failed
// load would be an error in the browser's console) with the code in the
// Arbiter-Refusal header.
func requireRefusal(t *testing.T, p page, code string) {
	t.Helper()
	require.Equal(t, http.StatusOK, p.status)
	require.Equal(t, code, p.header.Get("Arbiter-Refusal"))
}

// requirePanelOnPage checks that a no-JavaScript answer is the action page
// with the refusal inside its panel.
func requirePanelOnPage(t *testing.T, p page, want string) {
	t.Helper()
	require.Equal(t, 1, p.doc.Find("header.topbar").Length(), "a whole page")
	require.Equal(t, 1, p.testid("action-live").Length(), "the action's page, not the error page")
	require.Equal(t, 1, p.testid("action-header").Length())
	require.Contains(t, flatText(p.testid("decision-panel").Find(`[data-testid=decision-error]`)), want)
}

// TestRefusedDecisionStaysInThePanel: whatever refuses a decision, the
// answer is the panel with the reason worded for a person (htmx) or the
// action's page with it in the panel (no JavaScript), never an error page
// inside the action page, and the API keeps its own message.
func TestRefusedDecisionStaysInThePanel(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		d := newDetailEnv(t, st)
		admin := d.key("", "root", services.RoleAdmin)
		status, m := d.do("POST", "/v1/policies", admin, `{"name":"large refunds","namespace":"payments",`+
			`"tools":["payments.refund"],"condition":"has(params.amount) && params.amount > 100000","approvals_required":2,"expires_after":3600}`)
		require.Equal(t, http.StatusCreated, status, "%v", m)
		m = d.entry(`{"key":"refund:order-9001","type":"intent","tool":"payments.refund","params":{"amount":250000}}`)
		require.Equal(t, "pending_approval", m["outcome"])
		held := m["action"].(map[string]any)["id"].(string)

		// The forms aim at the panel.
		p := d.op.get("/actions/" + held)
		form := p.testid("decision-form-approve")
		require.Equal(t, "#decision-panel", form.AttrOr("hx-target", ""))
		require.Equal(t, "outerHTML", form.AttrOr("hx-swap", ""))
		approve := detailForm(t, p, "approve")
		p = d.op.post("/actions/"+held+"/decisions", approve)
		require.Equal(t, http.StatusSeeOther, p.status, p.body)

		// A second yes from the same person, forced past the page (no
		// expected_version, as from a second tab's hand-made request).
		again := url.Values{"decision": {"approve"}, "reason": {""}}
		p = htmxPost(t, d.op, "/actions/"+held+"/decisions", again)
		requireRefusal(t, p, services.CodeAlreadyApproved)
		requirePanelFragment(t, p, "You already approved this action")
		require.Equal(t, "You approved · waiting for 1 more", flatText(p.testid("decision-approved-by-you")))
		p = d.op.post("/actions/"+held+"/decisions", again)
		require.Equal(t, http.StatusConflict, p.status)
		requirePanelOnPage(t, p, "You already approved this action")

		// The same from a second tab that still shows Approve: the page is
		// out of date, which the panel says, with what changed.
		p = htmxPost(t, d.op, "/actions/"+held+"/decisions", approve)
		requireRefusal(t, p, services.CodeVersionConflict)
		requirePanelFragment(t, p, "changed after you opened")
		require.Equal(t, 1, p.testid("decision-panel").Find(`[data-testid=conflict]`).Length(), "what changed is shown in the panel")

		// A decision the state does not allow, worded for a person.
		timedOut := d.start("refund:order-1", "keyed", 1, `{}`)
		d.timeOut()
		bad := url.Values{"decision": {"mark_compensated"}, "reason": {"did it by hand"}}
		p = htmxPost(t, d.op, "/actions/"+timedOut+"/decisions", bad)
		requireRefusal(t, p, services.CodeInvalidTransition)
		requirePanelFragment(t, p, "not allowed")
		require.NotContains(t, flatText(p.testid("decision-error")), "allowed now: confirm", "the API's message is not shown")

		// An unknown action is a fragment too.
		p = htmxPost(t, d.op, "/actions/00000000-0000-4000-8000-000000000000/decisions", url.Values{"decision": {"abandon"}, "reason": {"x"}})
		requireRefusal(t, p, services.CodeNotFound)
		require.NotContains(t, p.body, "<html")
		require.Equal(t, 1, p.testid("decision-panel").Length(), p.body)
		require.Contains(t, flatText(p.testid("decision-error")), "no longer there")

		// The API says what it always said.
		op := d.key("payments", "ops-automation", services.RoleOperator)
		status, m = d.do("POST", "/v1/actions/"+timedOut+"/decisions", op, `{"decision":"mark_compensated","reason":"x"}`)
		require.Equal(t, http.StatusConflict, status)
		require.Contains(t, m["error"].(map[string]any)["message"], "allowed now:")
	})
}

// TestViewerRefusalInThePanel: a viewer's forged decision is refused on the
// action's page, in its panel.
func TestViewerRefusalInThePanel(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		d := newDetailEnv(t, st)
		id := d.start("refund:order-2", "keyed", 1, `{}`)
		d.timeOut()
		_, err := accounts.New(st).CreateMember(context.Background(), "viewer@example.com", services.RoleViewer, []string{"payments"},
			"correct horse battery viewer")
		require.NoError(t, err)
		b := d.browser()
		b.signIn("viewer@example.com", "correct horse battery viewer")
		b.get("/actions/" + id)
		v := url.Values{"decision": {"abandon"}, "reason": {"not mine to decide"}}
		p := b.post("/actions/"+id+"/decisions", v)
		require.Equal(t, http.StatusForbidden, p.status)
		requirePanelOnPage(t, p, "you may not decide")
		require.Equal(t, 1, p.testid("decision-readonly").Length())
		p = htmxPost(t, b, "/actions/"+id+"/decisions", url.Values{"decision": {"abandon"}, "reason": {"x"}})
		requireRefusal(t, p, services.CodeForbidden)
		requirePanelFragment(t, p, "you may not decide")
		s, _ := d.apiStatus(id)
		require.Equal(t, "timed_out", s)
	})
}
