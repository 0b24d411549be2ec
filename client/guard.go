package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Limits of the wire contract the guard keeps to, so that a report is
// never refused for its size.
const (
	defaultLease   = 300 * time.Second // the server's lease when an intent names none
	maxResultBytes = 64 << 10
	maxErrorBytes  = 8 << 10
)

// GuardFunc performs the side effect of one attempt. It returns the result
// to save in the ledger (anything that marshals to JSON, or nil) and the id
// of the effect in the downstream system (a refund id, a message id), or an
// error, which says what is known about the effect (see DefaultClassify,
// and GuardSpec.Classify to replace the rule):
//
//   - a *NotDone, or an *HTTPStatusError with a status in
//     GuardSpec.NotDoneStatuses: it did not happen, and it is final
//     (recorded failed);
//   - Retriable(err), a NotDone with Retriable, or a connection refused: it
//     did not happen, and a later intent may try again;
//   - any other error (a timeout, a lost connection, Unknown(err), an error
//     of no known kind): it may have happened; it is recorded
//     outcome_unknown, the action is timed_out at once, and a lookup, then
//     a person, finds out.
//
// Pass a.Key to the downstream system as its idempotency key when it takes
// one: a retry of the action then reaches the downstream with the same key.
// ctx is cancelled when the attempt may no longer continue (its lease was
// lost, see ErrLeaseLost) or the caller gives up.
type GuardFunc func(ctx context.Context, a Attempt) (result any, externalRef string, err error)

// CompensateFunc undoes the effect of an action an operator asked to
// compensate, and returns the id of the undoing in the downstream system.
type CompensateFunc func(ctx context.Context, a Attempt) (externalRef string, err error)

// GuardSpec describes the side effect a guarded call performs.
type GuardSpec struct {
	// Key identifies the action; derive it from the business identity with
	// [Key], e.g. Key("refund", orderID). Required.
	Key string
	// Tool names the operation, e.g. "payments.refund". Required.
	Tool string
	// Effect says how safe a repeat is: EffectReadOnly, EffectIdempotent,
	// EffectKeyed or EffectUnkeyed (the default).
	Effect string
	// Params are what the action does (marshalled to JSON; a
	// json.RawMessage is sent as is). Together with Tool they are the
	// action's fingerprint: the same key with other params is refused
	// (key_reused).
	Params any
	// Timeout is the lease of an attempt (default 300 s, at least 1 s):
	// how long the function may run without a heartbeat. Guard sends
	// heartbeats about every third of it, so it matters mostly when the
	// process dies: then the action times out after Timeout.
	Timeout time.Duration
	// Reference is a business reference shown to operators.
	Reference string
	// Agent and RunID name who runs the action (Agent defaults to the API
	// key's name).
	Agent string
	RunID string
	// Wait is how long to wait, with backoff, for another attempt that
	// holds the action (outcome in_progress) before giving up with an
	// *InProgressError. 0 gives up at once.
	Wait time.Duration
	// KeyTTL is how long the downstream honours Key as its idempotency key
	// (Stripe: 24 h), counted from the action's creation; 0 means for as
	// long as the ledger keeps the action. After it, a keyed action counts as
	// unkeyed: a lookup that finds nothing no longer makes a retry safe.
	KeyTTL time.Duration
	// Compensate undoes the effect when an operator asked for it. It runs
	// under the compensation's lease (Timeout), with heartbeats; its error
	// says what is known, as fn's does: a plain or Retriable error means
	// nothing was undone (reported compensation_failed, and the next intent
	// compensates again), an Unknown one, or any error after its context
	// was cancelled, that the undo may have happened (nothing is reported;
	// the lease passes and an operator decides).
	Compensate CompensateFunc
	// RequireApproval holds the action's first intent until a person
	// approves it: Guard returns a *PendingApprovalError until then, and
	// runs fn on the first call after the approval.
	RequireApproval bool
	// ApprovalWait is how long Guard waits for the decision on an action
	// held for approval (by RequireApproval or by a policy), bounded by
	// ctx's deadline: it waits on the server (Prefer: wait), runs fn as soon
	// as the action is approved, and returns a *DeniedError if it is denied
	// and a *PendingApprovalError if nobody decided in time. 0 returns the
	// *PendingApprovalError at once.
	ApprovalWait time.Duration
	// FrozenWait is how long Guard waits out a freeze that holds the
	// action's tool (outcome frozen), asking again after each Retry-After,
	// before giving up with a *FrozenError. 0 gives up at once. A new key
	// of a frozen tool waits for approval instead (ApprovalWait).
	FrozenWait time.Duration
	// NotDoneStatuses are the downstream HTTP statuses that prove the
	// effect did not happen (say 400, 402, 404, 409, 422), for a function
	// that returns an *HTTPStatusError: those are recorded failed, any other
	// status outcome_unknown.
	NotDoneStatuses []int
	// Classify replaces the default rule (DefaultClassify) that says what
	// an error of fn, or of Compensate, means for the effect. A Classify
	// that panics, or returns no known Classification, counts as
	// ClassOutcomeUnknown.
	Classify func(error) Classification
}

