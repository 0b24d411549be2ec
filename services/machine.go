package services

import (
	"encoding/json"
	"fmt"
	"time"
)

// The state machine of an action, as a table: for each event, the statuses it
// is allowed in and the rule that decides the outcome there. Fencing (attempt
// numbers), key reuse and unknown keys are checked before the table, so rules
// only see events for the current attempt of a matching action. Anything not
// in the table is an invalid transition.
//
// New capabilities (approval before execution, reconciliation) come in as new
// statuses, events and rows here, not as new branches elsewhere.

type event string

const (
	evIntent          event = TypeIntent
	evHeartbeat       event = TypeHeartbeat
	evSucceeded       event = TypeSucceeded
	evFailed          event = TypeFailed
	evCompensated     event = TypeCompensated
	evNote            event = TypeNote
	evExpire          event = "expire" // the sweeper saw the lease pass
	evConfirm         event = "confirm"
	evRetry           event = "retry"
	evCompensate      event = "compensate"
	evMarkCompensated event = "mark_compensated"
	evAbandon         event = "abandon"
)

// step is the input of one transition.
type step struct {
	now   time.Time
	act   *Action // as read; never nil inside rules
	in    *EntryInput
	dec   *DecisionInput
	actor Actor
}

// plan is what a rule decides. next nil means the action does not change;
// record nil means nothing is appended.
type plan struct {
	outcome string
	err     *Error
	next    *Action
	record  *recordSpec
	events  []string
}

// recordSpec describes the entry to append.
type recordSpec struct {
	typ     string
	attempt *int
	payload map[string]any
}

type rule func(s *step) plan

// rules is the transition table.
var rules = map[event]map[Status]rule{
	evIntent: {
		StatusInProgress:            intentWhileRunning,
		StatusTimedOut:              answer(OutcomeHeld),
		StatusRetryRequested:        startAttempt,
		StatusFailed:                intentAfterFailure,
		StatusSucceeded:             answer(OutcomeReplay),
		StatusConfirmed:             answer(OutcomeReplay),
		StatusCompensated:           answer(OutcomeReplay),
		StatusAbandoned:             answer(OutcomeReplay),
		StatusCompensationRequested: answer(OutcomeCompensate),
	},
	evHeartbeat: {
		StatusInProgress: heartbeat,
	},
	evSucceeded: {
		StatusInProgress:     finish(StatusSucceeded),
		StatusTimedOut:       lateResult(StatusSucceeded),
		StatusRetryRequested: lateResult(StatusSucceeded), // the retry is cancelled: the effect happened
		StatusSucceeded:      answer(OutcomeDuplicate),
	},
	evFailed: {
		StatusInProgress:     finish(StatusFailed),
		StatusTimedOut:       lateResult(StatusFailed),
		StatusRetryRequested: lateResultKeepRetry, // a late failure leaves the requested retry in place
		StatusFailed:         answer(OutcomeDuplicate),
	},
	// A compensated resent after the agent's own report is found by the
	// ledger's duplicate check; after the operator's mark_compensated it is
	// an outcome after a decision, which is invalid.
	evCompensated: {
		StatusCompensationRequested: compensated,
	},
	evExpire: {
		StatusInProgress: expire,
	},
	evConfirm: {
		StatusTimedOut:       decide(StatusConfirmed),
		StatusInProgress:     decide(StatusConfirmed),
		StatusFailed:         decide(StatusConfirmed),
		StatusRetryRequested: decide(StatusConfirmed),
	},
	evRetry: {
		StatusTimedOut: decideRetry,
		StatusFailed:   decideRetry,
	},
	evCompensate: {
		StatusTimedOut:  decide(StatusCompensationRequested),
		StatusSucceeded: decide(StatusCompensationRequested),
		StatusConfirmed: decide(StatusCompensationRequested),
	},
	evMarkCompensated: {
		StatusCompensationRequested: decide(StatusCompensated),
	},
	evAbandon: {
		StatusTimedOut:              decide(StatusAbandoned),
		StatusFailed:                decide(StatusAbandoned),
		StatusRetryRequested:        decide(StatusAbandoned),
		StatusCompensationRequested: decide(StatusAbandoned),
	},
}

// AllowedDecisions lists the decisions the table allows in status st, in the
// order a person reads them.
func AllowedDecisions(st Status) []string {
	var out []string
	for _, d := range Decisions {
		if _, ok := rules[event(d)][st]; ok {
			out = append(out, d)
		}
	}
	return out
}

