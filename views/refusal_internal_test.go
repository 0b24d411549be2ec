package views

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRefusalsReadForAPerson: the decision panel words the ledger's
// refusals for the operator, not in the API's field names.
func TestRefusalsReadForAPerson(t *testing.T) {
	got := RefusalText("duplicate_risk_unacknowledged", "action x is unkeyed: … send acknowledge_duplicate_risk: true to retry anyway")
	require.NotContains(t, got, "acknowledge_duplicate_risk")
	require.Contains(t, got, "tick the box")
	require.Equal(t, "You already approved this action; it waits for someone else's yes.", RefusalText("already_approved", "already approved by this identity"))
	require.Equal(t, "Something else", RefusalText("invalid", "Something else"))
}
