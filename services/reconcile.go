package services

import (
	"time"

	"github.com/arbiter-ledger/arbiter/services/driver"
	"github.com/arbiter-ledger/arbiter/services/record"
)

// Look before you resend, as rows of the rules table (machine.go): a
// timed-out attempt may be looked up at its downstream by the agent's own
// worker, under a lookup lease, at most record.MaxLookups times; the answer
// confirms the action, requests the retry the effect class makes safe, or
// leaves it to a person with the answer shown. And a compensation runs
// under a lease, so two workers never run one: its failure is recorded and
// the next intent compensates again; its lease passing holds the action
// for an operator.

var (
	evLookup             = event(record.TypeLookup)
	evLookupResult       = event(record.TypeLookupResult)
	evCompensationFailed = event(record.TypeCompensationFailed)
)

// compensationLeaseDeadline is a compensation's deadline: its lease, until
// it passed once.
func compensationLeaseDeadline(a *record.Action) *time.Time {
	if r := a.Reconciliation; r != nil && r.CompensationTimedOut {
		return nil
	}
	return a.LeaseUntil
}

// lookupResultRows records an answer in every status (late information is
// never dropped) and acts on it while the action is timed out.
func lookupResultRows() map[record.Status]rule {
	row := map[record.Status]rule{}
	for _, st := range record.Statuses {
		row[st] = recordLookupResult
	}
	row[record.StatusTimedOut] = reconcile
	return row
}

// reconciliation returns a copy of the action's reconciliation to change.
func reconciliation(a *record.Action) *record.Reconciliation {
	if a.Reconciliation == nil {
		return &record.Reconciliation{}
	}
	return a.Reconciliation.Clone()
}

// lookup grants a lookup lease on the timed-out attempt: one at a time, at
// most record.MaxLookups per attempt.
func lookup(s *step) plan {
	n := s.act.Attempt
	rc := reconciliation(s.act)
	if rc.LookupAttempt == n {
		if rc.LookupUntil != nil && rc.LookupUntil.After(s.now) {
			return plan{outcome: record.OutcomeInProgress, lease: rc.LookupUntil}
		}
		if rc.Lookups >= record.MaxLookups {
			return plan{outcome: record.OutcomeHeld}
		}
	} else {
		rc.LookupAttempt, rc.Lookups = n, 0
	}
	until := s.now.Add(s.in.timeout())
	rc.Lookups++
	rc.LookupUntil = &until
	next := s.act.Clone()
	next.Reconciliation = rc
	return plan{outcome: record.OutcomeProceed, next: next, lease: &until,
		record: &recordSpec{typ: record.TypeLookup, attempt: &n,
			payload: &record.LookupPayload{RunID: s.in.RunID, Timeout: s.in.timeout().Seconds()}}}
}

func staleLookup(s *step) plan {
	return plan{outcome: record.OutcomeRejected, err: Errorf(CodeStaleAttempt,
		"attempt %d is stale: the action is at attempt %d; look up the current attempt", *s.in.Attempt, s.act.Attempt)}
}

// recordLookupResult records an answer that changes nothing: for an older
// attempt, or on an action that is no longer timed out.
func recordLookupResult(s *step) plan {
	return plan{outcome: record.OutcomeRecorded,
		record: &recordSpec{typ: record.TypeLookupResult, attempt: s.in.Attempt, payload: lookupResultPayload(s.in)}}
}

func lookupResultPayload(in *EntryInput) *record.LookupResultPayload {
	return &record.LookupResultPayload{Answer: *in.Answer, Evidence: nullIfEmpty(in.Evidence),
		ExternalRef: in.ExternalRef, Result: nullIfEmpty(in.Result), RunID: in.RunID}
}

// reconcile acts on the answer for the timed-out attempt, whether or not
// its lookup lease is live: the answer is recorded as the agent's entry
// (releasing the lease and kept on the action for whoever decides next);
// happened confirms the action, and not_happened requests a retry where a
// repeat is safe, each as a system entry that names the lookup_result.
// Otherwise the action stays for a person.
func reconcile(s *step) plan {
	in, n := s.in, s.act.Attempt
	next := s.act.Clone()
	rc := reconciliation(s.act)
	if rc.LookupAttempt == n {
		rc.LookupUntil = nil
	}
	rc.LastLookup = &record.LookupAnswer{Attempt: n, Answer: *in.Answer, At: s.now, By: s.actor,
		ExternalRef: in.ExternalRef, Said: record.Said(in.Evidence)}
	next.Reconciliation = rc
	pl := plan{outcome: record.OutcomeRecorded, next: next,
		record: &recordSpec{typ: record.TypeLookupResult, attempt: &n, payload: lookupResultPayload(in)}}
	var to record.Status
	switch {
	case *in.Answer == record.AnswerHappened:
		to = record.StatusConfirmed
	case *in.Answer == record.AnswerNotHappened && s.act.EffectAt(s.now) != record.EffectUnkeyed:
		to = record.StatusRetryRequested
	default:
		pl.events = []record.EventType{record.EventReconciled}
		return pl
	}
	pl.then = func(lookup *record.Entry) plan {
		after := next.Clone()
		after.Status = to
		if to == record.StatusConfirmed {
			if in.ExternalRef != nil {
				after.ExternalRef = in.ExternalRef
			}
			if r := nullIfEmpty(in.Result); r != nil {
				after.Result = r
			}
		}
		return plan{outcome: record.OutcomeRecorded, next: after,
			record: &recordSpec{typ: record.TypeReconciled, attempt: &n, payload: &record.ReconciledPayload{
				Answer: *in.Answer, LookupSeq: lookup.Seq, Status: to}},
			events: []record.EventType{record.EventReconciled}}
	}
	return pl
}

