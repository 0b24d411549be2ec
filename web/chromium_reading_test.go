package web_test

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
)

// TestBrowserReadingAnAction: on an action's page the key, the id and each
// JSON block copy with one click; each entry links to itself and says how
// long after the one before it was recorded; relative times count on while
// the page stays open.
func TestBrowserReadingAnAction(t *testing.T) {
	t.Parallel()
	st := dbtest.Open(t, services.SQLite)
	d := newDesk(t, st)
	id := d.entry(`{"key":"refund:order-8812","type":"intent","tool":"payments.refund","effect":"keyed","params":{"amount":1999,"currency":"EUR"}}`)
	time.Sleep(300 * time.Millisecond)
	status, m := d.do("POST", "/v1/entries", d.agent, `{"key":"refund:order-8812","type":"succeeded","attempt":1,"result":{"refund":"re_1"}}`)
	require.Equal(t, http.StatusOK, status, "%v", m)

	pw := d.user("oncall@example.com", services.RoleOperator)
	tb := newTab(t, true)
	tb.signIn(t, d.srv.URL, "oncall@example.com", pw)
	tb.run(t,
		cdpbrowser.GrantPermissions([]cdpbrowser.PermissionType{cdpbrowser.PermissionTypeClipboardReadWrite, cdpbrowser.PermissionTypeClipboardSanitizedWrite}).
			WithOrigin(d.srv.URL),
		chromedp.Navigate(d.srv.URL+"/actions/"+id),
		chromedp.WaitVisible(testid("action-header")+` `+testid("copy"), chromedp.ByQuery),
	)
	readClipboard := func() string {
		var s string
		tb.run(t, chromedp.Evaluate(`navigator.clipboard.readText()`, &s, func(p *runtime.EvaluateParams) *runtime.EvaluateParams {
			return p.WithAwaitPromise(true)
		}))
		return s
	}
	var said string
	tb.run(t,
		chromedp.Click(testid("action-header")+` h1 `+testid("copy"), chromedp.ByQuery),
		chromedp.WaitVisible(`//button[@data-testid="copy" and text()="Copied"]`, chromedp.BySearch),
		chromedp.Text(testid("action-header")+` h1 `+testid("copy"), &said, chromedp.ByQuery),
	)
	require.Equal(t, "Copied", said)
	require.Equal(t, "refund:order-8812", readClipboard())
	tb.run(t, chromedp.Click(`.json-block:has([data-testid="action-params"]) `+testid("copy"), chromedp.ByQuery),
		chromedp.Sleep(200*time.Millisecond))
	require.JSONEq(t, `{"amount":1999,"currency":"EUR"}`, readClipboard())

	var hrefs []string
	var gaps []string
	tb.run(t,
		chromedp.Evaluate(`Array.from(document.querySelectorAll('[data-testid="entry-seq"]')).map(a => a.getAttribute("href"))`, &hrefs),
		chromedp.Evaluate(`Array.from(document.querySelectorAll('[data-testid="timeline-entry"]')).map(e => (e.querySelector('[data-testid="entry-gap"]') || {textContent: ""}).textContent)`, &gaps),
	)
	require.Equal(t, []string{"#entry-1", "#entry-2"}, hrefs, "each entry links to itself")
	require.Equal(t, "", gaps[0], "the first entry has none before it")
	require.Regexp(t, `^\+(\d+ ms|\d+\.\d s)$`, gaps[1], "recorded at least 300 ms after the intent")

	// Relative times count on without a reload.
	sel := testid("action-created") + ` time`
	seconds := func() int {
		var s string
		tb.run(t, chromedp.Text(sel, &s, chromedp.ByQuery))
		if s = strings.TrimSpace(s); s == "just now" {
			return 0
		}
		m := regexp.MustCompile(`^(\d+) s ago$`).FindStringSubmatch(s)
		require.NotNil(t, m, "%q", s)
		n, _ := strconv.Atoi(m[1])
		return n
	}
	before := seconds()
	ctx, cancel := context.WithTimeout(tb.ctx, 15*time.Second)
	defer cancel()
	require.NoError(t, chromedp.Run(ctx, chromedp.Poll(fmt.Sprintf(`document.querySelector('[data-testid="action-created"] time').textContent !== %q`,
		map[bool]string{true: "just now", false: strconv.Itoa(before) + " s ago"}[before == 0]), nil, chromedp.WithPollingInterval(250*time.Millisecond))),
		"the relative time did not change within 15 s")
	require.Greater(t, seconds(), before)
}

// TestBrowserCopyNewAPIKey: the Copy button beside a new API key copies
// the key itself, not the name of its field.
func TestBrowserCopyNewAPIKey(t *testing.T) {
	t.Parallel()
	st := dbtest.Open(t, services.SQLite)
	d := newDesk(t, st)
	pw := d.user("root@example.com", services.RoleAdmin)
	tb := newTab(t, true)
	tb.signIn(t, d.srv.URL, "root@example.com", pw)
	var secret, copied string
	tb.run(t,
		cdpbrowser.GrantPermissions([]cdpbrowser.PermissionType{cdpbrowser.PermissionTypeClipboardReadWrite, cdpbrowser.PermissionTypeClipboardSanitizedWrite}).
			WithOrigin(d.srv.URL),
		chromedp.Navigate(d.srv.URL+"/admin/keys"),
		chromedp.WaitVisible(`#key-name`, chromedp.ByQuery),
		chromedp.SendKeys(`#key-namespace`, "payments", chromedp.ByQuery),
		chromedp.SendKeys(`#key-name`, "refund-bot", chromedp.ByQuery),
		chromedp.Click(testid("key-form")+` button[type=submit]`, chromedp.ByQuery),
		chromedp.WaitVisible(`button[data-copy="new-api-key"]`, chromedp.ByQuery),
		chromedp.Value(`#new-api-key`, &secret, chromedp.ByQuery),
		chromedp.Click(`button[data-copy="new-api-key"]`, chromedp.ByQuery),
		chromedp.WaitVisible(`//button[@data-copy="new-api-key" and text()="Copied"]`, chromedp.BySearch),
		chromedp.Evaluate(`navigator.clipboard.readText()`, &copied, func(p *runtime.EvaluateParams) *runtime.EvaluateParams {
			return p.WithAwaitPromise(true)
		}),
	)
	require.Regexp(t, `^ak_[0-9A-Za-z]{32}$`, secret)
	require.Equal(t, secret, copied)
}
