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
}

func (e *PendingApprovalError) Error() string {
	return fmt.Sprintf("arbiter: action %q awaits approval; nothing was run (%s)", e.Key, e.URL)
}

// DeniedError means the action's approval was rejected (By, Reason) or
// expired (Expired): fn did not run and must not run under this key.
type DeniedError struct {
	ActionID, Key string
	URL           string
	Expired       bool
	By, Reason    string
}

func (e *DeniedError) Error() string {
	if e.Expired {
		return fmt.Sprintf("arbiter: action %q was denied: its approval expired; nothing was run (%s)", e.Key, e.URL)
	}
	return fmt.Sprintf("arbiter: action %q was rejected by %s (%q); nothing was run (%s)", e.Key, e.By, e.Reason, e.URL)
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

// OutcomeUnknownError means the function returned an error marked with
// Unknown, or any error after its context was cancelled (by the caller, or
// because the lease was lost). The effect may or may not have happened, so
// no failure was reported: the action times out and an operator decides,
// unless a later report resolves it. Compensation is true when it was the
// compensation that was interrupted.
type OutcomeUnknownError struct {
	ActionID     string
	Key          string
	Attempt      int
	Compensation bool
	Err          error
}

func (e *OutcomeUnknownError) Error() string {
	what := "attempt"
	if e.Compensation {
		what = "the compensation of attempt"
	}
	return fmt.Sprintf("arbiter: %s %d of action %s (key %q) was interrupted (%v); the outcome is unknown and was not reported",
		what, e.Attempt, e.ActionID, e.Key, e.Err)
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

// Retriable marks a guarded function's error as retriable: the failure is
// recorded with retriable true, and the next intent for the key gets a new
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
// lost (a timeout, a broken connection). Guard then reports no outcome,
// leaves a note for the operators, and returns an *OutcomeUnknownError; the
// lease passes, the action times out, and a person (or a later report)
// resolves it. Recording "failed" instead would claim that nothing
// happened.
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
