package services

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/arbiter-ledger/arbiter/services/record"
)

// The state machine of an action, as a table: for each event, the statuses it
// is allowed in and the rule that decides the outcome there. Every change of
// an action is decided here: the first entry of a key (the StatusNone row),
// agents' entries, operators' decisions, and what the passing of a deadline
// means (evDeadline, asked by the sweeper). Fencing (attempt numbers), key
// reuse and duplicates are checked before the table, so rules only see
// events for the current attempt of a matching action. Anything not in the
// table is an invalid transition.
//
// New capabilities (approval before execution, reconciliation) come in as new
// statuses, events, rows here and in the deadlines table, not as new
// branches elsewhere; docs/architecture.md says where each kind of change
// goes.

type event string

const (
	evIntent          = event(record.TypeIntent)
	evHeartbeat       = event(record.TypeHeartbeat)
	evSucceeded       = event(record.TypeSucceeded)
	evFailed          = event(record.TypeFailed)
	evOutcomeUnknown  = event(record.TypeOutcomeUnknown)
	evCompensated     = event(record.TypeCompensated)
	evNote            = event(record.TypeNote)
	evDeadline        = event("deadline") // the sweeper saw the action's deadline pass
	evConfirm         = event(record.DecisionConfirm)
	evRetry           = event(record.DecisionRetry)
	evCompensate      = event(record.DecisionCompensate)
	evMarkCompensated = event(record.DecisionMarkCompensated)
	evAbandon         = event(record.DecisionAbandon)
	evAcknowledge     = event(record.DecisionAcknowledge)
)

// step is the input of one transition.
type step struct {
	now   time.Time
	ns    string         // the namespace of the key
	act   *record.Action // as read; nil for a key with no action yet
	in    *EntryInput
	dec   *DecisionInput
	actor record.Actor
	// identity tells distinct deciders apart (approvals count people).
	identity string
	// approval is what the policies require of a first intent, asked
	// before deciding (nil: nothing).
	approval *record.ApprovalRequest
	// limits are how the limits the first intent matched judge it, its
	// groups locked (limits.go).
	limits []record.LimitCheck
	// frozen are the active freezes that cover an intent's tool
	// (freeze.go); lift is the freeze being lifted, for evUnfreeze, with
	// the reason it was lifted.
	frozen []record.FreezeRef
	lift   *record.FreezeRef
}

// plan is what a rule decides. next nil means the action does not change;
// record nil means nothing is appended.
type plan struct {
	outcome record.Outcome
	err     *Error
	next    *record.Action
	record  *recordSpec
	events  []record.EventType
	// actor writes the record when it is not the step's actor: the system
	// recording what time decided (an approval that expired) when an agent
	// or an operator is the first to notice.
	actor *record.Actor
	// lease answers the entry when it is not the action's own lease (a
	// lookup's).
	lease *time.Time
	// then decides a second change, made by the system in the same
	// transaction once this plan's entry is written (and has its seq): what
	// the agent's entry caused.
	then func(written *record.Entry) plan
}

// recordSpec describes the entry to append: its type, attempt and payload
// (one of the payload structs of package record).
type recordSpec struct {
	typ     record.EntryType
	attempt *int
	payload record.Payload
}

type rule func(s *step) plan

// ruleTable maps an event and the action's status to the rule that decides.
type ruleTable map[event]map[record.Status]rule

// staleTable decides, per entry type, an entry for an attempt older than
// the action's current one; types without a row are stale outcomes.
type staleTable map[record.EntryType]rule

// stale is the table of entries for older attempts. A lookup of an older
// attempt is refused and its answer recorded (reconcile.go).
var stale = staleTable{
	record.TypeHeartbeat:    staleHeartbeat,
	record.TypeLookup:       staleLookup,
	record.TypeLookupResult: recordLookupResult,
}

// staleOutcome records an outcome for an older attempt and alerts it: the
// effect may have happened twice.
func staleOutcome(s *step) plan {
	n := *s.in.Attempt
	return plan{
		outcome: record.OutcomeRejected,
		err:     Errorf(CodeStaleAttempt, "attempt %d is stale: the action is at attempt %d", n, s.act.Attempt),
		record:  &recordSpec{typ: record.TypeStaleOutcome, attempt: &n, payload: reportPayload(s.in)},
		events:  []record.EventType{record.EventStaleOutcome},
	}
}

