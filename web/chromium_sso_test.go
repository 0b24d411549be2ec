package web_test

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
)

// TestBrowserSSOSignIn signs in through the provider running in the test,
// in a real browser: the sign-in page's SSO button, the provider, the
// callback, and the user's sessions page, with no console error or CSP
// violation on the way.
func TestBrowserSSOSignIn(t *testing.T) {
	t.Parallel()
	st := dbtest.Open(t, services.SQLite)
	m := startProvider(t, nil)
	e := newSSOEnv(t, st, m, false)
	m.QueueUser(person("sub-lena", "lena@example.com", "payments-ops"))
	tb := newTab(t, true)
	tb.run(t,
		chromedp.Navigate(e.srv.URL+"/signin"),
		chromedp.WaitVisible(testid("sso-button"), chromedp.ByQuery),
		chromedp.WaitVisible(testid("signin-form"), chromedp.ByQuery),
	)
	if updateScreenshots {
		var png []byte
		tb.run(t, chromedp.FullScreenshot(&png, 100))
		saveScreenshot(t, "signin-sso.png", png)
	}
	var who, role string
	tb.run(t,
		chromedp.Click(testid("sso-button"), chromedp.ByQuery),
		chromedp.WaitVisible(testid("current-user"), chromedp.ByQuery),
		chromedp.Text(testid("current-user"), &who, chromedp.ByQuery),
		chromedp.Text(`.who .role`, &role, chromedp.ByQuery),
	)
	require.Equal(t, "lena@example.com", strings.TrimSpace(who))
	require.Contains(t, role, "payments")
	var sessions int
	tb.run(t,
		chromedp.Click(testid("current-user"), chromedp.ByQuery),
		chromedp.WaitVisible(testid("session-row"), chromedp.ByQuery),
		chromedp.Evaluate(`document.querySelectorAll('[data-testid="session-row"]').length`, &sessions),
	)
	require.Equal(t, 1, sessions)
	require.Empty(t, tb.consoleErrors())
}
