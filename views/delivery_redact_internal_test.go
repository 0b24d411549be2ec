package views

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services/record"
	"github.com/arbiter-ledger/arbiter/services/webhooks"
)

// TestDeliveryErrorsShowOnlyTheEndpointsOrigin: a delivery's error on the
// action page names the endpoint by scheme and host only, never its path
// or query (a Slack webhook's secret path, a token in the query); admins
// get a link to the endpoint's page, others none.
func TestDeliveryErrorsShowOnlyTheEndpointsOrigin(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	status := 500
	errs := []string{
		`Post "https://hooks.slack.com/services/T000/B000/XXXXSECRET?token=abc123": dial tcp 10.0.0.1:443: connect: connection refused`,
		`Post "http://user:pw@alerts.example.com:8443/hook/s3cr3t#frag": context deadline exceeded (Client.Timeout exceeded while awaiting headers)`,
	}
	for _, admin := range []bool{false, true} {
		for _, msg := range errs {
			d := &webhooks.Delivery{ID: "d1", EndpointID: "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b", EventType: "action.timed_out",
				State: "pending", AttemptCount: 1, LastStatus: &status, LastError: &msg, CreatedAt: now}
			v := ActionView{Action: &record.Action{ID: "a1", Status: record.StatusTimedOut}, Now: now, Admin: admin,
				Deliveries: []*webhooks.Delivery{d}}
			var b bytes.Buffer
			require.NoError(t, ActionDeliveries(v).Render(context.Background(), &b))
			html := b.String()
			for _, secret := range []string{"XXXXSECRET", "token", "abc123", "/services", "s3cr3t", "/hook/", "frag", "pw@", "user:"} {
				require.NotContains(t, html, secret)
			}
			doc, err := goquery.NewDocumentFromReader(strings.NewReader(html))
			require.NoError(t, err)
			text := doc.Find(`[data-testid=action-delivery]`).Text()
			if strings.Contains(msg, "slack") {
				require.Contains(t, text, "https://hooks.slack.com")
			} else {
				require.Contains(t, text, "http://alerts.example.com:8443")
				require.Contains(t, text, "context deadline exceeded", "the reason stays")
			}
			link := doc.Find(`[data-testid=action-delivery-endpoint] a`)
			if admin {
				require.Equal(t, "/admin/webhooks/0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b", link.AttrOr("href", ""))
			} else {
				require.Equal(t, 0, link.Length(), "only admins can open an endpoint")
			}
		}
	}
}
