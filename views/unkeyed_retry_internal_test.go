package views

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services/record"
)

// TestRetryOfExpiredKeyAsksForAcknowledgement: a timed-out keyed action
// whose key the downstream no longer honours counts as unkeyed for a retry
// (the ledger's rule, record.Action.EffectAt): the retry form asks for the
// duplicate-risk acknowledgement and the header does not promise that a
// retry with the same key is safe.
func TestRetryOfExpiredKeyAsksForAcknowledgement(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	expired := now.Add(-time.Minute)
	honoured := now.Add(time.Hour)
	for _, tc := range []struct {
		name    string
		expires *time.Time
		ack     bool
	}{{"key expired", &expired, true}, {"key honoured", &honoured, false}} {
		t.Run(tc.name, func(t *testing.T) {
			a := &record.Action{ID: "a1", Namespace: "payments", Key: "refund:1", Tool: "payments.refund",
				Effect: record.EffectKeyed, Status: record.StatusTimedOut, Attempt: 1, Version: 2,
				Reconciliation: &record.Reconciliation{KeyExpiresAt: tc.expires}}
			v := ActionView{Action: a, Now: now, CanDecide: true}
			var b bytes.Buffer
			require.NoError(t, ActionLive(v).Render(context.Background(), &b))
			doc, err := goquery.NewDocumentFromReader(&b)
			require.NoError(t, err)
			ack := doc.Find(`[data-testid="decision-form-retry"] [data-testid="decision-ack"]`)
			effect := doc.Find(`[data-testid="action-effect"]`).Text()
			if tc.ack {
				require.Equal(t, 1, ack.Length(), "the retry form asks for the acknowledgement")
				require.NotContains(t, effect, "a retry with the same key is safe")
				require.Contains(t, effect, "no longer honours the key")
			} else {
				require.Equal(t, 0, ack.Length())
				require.Contains(t, effect, "a retry with the same key is safe")
			}
		})
	}
}
