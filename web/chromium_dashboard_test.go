package web_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
)

// The dashboard's acceptance path in a real browser: an operator watches the
// triage page, a worker dies mid-refund, the action appears without a
// reload, and the operator decides on it. The same runs without JavaScript
// and with the keyboard alone.

// updateScreenshots makes TestBrowserTriageToRetry rewrite the README's
// screenshots; normal runs leave the tree alone.
var updateScreenshots = os.Getenv("ARBITER_UPDATE_SCREENSHOTS") == "1"

// desk drives the JSON API of namespace "payments" as its agents and an
// on-call operator would.
type desk struct {
	*env
	agent, operator string
}

func newDesk(t *testing.T, st *services.Store) *desk {
	e := newEnv(t, st)
	return &desk{env: e, agent: e.key("payments", "refund-bot", services.RoleAgent),
		operator: e.key("payments", "on-call", services.RoleOperator)}
}

// entry records one agent entry and returns its action's id. Refused
// entries (a reused key is a 422) still name the action.
func (d *desk) entry(body string) string {
	d.t.Helper()
	status, m := d.do("POST", "/v1/entries", d.agent, body)
	require.Less(d.t, status, 500, "%v", m)
	a, _ := m["action"].(map[string]any)
	require.NotNil(d.t, a, "no action in %v", m)
	return a["id"].(string)
}

func (d *desk) decide(id, decision, reason string) {
	d.t.Helper()
	status, m := d.do("POST", "/v1/actions/"+id+"/decisions", d.operator,
		fmt.Sprintf(`{"decision":%q,"reason":%q}`, decision, reason))
	require.Equal(d.t, 201, status, "%v", m)
}

// sweepUntil runs the sweeper until it has timed out n actions, as the
// server's sweeper would once their one-second leases pass.
func (d *desk) sweepUntil(n int) {
	d.t.Helper()
	ledger := services.NewLedger(d.st, services.LedgerConfig{})
	deadline := time.Now().Add(5 * time.Second)
	done := 0
	for done < n {
		require.True(d.t, time.Now().Before(deadline), "the sweeper timed out %d of %d actions", done, n)
		time.Sleep(100 * time.Millisecond)
		k, err := ledger.Sweep(context.Background())
		require.NoError(d.t, err)
		done += k
	}
}

// seedQueue fills the queue with what a morning on call looks like: a
// refund being compensated and an agent that reused a key for another
// email.
func (d *desk) seedQueue() {
	d.t.Helper()
	comp := d.entry(`{"key":"refund:order-8790","type":"intent","tool":"payments.refund","effect":"keyed","reference":"ZD-48102",` +
		`"params":{"order":"8790","amount":4999,"currency":"EUR"}}`)
	d.entry(`{"key":"refund:order-8790","type":"succeeded","attempt":1,"external_ref":"re_3Pq8790","result":{"refund":"re_3Pq8790"}}`)
	d.decide(comp, "compensate", "customer kept the goods; the refund was issued by mistake")
	d.entry(`{"key":"email:receipt:order-8803","type":"intent","tool":"email.send","effect":"unkeyed","reference":"order-8803",` +
		`"params":{"template":"receipt","to":"cust-8803@example.com"}}`)
	d.entry(`{"key":"email:receipt:order-8803","type":"succeeded","attempt":1}`)
	d.entry(`{"key":"email:receipt:order-8803","type":"intent","tool":"email.send","effect":"unkeyed",` +
		`"params":{"template":"receipt-v2","to":"cust-8803@example.com"}}`)
}

func testid(id string) string { return `[data-testid="` + id + `"]` }

// rowLink is the link of the triage row of action id.
func rowLink(id string) string {
	return `[data-testid="triage-row"][data-action-id="` + id + `"] ` + testid("triage-key")
}

// decisionEntry is the decision in the timeline (each test decides once per action).
const decisionEntry = `[data-testid="timeline-entry"][data-type="decision"]`

// decideIn opens decision d's form, types a reason, and leaves submitting to
// the caller.
func decideIn(d, reason string) chromedp.Tasks {
	form := testid("decision-form-" + d)
	return chromedp.Tasks{
		chromedp.Click(testid("decision-"+d)+` > summary`, chromedp.ByQuery),
		chromedp.WaitVisible(form+` `+testid("decision-reason"), chromedp.ByQuery),
		chromedp.SendKeys(form+` `+testid("decision-reason"), reason, chromedp.ByQuery),
	}
}