// approvalWait is how much longer Guard may wait for a decision. Under a
// deadline it keeps a second back, so that the server's answer to the last
// wait arrives before the deadline does.
func (s *GuardSpec) approvalWait(ctx context.Context, start time.Time) time.Duration {
	left := s.ApprovalWait - time.Since(start)
	if d, ok := ctx.Deadline(); ok {
		left = min(left, time.Until(d)-time.Second)
	}
	return left.Truncate(time.Second)
}

func (s *GuardSpec) lease() time.Duration {
	if s.Timeout > 0 {
		return s.Timeout
	}
	return defaultLease
}

// entry returns an entry of type typ for the key, naming the agent and run.
func (s *GuardSpec) entry(typ string, attempt int) Entry {
	e := Entry{Key: s.Key, Type: typ}
	if attempt > 0 {
		e.Attempt = &attempt
	}
	if s.Agent != "" {
		e.Agent = &s.Agent
	}
	if s.RunID != "" {
		e.RunID = &s.RunID
	}
	return e
}

func (s *GuardSpec) intent() (Entry, error) {
	e := s.entry(TypeIntent, 0)
	e.Tool = &s.Tool
	if s.Effect != "" {
		e.Effect = &s.Effect
	}
	if s.Timeout > 0 {
		e.Timeout = Ptr(s.Timeout.Seconds())
	}
	if s.Reference != "" {
		e.Reference = &s.Reference
	}
	if s.RequireApproval {
		e.RequireApproval = Ptr(true)
	}
	if s.KeyTTL > 0 {
		e.KeyTTL = Ptr(max(s.KeyTTL, time.Second).Seconds())
	}
	params, err := marshalJSON(s.Params)
	if err != nil {
		return Entry{}, fmt.Errorf("arbiter: guard %q: params: %w", s.Key, err)
	}
	e.Params = params
	return e, nil
}

// marshalJSON marshals v, passing a json.RawMessage through unchanged so
// that stored params sent back give the same fingerprint.
func marshalJSON(v any) (json.RawMessage, error) {
	switch v := v.(type) {
	case nil:
		return nil, nil
	case json.RawMessage:
		if !json.Valid(v) {
			return nil, errors.New("invalid JSON")
		}
		return v, nil
	}
	return json.Marshal(v)
}

// Attempt is the attempt a guarded function runs as.
type Attempt struct {
	ActionID string
	Key      string
	Tool     string
	Number   int
	// Params are the action's params as the ledger stores them.
	Params json.RawMessage
}

