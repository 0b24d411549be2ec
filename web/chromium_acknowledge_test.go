package web_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
)

// TestBrowserClearKeyReuseAlert: a key offered again with other params
// shows on triage as "key reused"; the operator opens it, acknowledges the
// alert with a reason in three clicks, and it leaves triage while the
// action stays as it was; the panel no longer offers the acknowledgement.
func TestBrowserClearKeyReuseAlert(t *testing.T) {
	t.Parallel()
	st := dbtest.Open(t, services.SQLite)
	d := newDesk(t, st)
	id := d.entry(`{"key":"refund:order-8812","type":"intent","tool":"payments.refund","effect":"keyed","params":{"amount":1999}}`)
	status, m := d.do("POST", "/v1/entries", d.agent, `{"key":"refund:order-8812","type":"succeeded","attempt":1}`)
	require.Equal(t, http.StatusOK, status, "%v", m)
	status, m = d.do("POST", "/v1/entries", d.agent, `{"key":"refund:order-8812","type":"intent","tool":"payments.refund","effect":"keyed","params":{"amount":2999}}`)
	require.Equal(t, http.StatusUnprocessableEntity, status, "%v", m)

	pw := d.user("oncall@example.com", services.RoleOperator)
	tb := newTab(t, true)
	tb.signIn(t, d.srv.URL, "oncall@example.com", pw)
	row := `[data-testid="triage-row"][data-action-id="` + id + `"]`
	var kind string
	tb.run(t,
		chromedp.Navigate(d.srv.URL+"/"),
		chromedp.WaitVisible(row, chromedp.ByQuery),
		chromedp.Text(row+` `+testid("triage-kind"), &kind, chromedp.ByQuery),
	)
	require.Contains(t, kind, "key reused")

	clicks := 0
	click := func(sel string) chromedp.Action {
		clicks++
		return chromedp.Click(sel, chromedp.ByQuery)
	}
	const reason = "the second intent was the agent's retry with a recomputed amount; the refund ran once"
	var notice, status2 string
	tb.run(t,
		click(row+` `+testid("triage-key")),
		chromedp.WaitVisible(testid("decision-acknowledge"), chromedp.ByQuery),
		click(testid("decision-acknowledge")+` > summary`),
		chromedp.SendKeys(testid("decision-form-acknowledge")+` `+testid("decision-reason"), reason, chromedp.ByQuery),
		click(testid("decision-form-acknowledge")+` `+testid("decision-submit")),
		chromedp.WaitVisible(testid("decision-notice"), chromedp.ByQuery),
		chromedp.Text(testid("decision-notice"), &notice, chromedp.ByQuery),
		chromedp.Text(testid("action-status"), &status2, chromedp.ByQuery),
	)
	require.LessOrEqual(t, clicks, 3, "open, choose, submit")
	require.Contains(t, notice, "Acknowledged")
	require.Equal(t, "succeeded", strings.TrimSpace(status2), "the action does not change")
	var offered, rows int
	tb.run(t,
		chromedp.Evaluate(`document.querySelectorAll('[data-testid="decision-acknowledge"]').length`, &offered),
		chromedp.Navigate(d.srv.URL+"/"),
		chromedp.WaitVisible(testid("triage-counts"), chromedp.ByQuery),
		chromedp.Evaluate(`document.querySelectorAll('`+row+`').length`, &rows),
	)
	require.Zero(t, offered, "nothing left to acknowledge")
	require.Zero(t, rows, "the alert left triage")

	status, m = d.do("GET", "/v1/actions/"+id+"/entries", d.key("payments", "auditor", services.RoleReader), "")
	require.Equal(t, http.StatusOK, status)
	entries := m["entries"].([]any)
	last := entries[len(entries)-1].(map[string]any)
	require.Equal(t, "decision", last["type"])
	require.Equal(t, "acknowledge", last["payload"].(map[string]any)["decision"])
	require.Equal(t, reason, last["payload"].(map[string]any)["reason"])

	status, m = d.do("POST", "/v1/actions/"+id+"/decisions", d.operator, `{"decision":"acknowledge","reason":"again"}`)
	require.Equal(t, http.StatusConflict, status, "%v", m)
	require.Equal(t, "invalid_transition", errCode(m))
	require.Contains(t, m["error"].(map[string]any)["message"], "nothing to acknowledge")
}
