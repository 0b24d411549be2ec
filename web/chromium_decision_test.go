package web_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
)

// secondTab opens another tab in tb's browser: the same person, signed in
// with the same session, as when an operator keeps two tabs open.
// Uncaught exceptions, console errors and what the browser logs as an
// error fail the test, as in tb.
func secondTab(t *testing.T, tb *tab) *tab {
	t.Helper()
	ctx, cancel := chromedp.NewContext(tb.ctx)
	t.Cleanup(cancel)
	other := &tab{ctx: ctx}
	chromedp.ListenTarget(ctx, func(ev any) {
		switch ev := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.APITypeError {
				var parts []string
				for _, a := range ev.Args {
					parts = append(parts, string(a.Value)+a.Description)
				}
				other.addError("console (second tab): " + strings.Join(parts, " "))
			}
		case *runtime.EventExceptionThrown:
			other.addError("exception (second tab): " + ev.ExceptionDetails.Error())
		case *cdplog.EventEntryAdded:
			if ev.Entry.Level == cdplog.LevelError {
				other.addError(fmt.Sprintf("browser (second tab, %s): %s %s", ev.Entry.Source, ev.Entry.Text, ev.Entry.URL))
			}
		}
	})
	t.Cleanup(func() {
		if errs := other.consoleErrors(); len(errs) > 0 {
			t.Errorf("the second tab reported errors:\n%s", strings.Join(errs, "\n"))
		}
	})
	if err := chromedp.Run(ctx); err != nil {
		t.Fatalf("open a second tab: %v", err)
	}
	return other
}

// pageIntact checks that the action page is still one page after an htmx
// answer: one top bar, one live part with one header and one panel, no
// error page inside it.
func pageIntact(t *testing.T, tb *tab) {
	t.Helper()
	var counts []int
	tb.run(t, chromedp.Evaluate(`[
		document.querySelectorAll("header.topbar").length,
		document.querySelectorAll('[data-testid="action-live"]').length,
		document.querySelectorAll('[data-testid="action-header"]').length,
		document.querySelectorAll('[data-testid="decision-panel"]').length,
		document.querySelectorAll('[data-testid="error-page"]').length,
		document.querySelectorAll("html").length,
	]`, &counts))
	require.Equal(t, []int{1, 1, 1, 1, 0, 1}, counts, "top bar, live part, header, panel, error pages, documents")
}

// TestBrowserApproveOnce: an operator who gave 1 of 2 approvals reads "You
// approved · waiting for 1 more" and is offered no Approve; a second
// approval forced from other tabs opened before (one still showing the
// old page, one sending a hand-made approval) is refused inside the panel,
// worded for a person, and the page stays whole.
func TestBrowserApproveOnce(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		d := newDesk(t, st)
		admin := d.key("", "root", services.RoleAdmin)
		status, m := d.do("POST", "/v1/policies", admin, `{"name":"large refunds","namespace":"payments",`+
			`"tools":["payments.refund"],"condition":"has(params.amount) && params.amount > 100000","approvals_required":2,"expires_after":3600}`)
		require.Equal(t, http.StatusCreated, status, "%v", m)
		id := d.entry(`{"key":"refund:order-9001","type":"intent","tool":"payments.refund","params":{"amount":250000}}`)
		pw := d.user("alice@example.com", services.RoleOperator)
		a := newTab(t, true)
		a.signIn(t, d.srv.URL, "alice@example.com", pw)
		url := d.srv.URL + "/actions/" + id
		stale, forced := secondTab(t, a), secondTab(t, a)
		for _, tb := range []*tab{a, stale, forced} {
			tb.run(t, chromedp.Navigate(url), chromedp.WaitVisible(testid("decision-approve"), chromedp.ByQuery))
		}

		var mine string
		var approveForms int
		a.run(t,
			chromedp.Click(testid("decision-approve")+` > summary`, chromedp.ByQuery),
			chromedp.Click(testid("decision-form-approve")+` `+testid("decision-submit"), chromedp.ByQuery),
			chromedp.WaitVisible(testid("decision-approved-by-you"), chromedp.ByQuery),
			chromedp.Text(testid("decision-approved-by-you"), &mine, chromedp.ByQuery),
			chromedp.Evaluate(`document.querySelectorAll('[data-testid="decision-form-approve"]').length`, &approveForms),
		)
		require.Equal(t, "You approved · waiting for 1 more", strings.TrimSpace(mine))
		require.Zero(t, approveForms, "no Approve for a person whose yes is counted")
		pageIntact(t, a)

		// The tab still showing Approve: the page is out of date.
		var msg, count string
		stale.run(t,
			chromedp.Click(testid("decision-approve")+` > summary`, chromedp.ByQuery),
			chromedp.Click(testid("decision-form-approve")+` `+testid("decision-submit"), chromedp.ByQuery),
			chromedp.WaitVisible(testid("decision-panel")+` `+testid("decision-error"), chromedp.ByQuery),
			chromedp.Text(testid("decision-panel")+` `+testid("decision-error"), &msg, chromedp.ByQuery),
			chromedp.Text(testid("decision-panel")+` `+testid("decision-approved-by-you"), &mine, chromedp.ByQuery),
			chromedp.Text(testid("approval-count"), &count, chromedp.ByQuery),
		)
		require.Contains(t, msg, "changed after you opened it")
		require.Equal(t, "You approved · waiting for 1 more", strings.TrimSpace(mine))
		require.Equal(t, "1 of 2 approvals", strings.TrimSpace(count), "the header is refreshed beside the panel")
		pageIntact(t, stale)

		// A hand-made second approval (no version to compare): the ledger's
		// own refusal, worded for a person, in the panel.
		forced.run(t,
			chromedp.Evaluate(`document.querySelector('[data-testid="decision-form-approve"] input[name="expected_version"]').remove()`, nil),
			chromedp.Click(testid("decision-approve")+` > summary`, chromedp.ByQuery),
			chromedp.Click(testid("decision-form-approve")+` `+testid("decision-submit"), chromedp.ByQuery),
			chromedp.WaitVisible(testid("decision-panel")+` `+testid("decision-error"), chromedp.ByQuery),
			chromedp.Text(testid("decision-panel")+` `+testid("decision-error"), &msg, chromedp.ByQuery),
		)
		require.Equal(t, "You already approved this action; it waits for someone else's yes.", strings.TrimSpace(msg))
		pageIntact(t, forced)
		status, m = d.do("GET", "/v1/actions/"+id, admin, "")
		require.Equal(t, http.StatusOK, status)
		require.Len(t, m["approval"].(map[string]any)["approvals"], 1, "one person, one yes")
	})
}

