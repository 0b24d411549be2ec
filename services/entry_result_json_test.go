package services_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/record"
)

// TestEntryResultAppendJSON: the answer to an entry appended by hand is
// byte for byte what json.Marshal writes, with and without each optional
// part.
func TestEntryResultAppendJSON(t *testing.T) {
	attempt := 2
	lease := time.Date(2026, 12, 1, 6, 30, 0, 123456000, time.UTC)
	ref := `order <8812> & "co"`
	act := &record.Action{ID: "0193a7c2-0000-7000-8000-000000000001", Namespace: "payments", Key: "refund:order-8812",
		Tool: "payments.refund", Effect: record.EffectKeyed, Status: record.StatusInProgress, Attempt: 2, Version: 3,
		LeaseUntil: &lease, Reference: &ref, Params: json.RawMessage(`{"amount":1200}`),
		CreatedAt: lease.Add(-time.Minute), UpdatedAt: lease}
	for _, r := range []services.EntryResult{
		{Key: "k", Type: record.TypeIntent, Outcome: record.OutcomeProceed, Attempt: &attempt, LeaseUntil: &lease, Action: act},
		{Key: "k", Type: record.TypeIntent, Outcome: record.OutcomeReplay, Action: act},
		{Key: "caf\u00e9\u2028", Type: record.TypeSucceeded, Outcome: record.OutcomeRejected,
			Error: &services.Error{Code: services.CodeInvalid, Message: `field "attempt" is required for <succeeded> entries`}},
		{Key: "r2", Type: record.TypeIntent, Outcome: record.OutcomeDenied, Action: act,
			Error: &services.Error{Code: services.CodeLimitExceeded, Message: `limit "refunds" (version 1) allows 100`,
				Limits: []record.ApprovalLimit{{ID: act.ID, Name: "refunds <per customer>", Version: 1, Group: "c_1", Used: 60, Amount: 50.5, Max: 100}}}},
		{Key: "r3", Type: record.TypeIntent, Outcome: record.OutcomeFrozen, Action: act,
			Error: &services.Error{Code: services.CodeFrozen, Message: `freeze f1 ("incident") holds this tool`, RetryAfter: 5}},
		{},
	} {
		want, err := json.Marshal(&r)
		require.NoError(t, err)
		require.Equal(t, string(want), string(r.AppendJSON(nil)))
	}
}
