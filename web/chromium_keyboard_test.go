package web_test

import (
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
)

// TestBrowserShortcuts: on triage j and k move through the rows, x ticks
// the current one (and the bulk bar opens), Enter opens it; on the action
// r opens the retry form with the reason focused, and letters typed there
// are text, not shortcuts; ? lists the shortcuts; / goes to the search.
func TestBrowserShortcuts(t *testing.T) {
	t.Parallel()
	st := dbtest.Open(t, services.SQLite)
	d := newDesk(t, st)
	first := d.entry(`{"key":"refund:order-1","type":"intent","tool":"payments.refund","effect":"keyed","timeout":1}`)
	second := d.entry(`{"key":"refund:order-2","type":"intent","tool":"payments.refund","effect":"keyed","timeout":1}`)
	d.sweepUntil(2)
	pw := d.user("oncall@example.com", services.RoleOperator)
	tb := newTab(t, true)
	tb.signIn(t, d.srv.URL, "oncall@example.com", pw)

	var cur string
	var ticked bool
	currentRow := `document.querySelector("tr.kbd-current") && document.querySelector("tr.kbd-current").dataset.actionId`
	tb.run(t,
		chromedp.Navigate(d.srv.URL+"/"),
		chromedp.WaitVisible(testid("triage-table"), chromedp.ByQuery),
		chromedp.KeyEvent("j"), chromedp.KeyEvent("j"),
		chromedp.Evaluate(currentRow, &cur),
	)
	require.Equal(t, second, cur, "two rows down")
	tb.run(t, chromedp.KeyEvent("k"), chromedp.Evaluate(currentRow, &cur))
	require.Equal(t, first, cur, "one row up")
	tb.run(t,
		chromedp.KeyEvent("x"),
		chromedp.WaitVisible(`#bulk-decision`, chromedp.ByQuery),
		chromedp.Evaluate(`document.querySelector('[data-action-id="`+first+`"] input[name="ids"]').checked`, &ticked),
	)
	require.True(t, ticked, "x ticks the current row, and the bulk bar opens")

	var open bool
	var focused, reason string
	tb.run(t,
		chromedp.KeyEvent(kb.Enter),
		chromedp.WaitVisible(testid("decision-panel"), chromedp.ByQuery),
		chromedp.KeyEvent("r"),
		chromedp.Evaluate(`document.querySelector('details[data-decision="retry"]').open`, &open),
		chromedp.Evaluate(`document.activeElement.closest("form") && document.activeElement.closest("form").dataset.testid`, &focused),
		chromedp.KeyEvent("jkx r?"),
		chromedp.Value(testid("decision-form-retry")+` textarea`, &reason, chromedp.ByQuery),
	)
	require.True(t, open, "r opens the retry form")
	require.Equal(t, "decision-form-retry", focused, "with its reason focused")
	require.Equal(t, "jkx r?", reason, "typed in a field, letters are text")

	var helpOpen bool
	tb.run(t,
		chromedp.Evaluate(`document.activeElement.blur()`, nil),
		chromedp.KeyEvent("?"),
		chromedp.Evaluate(`document.getElementById("keyboard-help").open`, &helpOpen),
	)
	require.True(t, helpOpen, "? lists the shortcuts")
	tb.run(t, chromedp.KeyEvent(kb.Escape), chromedp.Evaluate(`document.getElementById("keyboard-help").open`, &helpOpen))
	require.False(t, helpOpen, "Escape closes the list")

	var search string
	tb.run(t,
		chromedp.KeyEvent("/"),
		chromedp.WaitVisible(testid("filter-q"), chromedp.ByQuery),
		chromedp.Evaluate(`document.activeElement.id`, &search),
	)
	require.Equal(t, "f-q", search, "/ goes to the search, focused")
}