// staleHeartbeat records a heartbeat of an older attempt as evidence that
// its worker was alive.
func staleHeartbeat(s *step) plan {
	pl := staleOutcome(s)
	pl.record.typ, pl.events = record.TypeStaleHeartbeat, nil
	return pl
}

// rules is the transition table, every row of it. The rules of approval
// before execution live in approval.go, those of reconciliation (lookups,
// the compensation lease) in reconcile.go.
var rules = ruleTable{
	evIntent: {
		record.StatusNone:                  createAction,
		record.StatusInProgress:            intentWhileRunning,
		record.StatusTimedOut:              answer(record.OutcomeHeld),
		record.StatusRetryRequested:        unlessFrozen(startAttempt),
		record.StatusFailed:                unlessFrozen(intentAfterFailure),
		record.StatusSucceeded:             answer(record.OutcomeReplay),
		record.StatusConfirmed:             answer(record.OutcomeReplay),
		record.StatusCompensated:           answer(record.OutcomeReplay),
		record.StatusAbandoned:             answer(record.OutcomeReplay),
		record.StatusCompensationRequested: unlessFrozen(compensateIntent), // takes the compensation's lease
		record.StatusAwaitingApproval:      unlessExpired(answer(record.OutcomePendingApproval)),
		record.StatusApproved:              unlessExpired(unlessFrozen(startAttempt)),
		record.StatusDenied:                intentAfterDenial,
	},
	evHeartbeat: {
		record.StatusInProgress:            heartbeat,
		record.StatusCompensationRequested: heartbeat, // extends a compensation's lease
	},
	evSucceeded: {
		record.StatusInProgress:     finish(record.StatusSucceeded),
		record.StatusTimedOut:       lateResult(record.StatusSucceeded),
		record.StatusRetryRequested: lateResult(record.StatusSucceeded), // the retry is cancelled: the effect happened
		record.StatusSucceeded:      answer(record.OutcomeDuplicate),
	},
	evFailed: {
		record.StatusInProgress:     finish(record.StatusFailed),
		record.StatusTimedOut:       lateResult(record.StatusFailed),
		record.StatusRetryRequested: lateResultKeepRetry, // a late failure leaves the requested retry in place
		record.StatusFailed:         answer(record.OutcomeDuplicate),
	},
	// The agent cannot tell whether the effect happened: while the attempt
	// runs, the action is timed out at once; later it is recorded as
	// evidence and changes nothing (the outcome is already unknown, or a
	// retry is already asked for).
	evOutcomeUnknown: {
		record.StatusInProgress:     outcomeUnknown,
		record.StatusTimedOut:       recordReport,
		record.StatusRetryRequested: recordReport,
	},
	// A compensated resent after the agent's own report is found by the
	// ledger's duplicate check; after the operator's mark_compensated it is
	// an outcome after a decision, which is invalid.
	evCompensated: {
		record.StatusCompensationRequested: compensated,
	},
	evCompensationFailed: {
		record.StatusCompensationRequested: compensationFailed,
	},
	evLookup: {
		record.StatusTimedOut: lookup,
	},
	evLookupResult: lookupResultRows(),
	evDeadline: {
		record.StatusInProgress:            expire,
		record.StatusAwaitingApproval:      approvalDeadline,
		record.StatusApproved:              approvalDeadline,
		record.StatusCompensationRequested: compensationExpired,
	},
	evConfirm: {
		record.StatusTimedOut:       decide(record.StatusConfirmed),
		record.StatusInProgress:     decide(record.StatusConfirmed),
		record.StatusFailed:         decide(record.StatusConfirmed),
		record.StatusRetryRequested: decide(record.StatusConfirmed),
	},
	evRetry: {
		record.StatusTimedOut: decideRetry,
		record.StatusFailed:   decideRetry,
	},
	evCompensate: {
		record.StatusTimedOut:              decide(record.StatusCompensationRequested),
		record.StatusSucceeded:             decide(record.StatusCompensationRequested),
		record.StatusConfirmed:             decide(record.StatusCompensationRequested),
		record.StatusCompensationRequested: compensateAgain,
	},
	evMarkCompensated: {
		record.StatusCompensationRequested: decide(record.StatusCompensated),
	},
	evAbandon: {
		record.StatusTimedOut:              decide(record.StatusAbandoned),
		record.StatusFailed:                decide(record.StatusAbandoned),
		record.StatusRetryRequested:        decide(record.StatusAbandoned),
		record.StatusCompensationRequested: decide(record.StatusAbandoned),
	},
	evApprove: {
		record.StatusAwaitingApproval: approve,
	},
	evReject: {
		record.StatusAwaitingApproval: reject,
		record.StatusApproved:         reject,
	},
	evUnfreeze: {
		record.StatusAwaitingApproval: unfreeze,
	},
	// Allowed in every status, while a review alert shows (acknowledge).
	evAcknowledge: everyStatus(acknowledge),
}