func saveScreenshot(t *testing.T, name string, png []byte) {
	t.Helper()
	path := filepath.Join("..", "docs", "screenshots", name)
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, png, 0o644))
	t.Logf("wrote %s (%d bytes)", path, len(png))
}

func TestBrowserTriageToRetry(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		d := newDesk(t, st)
		d.seedQueue()
		pw := d.user("oncall@example.com", services.RoleOperator)
		tb := newTab(t, true)
		tb.signIn(t, d.srv.URL, "oncall@example.com", pw)
		var titleBefore string
		tb.run(t,
			chromedp.Navigate(d.srv.URL+"/"),
			chromedp.WaitVisible(testid("triage-table"), chromedp.ByQuery),
			chromedp.Evaluate(`window.__stillHere = 1`, nil),
			chromedp.Title(&titleBefore),
		)
		require.Regexp(t, `^\(\d+\) Triage · Arbiter$`, titleBefore, "what waits is counted in the tab's title")

		// A refund worker and an email worker die mid-action while the page
		// is open.
		refund := d.entry(`{"key":"refund:order-8812","type":"intent","tool":"payments.refund","effect":"keyed","reference":"ZD-48213",` +
			`"params":{"order":"8812","amount":1999,"currency":"EUR"},"timeout":1}`)
		email := d.entry(`{"key":"email:refund-confirmation:order-8812","type":"intent","tool":"email.send","effect":"unkeyed",` +
			`"reference":"ZD-48213","params":{"template":"refund-confirmation","to":"cust-8812@example.com"},"timeout":1}`)
		d.sweepUntil(2)
		swept := time.Now()
		ctx, cancel := context.WithTimeout(tb.ctx, 3*time.Second)
		err := chromedp.Run(ctx, chromedp.WaitVisible(rowLink(refund), chromedp.ByQuery))
		cancel()
		require.NoError(t, err, "the timed-out action did not appear on the open triage page within 3 s")
		took := time.Since(swept)
		t.Logf("%s: the timed-out action appeared on the open triage page %v after the sweep", st.Dialect, took.Round(time.Millisecond))
		require.LessOrEqual(t, took, 2*time.Second)
		var stillHere bool
		var kind string
		tb.run(t,
			chromedp.WaitVisible(rowLink(email), chromedp.ByQuery),
			chromedp.Evaluate(`window.__stillHere === 1`, &stillHere),
			chromedp.Text(`[data-testid="triage-row"][data-action-id="`+refund+`"] `+testid("triage-kind"), &kind, chromedp.ByQuery),
		)
		require.True(t, stillHere, "the page was reloaded instead of updated")
		require.Equal(t, "timed_out", strings.TrimSpace(kind))
		var before, after int
		var titleAfter string
		tb.run(t, chromedp.Title(&titleAfter))
		_, err = fmt.Sscanf(titleBefore, "(%d)", &before)
		require.NoError(t, err)
		_, err = fmt.Sscanf(titleAfter, "(%d)", &after)
		require.NoError(t, err, titleAfter)
		require.Equal(t, before+2, after, "the live update counts the two timeouts in the title")
		writeShots := updateScreenshots && st.Dialect == services.SQLite
		if writeShots {
			var png []byte
			tb.run(t, chromedp.FullScreenshot(&png, 100))
			saveScreenshot(t, "triage.png", png)
		}

		// The refund is keyed: a retry with the same key is safe once the
		// operator has checked, so no acknowledgement is asked for.
		const reason = "checked the payment provider: no refund for order 8812 went out"
		tb.run(t,
			chromedp.Click(rowLink(refund), chromedp.ByQuery),
			chromedp.WaitVisible(testid("decision-panel"), chromedp.ByQuery),
			decideIn("retry", reason),
		)
		var acks int
		tb.run(t, chromedp.Evaluate(`document.querySelectorAll('[data-testid="decision-form-retry"] [data-testid="decision-ack"]').length`, &acks))
		require.Zero(t, acks, "a keyed retry needs no duplicate-risk acknowledgement")
		var status, decision, gotReason string
		tb.run(t,
			chromedp.Click(testid("decision-form-retry")+` `+testid("decision-submit"), chromedp.ByQuery),
			chromedp.WaitVisible(decisionEntry, chromedp.ByQuery),
			chromedp.Text(testid("action-status"), &status, chromedp.ByQuery),
			chromedp.Text(decisionEntry+` `+testid("entry-decision"), &decision, chromedp.ByQuery),
			chromedp.Text(decisionEntry+` `+testid("entry-reason"), &gotReason, chromedp.ByQuery),
		)
		require.Equal(t, "retry_requested", strings.TrimSpace(status))
		require.Equal(t, "Decision: retry", strings.TrimSpace(decision))
		require.Equal(t, reason, strings.TrimSpace(gotReason))
		if writeShots {
			var png []byte
			tb.run(t, chromedp.FullScreenshot(&png, 100))
			saveScreenshot(t, "action.png", png)
		}

		// The email is unkeyed: the form cannot be sent until the operator
		// acknowledges that a retry may send it twice.
		const emailReason = "mail log shows no delivery to cust-8812"
		form := testid("decision-form-retry")
		var valid bool
		tb.run(t,
			chromedp.Navigate(d.srv.URL+"/actions/"+email),
			chromedp.WaitVisible(testid("decision-panel"), chromedp.ByQuery),
			decideIn("retry", emailReason),
			chromedp.Evaluate(`document.querySelector('[data-testid="decision-form-retry"]').checkValidity()`, &valid),
		)
		require.False(t, valid, "an unkeyed retry without the acknowledgement must not be sendable")
		var acknowledged string
		tb.run(t,
			chromedp.Click(form+` `+testid("decision-ack")+` input[type=checkbox]`, chromedp.ByQuery),
			chromedp.Evaluate(`document.querySelector('[data-testid="decision-form-retry"]').checkValidity()`, &valid),
			chromedp.Click(form+` `+testid("decision-submit"), chromedp.ByQuery),
			chromedp.WaitVisible(decisionEntry+` `+testid("entry-acknowledged"), chromedp.ByQuery),
			chromedp.Text(testid("action-status"), &status, chromedp.ByQuery),
			chromedp.Text(decisionEntry+` `+testid("entry-reason"), &gotReason, chromedp.ByQuery),
			chromedp.Text(decisionEntry+` `+testid("entry-acknowledged"), &acknowledged, chromedp.ByQuery),
		)
		require.True(t, valid)
		require.Equal(t, "retry_requested", strings.TrimSpace(status))
		require.Equal(t, emailReason, strings.TrimSpace(gotReason))
		require.Contains(t, acknowledged, "may repeat the effect")
		require.Empty(t, tb.consoleErrors())
	})
}

