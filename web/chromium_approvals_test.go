package web_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/client"
	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
)

// TestBrowserFourEyes: a policy needs two people for large refunds. An agent
// asks for one and waits (the SDK's Guard, Prefer: wait); the request
// appears live at the top of the open triage page; one operator approves
// from the action page (1 of 2), a second operator in another session
// approves, and the waiting agent runs the refund at once.
//
// It runs on SQLite only and holds two browsers at once (the ledger's
// approval rules run on both databases in services/approval_test.go).
func TestBrowserFourEyes(t *testing.T) {
	t.Parallel()
	st := dbtest.Open(t, services.SQLite)
	d := newDesk(t, st)
	d.seedQueue()
	admin := d.key("", "root", services.RoleAdmin)
	status, m := d.do("POST", "/v1/policies", admin, `{"name":"large refunds","namespace":"payments",`+
		`"tools":["payments.refund"],"condition":"params.amount > 100000","approvals_required":2,"expires_after":3600,"escalate_after":900}`)
	require.Equal(t, http.StatusCreated, status, "%v", m)
	policyID := m["id"].(string)

	alicePW := d.user("alice@example.com", services.RoleAdmin) // admins decide as operators do
	bobPW := d.user("bob@example.com", services.RoleOperator)
	alice, bob := newTab(t, true), newTab(t, true)
	alice.signIn(t, d.srv.URL, "alice@example.com", alicePW)
	bob.signIn(t, d.srv.URL, "bob@example.com", bobPW)
	alice.run(t,
		chromedp.Navigate(d.srv.URL+"/"),
		chromedp.WaitVisible(testid("triage-table"), chromedp.ByQuery),
		chromedp.Evaluate(`window.__stillHere = 1`, nil),
	)

	type result struct {
		out *client.Outcome
		err error
	}
	done := make(chan result, 1)
	agent := client.New(d.srv.URL, d.agent)
	spec := client.GuardSpec{Key: client.Key("refund", "order-9001"), Tool: "payments.refund", Effect: client.EffectKeyed,
		Params: map[string]any{"order": "9001", "amount": 250000, "currency": "EUR"}, Reference: "ZD-48777",
		ApprovalWait: 60 * time.Second}
	go func() {
		out, err := agent.Guard(context.Background(), spec, func(ctx context.Context, a client.Attempt) (any, string, error) {
			return map[string]any{"refund": "re_9001"}, "re_9001", nil
		})
		done <- result{out, err}
	}()

	// The request appears at the top of the open page, without a reload.
	first := `[data-testid="triage-row"]:first-child`
	ctx, cancel := context.WithTimeout(alice.ctx, 5*time.Second)
	err := chromedp.Run(ctx, chromedp.WaitVisible(first+`[data-kind="awaiting_approval"]`, chromedp.ByQuery))
	cancel()
	require.NoError(t, err, "the held refund did not appear first on the open triage page")
	var stillHere bool
	var summary string
	alice.run(t,
		chromedp.Evaluate(`window.__stillHere === 1`, &stillHere),
		chromedp.Text(first+` `+testid("triage-approval"), &summary, chromedp.ByQuery),
	)
	require.True(t, stillHere, "the page was reloaded instead of updated")
	require.Contains(t, summary, "0 of 2 approvals")
	require.Contains(t, summary, "large refunds (version 1)")
	writeShots := updateScreenshots
	if writeShots {
		var png []byte
		alice.run(t, chromedp.FullScreenshot(&png, 100))
		saveScreenshot(t, "approvals.png", png)
	}

	// Alice approves without a reason: 1 of 2.
	var count string
	alice.run(t,
		chromedp.Click(first+` `+testid("triage-key"), chromedp.ByQuery),
		chromedp.WaitVisible(testid("action-approval"), chromedp.ByQuery),
		chromedp.Click(testid("decision-approve")+` > summary`, chromedp.ByQuery),
		chromedp.WaitVisible(testid("decision-form-approve")+` `+testid("decision-submit"), chromedp.ByQuery),
		chromedp.Click(testid("decision-form-approve")+` `+testid("decision-submit"), chromedp.ByQuery),
		chromedp.WaitVisible(testid("approval-vote"), chromedp.ByQuery),
		chromedp.Text(testid("approval-count"), &count, chromedp.ByQuery),
	)
	require.Equal(t, "1 of 2 approvals", strings.TrimSpace(count))
	var url string
	alice.run(t, chromedp.Location(&url))
	select {
	case r := <-done:
		t.Fatalf("the agent ran before the second approval: %+v", r)
	default:
	}

	// Bob, in his own session, gives the second yes; the agent runs.
	var votes int
	var statusText string
	bob.run(t,
		chromedp.Navigate(url),
		chromedp.WaitVisible(testid("decision-approve"), chromedp.ByQuery),
		chromedp.Click(testid("decision-approve")+` > summary`, chromedp.ByQuery),
		chromedp.WaitVisible(testid("decision-form-approve")+` `+testid("decision-reason"), chromedp.ByQuery),
		chromedp.SendKeys(testid("decision-form-approve")+` `+testid("decision-reason"), "checked the order with the customer", chromedp.ByQuery),
		chromedp.Click(testid("decision-form-approve")+` `+testid("decision-submit"), chromedp.ByQuery),
		chromedp.WaitVisible(testid("approval-votes")+` li:nth-child(2)`, chromedp.ByQuery),
		chromedp.Evaluate(`document.querySelectorAll('[data-testid="approval-vote"]').length`, &votes),
	)
	require.Equal(t, 2, votes)
	select {
	case r := <-done:
		require.NoError(t, r.err)
		require.True(t, r.out.Ran)
		require.Equal(t, 1, r.out.Attempt)
	case <-time.After(5 * time.Second):
		t.Fatal("the waiting agent did not run after the second approval")
	}
	bob.run(t,
		chromedp.Reload(),
		chromedp.WaitVisible(testid("action-status"), chromedp.ByQuery),
		chromedp.Text(testid("action-status"), &statusText, chromedp.ByQuery),
	)
	require.Contains(t, []string{"in_progress", "succeeded"}, strings.TrimSpace(statusText))

	if writeShots {
		var png []byte
		alice.run(t,
			chromedp.Navigate(d.srv.URL+"/admin/policies/"+policyID),
			chromedp.WaitVisible(testid("policy-form"), chromedp.ByQuery),
			chromedp.Click(testid("policy-test"), chromedp.ByQuery),
			chromedp.WaitVisible(testid("policy-preview"), chromedp.ByQuery),
			chromedp.FullScreenshot(&png, 100),
		)
		saveScreenshot(t, "policy.png", png)
	}
	require.Empty(t, alice.consoleErrors())
	require.Empty(t, bob.consoleErrors())
}
