package webhooks_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
	"github.com/arbiter-ledger/arbiter/services/policies"
	"github.com/arbiter-ledger/arbiter/services/record"
	"github.com/arbiter-ledger/arbiter/services/webhooks"
	"github.com/arbiter-ledger/arbiter/services/webhooks/webhookstest"
)

// TestFreezeAlertsInBothFormats: a freeze started and lifted reaches a
// standard endpoint with the freeze as data, signed, and a Slack endpoint
// as a message that says what is frozen, by whom and why.
func TestFreezeAlertsInBothFormats(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		ctx := context.Background()
		e := newHookEnv(t, st)
		_, fz, _ := policies.NewBraked(st, services.LedgerConfig{}, nil)
		std, slack := webhookstest.NewReceiver(t), webhookstest.NewReceiver(t)
		events := []record.EventType{record.EventFreezeStarted, record.EventFreezeLifted}
		stdEP := e.endpoint(t, webhookstest.EndpointOpts{URL: std.URL, Events: events, Namespaces: []string{e.ns}})
		e.endpoint(t, webhookstest.EndpointOpts{URL: slack.URL, Events: events, Namespaces: []string{e.ns}, Format: webhooks.FormatSlack})
		f, err := fz.Start(ctx, e.operator, policies.FreezeInput{Namespace: &e.ns, Tools: &[]string{"payments.*"},
			Reason: new("refunds <going> out twice")})
		require.NoError(t, err)
		_, err = fz.Lift(ctx, e.operator, f.ID, policies.LiftInput{Reason: new("fixed")})
		require.NoError(t, err)
		webhookstest.StartDispatcher(t, st, webhookstest.DispatcherOpts{PublicURL: "https://arbiter.example.com"})

		got := map[record.EventType]services.MessageBody{}
		for _, r := range std.WaitRequests(t, 2) {
			require.NoError(t, webhookstest.Verify(stdEP.Secret, r))
			var m services.MessageBody
			require.NoError(t, json.Unmarshal(r.Body, &m), "%s", r.Body)
			got[m.Type] = m
		}
		require.Equal(t, f.ID, got[record.EventFreezeStarted].Data.Freeze.ID)
		require.Nil(t, got[record.EventFreezeStarted].Data.Freeze.LiftedAt)
		require.Equal(t, "fixed", *got[record.EventFreezeLifted].Data.Freeze.LiftReason)
		require.Equal(t, record.ActorOperator, got[record.EventFreezeLifted].Data.Freeze.LiftedBy.Kind)

		texts := map[string]string{}
		for _, r := range slack.WaitRequests(t, 2) {
			var m struct {
				Text   string `json:"text"`
				Blocks []struct {
					Text struct{ Text string } `json:"text"`
				} `json:"blocks"`
			}
			require.NoError(t, json.Unmarshal(r.Body, &m), "%s", r.Body)
			texts[m.Text] = m.Blocks[0].Text.Text
		}
		started := texts["freeze.started: payments.* in "+e.ns]
		require.Contains(t, started, "started by alice@example.com: refunds &lt;going&gt; out twice")
		require.Contains(t, started, "<https://arbiter.example.com/freezes|freezes>")
		require.Contains(t, texts["freeze.lifted: payments.* in "+e.ns], "lifted by alice@example.com: fixed")
	})
}
