package web_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
)

// TestBrowserFreezeFromTriage: the person on call pulls the brake from the
// triage page (Freeze…, a reason), new refunds are held and shown frozen
// on triage, other intents are answered frozen; the lift on the freezes
// page asks for a reason, and the held refund proceeds.
func TestBrowserFreezeFromTriage(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		d := newDesk(t, st)
		pw := d.user("oncall@example.com", services.RoleOperator)
		tb := newTab(t, true)
		tb.signIn(t, d.srv.URL, "oncall@example.com", pw)
		tb.run(t,
			chromedp.Navigate(d.srv.URL+"/"),
			chromedp.WaitVisible(testid("freeze-control"), chromedp.ByQuery),
			chromedp.Click(testid("freeze-open"), chromedp.ByQuery),
			chromedp.WaitVisible(testid("freeze-namespace"), chromedp.ByQuery),
			chromedp.SendKeys(testid("freeze-namespace"), "payments", chromedp.ByQuery),
			chromedp.SetValue(testid("freeze-tools-input"), "payments.*", chromedp.ByQuery),
			chromedp.SendKeys(testid("freeze-reason-input"), "refunds are going out twice", chromedp.ByQuery),
			chromedp.Click(testid("freeze-start"), chromedp.ByQuery),
			chromedp.WaitVisible(testid("freeze"), chromedp.ByQuery),
		)
		var reason, flash string
		tb.run(t, chromedp.Text(testid("freeze-reason"), &reason, chromedp.ByQuery),
			chromedp.Text(testid("flash"), &flash, chromedp.ByQuery))
		require.Equal(t, "refunds are going out twice", reason)
		require.Contains(t, flash, "Froze payments.* in payments")

		status, m := d.do("POST", "/v1/entries", d.agent, `{"key":"refund:order-1","type":"intent","tool":"payments.refund",`+
			`"effect":"keyed","params":{"order":"1","amount":500}}`)
		require.Equal(t, http.StatusAccepted, status, "a new refund is held: %v", m)
		id := m["action"].(map[string]any)["id"].(string)
		var summary string
		tb.run(t,
			chromedp.Navigate(d.srv.URL+"/"),
			chromedp.WaitVisible(testid("triage-approval"), chromedp.ByQuery),
			chromedp.Text(testid("triage-approval"), &summary, chromedp.ByQuery),
		)
		require.Contains(t, summary, `frozen by "refunds are going out twice"`)
		if updateScreenshots {
			var png []byte
			tb.run(t, chromedp.Navigate(d.srv.URL+"/freezes"), chromedp.WaitVisible(testid("freeze"), chromedp.ByQuery),
				chromedp.FullScreenshot(&png, 100))
			saveScreenshot(t, "freezes.png", png)
		}

		// A lift needs a reason: the browser asks for it before anything is sent.
		tb.run(t,
			chromedp.Navigate(d.srv.URL+"/freezes"),
			chromedp.WaitVisible(testid("lift-form"), chromedp.ByQuery),
			chromedp.SendKeys(testid("lift-reason"), "the duplicate sender is fixed", chromedp.ByQuery),
			chromedp.Click(testid("lift"), chromedp.ByQuery),
			chromedp.WaitVisible(testid("freezes-empty"), chromedp.ByQuery),
			chromedp.WaitVisible(testid("lifted-freeze"), chromedp.ByQuery),
		)
		status, m = d.do("GET", "/v1/actions/"+id, d.operator, "")
		require.Equal(t, http.StatusOK, status)
		require.Equal(t, "approved", m["status"], "the lift let the held refund go on")
		status, m = d.do("POST", "/v1/entries", d.agent, `{"key":"refund:order-1","type":"intent","tool":"payments.refund",`+
			`"effect":"keyed","params":{"order":"1","amount":500}}`)
		require.Equal(t, http.StatusCreated, status, "and it proceeds: %v", m)
	})
}

// TestBrowserLimitBars: the limits page shows a per-customer budget's
// busiest groups, each a bar against max.
func TestBrowserLimitBars(t *testing.T) {
	t.Parallel()
	st := dbtest.Open(t, services.SQLite)
	d := newDesk(t, st)
	admin := d.key("", "root", services.RoleAdmin)
	status, m := d.do("POST", "/v1/limits", admin, `{"name":"refunds per customer","namespace":"payments",
		"tools":["payments.refund"],"amount":"params.amount","group_by":"params.customer","window":86400,"max":500,"over":"hold"}`)
	require.Equal(t, http.StatusCreated, status, "%v", m)
	for i, c := range []struct {
		customer string
		amount   int
	}{{"cus_ana", 480}, {"cus_ben", 120}, {"cus_ben", 60}, {"cus_cy", 20}} {
		d.entry(fmt.Sprintf(`{"key":"refund:%d","type":"intent","tool":"payments.refund","effect":"keyed",`+
			`"params":{"customer":%q,"amount":%d}}`, i, c.customer, c.amount))
	}
	pw := d.user("viewer@example.com", services.RoleViewer)
	tb := newTab(t, true)
	tb.signIn(t, d.srv.URL, "viewer@example.com", pw)
	var groups []string
	var values []string
	tb.run(t,
		chromedp.Navigate(d.srv.URL+"/limits"),
		chromedp.WaitVisible(testid("limit-bar"), chromedp.ByQuery),
		chromedp.Evaluate(`[...document.querySelectorAll('[data-testid="limit-group-name"]')].map(e => e.textContent)`, &groups),
		chromedp.Evaluate(`[...document.querySelectorAll('[data-testid="limit-bar"]')].map(e => e.value + "/" + e.max)`, &values),
	)
	require.Equal(t, []string{"cus_ana", "cus_ben", "cus_cy"}, groups, "busiest first")
	require.Equal(t, []string{"480/500", "180/500", "20/500"}, values)
	var used string
	tb.run(t, chromedp.Text(testid("limit-group-used"), &used, chromedp.ByQuery))
	require.Equal(t, "480 of 500", strings.TrimSpace(used))
	if updateScreenshots {
		var png []byte
		tb.run(t, chromedp.FullScreenshot(&png, 100))
		saveScreenshot(t, "limits.png", png)
	}

	// The actions behind a group: a failed refund stops counting, and the
	// group's page says so beside the one that still counts.
	d.entry(`{"key":"refund:2","type":"failed","attempt":1,"error":"card closed"}`)
	var keys, counts []string
	var groupUsed string
	tb.run(t,
		chromedp.Navigate(d.srv.URL+"/limits"),
		chromedp.WaitVisible(testid("limit-bar"), chromedp.ByQuery),
		chromedp.Click(`[data-testid="limit-group"]:nth-child(2) [data-testid="limit-group-name"]`, chromedp.ByQuery),
		chromedp.WaitVisible(testid("group-charges"), chromedp.ByQuery),
		chromedp.Text(testid("group-used"), &groupUsed, chromedp.ByQuery),
		chromedp.Evaluate(`[...document.querySelectorAll('[data-testid="charge-key"]')].map(e => e.textContent)`, &keys),
		chromedp.Evaluate(`[...document.querySelectorAll('[data-testid="charge-counts"]')].map(e => e.textContent)`, &counts),
	)
	require.Equal(t, "120 of 500", strings.TrimSpace(groupUsed))
	require.Equal(t, []string{"refund:2", "refund:1"}, keys, "newest first")
	require.Equal(t, []string{"stopped counting: failed", "counts"}, counts)
	tb.audit(t)
}
