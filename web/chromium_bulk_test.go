package web_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
)

// pickBox is the triage checkbox of action id.
func pickBox(id string) string {
	return `[data-testid="triage-row"][data-kind="timed_out"][data-action-id="` + id + `"] ` + testid("pick")
}

// TestBrowserBulkAbandonOnTriage: during a payment provider's outage three
// refunds time out. The operator ticks them on the open triage page (the
// ticks survive the queue updating itself), abandons them with one reason
// in one step after seeing the count, and watches them leave the queue
// without a reload, each decided with its own entry.
func TestBrowserBulkAbandonOnTriage(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		d := newDesk(t, st)
		d.seedQueue()
		var refunds []string
		for i := range 3 {
			refunds = append(refunds, d.entry(fmt.Sprintf(`{"key":"refund:order-%d","type":"intent","tool":"payments.refund",`+
				`"effect":"keyed","reference":"ZD-4830%d","params":{"order":"%d","amount":1999},"timeout":1}`, 8820+i, i, 8820+i)))
		}
		email := d.entry(`{"key":"email:refund-confirmation:order-8820","type":"intent","tool":"email.send","effect":"unkeyed",` +
			`"params":{"template":"refund-confirmation"},"timeout":1}`)
		d.sweepUntil(4)

		pw := d.user("oncall@example.com", services.RoleOperator)
		tb := newTab(t, true)
		tb.signIn(t, d.srv.URL, "oncall@example.com", pw)
		tb.run(t,
			chromedp.Navigate(d.srv.URL+"/"),
			chromedp.WaitVisible(testid("bulk-form"), chromedp.ByQuery),
			chromedp.WaitVisible(pickBox(email), chromedp.ByQuery),
			chromedp.Evaluate(`window.__stillHere = 1`, nil),
		)
		// The queue first: until a row is ticked the bar is one line.
		var idle []bool
		tb.run(t, chromedp.Evaluate(`[
			document.querySelector('[data-testid="bulk-hint"]').offsetParent !== null,
			document.querySelector('#bulk-decision').offsetParent !== null]`, &idle))
		require.Equal(t, []bool{true, false}, idle, "the hint shows, the decision does not")
		for _, id := range refunds {
			tb.run(t, chromedp.Click(pickBox(id), chromedp.ByQuery))
		}
		var count string
		tb.run(t,
			chromedp.WaitVisible(`#bulk-decision`, chromedp.ByQuery),
			chromedp.Text(testid("bulk-count"), &count, chromedp.ByQuery),
		)
		require.Equal(t, fmt.Sprintf("· %d rows ticked", len(refunds)), count)

		// The queue updates itself while the operator types: another
		// action times out. The ticks stay.
		late := d.entry(`{"key":"refund:order-8899","type":"intent","tool":"payments.refund","effect":"keyed","timeout":1}`)
		d.sweepUntil(1)
		ctx, cancel := context.WithTimeout(tb.ctx, 3*time.Second)
		err := chromedp.Run(ctx, chromedp.WaitVisible(pickBox(late), chromedp.ByQuery))
		cancel()
		require.NoError(t, err, "the new timed-out action did not appear on the open page")
		var ticked []string
		tb.run(t, chromedp.Evaluate(`Array.from(document.querySelectorAll('input[name="ids"][form="bulk-form"]:checked')).map(b => b.value)`, &ticked))
		require.ElementsMatch(t, refunds, ticked, "the ticks survive the live update")

		const reason = "PSP outage 09:00-09:40: the provider confirms none of these refunds went out"
		tb.run(t,
			chromedp.SetValue(`#bulk-decision`, "abandon", chromedp.ByQuery),
			chromedp.SendKeys(`#bulk-reason`, reason, chromedp.ByQuery),
			chromedp.Click(testid("bulk-review"), chromedp.ByQuery),
			chromedp.WaitVisible(`#bulk-panel `+testid("bulk-confirm"), chromedp.ByQuery),
		)
		var allowed, matched, confirmLabel string
		var sampled int
		tb.run(t,
			chromedp.Text(testid("bulk-allowed"), &allowed, chromedp.ByQuery),
			chromedp.Text(testid("bulk-matched"), &matched, chromedp.ByQuery),
			chromedp.Text(testid("bulk-confirm"), &confirmLabel, chromedp.ByQuery),
			chromedp.Evaluate(`document.querySelectorAll('[data-testid="bulk-sample-row"]').length`, &sampled),
		)
		require.Equal(t, "3", allowed)
		require.Equal(t, "3", matched)
		require.Equal(t, 3, sampled)
		require.Equal(t, "Abandon: 3 actions", strings.TrimSpace(confirmLabel))
		for _, id := range refunds {
			status, m := d.do("GET", "/v1/actions/"+id, d.operator, "")
			require.Equal(t, 200, status)
			require.Equal(t, "timed_out", m["status"], "counting decided nothing")
		}

		tb.run(t,
			chromedp.Click(testid("bulk-confirm"), chromedp.ByQuery),
			chromedp.WaitVisible(`#bulk-panel `+testid("bulk-result"), chromedp.ByQuery),
		)
		var applied string
		tb.run(t, chromedp.Text(testid("bulk-applied"), &applied, chromedp.ByQuery))
		require.Equal(t, "3", applied)

		// They leave the open queue by themselves; the others stay.
		decided := time.Now()
		gone := `[` + quoted(refunds) + `].every(id => !document.querySelector('[data-testid="triage-row"][data-kind="timed_out"][data-action-id="' + id + '"]'))`
		ctx, cancel = context.WithTimeout(tb.ctx, 3*time.Second)
		err = chromedp.Run(ctx, chromedp.Poll(gone, nil, chromedp.WithPollingInterval(50*time.Millisecond)))
		cancel()
		require.NoError(t, err, "the abandoned refunds did not leave the open triage page within 3 s")
		t.Logf("%s: the abandoned refunds left the open triage page %v after the decision", st.Dialect, time.Since(decided).Round(time.Millisecond))
		var stillHere bool
		var emailRows, lateRows int
		tb.run(t,
			chromedp.Evaluate(`window.__stillHere === 1`, &stillHere),
			chromedp.Evaluate(`document.querySelectorAll('[data-testid="triage-row"][data-action-id="`+email+`"]').length`, &emailRows),
			chromedp.Evaluate(`document.querySelectorAll('[data-testid="triage-row"][data-action-id="`+late+`"]').length`, &lateRows),
		)
		require.True(t, stillHere, "the page was reloaded instead of updated")
		require.Equal(t, 1, emailRows, "the email was not picked and is still waiting")
		require.Equal(t, 1, lateRows)

		for _, id := range refunds {
			status, m := d.do("GET", "/v1/actions/"+id+"/entries", d.operator, "")
			require.Equal(t, 200, status)
			var decisions []map[string]any
			for _, e := range m["entries"].([]any) {
				if e := e.(map[string]any); e["type"] == "decision" {
					decisions = append(decisions, e)
				}
			}
			require.Len(t, decisions, 1, "one decision entry for %s", id)
			require.Equal(t, map[string]any{"kind": "operator", "name": "oncall@example.com", "via": "dashboard"}, decisions[0]["actor"])
			require.Equal(t, map[string]any{"decision": "abandon", "reason": reason, "via": "dashboard"}, decisions[0]["payload"])
		}
		require.Empty(t, tb.consoleErrors())
		if updateScreenshots && st.Dialect == services.SQLite {
			var png []byte
			tb.run(t, chromedp.FullScreenshot(&png, 100))
			saveScreenshot(t, "bulk.png", png)
		}
	})
}

