package views

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/record"
)

// TestRefusalsReadForAPerson: the decision panel words the ledger's
// refusals for the operator, not in the API's field names.
func TestRefusalsReadForAPerson(t *testing.T) {
	got := RefusalText("duplicate_risk_unacknowledged", "action x is unkeyed: … send acknowledge_duplicate_risk: true to retry anyway")
	require.NotContains(t, got, "acknowledge_duplicate_risk")
	require.Contains(t, got, "tick the box")
	require.Equal(t, "You already approved this action; it waits for someone else's yes.", RefusalText("already_approved", "already approved by this identity"))
	require.Equal(t, "Something else", RefusalText("a_code_from_the_future", "Something else"), "an unknown code keeps the API's message")
}

// TestEveryDecisionRefusalIsWorded: every code a decision can be refused
// with (services.Ledger.Decide, its rules, and the web layer's own) has a
// sentence of its own, and none shows an API field name or code.
func TestEveryDecisionRefusalIsWorded(t *testing.T) {
	const api = `the API's message: field "x" (code y)`
	for _, code := range []string{
		services.CodeInvalid, services.CodeInvalidJSON, services.CodeBodyTooLarge, services.CodeForbidden,
		services.CodeNotFound, services.CodeInvalidTransition, services.CodeVersionConflict, services.CodeAlreadyApproved,
		services.CodeApprovalExpired, services.CodeApproverUnknown, services.CodeDuplicateRiskUnacknowledged,
		services.CodeConflict, services.CodeUnavailable,
	} {
		got := RefusalText(code, api)
		require.NotEqual(t, api, got, code)
		require.NotContains(t, got, code, "the code is not shown")
		require.True(t, strings.HasSuffix(got, "."), "%s: a sentence: %q", code, got)
	}
}

// TestInvalidDecisionsReadForAPerson: each way the ledger refuses a
// decision's fields as invalid reads as what to do, without the field's
// API name.
func TestInvalidDecisionsReadForAPerson(t *testing.T) {
	zero := 0
	ref := "re_1\x01"
	long := strings.Repeat("x", services.MaxReasonBytes+1)
	for _, tc := range []struct {
		name string
		in   services.DecisionInput
		want string
	}{
		{"no decision", services.DecisionInput{Reason: "x"}, "Reload the page"},
		{"unknown decision", services.DecisionInput{Decision: "yolo", Reason: "x"}, "Reload the page"},
		{"no reason", services.DecisionInput{Decision: record.DecisionAbandon, Reason: "  "}, "give a reason"},
		{"long reason", services.DecisionInput{Decision: record.DecisionAbandon, Reason: long}, "the reason is too long"},
		{"bad version", services.DecisionInput{Decision: record.DecisionAbandon, Reason: "x", ExpectedVersion: &zero}, "Reload the page"},
		{"result not JSON", services.DecisionInput{Decision: record.DecisionConfirm, Reason: "x", Result: json.RawMessage("{no")}, "the result must be JSON"},
		{"evidence on abandon", services.DecisionInput{Decision: record.DecisionAbandon, Reason: "x", Result: json.RawMessage("1")}, "Reload the page"},
		{"ack on confirm", services.DecisionInput{Decision: record.DecisionConfirm, Reason: "x", AcknowledgeDuplicateRisk: true}, "Reload the page"},
		{"bad external ref", services.DecisionInput{Decision: record.DecisionConfirm, Reason: "x", ExternalRef: &ref}, "the external reference must be"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.in.Validate()
			e, ok := services.AsError(err)
			require.True(t, ok, "%v", err)
			got := RefusalText(e.Code, e.Message)
			require.Contains(t, got, tc.want)
			require.NotContains(t, got, `field "`)
			require.NotContains(t, got, "expected_version")
			require.NotContains(t, got, "external_ref")
		})
	}
}