// Outcome is what a guarded call came to.
type Outcome struct {
	// Ran is true when the function ran in this call; false when the
	// ledger answered from an earlier attempt (a replay) or the call
	// compensated.
	Ran bool
	// Compensated is true when the call undid the effect at an operator's
	// request.
	Compensated bool
	// Attempt is the attempt the outcome belongs to.
	Attempt int
	// Action is the action as the ledger last answered.
	Action *Action
	// Result is the saved result (JSON) and ExternalRef the downstream id.
	Result      json.RawMessage
	ExternalRef string
}

// DecodeResult unmarshals the saved result into v.
func (o *Outcome) DecodeResult(v any) error {
	if len(o.Result) == 0 {
		return errors.New("arbiter: the outcome has no result")
	}
	return json.Unmarshal(o.Result, v)
}

// Guard performs one side effect the safe way, as the ledger decides:
//
//   - It records the intent first. If Arbiter cannot be reached then, fn
//     does not run and the error wraps ErrUnreachable (fail closed).
//   - proceed: it runs fn with the attempt, sending heartbeats about every
//     third of the lease while fn runs, and records succeeded (fn's result
//     and external ref), failed (an error that proves the effect did not
//     happen, see GuardFunc) or outcome_unknown (any other error) for that
//     attempt. The report is retried with backoff and jitter while Arbiter
//     is unavailable, up to the client's report budget; it names the
//     attempt, so a repeat is answered duplicate and counts once.
//   - replay: the action finished before; fn does not run. A succeeded or
//     confirmed action returns its saved result; a failed, abandoned or
//     compensated one returns a *FinishedError.
//   - in_progress: another attempt holds the action; it asks again with
//     backoff and jitter for up to spec.Wait, then returns an
//     *InProgressError.
//   - held: the outcome of an earlier attempt (or of a compensation) is
//     unknown; it returns a *HeldError with the action's dashboard link. A
//     person decides.
//   - compensate: an operator asked to undo the effect; it runs
//     spec.Compensate under the compensation's lease and records
//     compensated, or compensation_failed with its error, which releases
//     the lease so that the next call compensates again. Without a
//     Compensate function it reports compensation_failed too and returns
//     ErrCompensationRequested.
//   - The same key with other tool or params is an *Error with code
//     key_reused.
//
// When fn fails, the failure is recorded and fn's error is returned with
// the Outcome. When fn's error does not prove that the effect did not
// happen, or comes after its context was cancelled, the effect may have
// happened: the error is an *OutcomeUnknownError, and outcome_unknown is
// recorded, unless the lease was lost or ctx ended (then nothing is
// reported and the action times out when its lease passes). A
// success is reported even if ctx was cancelled meanwhile, because the
// effect happened.
func (c *Client) Guard(ctx context.Context, spec GuardSpec, fn GuardFunc) (*Outcome, error) {
	intent, err := spec.intent()
	if err != nil {
		return nil, err
	}
	start := time.Now()
	var pending *PendingApprovalError // set once the action is known to await approval
	for n := 0; ; n++ {
		var res *Result
		if left := spec.approvalWait(ctx, start); n > 0 && left > 0 {
			res, err = c.SubmitWait(ctx, intent, left)
		} else {
			res, err = c.Submit(ctx, intent)
		}
		if IsUnavailable(err) {
			return nil, fmt.Errorf("%w (key %q): %w", ErrUnreachable, spec.Key, err)
		}
		if err != nil && pending != nil && ctx.Err() != nil {
			// The deadline ended a wait for the decision: still pending.
			pending.Waited = time.Since(start)
			return nil, pending
		}
		if err != nil {
			return nil, err
		}
		if res.Action == nil {
			return nil, fmt.Errorf("arbiter: guard %q: the answer to the intent (%s) carries no action", spec.Key, res.Outcome)
		}
		switch res.Outcome {
		case OutcomeProceed:
			return c.execute(ctx, &spec, res, fn)
		case OutcomeReplay:
			return replayed(res)
		case OutcomeCompensate:
			return c.compensate(ctx, &spec, res)
		case OutcomeHeld:
			return nil, &HeldError{ActionID: res.Action.ID, Key: spec.Key, Attempt: res.AttemptNumber(), URL: c.ActionURL(res.Action.ID),
				Compensation: res.Action.Status == StatusCompensationRequested}
		case OutcomePendingApproval:
			pending = &PendingApprovalError{ActionID: res.Action.ID, Key: spec.Key, URL: c.ActionURL(res.Action.ID),
				Waited: time.Since(start), PolicyErrors: policyErrors(res.Action)}
			if ap := res.Action.Approval; ap != nil {
				pending.FrozenBy = ap.FrozenBy
			}
			if spec.approvalWait(ctx, start) <= 0 {
				return nil, pending
			}
			// Ask again, waiting on the server for the decision.
		case OutcomeDenied:
			return nil, deniedError(c, spec.Key, res)
		case OutcomeFrozen:
			fe := frozenError(c, spec.Key, res, time.Since(start))
			left := spec.FrozenWait - time.Since(start)
			if left <= 0 {
				return nil, fe
			}
			if err := sleep(ctx, min(fe.RetryAfter, left)); err != nil {
				return nil, fe
			}
		case OutcomeInProgress:
			left := spec.Wait - time.Since(start)
			if left <= 0 {
				return nil, &InProgressError{ActionID: res.Action.ID, Key: spec.Key, Attempt: res.AttemptNumber(),
					LeaseUntil: res.LeaseUntil, Waited: time.Since(start)}
			}
			if err := sleep(ctx, min(c.backoff.pause(n), left)); err != nil {
				return nil, err
			}
		default:
			return nil, fmt.Errorf("arbiter: guard %q: unexpected outcome %q for an intent", spec.Key, res.Outcome)
		}
	}
}

