package web_test

import (
	"fmt"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
)

// TestBrowserOlderEntries: in a browser with JavaScript, "Older entries"
// puts the page before in its place, oldest entry first, under the page's
// Content-Security-Policy and without a console error, until the first
// entry is shown.
func TestBrowserOlderEntries(t *testing.T) {
	t.Parallel()
	d := newDesk(t, dbtest.Open(t, services.SQLite))
	id := d.entry(`{"key":"long","type":"intent","tool":"payments.refund"}`)
	notes := make([]string, 149)
	for i := range notes {
		notes[i] = fmt.Sprintf(`{"key":"long","type":"note","message":"note %d"}`, i)
	}
	postBatches(t, d.env, d.agent, notes, 500)
	pw := d.user("oncall@example.com", services.RoleOperator)
	tb := newTab(t, true)
	tb.signIn(t, d.srv.URL, "oncall@example.com", pw)

	const count = `document.querySelectorAll('[data-testid="timeline-entry"]').length`
	const first = `document.querySelector('[data-testid="timeline-entry"]').getAttribute("data-seq")`
	var before, after, older int
	var firstSeq string
	tb.run(t,
		chromedp.Navigate(d.srv.URL+"/actions/"+id),
		chromedp.WaitVisible(testid("timeline-older-link"), chromedp.ByQuery),
		chromedp.Evaluate(count, &before),
		chromedp.Click(testid("timeline-older-link"), chromedp.ByQuery),
		chromedp.WaitNotPresent(testid("timeline-older"), chromedp.ByQuery),
		chromedp.Evaluate(count, &after),
		chromedp.Evaluate(first, &firstSeq),
		chromedp.Evaluate(`document.querySelectorAll('[data-testid="timeline-older"]').length`, &older),
	)
	require.Equal(t, 100, before)
	require.Equal(t, 150, after)
	require.Equal(t, "1", firstSeq)
	require.Zero(t, older)
	require.Empty(t, tb.consoleErrors())
}