// TestBrowserUnkeyedRetry: a timed-out keyed refund whose key outlived its
// key_ttl counts as unkeyed. The page asks for the duplicate-risk
// acknowledgement and its header does not promise a safe retry; a retry
// sent without it (the box's own check bypassed) is refused inside the
// panel in words for a person, and the refreshed form still asks for it;
// with it, the retry is recorded.
func TestBrowserUnkeyedRetry(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		d := newDesk(t, st)
		id := d.entry(`{"key":"refund:order-8812","type":"intent","tool":"payments.refund","effect":"keyed","key_ttl":1,"timeout":1}`)
		d.sweepUntil(1)
		time.Sleep(200 * time.Millisecond) // the key_ttl of 1 s has passed with the lease
		pw := d.user("oncall@example.com", services.RoleOperator)
		tb := newTab(t, true)
		tb.signIn(t, d.srv.URL, "oncall@example.com", pw)

		const reason = "the provider shows no refund for order 8812"
		form := testid("decision-form-retry")
		var effect string
		var acks int
		tb.run(t,
			chromedp.Navigate(d.srv.URL+"/actions/"+id),
			chromedp.WaitVisible(testid("decision-panel"), chromedp.ByQuery),
			chromedp.Text(testid("action-effect"), &effect, chromedp.ByQuery),
			chromedp.Evaluate(`document.querySelectorAll('[data-testid="decision-form-retry"] [data-testid="decision-ack"] input[type=checkbox]').length`, &acks),
		)
		require.Equal(t, 1, acks, "the retry asks for the duplicate-risk acknowledgement")
		require.NotContains(t, effect, "a retry with the same key is safe")
		require.Contains(t, effect, "no longer honours the key")

		var msg string
		tb.run(t,
			decideIn("retry", reason),
			// As a hand-made request or an old browser would: past the box's
			// own required check.
			chromedp.Evaluate(`document.querySelector('[data-testid="decision-form-retry"] input[name="acknowledge_duplicate_risk"]').required = false`, nil),
			chromedp.Click(form+` `+testid("decision-submit"), chromedp.ByQuery),
			chromedp.WaitVisible(testid("decision-panel")+` `+testid("decision-error"), chromedp.ByQuery),
			chromedp.Text(testid("decision-panel")+` `+testid("decision-error"), &msg, chromedp.ByQuery),
			chromedp.Evaluate(`document.querySelectorAll('[data-testid="decision-form-retry"] [data-testid="decision-ack"] input[type=checkbox]').length`, &acks),
			chromedp.Text(testid("action-effect"), &effect, chromedp.ByQuery),
		)
		require.Contains(t, msg, "tick the box")
		require.NotContains(t, msg, "acknowledge_duplicate_risk", "worded for a person, not the API")
		require.Equal(t, 1, acks, "the refreshed form still asks for the acknowledgement")
		require.NotContains(t, effect, "a retry with the same key is safe")
		pageIntact(t, tb)
		var kept string
		tb.run(t, chromedp.Value(form+` `+testid("decision-reason"), &kept, chromedp.ByQuery))
		require.Equal(t, reason, kept, "the reason typed is kept")

		var status, acknowledged string
		tb.run(t,
			chromedp.Click(form+` `+testid("decision-ack")+` input[type=checkbox]`, chromedp.ByQuery),
			chromedp.Click(form+` `+testid("decision-submit"), chromedp.ByQuery),
			chromedp.WaitVisible(decisionEntry+` `+testid("entry-acknowledged"), chromedp.ByQuery),
			chromedp.Text(testid("action-status"), &status, chromedp.ByQuery),
			chromedp.Text(decisionEntry+` `+testid("entry-acknowledged"), &acknowledged, chromedp.ByQuery),
		)
		require.Equal(t, "retry_requested", strings.TrimSpace(status))
		require.Contains(t, acknowledged, "may repeat the effect")
		pageIntact(t, tb)
	})
}