func TestBrowserConfirmWithoutJavaScript(t *testing.T) {
	t.Parallel()
	d := newDesk(t, dbtest.Open(t, services.SQLite))
	id := d.entry(`{"key":"refund:order-8812","type":"intent","tool":"payments.refund","effect":"keyed","reference":"ZD-48213",` +
		`"params":{"order":"8812","amount":1999},"timeout":1}`)
	d.sweepUntil(1)
	pw := d.user("oncall@example.com", services.RoleOperator)
	tb := newTab(t, false)
	tb.signIn(t, d.srv.URL, "oncall@example.com", pw)

	const reason = "the provider's dashboard shows refund re_3Pq8812 for order 8812"
	form := testid("decision-form-confirm")
	var status, decision, gotReason, ref string
	tb.run(t,
		chromedp.Navigate(d.srv.URL+"/actions/"+id),
		chromedp.WaitVisible(testid("decision-panel"), chromedp.ByQuery),
		decideIn("confirm", reason),
		chromedp.SendKeys(form+` `+testid("decision-external-ref"), "re_3Pq8812", chromedp.ByQuery),
		chromedp.Click(form+` `+testid("decision-submit"), chromedp.ByQuery),
		chromedp.WaitVisible(decisionEntry, chromedp.ByQuery),
		chromedp.Text(testid("action-status"), &status, chromedp.ByQuery),
		chromedp.Text(decisionEntry+` `+testid("entry-decision"), &decision, chromedp.ByQuery),
		chromedp.Text(decisionEntry+` `+testid("entry-reason"), &gotReason, chromedp.ByQuery),
		chromedp.Text(decisionEntry+` `+testid("entry-external-ref"), &ref, chromedp.ByQuery),
	)
	require.Equal(t, "confirmed", strings.TrimSpace(status))
	require.Equal(t, "Decision: confirm", strings.TrimSpace(decision))
	require.Equal(t, reason, strings.TrimSpace(gotReason))
	require.Contains(t, ref, "re_3Pq8812")
	var jsRan bool
	tb.run(t, chromedp.Evaluate(`typeof htmx !== "undefined"`, &jsRan))
	require.False(t, jsRan, "this test must run without JavaScript")
	require.Empty(t, tb.consoleErrors())
}

