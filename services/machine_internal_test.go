package services

import (
	"testing"
	"time"

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

// TestAgentActsAfterDecisionFollowsTheRules: every status a decision leads
// to and from which an intent is answered proceed or compensate is in
// AgentActsAfterDecision, and nothing else is. Each decision row is run on
// an action in its status, then the intent row of the status it left.
func TestAgentActsAfterDecisionFollowsTheRules(t *testing.T) {
	now := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	timeout, tool := 60.0, "payments.refund"
	acts := map[record.Status]bool{}
	for _, d := range record.Decisions {
		for from, r := range rules[event(d)] {
			a := &record.Action{ID: "a", Namespace: "ns", Key: "k", Status: from, Attempt: 1, Version: 1,
				Approval: &record.Approval{Required: 1, ExpiresAt: now.Add(time.Hour)}}
			pl := r(&step{now: now, ns: "ns", act: a, actor: record.Actor{Kind: record.ActorOperator, Name: "alice"},
				identity: "user:alice", dec: &DecisionInput{Decision: d, Reason: "asking", AcknowledgeDuplicateRisk: true}})
			if pl.err != nil || pl.next == nil {
				continue
			}
			to := pl.next.Status
			intent, ok := rules[evIntent][to]
			if !ok {
				continue
			}
			answer := intent(&step{now: now, ns: "ns", act: pl.next, in: &EntryInput{Key: "k", Type: record.TypeIntent, Tool: &tool, Timeout: &timeout}})
			if answer.outcome == record.OutcomeProceed || answer.outcome == record.OutcomeCompensate {
				acts[to] = true
			}
		}
	}
	listed := map[record.Status]bool{}
	for _, s := range AgentActsAfterDecision {
		listed[s] = true
		if !acts[s] {
			t.Errorf("AgentActsAfterDecision lists %s, but no decision leads to it with an intent that acts", s)
		}
	}
	for s := range acts {
		if !listed[s] {
			t.Errorf("a decision leads to %s, where the agent's next intent acts, but AgentActsAfterDecision leaves it out", s)
		}
	}
}
