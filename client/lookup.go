package client

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/arbiter-ledger/arbiter/services/record"
)

// Look before you resend: a timed-out attempt's outcome is unknown, and
// the agent's own worker knows how to ask its downstream (find a refund by
// its idempotency key, a message by its id). The worker asks before a
// person has to, under a lookup lease, and reports the answer; the ledger
// confirms the action, requests the retry its effect class makes safe, or
// leaves it to a person with the answer shown.

// LookupFunc asks the downstream system whether the effect of a timed-out
// attempt happened. Search by what the attempt sent: Key when the
// downstream took it as its idempotency key, Reference, Params, or one of
// ExternalRefs. Answer:
//
//   - AnswerHappened, with the effect's ExternalRef and a Result to save:
//     the action is confirmed;
//   - AnswerNotHappened when the downstream provably has no such effect: a
//     keyed (key still honoured), idempotent or read-only action is retried
//     with its key; any other waits for a person;
//   - AnswerUnknown when the downstream cannot tell, ever (it cannot be
//     searched): the action waits for a person, and this attempt is not
//     looked up again.
//
// Return an error when the downstream could not be asked now (it is down,
// the search timed out): the worker reports the answer unknown with the
// error as evidence and asks again later, with backoff, while the ledger
// grants the attempt lookups (MaxLookups). ctx ends at
// WorkerOptions.LookupTimeout.
type LookupFunc func(ctx context.Context, q LookupRequest) (LookupAnswer, error)

// LookupRequest is the timed-out attempt a lookup asks about.
type LookupRequest struct {
	ActionID string
	// Key is the action's key, the idempotency key the attempt passed to
	// the downstream if it takes one.
	Key       string
	Tool      string
	Effect    string
	Reference string
	// Params are the action's params as the ledger stores them.
	Params json.RawMessage
	// Attempt is the attempt whose outcome is unknown.
	Attempt int
	// ExternalRefs are the downstream ids the ledger heard of for this
	// action, oldest first: from earlier reports (a late or stale outcome),
	// lookups and operators' decisions. Usually none.
	ExternalRefs []string
	// CreatedAt is when the action was created: nothing it did downstream
	// is older.
	CreatedAt time.Time
}

// LookupAnswer is what a lookup found.
type LookupAnswer struct {
	Answer Answer
	// Evidence is what the downstream said (marshalled to JSON; at most
	// 64 KiB is kept): the search and its hits, shown to whoever decides.
	Evidence any
	// ExternalRef and Result are the effect's id downstream and the result
	// to save on the action, for AnswerHappened.
	ExternalRef string
	Result      any
}

// lookupError is the evidence of a lookup that could not ask the
// downstream. The worker recognises it at the start of the answer the
// action keeps (Reconciliation.LastLookup.Said), so any worker, after a
// restart too, knows that the attempt is worth asking about again.
type lookupError struct {
	LookupError string `json:"lookup_error"`
}

const lookupErrorSaid = `{"lookup_error":`

// HandleLookup registers how to find out whether tool's effect happened.
// The worker then also polls for timed-out actions of the tool and looks
// each attempt up before a person has to decide: see LookupFunc. When the
// answer makes the ledger request a retry, the worker runs it at once with
// the handler registered by Handle. Lookups take their turn with the
// worker's other work, each for at most WorkerOptions.LookupTimeout.
// Register before Run.
func (w *Worker) HandleLookup(tool string, lookup LookupFunc) {
	w.mu.Lock()
	defer w.mu.Unlock()
	h := w.handlers[tool]
	h.lookup = lookup
	w.handlers[tool] = h
}

// lookupDue reports whether the worker should look up the timed-out
// action now: not while another lookup's lease is live, not once the
// ledger's lookups for the attempt are spent, and not again after an
// answer that asking again will not change. A lookup that failed is asked
// again after LookupRetry, doubling with each lookup of the attempt.
func (w *Worker) lookupDue(a Action, now time.Time) bool {
	rc := a.Reconciliation
	if rc == nil || rc.LookupAttempt != a.Attempt {
		return true // this attempt was never looked up
	}
	if rc.LookupUntil != nil && now.Before(*rc.LookupUntil) {
		return false
	}
	if rc.Lookups >= MaxLookups {
		return false
	}
	last := rc.LastLookup
	if last == nil || last.Attempt != a.Attempt {
		return true // a lookup whose worker never answered: its lease passed
	}
	if !strings.HasPrefix(last.Said, lookupErrorSaid) {
		return false // an answer of the downstream's own: a person decides
	}
	wait := w.opts.LookupRetry
	for i := 1; i < rc.Lookups; i++ {
		wait *= 2
	}
	return !now.Before(last.At.Add(wait))
}