// deniedError is the error of a denied intent's answer: a
// *LimitExceededError when a limit denied it, else a *DeniedError.
func deniedError(c *Client, key string, res *Result) error {
	e := &DeniedError{ActionID: res.Action.ID, Key: key, URL: c.ActionURL(res.Action.ID)}
	if res.Error != nil && res.Error.Code == "limit_exceeded" && len(res.Error.Limits) > 0 {
		e.Limits, e.Why = res.Error.Limits, res.Error.Message
		return &LimitExceededError{e}
	}
	if ap := res.Action.Approval; ap != nil {
		e.Expired = ap.Rejection == nil
		if ap.Rejection != nil {
			e.By, e.Reason = ap.Rejection.By.Name, ap.Rejection.Reason
		}
	}
	return e
}

// frozenError is the error of a frozen intent's answer.
func frozenError(c *Client, key string, res *Result, waited time.Duration) *FrozenError {
	e := &FrozenError{ActionID: res.Action.ID, Key: key, URL: c.ActionURL(res.Action.ID), RetryAfter: DefaultFrozenRetry,
		Waited: waited}
	if res.Error != nil {
		e.Why = res.Error.Message
		if res.Error.RetryAfter > 0 {
			e.RetryAfter = time.Duration(res.Error.RetryAfter) * time.Second
		}
	}
	return e
}

// DefaultFrozenRetry is how long Guard waits before asking again about a
// frozen action when the answer does not say.
const DefaultFrozenRetry = 5 * time.Second

func attemptOf(spec *GuardSpec, res *Result) Attempt {
	a := Attempt{Key: spec.Key, Tool: spec.Tool, Number: res.AttemptNumber()}
	if res.Action != nil {
		a.ActionID, a.Params = res.Action.ID, res.Action.Params
	}
	return a
}

func replayed(res *Result) (*Outcome, error) {
	a := res.Action
	out := &Outcome{Attempt: res.AttemptNumber(), Action: a, Result: a.Result}
	if a.ExternalRef != nil {
		out.ExternalRef = *a.ExternalRef
	}
	switch a.Status {
	case StatusSucceeded, StatusConfirmed:
		return out, nil
	}
	return out, &FinishedError{Action: a}
}