// everyStatus is a row for each status an action can be in.
func everyStatus(r rule) map[record.Status]rule {
	m := make(map[record.Status]rule, len(record.Statuses))
	for _, st := range record.Statuses {
		m[st] = r
	}
	return m
}

// acknowledge records that a person looked at the action's review alerts
// (key reuse, a stale outcome, a late result): they leave triage, the
// action is unchanged.
func acknowledge(s *step) plan {
	if !s.act.ReviewPending {
		return plan{outcome: record.OutcomeRejected, err: Errorf(CodeInvalidTransition,
			"nothing to acknowledge: action %s (%s) has no review alert left (key_reused, stale_outcome or late_result in the last 7 days)",
			s.act.ID, s.act.Status)}
	}
	var attempt *int
	if n := s.act.Attempt; n > 0 {
		attempt = &n
	}
	return plan{outcome: record.OutcomeRecorded,
		record: &recordSpec{typ: record.TypeDecision, attempt: attempt, payload: s.dec.payload(s.actor.Via)},
		events: []record.EventType{record.EventDecided}}
}

// deadlineTable says, per status, which time of an action is its deadline:
// when the sweeper asks the rules table (evDeadline) what its passing means.
// A status without a row has no deadline. Every status here needs an
// evDeadline rule (a test checks).
type deadlineTable map[record.Status]func(a *record.Action) *time.Time

// deadlines is the deadline table: a running attempt's lease; while an
// approval waits, its escalation (until it happened) then its expiry, and
// once approved its expiry if the intent has not proceeded by then
// (approval.go); a compensation's lease, until it passed once
// (reconcile.go).
var deadlines = deadlineTable{
	record.StatusInProgress:            func(a *record.Action) *time.Time { return a.LeaseUntil },
	record.StatusAwaitingApproval:      func(a *record.Action) *time.Time { return a.Approval.Deadline() },
	record.StatusApproved:              approvalExpiry,
	record.StatusCompensationRequested: compensationLeaseDeadline,
}

// AllowedDecisions lists the decisions the table allows on a now, in the
// order a person reads them.
func AllowedDecisions(a *record.Action) []record.Decision {
	return rules.allowedDecisions(a, Now())
}

// allowedDecisions asks each decision's rule for a's status whether it
// would refuse a as invalid_transition (some rows allow a decision only in
// some cases, such as compensating again). A refusal for want of a field
// (the duplicate-risk acknowledgement) still counts as allowed. Rules are
// pure, so asking writes nothing.
func (t ruleTable) allowedDecisions(a *record.Action, now time.Time) []record.Decision {
	var out []record.Decision
	for _, d := range record.Decisions {
		r, ok := t[event(d)][a.Status]
		if !ok {
			continue
		}
		pl := r(&step{now: now, ns: a.Namespace, act: a, actor: record.Actor{Kind: record.ActorOperator},
			dec: &DecisionInput{Decision: d, Reason: "asking", AcknowledgeDuplicateRisk: true}})
		if pl.err == nil || pl.err.Code != CodeInvalidTransition {
			out = append(out, d)
		}
	}
	return out
}

