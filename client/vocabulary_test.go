package client_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/client"
	"github.com/arbiter-ledger/arbiter/services/record"
)

// TestVocabularyIsRecords: the SDK's constants are the ledger's
// vocabulary, every value of it and in its order, so a value added to
// package record and forgotten here fails.
func TestVocabularyIsRecords(t *testing.T) {
	t.Parallel()
	require.Equal(t, record.Statuses, []client.Status{client.StatusInProgress, client.StatusSucceeded,
		client.StatusFailed, client.StatusTimedOut, client.StatusRetryRequested, client.StatusConfirmed,
		client.StatusCompensationRequested, client.StatusCompensated, client.StatusAbandoned,
		client.StatusAwaitingApproval, client.StatusApproved, client.StatusDenied})
	require.Equal(t, strs(record.Effects), []string{client.EffectReadOnly, client.EffectIdempotent,
		client.EffectKeyed, client.EffectUnkeyed})
	require.Equal(t, strs(record.AgentEntryTypes), []string{client.TypeIntent, client.TypeHeartbeat,
		client.TypeSucceeded, client.TypeFailed, client.TypeOutcomeUnknown, client.TypeCompensated,
		client.TypeNote, client.TypeLookup, client.TypeLookupResult, client.TypeCompensationFailed})
	require.Equal(t, strs(record.Outcomes), []string{client.OutcomeProceed, client.OutcomeReplay,
		client.OutcomeInProgress, client.OutcomeHeld, client.OutcomeCompensate, client.OutcomeRecorded,
		client.OutcomeDuplicate, client.OutcomeRejected, client.OutcomePendingApproval, client.OutcomeDenied, client.OutcomeFrozen})
	require.Equal(t, strs(record.Decisions), []string{client.DecisionConfirm, client.DecisionRetry,
		client.DecisionCompensate, client.DecisionMarkCompensated, client.DecisionAbandon,
		client.DecisionApprove, client.DecisionReject, client.DecisionAcknowledge})
	require.Equal(t, record.Answers, []client.Answer{client.AnswerHappened, client.AnswerNotHappened,
		client.AnswerUnknown})
}

func strs[T ~string](xs []T) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = string(x)
	}
	return out
}
