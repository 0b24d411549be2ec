package views

import (
	"testing"

	"github.com/arbiter-ledger/arbiter/services/record"
)

// TestWebhookEventLabelsCoverEveryEvent: the endpoint form offers every
// event an action's change can alert, each once, with a label.
func TestWebhookEventLabelsCoverEveryEvent(t *testing.T) {
	labelled := map[record.EventType]int{}
	for _, ev := range webhookEvents {
		labelled[ev.Value]++
		if ev.Label == "" {
			t.Errorf("event %s has no label", ev.Value)
		}
	}
	for _, ev := range record.EventTypes {
		if ev == record.EventTest {
			continue // a test goes to one endpoint on request, never by subscription
		}
		if labelled[ev] != 1 {
			t.Errorf("event %s is offered %d times on the endpoint form", ev, labelled[ev])
		}
	}
	if len(labelled) != len(record.EventTypes)-1 {
		t.Errorf("the form offers %d events; the vocabulary has %d besides webhook.test", len(labelled), len(record.EventTypes)-1)
	}
}