// transition decides what an agent entry does to the action of its key, or
// to a key without one.
func (t ruleTable) transition(s *step) plan {
	a, in := s.act, s.in
	if a == nil {
		r, ok := t[event(in.Type)][record.StatusNone]
		if !ok {
			return plan{outcome: record.OutcomeRejected, err: Errorf(CodeNotFound,
				"no action has key %q in namespace %q: record an intent first", in.Key, s.ns)}
		}
		return r(s)
	}
	if in.Type == record.TypeIntent {
		fp, params, err := intentFingerprint(in)
		if err != nil {
			return plan{outcome: record.OutcomeRejected, err: err.(*Error)}
		}
		if fp != a.Fingerprint {
			p := intentPayload(in)
			return plan{
				outcome: record.OutcomeRejected,
				err:     Errorf(CodeKeyReused, "key %q is already used by an action with different tool or params (fingerprint %s…)", a.Key, a.Fingerprint[:12]),
				record: &recordSpec{typ: record.TypeKeyReused, payload: &record.KeyReusedPayload{
					Effect: p.Effect, Fingerprint: fp, Params: params, Reference: p.Reference, RunID: p.RunID,
					Timeout: p.Timeout, Tool: p.Tool}},
				events: []record.EventType{record.EventKeyReused},
			}
		}
	} else if in.Attempt != nil && in.Type != record.TypeNote {
		n := *in.Attempt
		if n < a.Attempt {
			if r, ok := stale[in.Type]; ok {
				return r(s)
			}
			return staleOutcome(s)
		}
		if n > a.Attempt {
			return invalidTransition(s, fmt.Sprintf("attempt %d has not started: the action is at attempt %d", n, a.Attempt))
		}
	}
	if in.Type == record.TypeNote {
		return plan{outcome: record.OutcomeRecorded, record: &recordSpec{typ: record.TypeNote, attempt: in.Attempt, payload: reportPayload(in)}}
	}
	r, ok := t[event(in.Type)][a.Status]
	if !ok {
		if in.Type == record.TypeHeartbeat {
			return leaseLost(s)
		}
		return invalidTransition(s, fmt.Sprintf("a %s entry is not allowed while the action is %s", in.Type, a.Status))
	}
	return r(s)
}

// intentAfterDenial answers an intent for a denied action: denied, and when
// a limit denied it (no approval was asked), limit_exceeded as for its first
// intent, so a retry learns why.
func intentAfterDenial(s *step) plan {
	pl := plan{outcome: record.OutcomeDenied}
	if s.act.Approval != nil {
		return pl
	}
	var over []string
	for _, c := range s.act.Limits {
		if c.Denied {
			over = append(over, fmt.Sprintf("limit %q (version %d) allowed %g in group %q; %g was used and this intent added %g",
				c.Name, c.Version, c.Max, c.Group, c.Used, c.Amount))
		}
	}
	if len(over) > 0 {
		pl.err = limitExceeded(s.act.Limits, "a limit denied this action when its first intent came: "+strings.Join(over, "; "))
	}
	return pl
}

func answer(outcome record.Outcome) rule {
	return func(*step) plan { return plan{outcome: outcome} }
}

func invalidTransition(s *step, msg string) plan {
	return plan{
		outcome: record.OutcomeRejected,
		err:     Errorf(CodeInvalidTransition, "%s", msg),
		record:  &recordSpec{typ: record.TypeRejected, attempt: s.in.Attempt, payload: reportPayload(s.in)},
	}
}

func leaseLost(s *step) plan {
	return plan{
		outcome: record.OutcomeRejected,
		err:     Errorf(CodeLeaseLost, "the lease of attempt %d has passed; stop and do not report success without checking", s.act.Attempt),
		record:  &recordSpec{typ: record.TypeLeaseLost, attempt: s.in.Attempt, payload: reportPayload(s.in)},
	}
}

func leaseLive(s *step) bool {
	return s.act.LeaseUntil != nil && s.act.LeaseUntil.After(s.now)
}

// createAction decides the first intent of a key: the action is created in
// progress at attempt 1, with its lease.
func createAction(s *step) plan {
	in := s.in
	fp, params, err := intentFingerprint(in)
	if err != nil {
		return plan{outcome: record.OutcomeRejected, err: err.(*Error)}
	}
	effect := record.EffectUnkeyed
	if in.Effect != nil {
		effect = *in.Effect
	}
	lease := s.now.Add(in.timeout())
	agent := s.actor.Name
	one := 1
	a := &record.Action{
		ID: newID(), Namespace: s.ns, Key: in.Key, Tool: *in.Tool, Effect: effect,
		Status: record.StatusInProgress, Attempt: 1, LeaseUntil: &lease,
		Reference: in.Reference, Agent: &agent, Params: params,
		CreatedAt: s.now, RunID: in.RunID, Fingerprint: fp,
	}
	if in.KeyTTL != nil {
		expires := s.now.Add(time.Duration(*in.KeyTTL * float64(time.Second)))
		a.Reconciliation = &record.Reconciliation{KeyExpiresAt: &expires}
	}
	pl := plan{outcome: record.OutcomeProceed, next: a,
		record: &recordSpec{typ: record.TypeIntent, attempt: &one, payload: intentPayload(in)}}
	if s.approval != nil && len(s.approval.Shadow) > 0 {
		pl.record.payload.(*record.IntentPayload).ShadowPolicies = s.approval.Shadow
	}
	if limitPlan(&pl, s.limits) {
		return pl
	}
	if req := approvalRequest(s); req != nil {
		return holdForApproval(pl, req)
	}
	return pl
}

