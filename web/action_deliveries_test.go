package web_test

import (
	"context"
	"testing"

	"github.com/arbiter-ledger/arbiter/services/webhooks"

	"github.com/arbiter-ledger/arbiter/services/record"

	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
)

// TestActionPageShowsDeliveries: the action's page lists the webhook alerts
// its changes caused.
func TestActionPageShowsDeliveries(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		d := newDetailEnv(t, st)
		url := "http://127.0.0.1:9/hook"
		_, err := webhooks.New(st, webhooks.Config{Policy: webhooks.AddressPolicy{AllowPrivate: true}}).CreateEndpoint(context.Background(),
			services.Principal{Kind: "api_key", Role: services.RoleAdmin, Name: "root"},
			webhooks.EndpointInput{URL: &url, EventTypes: &[]record.EventType{record.EventTimedOut}})
		require.NoError(t, err)

		quiet := d.start("refund:quiet", "keyed", 300, `{}`)
		p := d.op.get("/actions/" + quiet)
		require.Equal(t, 1, p.testid("action-deliveries-empty").Length())

		id := d.start("refund:loud", "keyed", 1, `{}`)
		d.timeOut()
		p = d.op.get("/actions/" + id)
		rows := p.testid("action-delivery")
		require.Equal(t, 1, rows.Length())
		require.Equal(t, "pending", rows.AttrOr("data-state", ""))
		require.Contains(t, rows.Text(), "action.timed_out")
	})
}