// transition decides what an agent entry does to an existing action.
func transition(s *step) plan {
	a, in := s.act, s.in
	if in.Type == TypeIntent {
		fp, params, err := intentFingerprint(in)
		if err != nil {
			return plan{outcome: OutcomeRejected, err: err.(*Error)}
		}
		if fp != a.fingerprint {
			return plan{
				outcome: OutcomeRejected,
				err:     Errorf(CodeKeyReused, "key %q is already used by an action with different tool or params (fingerprint %s…)", a.Key, a.fingerprint[:12]),
				record:  &recordSpec{typ: TypeKeyReused, payload: withRaw(intentPayload(in), "params", params, "fingerprint", fp)},
				events:  []string{EventKeyReused},
			}
		}
	} else if in.Attempt != nil && in.Type != TypeNote {
		n := *in.Attempt
		if n < a.Attempt {
			typ, events := TypeStaleOutcome, []string{EventStaleOutcome}
			if in.Type == TypeHeartbeat {
				typ, events = TypeStaleHeartbeat, nil
			}
			return plan{
				outcome: OutcomeRejected,
				err:     Errorf(CodeStaleAttempt, "attempt %d is stale: the action is at attempt %d", n, a.Attempt),
				record:  &recordSpec{typ: typ, attempt: &n, payload: agentPayload(in)},
				events:  events,
			}
		}
		if n > a.Attempt {
			return invalidTransition(s, fmt.Sprintf("attempt %d has not started: the action is at attempt %d", n, a.Attempt))
		}
	}
	if in.Type == TypeNote {
		return plan{outcome: OutcomeRecorded, record: &recordSpec{typ: TypeNote, attempt: in.Attempt, payload: agentPayload(in)}}
	}
	r, ok := rules[event(in.Type)][a.Status]
	if !ok {
		if in.Type == TypeHeartbeat {
			return leaseLost(s)
		}
		return invalidTransition(s, fmt.Sprintf("a %s entry is not allowed while the action is %s", in.Type, a.Status))
	}
	return r(s)
}

func answer(outcome string) rule {
	return func(*step) plan { return plan{outcome: outcome} }
}

func invalidTransition(s *step, msg string) plan {
	return plan{
		outcome: OutcomeRejected,
		err:     Errorf(CodeInvalidTransition, "%s", msg),
		record:  &recordSpec{typ: TypeRejected, attempt: s.in.Attempt, payload: agentPayload(s.in)},
	}
}

func leaseLost(s *step) plan {
	return plan{
		outcome: OutcomeRejected,
		err:     Errorf(CodeLeaseLost, "the lease of attempt %d has passed; stop and do not report success without checking", s.act.Attempt),
		record:  &recordSpec{typ: TypeLeaseLost, attempt: s.in.Attempt, payload: agentPayload(s.in)},
	}
}

func leaseLive(s *step) bool {
	return s.act.LeaseUntil != nil && s.act.LeaseUntil.After(s.now)
}

func intentWhileRunning(s *step) plan {
	if leaseLive(s) {
		return plan{outcome: OutcomeInProgress}
	}
	// The lease passed but the sweeper has not got to it yet: the outcome is
	// already unknown.
	return plan{outcome: OutcomeHeld}
}

func intentAfterFailure(s *step) plan {
	if s.act.retriable {
		return startAttempt(s)
	}
	return plan{outcome: OutcomeReplay}
}

// startAttempt grants the next attempt.
func startAttempt(s *step) plan {
	next := s.act.clone()
	next.Status = StatusInProgress
	next.Attempt++
	lease := s.now.Add(s.in.timeout())
	next.LeaseUntil = &lease
	next.retriable = false
	n := next.Attempt
	return plan{outcome: OutcomeProceed, next: next, record: &recordSpec{typ: TypeIntent, attempt: &n, payload: intentPayload(s.in)}}
}

func heartbeat(s *step) plan {
	if !leaseLive(s) {
		return leaseLost(s)
	}
	next := s.act.clone()
	lease := s.now.Add(s.in.timeout())
	next.LeaseUntil = &lease
	return plan{outcome: OutcomeRecorded, next: next, record: &recordSpec{typ: TypeHeartbeat, attempt: s.in.Attempt, payload: agentPayload(s.in)}}
}

// applyOutcome moves the action to a finished status with the entry's data.
func applyOutcome(s *step, to Status) *Action {
	next := s.act.clone()
	next.Status = to
	next.LeaseUntil = nil
	if to == StatusSucceeded {
		next.Result = nullIfEmpty(s.in.Result)
		next.ExternalRef = s.in.ExternalRef
	} else {
		next.retriable = s.in.Retriable != nil && *s.in.Retriable
	}
	return next
}

func failedEvents(s *step, to Status) []string {
	if to == StatusFailed && (s.in.Retriable == nil || !*s.in.Retriable) {
		return []string{EventFailed}
	}
	return nil
}

func finish(to Status) rule {
	return func(s *step) plan {
		if !leaseLive(s) {
			return lateResult(to)(s)
		}
		return plan{outcome: OutcomeRecorded, next: applyOutcome(s, to),
			record: &recordSpec{typ: s.in.Type, attempt: s.in.Attempt, payload: agentPayload(s.in)},
			events: failedEvents(s, to)}
	}
}

