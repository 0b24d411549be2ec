package record

import (
	"encoding/json"
	"testing"
)

// TestEveryEntryTypeHasAPayload: every entry type decodes into a struct of
// its own, and a payload written from one reads back the same.
func TestEveryEntryTypeHasAPayload(t *testing.T) {
	for _, typ := range EntryTypes {
		if NewPayload(typ) == nil {
			t.Errorf("entry type %q has no payload type", typ)
		}
	}
	if NewPayload("no_such_type") != nil {
		t.Error("an unknown entry type has a payload type")
	}
	msg, ref := "checked", "re_1"
	written := &ReportPayload{Message: &msg, ExternalRef: &ref, Type: TypeSucceeded}
	e := &Entry{Type: TypeLateResult, Payload: MarshalPayload(written)}
	got, err := DecodePayload(e)
	if err != nil {
		t.Fatal(err)
	}
	back, ok := got.(*ReportPayload)
	if !ok || *back.Message != msg || *back.ExternalRef != ref || back.Type != TypeSucceeded {
		t.Fatalf("read back %#v from %s", got, e.Payload)
	}
	if _, err := DecodePayload(&Entry{Type: TypeDecision, Payload: json.RawMessage(`{"decision":7}`)}); err == nil {
		t.Error("a payload of the wrong shape decodes without an error")
	}
}

// TestPayloadsKeepTheirBytes: payload fields are in the alphabetical order
// the ledger wrote before payloads were typed, so stored bytes and webhook
// bodies do not change.
func TestPayloadsKeepTheirBytes(t *testing.T) {
	eff, run := EffectKeyed, "run-1"
	for _, c := range []struct {
		p    Payload
		want string
	}{
		{&IntentPayload{Effect: &eff, RunID: &run, Timeout: 60, Tool: "payments.refund"},
			`{"effect":"keyed","run_id":"run-1","timeout":60,"tool":"payments.refund"}`},
		{&DecisionPayload{Decision: DecisionRetry, Reason: "checked", AcknowledgeDuplicateRisk: true},
			`{"acknowledge_duplicate_risk":true,"decision":"retry","reason":"checked"}`},
	} {
		if got := string(MarshalPayload(c.p)); got != c.want {
			t.Errorf("got %s, want %s", got, c.want)
		}
	}
}
