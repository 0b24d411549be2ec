package web_test

import (
	"strings"
	"testing"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/record"
)

// TestEveryAgentEntryTypeIsAccepted: POST /v1/entries knows every type an
// agent may send (services.EntryInput.Validate has its fields), so a type
// added to record.AgentEntryTypes and not given its fields fails here
// rather than being refused as unknown.
func TestEveryAgentEntryTypeIsAccepted(t *testing.T) {
	t.Parallel()
	for _, typ := range record.AgentEntryTypes {
		in := &services.EntryInput{Key: "k", Type: typ}
		if err := in.Validate(); err != nil && strings.Contains(err.Error(), "unknown type") {
			t.Errorf("entry type %s is refused as unknown: give it its fields in allowedFields (services/entry_input.go)", typ)
		}
	}
	if err := (&services.EntryInput{Key: "k", Type: "no_such_type"}).Validate(); err == nil || !strings.Contains(err.Error(), "unknown type") {
		t.Errorf("an unknown type is answered %v, not as unknown", err)
	}
}