// TestBrowserBulkBarOpensForEveryOne: the waiting bar's "Decide on every
// one matched…" opens the bar with that scope chosen and the decision
// focused, with no row ticked.
func TestBrowserBulkBarOpensForEveryOne(t *testing.T) {
	t.Parallel()
	st := dbtest.Open(t, services.SQLite)
	d := newDesk(t, st)
	d.entry(`{"key":"refund:order-1","type":"intent","tool":"payments.refund","effect":"keyed","timeout":1}`)
	d.sweepUntil(1)
	pw := d.user("oncall@example.com", services.RoleOperator)
	tb := newTab(t, true)
	tb.signIn(t, d.srv.URL, "oncall@example.com", pw)
	var state []any
	tb.run(t,
		chromedp.Navigate(d.srv.URL+"/"),
		chromedp.WaitVisible(testid("bulk-open-all"), chromedp.ByQuery),
		chromedp.Click(testid("bulk-open-all"), chromedp.ByQuery),
		chromedp.WaitVisible(`#bulk-decision`, chromedp.ByQuery),
		chromedp.Evaluate(`[
			document.querySelector('[data-testid="bulk-scope-all"]').checked,
			document.activeElement.id,
			document.querySelector('[data-testid="bulk-hint"]').offsetParent !== null]`, &state),
	)
	require.Equal(t, []any{true, "bulk-decision", false}, state, "every one matched, the decision focused, the hint gone")
}