func intentWhileRunning(s *step) plan {
	if leaseLive(s) {
		return plan{outcome: record.OutcomeInProgress}
	}
	// The lease passed but the sweeper has not got to it yet: the outcome is
	// already unknown.
	return plan{outcome: record.OutcomeHeld}
}

func intentAfterFailure(s *step) plan {
	if s.act.Retriable {
		return startAttempt(s)
	}
	return plan{outcome: record.OutcomeReplay}
}

// startAttempt grants the next attempt.
func startAttempt(s *step) plan {
	next := s.act.Clone()
	next.Status = record.StatusInProgress
	next.Attempt++
	lease := s.now.Add(s.in.timeout())
	next.LeaseUntil = &lease
	next.Retriable = false
	n := next.Attempt
	return plan{outcome: record.OutcomeProceed, next: next, record: &recordSpec{typ: record.TypeIntent, attempt: &n, payload: intentPayload(s.in)}}
}

func heartbeat(s *step) plan {
	if !leaseLive(s) {
		return leaseLost(s)
	}
	next := s.act.Clone()
	lease := s.now.Add(s.in.timeout())
	next.LeaseUntil = &lease
	return plan{outcome: record.OutcomeRecorded, next: next, record: &recordSpec{typ: record.TypeHeartbeat, attempt: s.in.Attempt, payload: reportPayload(s.in)}}
}

// applyOutcome moves the action to a finished status with the entry's data.
func applyOutcome(s *step, to record.Status) *record.Action {
	next := s.act.Clone()
	next.Status = to
	next.LeaseUntil = nil
	if to == record.StatusSucceeded {
		next.Result = nullIfEmpty(s.in.Result)
		next.ExternalRef = s.in.ExternalRef
	} else {
		next.Retriable = s.in.Retriable != nil && *s.in.Retriable
	}
	return next
}

func failedEvents(s *step, to record.Status) []record.EventType {
	if to == record.StatusFailed && (s.in.Retriable == nil || !*s.in.Retriable) {
		return []record.EventType{record.EventFailed}
	}
	return nil
}

func finish(to record.Status) rule {
	return func(s *step) plan {
		if !leaseLive(s) {
			return lateResult(to)(s)
		}
		return plan{outcome: record.OutcomeRecorded, next: applyOutcome(s, to),
			record: &recordSpec{typ: s.in.Type, attempt: s.in.Attempt, payload: reportPayload(s.in)},
			events: failedEvents(s, to)}
	}
}

func lateResult(to record.Status) rule {
	return func(s *step) plan {
		return plan{outcome: record.OutcomeRecorded, next: applyOutcome(s, to),
			record: &recordSpec{typ: record.TypeLateResult, attempt: s.in.Attempt, payload: reportPayload(s.in)},
			events: append([]record.EventType{record.EventLateResult}, failedEvents(s, to)...)}
	}
}

func lateResultKeepRetry(s *step) plan {
	return plan{outcome: record.OutcomeRecorded,
		record: &recordSpec{typ: record.TypeLateResult, attempt: s.in.Attempt, payload: reportPayload(s.in)},
		events: []record.EventType{record.EventLateResult}}
}

func compensated(s *step) plan {
	next := s.act.Clone()
	next.Status = record.StatusCompensated
	next.LeaseUntil = nil
	if s.in.ExternalRef != nil {
		next.ExternalRef = s.in.ExternalRef
	}
	return plan{outcome: record.OutcomeRecorded, next: next,
		record: &recordSpec{typ: record.TypeCompensated, attempt: s.in.Attempt, payload: reportPayload(s.in)},
		events: []record.EventType{record.EventCompensated}}
}