func lateResult(to Status) rule {
	return func(s *step) plan {
		return plan{outcome: OutcomeRecorded, next: applyOutcome(s, to),
			record: &recordSpec{typ: TypeLateResult, attempt: s.in.Attempt, payload: agentPayload(s.in)},
			events: append([]string{EventLateResult}, failedEvents(s, to)...)}
	}
}

func lateResultKeepRetry(s *step) plan {
	return plan{outcome: OutcomeRecorded,
		record: &recordSpec{typ: TypeLateResult, attempt: s.in.Attempt, payload: agentPayload(s.in)},
		events: []string{EventLateResult}}
}

func compensated(s *step) plan {
	next := s.act.clone()
	next.Status = StatusCompensated
	if s.in.ExternalRef != nil {
		next.ExternalRef = s.in.ExternalRef
	}
	return plan{outcome: OutcomeRecorded, next: next,
		record: &recordSpec{typ: TypeCompensated, attempt: s.in.Attempt, payload: agentPayload(s.in)},
		events: []string{EventCompensated}}
}

func expire(s *step) plan {
	if leaseLive(s) {
		return plan{} // a heartbeat won the race
	}
	next := s.act.clone()
	next.Status = StatusTimedOut
	n := s.act.Attempt
	return plan{outcome: OutcomeRecorded, next: next,
		record: &recordSpec{typ: TypeTimedOut, attempt: &n, payload: map[string]any{"lease_until": s.act.LeaseUntil}},
		events: []string{EventTimedOut}}
}

func decide(to Status) rule {
	return func(s *step) plan {
		d := s.dec
		next := s.act.clone()
		next.Status = to
		if s.act.Status == StatusInProgress {
			next.LeaseUntil = nil
		}
		if d.ExternalRef != nil {
			next.ExternalRef = d.ExternalRef
		}
		if d.Result != nil {
			next.Result = nullIfEmpty(d.Result)
		}
		events := []string{EventDecided}
		if to == StatusCompensated {
			events = append(events, EventCompensated)
		}
		n := s.act.Attempt
		return plan{outcome: OutcomeRecorded, next: next,
			record: &recordSpec{typ: TypeDecision, attempt: &n, payload: d.payload()},
			events: events}
	}
}

func decideRetry(s *step) plan {
	if s.act.Effect == EffectUnkeyed && !s.dec.AcknowledgeDuplicateRisk {
		return plan{outcome: OutcomeRejected, err: Errorf(CodeDuplicateRiskUnacknowledged,
			"action %s is unkeyed: the downstream does not deduplicate, so a retry may repeat the effect; "+
				"send acknowledge_duplicate_risk: true to retry anyway", s.act.ID)}
	}
	return decide(StatusRetryRequested)(s)
}

// intentFingerprint canonicalizes the intent's params and fingerprints them.
func intentFingerprint(in *EntryInput) (string, []byte, error) {
	params := []byte("{}")
	if len(in.Params) > 0 && string(in.Params) != "null" {
		c, err := Canonicalize(in.Params)
		if err != nil {
			return "", nil, Errorf(CodeInvalid, "field \"params\": %v", err)
		}
		params = c
	}
	return Fingerprint(*in.Tool, params), params, nil
}

func intentPayload(in *EntryInput) map[string]any {
	p := map[string]any{"tool": *in.Tool, "timeout": in.timeout().Seconds()}
	if in.Effect != nil {
		p["effect"] = *in.Effect
	}
	if in.Reference != nil {
		p["reference"] = *in.Reference
	}
	if in.RunID != nil {
		p["run_id"] = *in.RunID
	}
	return p
}

// agentPayload keeps what an agent's entry said, apart from the fields that
// have columns of their own.
func agentPayload(in *EntryInput) map[string]any {
	p := map[string]any{}
	if in.Type != TypeIntent {
		p["type"] = in.Type
	}
	if in.RunID != nil {
		p["run_id"] = *in.RunID
	}
	if in.Result != nil {
		p["result"] = json.RawMessage(in.Result)
	}
	if in.ExternalRef != nil {
		p["external_ref"] = *in.ExternalRef
	}
	if in.Error != nil {
		p["error"] = *in.Error
	}
	if in.Retriable != nil {
		p["retriable"] = *in.Retriable
	}
	if in.Message != nil {
		p["message"] = *in.Message
	}
	if in.Timeout != nil {
		p["timeout"] = *in.Timeout
	}
	if in.Tool != nil {
		p["tool"] = *in.Tool
	}
	return p
}

func withRaw(p map[string]any, kv ...any) map[string]any {
	for i := 0; i+1 < len(kv); i += 2 {
		switch v := kv[i+1].(type) {
		case []byte:
			p[kv[i].(string)] = json.RawMessage(v)
		default:
			p[kv[i].(string)] = v
		}
	}
	return p
}

func nullIfEmpty(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	return raw
}

func (a *Action) clone() *Action {
	c := *a
	return &c
}
