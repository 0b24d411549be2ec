package web_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/arbiter-ledger/arbiter/services/webhooks"

	"github.com/arbiter-ledger/arbiter/services/record"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
)

// TestBrowserWebhookTestEvent: in a real browser, "Send test event" swaps
// the deliveries in place through htmx, the pending delivery refreshes
// itself until it has succeeded, and nothing breaks the page's CSP.
func TestBrowserWebhookTestEvent(t *testing.T) {
	t.Parallel()
	st := dbtest.Open(t, services.SQLite)
	e := newEnv(t, st)
	pw := e.user("root@example.com", services.RoleAdmin)
	sink := newHookSink(t, http.StatusOK)
	u := sink.srv.URL + "/hook"
	ep, err := webhooks.New(st, webhooks.Config{Policy: webhooks.AddressPolicy{AllowPrivate: true}}).CreateEndpoint(context.Background(),
		services.Principal{Kind: "api_key", Name: "root", Role: services.RoleAdmin},
		webhooks.EndpointInput{URL: &u, EventTypes: &[]record.EventType{record.EventTimedOut}})
	require.NoError(t, err)

	tb := newTab(t, true)
	tb.signIn(t, e.srv.URL, "root@example.com", pw)
	page := e.srv.URL + "/admin/webhooks/" + ep.ID
	var location, notice string
	tb.run(t,
		chromedp.Navigate(page),
		chromedp.WaitVisible(`[data-testid="webhook-deliveries-empty"]`, chromedp.ByQuery),
		chromedp.Click(`[data-testid="webhook-test"]`, chromedp.ByQuery),
		chromedp.WaitVisible(`[data-testid="webhook-notice"]`, chromedp.ByQuery),
		chromedp.Text(`[data-testid="webhook-notice"]`, &notice, chromedp.ByQuery),
		chromedp.Location(&location),
	)
	require.Contains(t, notice, "Queued a webhook.test message")
	require.Equal(t, page, location, "swapped in place, no navigation")

	runDispatcher(t, st)
	tb.run(t, chromedp.WaitVisible(`[data-testid="webhook-delivery"][data-state="succeeded"]`, chromedp.ByQuery))
	reqs, _ := sink.requests()
	require.Len(t, reqs, 1)
	require.Empty(t, tb.consoleErrors())
}