// expire decides a passed lease: the outcome is unknown.
func expire(s *step) plan {
	if leaseLive(s) {
		return plan{} // a heartbeat won the race
	}
	next := s.act.Clone()
	next.Status = record.StatusTimedOut
	n := s.act.Attempt
	return plan{outcome: record.OutcomeRecorded, next: next,
		record: &recordSpec{typ: record.TypeTimedOut, attempt: &n, payload: &record.TimedOutPayload{LeaseUntil: s.act.LeaseUntil}},
		events: []record.EventType{record.EventTimedOut}}
}

// outcomeUnknown decides an agent's outcome_unknown for the running
// attempt: the action is timed out at once, as if its lease had passed,
// and the entry keeps what the agent saw.
func outcomeUnknown(s *step) plan {
	next := s.act.Clone()
	next.Status = record.StatusTimedOut
	return plan{outcome: record.OutcomeRecorded, next: next,
		record: &recordSpec{typ: record.TypeOutcomeUnknown, attempt: s.in.Attempt, payload: reportPayload(s.in)},
		events: []record.EventType{record.EventTimedOut}}
}

// recordReport records the agent's entry as it came, without changing the
// action.
func recordReport(s *step) plan {
	return plan{outcome: record.OutcomeRecorded,
		record: &recordSpec{typ: s.in.Type, attempt: s.in.Attempt, payload: reportPayload(s.in)}}
}

func decide(to record.Status) rule {
	return func(s *step) plan {
		d := s.dec
		next := s.act.Clone()
		next.Status = to
		// A lease of the attempt or of the compensation ends with the
		// decision; a new compensation has none until an intent takes it.
		if s.act.Status == record.StatusInProgress || s.act.Status == record.StatusCompensationRequested ||
			to == record.StatusCompensationRequested {
			next.LeaseUntil = nil
		}
		if d.ExternalRef != nil {
			next.ExternalRef = d.ExternalRef
		}
		if d.Result != nil {
			next.Result = nullIfEmpty(d.Result)
		}
		events := []record.EventType{record.EventDecided}
		if to == record.StatusCompensated {
			events = append(events, record.EventCompensated)
		}
		var attempt *int // an action awaiting approval has no attempt yet
		if n := s.act.Attempt; n > 0 {
			attempt = &n
		}
		return plan{outcome: record.OutcomeRecorded, next: next,
			record: &recordSpec{typ: record.TypeDecision, attempt: attempt, payload: d.payload(s.actor.Via)},
			events: events}
	}
}

func decideRetry(s *step) plan {
	if s.act.EffectAt(s.now) == record.EffectUnkeyed && !s.dec.AcknowledgeDuplicateRisk {
		why := "is unkeyed: the downstream does not deduplicate"
		if s.act.Effect == record.EffectKeyed {
			why = "is keyed, but its key outlived the downstream's key_ttl"
		}
		return plan{outcome: record.OutcomeRejected, err: Errorf(CodeDuplicateRiskUnacknowledged,
			"action %s %s, so a retry may repeat the effect; "+
				"send acknowledge_duplicate_risk: true to retry anyway", s.act.ID, why)}
	}
	return decide(record.StatusRetryRequested)(s)
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

func intentPayload(in *EntryInput) *record.IntentPayload {
	return &record.IntentPayload{Effect: in.Effect, KeyTTL: in.KeyTTL, Reference: in.Reference, RunID: in.RunID,
		Timeout: in.timeout().Seconds(), Tool: *in.Tool}
}

// reportPayload keeps what an agent's entry said, apart from the fields
// that have columns of their own.
func reportPayload(in *EntryInput) *record.ReportPayload {
	p := &record.ReportPayload{Error: in.Error, ExternalRef: in.ExternalRef, Message: in.Message,
		Retriable: in.Retriable, RunID: in.RunID, Timeout: in.Timeout, Tool: in.Tool}
	if in.Result != nil {
		p.Result = json.RawMessage(in.Result)
	}
	if in.Type != record.TypeIntent {
		p.Type = in.Type
	}
	return p
}

func nullIfEmpty(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	return raw
}

// AgentActsAfterDecision lists the statuses a decision can leave an action
// in from which the agent's next intent for the key acts: runs an attempt
// (proceed) or the compensation (compensate). What the CLI tells a person
// after a decision follows it (`nextAfter` in cmd/arbiter/decide.go), and
// TestAgentActsAfterDecisionFollowsTheRules holds it to the rules table.
var AgentActsAfterDecision = []record.Status{
	record.StatusRetryRequested, record.StatusCompensationRequested, record.StatusApproved,
}
