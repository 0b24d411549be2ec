package client

import (
	"errors"
	"fmt"
	"time"
)

// ErrUnreachable means the guard could not record the intent, so the
// function was not run (fail closed). It is safe to call Guard again later
// with the same key: if the lost intent did land, the ledger answers
// in_progress while its lease lasts and held after.
var ErrUnreachable = errors.New("arbiter unreachable: the action was not started")

// ErrLeaseLost is the cause of the context given to a guarded function
// when Arbiter says its attempt may no longer continue: its lease passed,
// an operator decided, or a newer attempt started. Stop, and do not start
// the effect if it has not started yet.
var ErrLeaseLost = errors.New("arbiter: the lease of this attempt was lost")

// ErrCompensationRequested is returned by Guard when an operator asked to
// undo the action and the GuardSpec has no Compensate function.
var ErrCompensationRequested = errors.New("arbiter: an operator asked to compensate this action and no Compensate function was given")

// HeldError means the action's outcome is unknown (an attempt's lease
// passed without a report) and a person must decide before anything runs
// again: confirm it, retry it, compensate it or abandon it. URL is its page
// on the dashboard. Compensation is true when it is the compensation whose
// outcome is unknown (its lease passed without a report): a person decides
// mark_compensated, abandon, or compensate again.
type HeldError struct {
	ActionID     string
	Key          string
	Attempt      int
	URL          string
	Compensation bool
}

func (e *HeldError) Error() string {
	if e.Compensation {
		return fmt.Sprintf("arbiter: action %s (key %q) is held: whether the compensation of attempt %d undid the effect is unknown "+
			"and an operator must decide; see %s", e.ActionID, e.Key, e.Attempt, e.URL)
	}
	return fmt.Sprintf("arbiter: action %s (key %q) is held: the outcome of attempt %d is unknown and an operator must decide; see %s",
		e.ActionID, e.Key, e.Attempt, e.URL)
}

// PendingApprovalError means the action waits for people's approval: fn
// did not run. Call Guard again with the same spec later; it runs fn once
// the action is approved.
type PendingApprovalError struct {
	ActionID, Key string
	URL           string        // the action's page, where operators approve it
	Waited        time.Duration // how long Guard waited for a decision (GuardSpec.ApprovalWait)
	// PolicyErrors describe the run-time errors of policies whose
	// condition could not be evaluated for the action, which held it.
	PolicyErrors []string
	// FrozenBy are the freezes that hold it: it is approved once they are
	// lifted (and its people approved it).
	FrozenBy []FreezeRef
}

func (e *PendingApprovalError) Error() string {
	msg := fmt.Sprintf("arbiter: action %q awaits approval; nothing was run (%s)", e.Key, e.URL)
	for _, f := range e.FrozenBy {
		msg += fmt.Sprintf("; frozen by %s: %s", f.ID, f.Reason)
	}
	for _, p := range e.PolicyErrors {
		msg += "; " + p
	}
	return msg
}

// policyErrors describes the run-time errors of the policies that held
// the action, one "policy NAME could not be evaluated: ERROR" each.
func policyErrors(a *Action) []string {
	if a == nil || a.Approval == nil {
		return nil
	}
	var out []string
	for _, p := range a.Approval.Policies {
		if p.Error != nil && *p.Error != "" {
			out = append(out, fmt.Sprintf("policy %q could not be evaluated, so the action was held: %s", p.Name, *p.Error))
		}
	}
	return out
}

// DeniedError means the action's approval was rejected (By, Reason) or
// expired (Expired), or a limit denied it (Limits; the error is then also a
// *LimitExceededError): fn did not run and must not run under this key.
type DeniedError struct {
	ActionID, Key string
	URL           string
	Expired       bool
	By, Reason    string
	// Limits are the limits that denied the action, with their groups' use
	// when its first intent came; Why is Arbiter's account of it.
	Limits []ApprovalLimit
	Why    string
}

func (e *DeniedError) Error() string {
	if len(e.Limits) > 0 {
		return fmt.Sprintf("arbiter: action %q was denied by a limit: %s; nothing was run (%s)", e.Key, e.Why, e.URL)
	}
	if e.Expired {
		return fmt.Sprintf("arbiter: action %q was denied: its approval expired; nothing was run (%s)", e.Key, e.URL)
	}
	return fmt.Sprintf("arbiter: action %q was rejected by %s (%q); nothing was run (%s)", e.Key, e.By, e.Reason, e.URL)
}

// LimitExceededError means a limit across actions denied the action: its
// group's counted use plus this intent's amount was over the limit's max
// (Limits says which, with the use). It is a *DeniedError too, so code that
// handles denials handles it; fn did not run and must not run under this key.
type LimitExceededError struct{ *DeniedError }

// Unwrap lets errors.As find the *DeniedError.
func (e *LimitExceededError) Unwrap() error { return e.DeniedError }

