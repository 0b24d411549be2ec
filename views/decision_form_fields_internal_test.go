package views

import (
	"bytes"
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/record"
)

// decisionInputFields are the JSON names of services.DecisionInput's fields:
// what a decision can carry.
func decisionInputFields() []string {
	var out []string
	ty := reflect.TypeOf(services.DecisionInput{})
	for i := range ty.NumField() {
		name, _, _ := strings.Cut(ty.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			out = append(out, name)
		}
	}
	return out
}

// TestDecisionFormsCarryEveryField: the decision panel's forms, over the
// statuses that offer every decision, have an input for each field a
// decision can carry, so a field added to DecisionInput cannot be out of
// reach of the dashboard.
func TestDecisionFormsCarryEveryField(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	names := map[string]bool{}
	offered := map[record.Decision]bool{}
	for _, st := range record.Statuses {
		a := &record.Action{ID: "a1", Namespace: "payments", Key: "refund:9001", Tool: "payments.refund",
			Effect: record.EffectUnkeyed, Status: st, Attempt: 1, Version: 3, ReviewPending: true,
			Approval: &record.Approval{Required: 1, ExpiresAt: now.Add(time.Hour)}}
		var b bytes.Buffer
		require.NoError(t, DecisionPanel(ActionView{Action: a, Now: now, CanDecide: true}).Render(context.Background(), &b))
		doc, err := goquery.NewDocumentFromReader(&b)
		require.NoError(t, err)
		doc.Find("form [name]").Each(func(_ int, s *goquery.Selection) {
			n, _ := s.Attr("name")
			names[n] = true
			if n == "decision" {
				v, _ := s.Attr("value")
				offered[record.Decision(v)] = true
			}
		})
	}
	for _, d := range record.Decisions {
		require.True(t, offered[d], "some status's panel offers the decision %s", d)
	}
	for _, f := range decisionInputFields() {
		require.True(t, names[f], "no decision form has an input named %q (views/decision_panel.templ, decisionForm)", f)
	}
}
