package views

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services/record"
)

// TestIntentSummarySaysWhatItWasAnswered: the timeline line of an intent
// says what the ledger answered it. An intent held for approval did not
// proceed; one whose policy failed to evaluate says so.
func TestIntentSummarySaysWhatItWasAnswered(t *testing.T) {
	one := 1
	zero := 0
	for _, tc := range []struct {
		name, payload string
		attempt       *int
		want, not     string
	}{
		{"proceed", `{"tool":"payments.refund","timeout":300}`, &one, "proceed: payments.refund runs as attempt 1", ""},
		{"held", `{"tool":"payments.refund","timeout":300,"approval":{"required":2,"expires_at":"2026-12-02T00:00:00Z","policies":[{"id":"p","name":"large refunds","version":1}]}}`,
			&zero, "pending approval: payments.refund needs 2 approvals (large refunds); nothing ran", "proceed"},
		{"held on an error", `{"tool":"payments.refund","timeout":300,"approval":{"required":1,"expires_at":"2026-12-02T00:00:00Z","policies":[{"id":"p","name":"large refunds","version":1}],"error":"no such key: amount"}}`,
			&zero, "pending approval: payments.refund needs 1 approval (large refunds: its condition failed: no such key: amount); nothing ran", "proceed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := entrySummary(&record.Entry{Type: record.TypeIntent, Attempt: tc.attempt, Payload: []byte(tc.payload)})
			require.Equal(t, tc.want, got)
			if tc.not != "" {
				require.NotContains(t, got, tc.not)
			}
		})
	}
}
