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

// TestApproverIsNotOfferedApproveTwice: a person whose yes is counted (1 of
// 2) reads "You approved · waiting for 1 more" and gets no Approve form;
// Reject stays.
func TestApproverIsNotOfferedApproveTwice(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	a := &record.Action{ID: "a1", Namespace: "payments", Key: "refund:9001", Tool: "payments.refund",
		Effect: record.EffectKeyed, Status: record.StatusAwaitingApproval, Version: 2,
		Approval: &record.Approval{Required: 2, ExpiresAt: now.Add(time.Hour),
			Approvals: []record.Vote{{By: record.Actor{Kind: "user", Name: "carol@example.com"}, At: now, Identity: "user:1"}}}}
	for _, approved := range []bool{true, false} {
		v := ActionView{Action: a, Now: now, CanDecide: true, Approved: approved}
		var b bytes.Buffer
		require.NoError(t, ActionLive(v).Render(context.Background(), &b))
		doc, err := goquery.NewDocumentFromReader(&b)
		require.NoError(t, err)
		if approved {
			require.Equal(t, 0, doc.Find(`[data-testid="decision-form-approve"]`).Length())
			require.Equal(t, "You approved · waiting for 1 more", doc.Find(`[data-testid="decision-approved-by-you"]`).Text())
		} else {
			require.Equal(t, 1, doc.Find(`[data-testid="decision-form-approve"]`).Length())
			require.Equal(t, 0, doc.Find(`[data-testid="decision-approved-by-you"]`).Length())
		}
		require.Equal(t, 1, doc.Find(`[data-testid="decision-form-reject"]`).Length())
	}
}
