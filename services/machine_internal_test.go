package services

import (
	"testing"

	"github.com/arbiter-ledger/arbiter/services/record"
)

// TestEveryDeadlineHasARule: a status that has a deadline has a rule for
// its passing, or the sweeper would read its actions and leave them be.
func TestEveryDeadlineHasARule(t *testing.T) {
	for st := range deadlines {
		if _, ok := rules[evDeadline][st]; !ok {
			t.Errorf("status %q has a deadline but no %s rule", st, evDeadline)
		}
	}
	for st := range rules[evDeadline] {
		if _, ok := deadlines[st]; !ok {
			t.Errorf("status %q has a %s rule but no deadline: the rule can never run", st, evDeadline)
		}
	}
}

// TestOnlyIntentsCreateActions: the "no action yet" row holds intents only;
// any other first entry is answered not_found without a write.
func TestOnlyIntentsCreateActions(t *testing.T) {
	for ev, row := range rules {
		if _, ok := row[record.StatusNone]; ok && ev != evIntent {
			t.Errorf("event %q creates actions", ev)
		}
	}
	attempt := 1
	pl := rules.transition(&step{ns: "ns", in: &EntryInput{Key: "k", Type: record.TypeHeartbeat, Attempt: &attempt}})
	if pl.outcome != record.OutcomeRejected || pl.err == nil || pl.err.Code != CodeNotFound || pl.record != nil {
		t.Errorf("a heartbeat for a new key: %+v", pl)
	}
}

// TestEveryAgentEntryTypeHasRules: each type an agent may send, and each
// decision, has rows in the rules table; without one, every entry of a new
// type would be refused as if its action's status did not allow it.
func TestEveryAgentEntryTypeHasRules(t *testing.T) {
	// A note is recorded in every status by ruleTable.transition itself,
	// before the table is asked.
	beforeTheTable := map[record.EntryType]bool{record.TypeNote: true}
	for _, ty := range record.AgentEntryTypes {
		if len(rules[event(ty)]) == 0 && !beforeTheTable[ty] {
			t.Errorf("the agent's entry type %q has no rows in the rules table", ty)
		}
	}
	for _, d := range record.Decisions {
		if len(rules[event(d)]) == 0 {
			t.Errorf("the decision %q has no rows in the rules table", d)
		}
	}
}
