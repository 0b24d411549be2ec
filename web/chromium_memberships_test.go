package web_test

import (
	"context"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/accounts"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
)

// An operator of team-a in a real browser: triage lists team-a's timed-out
// refund and not team-b's, and the counts say one (that team-b's action page
// is not found is TestOperatorsSeeAndDecideOnlyTheirNamespace's: a 404 is a
// browser error here). Then their sessions page, with the one signed in elsewhere
// ended from it (docs/screenshots/sessions.png).
func TestBrowserOperatorSeesOnlyTheirNamespace(t *testing.T) {
	t.Parallel()
	te := newTeamsEnv(t, dbtest.Open(t, services.SQLite))
	_, err := accounts.New(te.st).CreateMember(context.Background(), "ana@team-a.example.com", services.RoleOperator,
		[]string{"team-a"}, "ana's long password")
	require.NoError(t, err)
	te.browser().signIn("ana@team-a.example.com", "ana's long password") // another browser, for the sessions page

	tb := newTab(t, true)
	tb.signIn(t, te.srv.URL, "ana@team-a.example.com", "ana's long password")
	var rows []string
	var count, who string
	tb.run(t,
		chromedp.Navigate(te.srv.URL+"/"),
		chromedp.WaitVisible(testid("triage-table"), chromedp.ByQuery),
		chromedp.Evaluate(`[...document.querySelectorAll('[data-testid="triage-row"]')].map(r => r.dataset.actionId)`, &rows),
		chromedp.Text(testid("count-timed_out")+` .n`, &count, chromedp.ByQuery),
		chromedp.Text(`.who`, &who, chromedp.ByQuery),
	)
	require.Equal(t, []string{te.ids["team-a"]}, rows)
	require.Equal(t, "1", strings.TrimSpace(count))
	require.Contains(t, who, "operator in team-a")

	var png []byte
	var sessions int
	tb.run(t,
		chromedp.Navigate(te.srv.URL+"/account/sessions"),
		chromedp.WaitVisible(testid("sessions-table"), chromedp.ByQuery),
		chromedp.Evaluate(`document.querySelectorAll('[data-testid="session-row"]').length`, &sessions),
	)
	require.Equal(t, 2, sessions)
	if updateScreenshots {
		tb.run(t, chromedp.FullScreenshot(&png, 100))
		saveScreenshot(t, "sessions.png", png)
	}
	tb.run(t,
		chromedp.Click(testid("session-end"), chromedp.ByQuery),
		chromedp.WaitVisible(testid("flash"), chromedp.ByQuery),
		chromedp.Evaluate(`document.querySelectorAll('[data-testid="session-row"]').length`, &sessions),
	)
	require.Equal(t, 1, sessions)
	require.Empty(t, tb.consoleErrors())
}
