package views

import (
	"encoding/json"
	"testing"

	"github.com/arbiter-ledger/arbiter/services/record"
)

// TestOutcomeUnknownTimelineText: the timeline says which attempt's outcome
// is unknown and what the agent saw, and marks the entry for a second look.
func TestOutcomeUnknownTimelineText(t *testing.T) {
	n := 2
	e := &record.Entry{Type: record.TypeOutcomeUnknown, Attempt: &n,
		Payload: json.RawMessage(`{"error":"timeout after 30 s calling the provider","type":"outcome_unknown"}`)}
	if got, want := entrySummary(e), "outcome unknown for attempt 2: timeout after 30 s calling the provider"; got != want {
		t.Fatalf("summary %q, want %q", got, want)
	}
	if _, ok := entryNote[record.TypeOutcomeUnknown]; !ok {
		t.Fatal("no note for outcome_unknown entries")
	}
	if !entryWarns(record.TypeOutcomeUnknown) {
		t.Fatal("an outcome_unknown entry must warn")
	}
}
