package web_test

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
)

// TestBrowserSignIn signs in and out in a real browser, with and without
// JavaScript, and checks the page raised no errors (a CSP violation would).
func TestBrowserSignIn(t *testing.T) {
	t.Parallel()
	for _, js := range []bool{true, false} {
		name := "javascript"
		if !js {
			name = "no-javascript"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, dbtest.Open(t, services.SQLite))
			pw := e.user("ops@example.com", services.RoleOperator)
			tb := newTab(t, js)
			tb.signIn(t, e.srv.URL, "ops@example.com", pw)
			var who string
			tb.run(t, chromedp.Text(`[data-testid="current-user"]`, &who, chromedp.ByQuery))
			require.Equal(t, "ops@example.com", strings.TrimSpace(who))
			var title string
			tb.run(t,
				chromedp.Click(`[data-testid="sign-out"]`, chromedp.ByQuery),
				chromedp.WaitVisible(`[data-testid="signin-form"]`, chromedp.ByQuery),
				chromedp.Title(&title),
			)
			require.Contains(t, title, "Sign in")
			require.Empty(t, tb.consoleErrors())
		})
	}
}