// lookUp takes a lookup lease on the action's timed-out attempt, runs the
// tool's lookup, and reports its answer. If the ledger then requests a
// retry, it runs it. It returns an error when the action should be tried
// again later, not at the next poll.
func (w *Worker) lookUp(ctx context.Context, a Action, h handler) error {
	log := w.log.With("action_id", a.ID, "key", a.Key, "tool", a.Tool, "attempt", a.Attempt)
	// The timeline first: failing to read it costs no lookup of the budget.
	entries, err := w.c.Entries(ctx, a.ID)
	if err != nil {
		return err
	}
	spec := GuardSpec{Key: a.Key, Agent: w.opts.Agent}
	take := spec.entry(TypeLookup, a.Attempt)
	take.Timeout = Ptr(w.lookupLease().Seconds())
	res, err := w.c.Submit(ctx, take)
	switch {
	case IsCode(err, "stale_attempt"), IsCode(err, "invalid_transition"):
		log.InfoContext(ctx, "arbiter worker: the action moved on before the lookup", "err", err)
		return nil
	case err != nil:
		return err
	case res.Outcome == OutcomeInProgress:
		log.InfoContext(ctx, "arbiter worker: another worker is looking it up")
		return nil
	case res.Outcome == OutcomeHeld:
		log.InfoContext(ctx, "arbiter worker: no lookups left for this attempt; held for an operator")
		return nil
	case res.Outcome != OutcomeProceed:
		return fmt.Errorf("arbiter: lookup %q: unexpected outcome %q", a.Key, res.Outcome)
	}

	q := LookupRequest{ActionID: a.ID, Key: a.Key, Tool: a.Tool, Effect: a.Effect, Params: a.Params, Attempt: a.Attempt,
		ExternalRefs: externalRefs(a, entries), CreatedAt: a.CreatedAt}
	if a.Reference != nil {
		q.Reference = *a.Reference
	}
	log.InfoContext(ctx, "arbiter worker: looking up a timed-out attempt")
	lctx, cancel := context.WithTimeout(ctx, w.opts.LookupTimeout)
	ans, lookupErr := h.lookup(lctx, q)
	cancel()
	if ctx.Err() != nil {
		// Stopping: the lookup lease passes and a worker asks again.
		return nil
	}
	e := lookupResult(spec.entry(TypeLookupResult, a.Attempt), ans, lookupErr)
	stored, err := w.c.report(context.WithoutCancel(ctx), Attempt{ActionID: a.ID, Key: a.Key, Number: a.Attempt}, e)
	if err != nil {
		return err
	}
	status := Status("")
	if stored.Action != nil {
		status = stored.Action.Status
	}
	log = log.With("answer", *e.Answer, "status", status)
	switch {
	case lookupErr != nil:
		log.WarnContext(ctx, "arbiter worker: the lookup failed; reported unknown, to ask again later", "err", lookupErr)
	case status == StatusRetryRequested && h.run == nil:
		log.InfoContext(ctx, "arbiter worker: the lookup found no effect; a worker with a handler for the tool retries it")
	case status == StatusRetryRequested:
		log.InfoContext(ctx, "arbiter worker: the lookup found no effect; retrying with the same key")
	default:
		log.InfoContext(ctx, "arbiter worker: reported the lookup's answer")
	}
	if status == StatusRetryRequested && h.run != nil {
		w.work(ctx, *stored.Action, h)
	}
	return nil
}

// lookupLease is the lease asked for a lookup: its timeout and time to
// report the answer.
func (w *Worker) lookupLease() time.Duration {
	return min(w.opts.LookupTimeout+10*time.Second, time.Hour)
}

// lookupResult fills the lookup_result entry e from what the lookup
// returned. A failed lookup is answered unknown with its error as
// evidence; evidence or a result the ledger would refuse is left out
// rather than losing the answer.
func lookupResult(e Entry, ans LookupAnswer, lookupErr error) Entry {
	if lookupErr == nil && !ans.Answer.Valid() {
		lookupErr = fmt.Errorf("the lookup answered %q, which is none of %v", ans.Answer, record.Answers)
	}
	if lookupErr != nil {
		e.Answer = Ptr(AnswerUnknown)
		e.Evidence, _ = json.Marshal(lookupError{LookupError: errorText(lookupErr)})
		return e
	}
	e.Answer = &ans.Answer
	e.Evidence = keptJSON("evidence", ans.Evidence)
	if ans.Answer == AnswerHappened {
		e.Result = keptJSON("result", ans.Result)
		if ans.ExternalRef != "" {
			e.ExternalRef = &ans.ExternalRef
		}
	}
	return e
}

// keptJSON marshals v for a field the ledger keeps up to maxResultBytes;
// what it cannot keep becomes a string that says so.
func keptJSON(field string, v any) json.RawMessage {
	raw, err := marshalJSON(v)
	switch {
	case err != nil:
		raw, _ = json.Marshal(fmt.Sprintf("the %s was not JSON and was not kept: %v", field, err))
	case len(raw) > maxResultBytes:
		raw, _ = json.Marshal(fmt.Sprintf("the %s was %d bytes, over the %d the ledger keeps; it was not kept", field, len(raw), maxResultBytes))
	}
	return raw
}

// externalRefs collects the downstream ids the ledger heard of for the
// action, oldest first, each once.
func externalRefs(a Action, entries []LedgerEntry) []string {
	var refs []string
	add := func(ref *string) {
		if ref != nil && *ref != "" && !slices.Contains(refs, *ref) {
			refs = append(refs, *ref)
		}
	}
	for _, e := range entries {
		p, err := e.DecodePayload()
		if err != nil {
			continue
		}
		switch p := p.(type) {
		case *record.ReportPayload:
			add(p.ExternalRef)
		case *record.LookupResultPayload:
			add(p.ExternalRef)
		case *record.DecisionPayload:
			add(p.ExternalRef)
		}
	}
	add(a.ExternalRef)
	return refs
}