// execute runs fn for the attempt the ledger granted and records its
// outcome.
func (c *Client) execute(ctx context.Context, spec *GuardSpec, res *Result, fn GuardFunc) (*Outcome, error) {
	a := attemptOf(spec, res)
	runCtx, cancelRun := context.WithCancelCause(ctx)
	defer cancelRun(nil)
	hb := c.heartbeat(runCtx, spec, a, cancelRun)
	// A panic in fn stops the heartbeats and reports nothing: the lease
	// passes and the action waits for an operator, as if the process died.
	defer hb.stop()
	result, ref, fnErr := fn(runCtx, a)
	lost := hb.stop()

	if fnErr != nil && (lost != nil || ctx.Err() != nil) {
		// The attempt is no longer this caller's (its lease was lost), or
		// the caller gave up on it: nothing is reported, as if the process
		// had died; the lease passes and the action times out.
		return nil, &OutcomeUnknownError{ActionID: a.ActionID, Key: a.Key, Attempt: a.Number, Err: fnErr}
	}
	class := ClassOutcomeUnknown
	if fnErr != nil {
		class = spec.classify(fnErr)
	}
	if fnErr != nil && class == ClassOutcomeUnknown {
		// The effect may have happened: say so, so that the action goes to
		// a lookup and a person at once.
		e := spec.entry(TypeOutcomeUnknown, a.Number)
		e.Error = Ptr(outcomeErrorText(fnErr))
		stored, err := c.report(ctx, a, e)
		ue := &OutcomeUnknownError{ActionID: a.ActionID, Key: a.Key, Attempt: a.Number, Err: fnErr, Reported: err == nil}
		if stored != nil {
			ue.Action = stored.Action
		}
		return nil, errors.Join(ue, err)
	}
	e := spec.entry(TypeSucceeded, a.Number)
	var resultErr error
	reportCtx := ctx
	if fnErr == nil {
		// The effect happened: record it even if the caller stopped waiting.
		reportCtx = context.WithoutCancel(ctx)
		e.Result, resultErr = marshalJSON(result)
		switch {
		case resultErr != nil:
			resultErr = fmt.Errorf("arbiter: guard %q: the result is not JSON and was not saved: %w", spec.Key, resultErr)
			e.Result = nil
		case len(e.Result) > maxResultBytes:
			// Saving the success matters more than saving its details.
			resultErr = fmt.Errorf("arbiter: guard %q: the result is %d bytes, over the %d the ledger keeps; it was not saved",
				spec.Key, len(e.Result), maxResultBytes)
			e.Result = nil
		}
		if ref != "" {
			e.ExternalRef = &ref
		}
	} else {
		e.Type = TypeFailed
		e.Error = Ptr(outcomeErrorText(fnErr))
		e.Retriable = Ptr(class == ClassFailedRetriable)
	}
	stored, err := c.report(reportCtx, a, e)
	out := &Outcome{Ran: true, Attempt: a.Number, Result: e.Result, ExternalRef: ref}
	if stored != nil {
		out.Action = stored.Action
	}
	return out, errors.Join(fnErr, err, resultErr)
}