// FrozenError means a freeze holds the action's tool back: nothing ran and
// nothing changed. Ask again after RetryAfter (Guard does, for up to
// GuardSpec.FrozenWait); the freeze ends when a person lifts it. Why names
// the freezes and their reasons.
type FrozenError struct {
	ActionID, Key string
	URL           string
	RetryAfter    time.Duration
	Waited        time.Duration
	Why           string
}

func (e *FrozenError) Error() string {
	return fmt.Sprintf("arbiter: action %q is frozen: %s (%s)", e.Key, e.Why, e.URL)
}

// InProgressError means another attempt held a live lease for the whole
// of GuardSpec.Wait. Nothing ran.
type InProgressError struct {
	ActionID   string
	Key        string
	Attempt    int
	LeaseUntil *time.Time
	Waited     time.Duration
}

func (e *InProgressError) Error() string {
	until := "unknown"
	if e.LeaseUntil != nil {
		until = e.LeaseUntil.UTC().Format(time.RFC3339)
	}
	return fmt.Sprintf("arbiter: action %s (key %q) is in progress in attempt %d (lease until %s); waited %s",
		e.ActionID, e.Key, e.Attempt, until, e.Waited.Round(time.Millisecond))
}

// FinishedError means the action ended before without its effect being in
// place (failed, abandoned or compensated); the ledger replays that ending
// and nothing runs again. Mint a new key for a new action.
type FinishedError struct {
	Action *Action
}

func (e *FinishedError) Error() string {
	return fmt.Sprintf("arbiter: action %s (key %q) already ended %s; it is not run again",
		e.Action.ID, e.Action.Key, e.Action.Status)
}

// OutcomeUnknownError means the effect may or may not have happened: the
// function returned an error the classification (GuardSpec.Classify,
// DefaultClassify) did not prove harmless — a timeout, a lost connection,
// an error of no known kind — or any error after its context was cancelled
// (by the caller, or because the lease was lost). When Reported, the guard
// recorded outcome_unknown: the action (Action, as the ledger answered) is
// timed_out, and a lookup, then a person, finds out; the next call gets a
// *HeldError. Otherwise (the lease was lost, the caller's context ended,
// the report could not be made, or it was a compensation) nothing was
// reported: the lease passes and an operator decides.
// Compensation is true when it was the compensation that was interrupted.
type OutcomeUnknownError struct {
	ActionID     string
	Key          string
	Attempt      int
	Compensation bool
	Reported     bool
	Action       *Action
	Err          error
}

func (e *OutcomeUnknownError) Error() string {
	what := "attempt"
	if e.Compensation {
		what = "the compensation of attempt"
	}
	how := "was not reported"
	if e.Reported {
		how = "was reported outcome_unknown, and a person will check it"
	}
	return fmt.Sprintf("arbiter: %s %d of action %s (key %q) did not say whether it took effect (%v); the outcome is unknown and %s",
		what, e.Attempt, e.ActionID, e.Key, e.Err, how)
}

func (e *OutcomeUnknownError) Unwrap() error { return e.Err }

// ReportError means the outcome could not be recorded within the report
// budget. The effect happened (or failed) but the ledger does not know: the
// action will time out and an operator decides.
type ReportError struct {
	ActionID string
	Key      string
	Attempt  int
	Type     string // succeeded, failed, compensated, compensation_failed or lookup_result
	Err      error
}

func (e *ReportError) Error() string {
	return fmt.Sprintf("arbiter: could not record %s for attempt %d of action %s (key %q): %v",
		e.Type, e.Attempt, e.ActionID, e.Key, e.Err)
}

func (e *ReportError) Unwrap() error { return e.Err }

// Retriable marks a guarded function's error as proving the effect did
// not happen, and retriable (as &NotDone{Err: err, Retriable: true}): the
// failure is recorded with retriable true, and the next intent for the key gets a new
// attempt instead of a replay of the failure. Use it for failures known to
// have had no effect (the provider refused the request, a validation
// error upstream, …).
func Retriable(err error) error {
	if err == nil {
		return nil
	}
	return &retriableError{err: err}
}

// IsRetriable reports whether err was marked with Retriable.
func IsRetriable(err error) bool {
	var r *retriableError
	return errors.As(err, &r)
}

type retriableError struct{ err error }

// Unknown marks a guarded function's error as leaving the outcome unknown:
// the request may have reached the downstream system and the answer was
// lost. It is what DefaultClassify says of any error it cannot prove
// harmless; Unknown says it also under a *NotDone or Retriable. Guard
// records outcome_unknown and returns an *OutcomeUnknownError; the action is
// timed_out, and a lookup, then a person, resolves it. Recording "failed"
// instead would claim that nothing happened.
func Unknown(err error) error {
	if err == nil {
		return nil
	}
	return &unknownError{err: err}
}

// IsUnknown reports whether err was marked with Unknown.
func IsUnknown(err error) bool {
	var u *unknownError
	return errors.As(err, &u)
}

type unknownError struct{ err error }

func (e *unknownError) Error() string { return e.err.Error() }
func (e *unknownError) Unwrap() error { return e.err }

func (e *retriableError) Error() string { return e.err.Error() }
func (e *retriableError) Unwrap() error { return e.err }
