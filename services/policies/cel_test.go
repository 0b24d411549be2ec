package policies

import (
	"testing"
)

// TestCostLimit: a condition the checker cannot bound is stopped at the
// cost limit (and then holds the intent: fail closed); one it can bound runs
// without counting.
func TestCostLimit(t *testing.T) {
	heavy, err := compile(`params.items.all(x, params.items.all(y, x != y || x == y))`)
	if err != nil {
		t.Fatal(err)
	}
	items := make([]any, 2000)
	for i := range items {
		items[i] = float64(i)
	}
	if _, err := eval(heavy, Facts{Params: map[string]any{"items": items}}); err == nil {
		t.Fatal("4,000,000 comparisons ran within the cost limit")
	}
	if ok, err := eval(heavy, Facts{Params: map[string]any{"items": items[:10]}}); err != nil || !ok {
		t.Fatalf("a small list: %v %v", ok, err)
	}
	light, err := compile(`params.amount > 100000 && agent != 'nobody'`)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := eval(light, Facts{Agent: "bot", Params: map[string]any{"amount": float64(250000)}}); err != nil || !ok {
		t.Fatalf("light: %v %v", ok, err)
	}
	if _, err := eval(light, Facts{Agent: "bot", Params: map[string]any{}}); err == nil {
		t.Fatal("a missing param evaluated without an error")
	}
}

func TestMatchTool(t *testing.T) {
	for _, c := range []struct {
		pattern, tool string
		want          bool
	}{
		{"payments.refund", "payments.refund", true},
		{"payments.refund", "payments.refunds", false},
		{"payments.*", "payments.refund", true},
		{"payments.*", "payments.", true},
		{"payments.*", "payment.refund", false},
		{"*.delete", "crm.contacts.delete", true},
		{"*", "anything", true},
		{"a*b*c", "aXbYc", true},
		{"a*b*c", "aXcYb", false},
		{"*refund*", "payments.refund.partial", true},
	} {
		if got := matchTool(c.pattern, c.tool); got != c.want {
			t.Errorf("matchTool(%q, %q) = %v", c.pattern, c.tool, got)
		}
	}
}
