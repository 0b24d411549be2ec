package record_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services/record"
)

// requireEveryField fails unless every field of v is set, so that a round
// trip of v checks each one: a field added later and left out of the stored
// form fails here until the test sets it.
func requireEveryField(t *testing.T, v any) {
	t.Helper()
	rv := reflect.ValueOf(v)
	for i := range rv.NumField() {
		require.False(t, rv.Field(i).IsZero(), "set %s.%s in this test", rv.Type().Name(), rv.Type().Field(i).Name)
	}
}

// TestStoredApprovalKeepsEveryField: an approval read back from the actions
// table is the approval written, with the fields never shown.
func TestStoredApprovalKeepsEveryField(t *testing.T) {
	at := time.Date(2026, 12, 3, 6, 0, 0, 0, time.UTC)
	esc := at.Add(10 * time.Minute)
	vote := record.Vote{By: record.Actor{Kind: "user", Name: "oncall@example.com"}, At: at, Reason: "checked", Identity: "u1"}
	rej := vote
	a := record.Approval{Required: 2, Approvals: []record.Vote{vote}, ExpiresAt: at.Add(time.Hour), EscalateAt: &esc,
		Policies:  []record.PolicyRef{{ID: "p1", Name: "large refunds", Version: 3, Error: "no such key"}},
		Limits:    []record.ApprovalLimit{{ID: "l1", Name: "refunds per customer", Version: 2, Group: "c_1", Used: 480, Amount: 50, Max: 500}},
		FrozenBy:  []record.FreezeRef{{ID: "f1", Reason: "provider incident"}},
		Rejection: &rej, Escalated: true, Error: "params.amount: no such key"}
	requireEveryField(t, a)
	back, err := record.UnmarshalStoredApproval(a.MarshalStored())
	require.NoError(t, err)
	require.Equal(t, &a, back)
}

// TestStoredLimitsKeepEveryField: an action's charges read back are the
// charges written, with the use and max its JSON leaves out.
func TestStoredLimitsKeepEveryField(t *testing.T) {
	c := record.LimitCharge{ID: "l1", Name: "refunds", Version: 1, Group: "c_1", Amount: 50, Exceeded: true, Used: 60, Max: 100, Denied: true}
	requireEveryField(t, c)
	back, err := record.UnmarshalLimits(record.MarshalLimits([]record.LimitCharge{c}))
	require.NoError(t, err)
	require.Equal(t, []record.LimitCharge{c}, back)
}
