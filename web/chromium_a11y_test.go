package web_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
	"github.com/arbiter-ledger/arbiter/services/record"
	"github.com/arbiter-ledger/arbiter/services/webhooks"
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

// TestBrowserEveryPageMeetsWCAG visits, as an admin, each dashboard page the
// other browser tests do not reach, light and dark, closed and with its
// disclosures open, so the harness audits them all: the key-reuse
// comparison, the actions list and its filters, the decision forms, the
// admin pages and the account pages (the error page is
// TestBrowserErrorPageHasHeading's).
func TestBrowserEveryPageMeetsWCAG(t *testing.T) {
	t.Parallel()
	st := dbtest.Open(t, services.SQLite)
	d := newDesk(t, st)
	d.seedQueue()
	timedOut := d.entry(`{"key":"refund:order-8812","type":"intent","tool":"payments.refund","effect":"keyed","reference":"ZD-48213",` +
		`"params":{"order":"8812","amount":1999,"currency":"EUR"},"timeout":1}`)
	d.sweepUntil(1)
	reused := d.entry(`{"key":"email:receipt:order-8803","type":"intent","tool":"email.send","effect":"unkeyed",` +
		`"params":{"template":"receipt-v2","to":"cust-8803@example.com"}}`)
	admin := d.key("", "root", services.RoleAdmin)
	status, m := d.do("POST", "/v1/policies", admin, `{"name":"large refunds","namespace":"payments",`+
		`"tools":["payments.refund"],"condition":"params.amount > 100000","approvals_required":2}`)
	require.Equal(t, http.StatusCreated, status, "%v", m)
	policy := m["id"].(string)
	u := "https://hooks.example.com/arbiter"
	ep, err := webhooks.New(st, webhooks.Config{Policy: webhooks.AddressPolicy{AllowPrivate: true}}).CreateEndpoint(context.Background(),
		services.Principal{Kind: "api_key", Name: "root", Role: services.RoleAdmin},
		webhooks.EndpointInput{URL: &u, EventTypes: &[]record.EventType{record.EventTimedOut}})
	require.NoError(t, err)

	require.Positive(t, d.sequenceAll(), "the entries join the evidence log: the marks show verified")

	pw := d.user("root@example.com", services.RoleAdmin)
	tb := newTab(t, true)
	tb.signIn(t, d.srv.URL, "root@example.com", pw)
	pages := []string{
		"/",
		"/actions",
		"/actions?status=timed_out&status=compensation_requested&tool=payments.*",
		"/actions/" + reused,
		"/actions/" + timedOut,
		"/admin/namespaces",
		"/admin/keys",
		"/admin/users",
		"/admin/policies",
		"/admin/policies/" + policy,
		"/admin/webhooks",
		"/admin/webhooks/new",
		"/admin/webhooks/" + ep.ID,
		"/admin/audit",
		"/account/sessions",
		"/account/password",
	}
	for _, scheme := range []string{"light", "dark"} {
		tb.run(t, emulation.SetEmulatedMedia().WithFeatures([]*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}}))
		for _, p := range pages {
			tb.run(t,
				chromedp.Navigate(d.srv.URL+p),
				chromedp.WaitVisible(`main`, chromedp.ByQuery),
			)
			// Then with every disclosure open (the decision forms, the
			// payloads), which axe-core skips while they are closed.
			var opened int
			tb.run(t, chromedp.Evaluate(`(function () {
				var ds = document.querySelectorAll("main details:not([open])");
				ds.forEach(function (d) { d.open = true; });
				return ds.length;
			})()`, &opened))
			if opened > 0 {
				tb.changed()
				tb.run(t)
			}
		}
	}
	require.Positive(t, tb.audits, "the harness audited the pages")
}

// TestBrowserStatusFilterTargets: each status box of the actions filter is
// a target of at least 24 × 24 CSS pixels (WCAG 2.2, 2.5.8), and so are the
// boxes that pick rows on triage.
func TestBrowserStatusFilterTargets(t *testing.T) {
	t.Parallel()
	d := newDesk(t, dbtest.Open(t, services.SQLite))
	d.entry(`{"key":"refund:order-8812","type":"intent","tool":"payments.refund","effect":"keyed","timeout":1}`)
	d.sweepUntil(1)
	pw := d.user("oncall@example.com", services.RoleOperator)
	tb := newTab(t, true)
	tb.signIn(t, d.srv.URL, "oncall@example.com", pw)
	const sizes = `Array.from(document.querySelectorAll(%q)).map(function (b) {
		var r = b.getBoundingClientRect(); return [Math.round(r.width * 10) / 10, Math.round(r.height * 10) / 10];
	})`
	for page, boxes := range map[string]string{
		"/actions": `[data-testid="filter-status"] input[type=checkbox]`,
		"/":        `[data-testid="triage-row"] input[type=checkbox]`,
	} {
		var got [][]float64
		tb.run(t,
			chromedp.Navigate(d.srv.URL+page),
			chromedp.WaitVisible(`main`, chromedp.ByQuery),
			chromedp.Evaluate(strings.Replace(sizes, "%q", `'`+boxes+`'`, 1), &got),
		)
		require.NotEmpty(t, got, "boxes on %s", page)
		for _, wh := range got {
			require.GreaterOrEqual(t, wh[0], 24.0, "%s: a box is %v px wide", page, wh[0])
			require.GreaterOrEqual(t, wh[1], 24.0, "%s: a box is %v px high", page, wh[1])
		}
	}
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
