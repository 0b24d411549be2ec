package web_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
	"github.com/arbiter-ledger/arbiter/services/record"
	"github.com/arbiter-ledger/arbiter/services/webhooks"
)

// TestActionPageHidesWebhookURLs: a failed delivery's error on the action
// page names the endpoint by scheme and host only, never the path or query
// that may be its secret; an admin gets a link to the endpoint's page, an
// operator none.
func TestActionPageHidesWebhookURLs(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		d := newDetailEnv(t, st)
		u := "http://127.0.0.1:9/services/T000/s3cr3t?token=abc123"
		ep, err := webhooks.New(st, webhooks.Config{Policy: webhooks.AddressPolicy{AllowPrivate: true}}).CreateEndpoint(context.Background(),
			services.Principal{Kind: "api_key", Role: services.RoleAdmin, Name: "root"},
			webhooks.EndpointInput{URL: &u, EventTypes: &[]record.EventType{record.EventTimedOut}})
		require.NoError(t, err)
		id := d.start("refund:loud", "keyed", 1, `{}`)
		d.timeOut()
		runDispatcher(t, st)

		var p page
		require.Eventually(t, func() bool {
			p = d.op.get("/actions/" + id)
			return p.testid("action-delivery-error").Length() == 1
		}, 10*time.Second, 50*time.Millisecond, "the failed attempt is shown")
		text := flatText(p.testid("action-delivery"))
		require.Contains(t, text, "http://127.0.0.1:9")
		for _, secret := range []string{"s3cr3t", "token=", "abc123", "/services"} {
			require.False(t, strings.Contains(p.body, secret), "the page shows %q of the endpoint's URL", secret)
		}
		require.Equal(t, 0, p.testid("action-delivery-endpoint").Find("a").Length(), "an operator cannot open endpoints")

		pw := d.user("admin@example.com", services.RoleAdmin)
		admin := d.browser()
		admin.signIn("admin@example.com", pw)
		p = admin.get("/actions/" + id)
		require.False(t, strings.Contains(p.body, "s3cr3t"))
		require.Equal(t, "/admin/webhooks/"+ep.ID, p.testid("action-delivery-endpoint").Find("a").AttrOr("href", ""))
	})
}