// focused describes the focused element: its data-testid or, failing that,
// its tag and text.
const focused = `(function () {
	var e = document.activeElement;
	if (!e) return "";
	return e.getAttribute("data-testid") || (e.tagName.toLowerCase() + ":" + e.textContent.trim().slice(0, 40));
})()`

// tabThrough presses Tab until want has had the focus, and returns what had
// it on the way.
func tabThrough(t *testing.T, tb *tab, want string, limit int) []string {
	t.Helper()
	var seen []string
	for range limit {
		var s string
		tb.run(t, chromedp.KeyEvent(kb.Tab), chromedp.Evaluate(focused, &s))
		seen = append(seen, s)
		if s == want {
			return seen
		}
	}
	t.Fatalf("%q never had the focus within %d tabs; focused: %q", want, limit, seen)
	return nil
}

// TestBrowserKeyboard decides with the keyboard alone: Tab to the queue,
// Enter on the row, Tab to the decision, Enter to open it, type, submit.
func TestBrowserKeyboard(t *testing.T) {
	t.Parallel()
	d := newDesk(t, dbtest.Open(t, services.SQLite))
	id := d.entry(`{"key":"refund:order-8812","type":"intent","tool":"payments.refund","effect":"keyed","timeout":1}`)
	d.sweepUntil(1)
	pw := d.user("oncall@example.com", services.RoleOperator)
	tb := newTab(t, true)
	tb.signIn(t, d.srv.URL, "oncall@example.com", pw)
	tb.run(t,
		chromedp.Navigate(d.srv.URL+"/"),
		chromedp.WaitVisible(rowLink(id), chromedp.ByQuery),
	)

	seen := tabThrough(t, tb, "triage-key", 30)
	require.Contains(t, seen, "a:Triage", "the navigation is reachable by keyboard")
	require.Contains(t, seen, "a:Actions")
	require.Contains(t, seen, "sign-out")
	require.Contains(t, seen, "triage-refresh")

	var status string
	tb.run(t,
		chromedp.KeyEvent(kb.Enter),
		chromedp.WaitVisible(testid("decision-panel"), chromedp.ByQuery),
	)
	var summary string
	for range 60 {
		tb.run(t, chromedp.KeyEvent(kb.Tab), chromedp.Evaluate(`(function () {
			var e = document.activeElement;
			return e && e.tagName === "SUMMARY" ? e.parentElement.getAttribute("data-decision") : "";
		})()`, &summary))
		if summary == "retry" {
			break
		}
	}
	require.Equal(t, "retry", summary, "the retry decision is reachable by keyboard")
	tb.run(t,
		chromedp.KeyEvent(kb.Enter),
		chromedp.WaitVisible(testid("decision-form-retry")+` `+testid("decision-reason"), chromedp.ByQuery),
	)
	tabThrough(t, tb, "decision-reason", 5)
	tb.run(t, chromedp.KeyEvent("checked with the provider: no refund went out"))
	tabThrough(t, tb, "decision-submit", 5)
	tb.run(t,
		chromedp.KeyEvent(kb.Enter),
		chromedp.WaitVisible(decisionEntry, chromedp.ByQuery),
		chromedp.Text(testid("action-status"), &status, chromedp.ByQuery),
	)
	require.Equal(t, "retry_requested", strings.TrimSpace(status))
	require.Empty(t, tb.consoleErrors())
}
