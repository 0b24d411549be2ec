package web

import (
	"net/http"
	"testing"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/record"
)

// TestEveryOutcomeHasAStatus: a single entry's answer has an HTTP status
// for every outcome, so an outcome added to record and not here fails
// rather than being answered with status 0. A rejected entry takes its
// error's status instead.
func TestEveryOutcomeHasAStatus(t *testing.T) {
	t.Parallel()
	for _, o := range record.Outcomes {
		r := services.EntryResult{Outcome: o, Type: record.TypeIntent}
		if o == record.OutcomeRejected {
			if _, ok := outcomeStatus[o]; ok {
				t.Errorf("outcome %s is in outcomeStatus; a rejection takes its error's status", o)
			}
			r.Error = services.Errorf(services.CodeInvalidTransition, "x")
		}
		if got := resultStatus(r); got < http.StatusOK || got >= 500 {
			t.Errorf("outcome %s is answered with HTTP status %d (add it to outcomeStatus, web/entries.go)", o, got)
		}
	}
	if len(outcomeStatus) != len(record.Outcomes)-1 {
		t.Errorf("outcomeStatus has %d outcomes; record.Outcomes has %d besides rejected", len(outcomeStatus), len(record.Outcomes)-1)
	}
}
