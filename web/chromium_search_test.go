package web_test

import (
	"fmt"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
)

// TestBrowserFindByKeyPrefix: an operator who remembers only the start of
// an order's key types it with a * on the action list and finds its
// actions, and only those, with one click; a tool pattern narrows them.
func TestBrowserFindByKeyPrefix(t *testing.T) {
	t.Parallel()
	st := dbtest.Open(t, services.SQLite)
	d := newDesk(t, st)
	want := map[string]bool{}
	for i, key := range []string{"refund:order-740", "refund:order-741", "refund:order-7412", "refund:order-750", "email:order-740"} {
		tool := "payments.refund"
		if i == 2 {
			tool = "payments.refund_v2"
		}
		id := d.entry(fmt.Sprintf(`{"key":%q,"type":"intent","tool":%q,"effect":"keyed","params":{}}`, key, tool))
		if i < 3 {
			want[id] = true
		}
	}
	pw := d.user("oncall@example.com", services.RoleOperator)
	tb := newTab(t, true)
	tb.signIn(t, d.srv.URL, "oncall@example.com", pw)

	ids := func() map[string]bool {
		var got []string
		tb.run(t, chromedp.Evaluate(`Array.from(document.querySelectorAll('[data-testid="action-row"]')).map(r => r.dataset.actionId)`, &got))
		out := map[string]bool{}
		for _, id := range got {
			out[id] = true
		}
		return out
	}
	tb.run(t,
		chromedp.Navigate(d.srv.URL+"/actions"),
		chromedp.WaitVisible(testid("filter-q"), chromedp.ByQuery),
		chromedp.SendKeys(testid("filter-q"), "refund:order-74*", chromedp.ByQuery),
		chromedp.Click(testid("filter-submit"), chromedp.ByQuery),
		chromedp.WaitVisible(`[data-testid="action-row"]`, chromedp.ByQuery),
	)
	require.Equal(t, want, ids(), "the three keys that begin so, not order-750 nor the email")

	tb.run(t,
		chromedp.SendKeys(testid("filter-tool"), "*_v2", chromedp.ByQuery),
		chromedp.Click(testid("filter-submit"), chromedp.ByQuery),
		chromedp.WaitNotPresent(`[data-testid="action-row"]:nth-of-type(2)`, chromedp.ByQuery),
	)
	require.Len(t, ids(), 1, "the tool pattern narrows to the v2 refund")
}