// compensateIntent grants the compensation of the current attempt under a
// lease: while it is live another intent is answered in_progress; after a
// lease passed without a report, intents are held for an operator.
func compensateIntent(s *step) plan {
	if rc := s.act.Reconciliation; rc != nil && rc.CompensationTimedOut {
		return plan{outcome: record.OutcomeHeld}
	}
	if leaseLive(s) {
		return plan{outcome: record.OutcomeInProgress}
	}
	next := s.act.Clone()
	lease := s.now.Add(s.in.timeout())
	next.LeaseUntil = &lease
	n := s.act.Attempt
	return plan{outcome: record.OutcomeCompensate, next: next,
		record: &recordSpec{typ: record.TypeIntent, attempt: &n, payload: intentPayload(s.in)}}
}

// compensationFailed records a compensation's failure and releases its
// lease: the next intent compensates again. A failure reported after the
// lease passed also tells that the undo did not happen, so the hold ends.
func compensationFailed(s *step) plan {
	next := s.act.Clone()
	next.LeaseUntil = nil
	rc := reconciliation(s.act)
	rc.CompensationFailures++
	rc.CompensationError = s.in.Error
	rc.CompensationRetriable = s.in.Retriable != nil && *s.in.Retriable
	rc.CompensationTimedOut = false
	next.Reconciliation = rc
	return plan{outcome: record.OutcomeRecorded, next: next,
		record: &recordSpec{typ: record.TypeCompensationFailed, attempt: s.in.Attempt, payload: reportPayload(s.in)}}
}

// compensationExpired decides a compensation lease that passed without a
// report: whether the undo happened is unknown.
func compensationExpired(s *step) plan {
	if leaseLive(s) || s.act.LeaseUntil == nil {
		return plan{} // a heartbeat or a report won the race
	}
	next := s.act.Clone()
	rc := reconciliation(s.act)
	rc.CompensationTimedOut = true
	next.Reconciliation = rc
	n := s.act.Attempt
	return plan{outcome: record.OutcomeRecorded, next: next,
		record: &recordSpec{typ: record.TypeCompensationTimedOut, attempt: &n,
			payload: &record.TimedOutPayload{LeaseUntil: s.act.LeaseUntil}},
		events: []record.EventType{record.EventTimedOut}}
}

// compensateAgain lets an operator ask for the compensation again after its
// lease passed without a report.
func compensateAgain(s *step) plan {
	if rc := s.act.Reconciliation; rc == nil || !rc.CompensationTimedOut {
		return plan{outcome: record.OutcomeRejected, err: Errorf(CodeInvalidTransition,
			"cannot compensate an action that is %s while its compensation may still run; compensate again after its "+
				"compensation lease passed without a report, or decide mark_compensated or abandon", s.act.Status)}
	}
	pl := decide(record.StatusCompensationRequested)(s)
	pl.next.Reconciliation.CompensationTimedOut = false
	return pl
}

// resolvedBy names what resolves a timed-out action by the entry that
// records the change.
var resolvedBy = map[record.EntryType]string{
	record.TypeReconciled: "lookup",
	record.TypeLateResult: "late_result",
	record.TypeDecision:   "operator",
}

// ResolvedBy lists what may resolve a timed-out action, for metrics.
var ResolvedBy = []string{"lookup", "late_result", "operator"}

// observeReconciliation reports the lookups answered and the timeouts
// resolved by a set of written changes.
func (l *Ledger) observeReconciliation(chs []*driver.Change, written []bool) {
	for i, ch := range chs {
		if !written[i] {
			continue
		}
		if ch.Entry.Type == record.TypeLookupResult && l.lookupAnswered != nil {
			if p, err := record.DecodePayload(&ch.Entry); err == nil {
				l.lookupAnswered(p.(*record.LookupResultPayload).Answer)
			}
		}
		if ch.Prev.Status == record.StatusTimedOut && ch.Next.Status != record.StatusTimedOut && l.timeoutResolved != nil {
			if by, ok := resolvedBy[ch.Entry.Type]; ok {
				l.timeoutResolved(by)
			}
		}
	}
}
