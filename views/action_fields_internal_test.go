package views

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services/record"
)

// actionFieldTestids is where the action page shows each field a client
// reads of an action (record.Action's JSON): the data-testid of the element
// that holds it. A field people are not to see would be listed in
// actionFieldsNotShown instead, with the reason.
var actionFieldTestids = map[string]string{
	"id":             "action-id",
	"namespace":      "action-namespace",
	"key":            "action-key",
	"tool":           "action-tool",
	"effect":         "action-effect",
	"status":         "action-status",
	"attempt":        "action-attempt",
	"version":        "action-version",
	"lease_until":    "action-lease",
	"reference":      "action-reference",
	"agent":          "action-agent",
	"params":         "action-params",
	"result":         "action-result",
	"external_ref":   "action-external-ref",
	"created_at":     "action-created",
	"updated_at":     "action-updated",
	"approval":       "action-approval",
	"reconciliation": "action-reconciliation",
	"limits":         "action-limits",
}

var actionFieldsNotShown = map[string]string{}

// TestActionPageShowsEveryField: a new column of actions that clients see is
// also on the action page, or is said here not to be. The action below has
// every field set (the test fails first if a new one is left zero), and the
// page must have each field's element, holding its value where it is text.
func TestActionPageShowsEveryField(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	lease, created, updated := now.Add(90*time.Second), now.Add(-2*time.Hour), now.Add(-time.Minute)
	reference, agent, ref, lookupErr := "order-9001", "refund-bot", "re_3PqX", "downstream timed out"
	a := &record.Action{ID: "0193a5c2-7d1e-7c4a-9b7e-2f1d3c4b5a69", Namespace: "payments", Key: "refund:9001",
		Tool: "payments.refund", Effect: record.EffectKeyed, Status: record.StatusAwaitingApproval,
		Attempt: 3, Version: 17, LeaseUntil: &lease, Reference: &reference, Agent: &agent,
		Params: json.RawMessage(`{"amount_cents":1250}`), Result: json.RawMessage(`{"refund_id":"re_3PqX"}`),
		ExternalRef: &ref, CreatedAt: created, UpdatedAt: updated,
		Approval: &record.Approval{Required: 2, ExpiresAt: now.Add(time.Hour),
			Policies: []record.PolicyRef{{ID: "p1", Name: "large refunds", Version: 1}}},
		Reconciliation: &record.Reconciliation{LookupAttempt: 3, Lookups: 1, CompensationError: &lookupErr},
		Limits:         []record.LimitCharge{{ID: "l1", Name: "daily refunds", Version: 2, Group: "c_1", Amount: 50, Exceeded: true}}}

	fields := map[string]reflect.Value{}
	rv := reflect.ValueOf(a).Elem()
	for i := range rv.NumField() {
		name, _, _ := strings.Cut(rv.Type().Field(i).Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		fields[name] = rv.Field(i)
		require.Falsef(t, rv.Field(i).IsZero(), "the action above must set %q so that its place on the page is seen", name)
		_, shown := actionFieldTestids[name]
		_, hidden := actionFieldsNotShown[name]
		require.Truef(t, shown != hidden, "field %q of record.Action: name its element in actionFieldTestids or say in actionFieldsNotShown why it is not shown", name)
	}
	for name := range actionFieldTestids {
		require.Containsf(t, fields, name, "actionFieldTestids names %q, which record.Action's JSON does not have", name)
	}

	var b bytes.Buffer
	require.NoError(t, ActionLive(ActionView{Action: a, Now: now, CanDecide: true}).Render(context.Background(), &b))
	doc, err := goquery.NewDocumentFromReader(&b)
	require.NoError(t, err)
	for name, testid := range actionFieldTestids {
		el := doc.Find(`[data-testid="` + testid + `"]`)
		require.Equalf(t, 1, el.Length(), "field %q: the page has no element %q", name, testid)
		v := fields[name]
		if v.Kind() == reflect.Pointer && v.Elem().Kind() == reflect.String {
			v = v.Elem()
		}
		if v.Kind() == reflect.String {
			require.Containsf(t, el.Text(), v.String(), "field %q is on the page in %q", name, testid)
		}
	}
}
