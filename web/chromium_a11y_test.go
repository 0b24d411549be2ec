package web_test

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
)

// The dashboard under its Content-Security-Policy and WCAG 2.2 AA. The
// harness audits every page any browser test visits (chromium_test.go);
// these tests visit the pages the other tests do not, and hold the fixes
// that axe-core alone would not name.

// TestBrowserResizedReasonSettlesWithoutCSPViolation: an operator drags a
// reason box bigger (the browser sets its inline style through the CSSOM,
// which the CSP allows) and decides. The panel comes back through htmx with
// the same boxes; htmx's settle step must not copy the old style attribute
// onto them, which the CSP (style-src 'self') refuses and logs.
func TestBrowserResizedReasonSettlesWithoutCSPViolation(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		d := newDesk(t, st)
		id := d.entry(`{"key":"refund:order-8812","type":"intent","tool":"payments.refund","effect":"keyed","timeout":1}`)
		d.sweepUntil(1)
		pw := d.user("oncall@example.com", services.RoleOperator)
		tb := newTab(t, true)
		tb.signIn(t, d.srv.URL, "oncall@example.com", pw)
		var resized int
		var status string
		tb.run(t,
			chromedp.Navigate(d.srv.URL+"/actions/"+id),
			chromedp.WaitVisible(testid("decision-panel"), chromedp.ByQuery),
			decideIn("retry", "checked the provider: no refund for order 8812 went out"),
			// What a drag of the resize handle does.
			chromedp.Evaluate(`(function () {
				var boxes = document.querySelectorAll('[data-testid="decision-panel"] textarea');
				boxes.forEach(function (b) { b.style.height = "180px"; b.style.width = "480px"; });
				return boxes.length;
			})()`, &resized),
			chromedp.Click(testid("decision-form-retry")+` `+testid("decision-submit"), chromedp.ByQuery),
			chromedp.WaitVisible(decisionEntry, chromedp.ByQuery),
			chromedp.Text(testid("action-status"), &status, chromedp.ByQuery),
		)
		require.Greater(t, resized, 1, "more than the retry's box is resized, so a box outlives the swap")
		require.Equal(t, "retry_requested", strings.TrimSpace(status))
		var abandonBoxes int
		tb.run(t, chromedp.Evaluate(`document.querySelectorAll('#reason-abandon').length`, &abandonBoxes))
		require.Equal(t, 1, abandonBoxes, "the abandon box is in the panel before and after the decision")
		require.Empty(t, tb.consoleErrors(), "no CSP violation when the panel settles")
	})
}

// TestBrowserErrorPageHasHeading: an error page names its status in its
// heading, not in a paragraph styled to look like one. The browser is told
// to expect the 404 it logs for the page itself.
func TestBrowserErrorPageHasHeading(t *testing.T) {
	t.Parallel()
	d := newDesk(t, dbtest.Open(t, services.SQLite))
	pw := d.user("oncall@example.com", services.RoleOperator)
	tb := newTab(t, true)
	tb.signIn(t, d.srv.URL, "oncall@example.com", pw)
	tb.allowError("status of 404")
	var heading string
	var styled int
	tb.run(t,
		chromedp.Navigate(d.srv.URL+"/actions/01HZZZZZZZZZZZZZZZZZZZZZZZ"),
		chromedp.WaitVisible(testid("error-page"), chromedp.ByQuery),
		chromedp.Text(testid("error-page")+` h1`, &heading, chromedp.ByQuery),
		chromedp.Evaluate(`document.querySelectorAll('[data-testid="error-page"] p.status-code').length`, &styled),
	)
	require.Contains(t, heading, "404")
	require.Zero(t, styled, "the status is part of the heading")
}