// compensate undoes the effect at an operator's request, under the
// compensation's lease, and records what came of it.
func (c *Client) compensate(ctx context.Context, spec *GuardSpec, res *Result) (*Outcome, error) {
	a := attemptOf(spec, res)
	if spec.Compensate == nil {
		// Release the lease at once: another process that can undo it, or a
		// person, takes over, and nobody waits for a lease to pass.
		err := fmt.Errorf("%w: action %s (key %q), see %s", ErrCompensationRequested, a.ActionID, a.Key, c.ActionURL(a.ActionID))
		_, rerr := c.reportCompensationFailed(ctx, spec, a,
			fmt.Errorf("this caller of Guard has no Compensate function for %s", spec.Tool), true)
		return nil, errors.Join(err, rerr)
	}
	runCtx, cancelRun := context.WithCancelCause(ctx)
	defer cancelRun(nil)
	hb := c.heartbeat(runCtx, spec, a, cancelRun)
	defer hb.stop()
	ref, fnErr := spec.Compensate(runCtx, a)
	lost := hb.stop()
	class := ClassOutcomeUnknown
	if fnErr != nil && lost == nil && ctx.Err() == nil {
		class = spec.classify(fnErr)
	}
	if fnErr != nil && class == ClassOutcomeUnknown {
		// The undo may have happened: nothing is reported, the
		// compensation's lease passes and a person decides.
		if lost == nil && ctx.Err() == nil {
			note := spec.entry(TypeNote, a.Number)
			note.Message = Ptr("compensation outcome unknown: " + outcomeErrorText(fnErr))
			_, _ = c.Submit(ctx, note)
		}
		return nil, &OutcomeUnknownError{ActionID: a.ActionID, Key: a.Key, Attempt: a.Number, Compensation: true, Err: fnErr}
	}
	if fnErr != nil {
		_, err := c.reportCompensationFailed(ctx, spec, a, fnErr, class == ClassFailedRetriable)
		return nil, errors.Join(fnErr, err)
	}
	e := spec.entry(TypeCompensated, a.Number)
	if ref != "" {
		e.ExternalRef = &ref
	}
	stored, err := c.report(context.WithoutCancel(ctx), a, e)
	out := &Outcome{Compensated: true, Attempt: a.Number, ExternalRef: ref}
	if stored != nil {
		out.Action = stored.Action
	}
	return out, err
}

// reportCompensationFailed records that the compensation did not undo the
// effect, which releases its lease; the action stays
// compensation_requested for the next intent or a person.
func (c *Client) reportCompensationFailed(ctx context.Context, spec *GuardSpec, a Attempt, cause error, retriable bool) (*Result, error) {
	e := spec.entry(TypeCompensationFailed, a.Number)
	e.Error = Ptr(outcomeErrorText(cause))
	e.Retriable = Ptr(retriable)
	return c.report(ctx, a, e)
}

// report records an outcome, retrying with backoff and jitter while
// Arbiter is unavailable, within the report budget. The entry names its
// attempt, so a report that landed before its answer was lost comes back
// duplicate, which counts as done.
func (c *Client) report(ctx context.Context, a Attempt, e Entry) (*Result, error) {
	deadline := time.Now().Add(c.reportBudget)
	for n := 0; ; n++ {
		res, err := c.Submit(ctx, e)
		if err == nil || !retryable(err) {
			return res, err
		}
		pause := c.backoff.pause(n)
		if time.Now().Add(pause).After(deadline) {
			return nil, &ReportError{ActionID: a.ActionID, Key: a.Key, Attempt: a.Number, Type: e.Type, Err: err}
		}
		if err := sleep(ctx, pause); err != nil {
			return nil, &ReportError{ActionID: a.ActionID, Key: a.Key, Attempt: a.Number, Type: e.Type, Err: err}
		}
	}
}

// errorText is err's message as the ledger accepts it: non-empty, valid
// UTF-8 without NUL, and short enough to store.
func errorText(err error) string {
	msg := strings.ReplaceAll(strings.ToValidUTF8(err.Error(), "\uFFFD"), "\x00", "")
	if len(msg) > maxErrorBytes {
		msg = strings.ToValidUTF8(msg[:maxErrorBytes], "") + "…"
	}
	if strings.TrimSpace(msg) == "" {
		msg = fmt.Sprintf("%T with an empty message", err)
	}
	return msg
}

// retryable reports whether sending the same entry again may succeed.
func retryable(err error) bool {
	return IsUnavailable(err) || IsCode(err, "conflict") || IsCode(err, "internal")
}
