package client

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/arbiter-ledger/arbiter/services/record"
)

// WorkerOptions configure a Worker.
type WorkerOptions struct {
	// Namespace narrows the poll to one namespace, for a key that sees
	// several. Entries are written with the client's key, which must be an
	// agent key, and an agent key sees its own namespace only.
	Namespace string
	// Poll is the pause between polls while there is work (default 1 s).
	// While idle the pause doubles, up to MaxPoll (default 30 s).
	Poll    time.Duration
	MaxPoll time.Duration
	// Agent names the worker in the ledger (default the API key's name).
	Agent string
	// Logger receives one line per action the worker handles (default
	// slog.Default()).
	Logger *slog.Logger
	// LookupTimeout bounds one lookup (HandleLookup; default 30 s, at most
	// 50 minutes). The lookup lease asked of the ledger is 10 s longer, to
	// report the answer.
	LookupTimeout time.Duration
	// LookupRetry is the pause before a failed lookup is asked again
	// (default 30 s), doubling with each lookup of the attempt.
	LookupRetry time.Duration
}

// Worker carries out operators' decisions for the tools it handles: it
// polls for actions an operator asked to retry (retry_requested) or to
// compensate (compensation_requested), and runs the registered handler
// through Guard with the action's original key, tool, effect and params.
// For tools with a lookup (HandleLookup) it also polls for timed-out
// actions and asks the downstream what happened before a person has to.
// The ledger's answer to the intent (or the lookup) decides who runs: only
// one of several workers gets proceed for an attempt, the others get
// in_progress and skip it. Actions are handled one at a time, oldest first.
type Worker struct {
	c    *Client
	opts WorkerOptions
	log  *slog.Logger

	mu       sync.Mutex
	handlers map[string]handler
	delays   map[string]delay // action id → backoff after a failed try
}

type handler struct {
	run        GuardFunc
	compensate CompensateFunc
	lookup     LookupFunc
	notDone    []int
	classify   func(error) Classification
}

// statuses are the statuses of the actions h has work for.
func (h handler) statuses() []Status {
	var s []Status
	if h.run != nil {
		s = append(s, StatusRetryRequested)
	}
	if h.compensate != nil {
		s = append(s, StatusCompensationRequested)
	}
	if h.lookup != nil {
		s = append(s, StatusTimedOut)
	}
	return s
}

type delay struct {
	failures int
	until    time.Time
}

// NewWorker returns a worker that uses c.
func NewWorker(c *Client, opts WorkerOptions) *Worker {
	if opts.Poll <= 0 {
		opts.Poll = time.Second
	}
	if opts.MaxPoll < opts.Poll {
		opts.MaxPoll = max(30*time.Second, opts.Poll)
	}
	if opts.LookupTimeout <= 0 {
		opts.LookupTimeout = 30 * time.Second
	}
	opts.LookupTimeout = min(opts.LookupTimeout, 50*time.Minute)
	if opts.LookupRetry <= 0 {
		opts.LookupRetry = 30 * time.Second
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Worker{c: c, opts: opts, log: log, handlers: map[string]handler{}, delays: map[string]delay{}}
}

// Handle registers the function that performs tool's effect (run with the
// action's stored params in Attempt.Params) and the one that undoes it
// (compensate; nil if the tool cannot be compensated by the agent). Register
// before Run.
func (w *Worker) Handle(tool string, run GuardFunc, compensate CompensateFunc) {
	w.mu.Lock()
	defer w.mu.Unlock()
	h := w.handlers[tool]
	h.run, h.compensate = run, compensate
	w.handlers[tool] = h
}

// Classify sets how the errors of tool's handlers are read, as
// GuardSpec.NotDoneStatuses and GuardSpec.Classify do for Guard: notDone
// are the downstream HTTP statuses (of an *HTTPStatusError) that prove the
// effect did not happen, and classify, if not nil, replaces the default
// rule (DefaultClassify). Without it the default rule applies: an error
// that does not prove the effect did not happen is recorded
// outcome_unknown (or, for a compensation, leaves the undo to a person).
func (w *Worker) Classify(tool string, notDone []int, classify func(error) Classification) {
	w.mu.Lock()
	defer w.mu.Unlock()
	h := w.handlers[tool]
	h.notDone, h.classify = notDone, classify
	w.handlers[tool] = h
}

// Run polls and works until ctx ends, then returns nil. Failures to reach
// Arbiter are logged and retried with backoff. A handler running when ctx
// ends sees its context cancelled; if it then returns an error, the outcome
// is unknown and nothing is reported (see Guard).
func (w *Worker) Run(ctx context.Context) error {
	idle := 0
	for {
		n, err := w.RunOnce(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			w.log.WarnContext(ctx, "arbiter worker: poll failed", "err", err)
		}
		if n > 0 && err == nil {
			idle = 0
		} else {
			idle++
		}
		pause := w.opts.Poll
		for i := 1; i < idle && pause < w.opts.MaxPoll; i++ {
			pause *= 2
		}
		pause = min(pause, w.opts.MaxPoll)
		// Half jitter: workers started together drift apart, and none polls
		// much faster than asked.
		pause = pause/2 + rand.N(pause/2+1)
		if sleep(ctx, pause) != nil {
			return nil
		}
	}
}

// RunOnce polls once and handles every action waiting for a handler of
// this worker. It returns how many it tried.
func (w *Worker) RunOnce(ctx context.Context) (int, error) {
	todo, err := w.waiting(ctx)
	if err != nil {
		return 0, err
	}
	w.forgetDelays(todo)
	tried := 0
	for _, a := range todo {
		if ctx.Err() != nil {
			return tried, nil
		}
		h, ok := w.handlerFor(a)
		if !ok {
			continue
		}
		tried++
		if a.Status == StatusTimedOut {
			w.lookedUp(a, w.lookUp(ctx, a, h))
			continue
		}
		w.work(ctx, a, h)
	}
	return tried, nil
}

// waiting lists the actions waiting for a handler of this worker, oldest
// first. It asks per tool, so actions of tools other workers handle are not
// fetched at every poll.
func (w *Worker) waiting(ctx context.Context) ([]Action, error) {
	w.mu.Lock()
	tools := slices.Sorted(maps.Keys(w.handlers))
	statuses := map[string][]Status{}
	for tool, h := range w.handlers {
		statuses[tool] = h.statuses()
	}
	w.mu.Unlock()
	var all []Action
	for _, tool := range tools {
		if len(statuses[tool]) == 0 {
			continue
		}
		opts := ListOptions{Status: statuses[tool], Tool: tool, Namespace: w.opts.Namespace, Limit: 500}
		for {
			page, err := w.c.ListActions(ctx, opts)
			if err != nil {
				return nil, err
			}
			all = append(all, page.Actions...)
			if page.NextCursor == "" {
				break
			}
			opts.Cursor = page.NextCursor
		}
	}
	// Ids are UUIDv7: their order is creation order.
	slices.SortFunc(all, func(a, b Action) int { return strings.Compare(a.ID, b.ID) })
	return all, nil
}

// handlerFor returns the handler for an action that has work for this
// worker now.
func (w *Worker) handlerFor(a Action) (handler, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	h, ok := w.handlers[a.Tool]
	now := time.Now()
	if !ok || now.Before(w.delays[a.ID].until) {
		return handler{}, false
	}
	switch a.Status {
	case StatusRetryRequested:
		ok = h.run != nil
	case StatusCompensationRequested:
		// Not while another worker's compensation holds the lease, nor
		// after a lease passed without a report, nor after a failure that
		// said it may not be retried: an operator decides then.
		rc := a.Reconciliation
		ok = h.compensate != nil && (a.LeaseUntil == nil || !now.Before(*a.LeaseUntil)) &&
			(rc == nil || (!rc.CompensationTimedOut && (rc.CompensationFailures == 0 || rc.CompensationRetriable)))
	case StatusTimedOut:
		ok = h.lookup != nil && w.lookupDue(a, now)
	default:
		ok = false
	}
	return h, ok
}

// work runs one action through Guard and logs what came of it.
func (w *Worker) work(ctx context.Context, a Action, h handler) {
	spec := GuardSpec{Key: a.Key, Tool: a.Tool, Effect: a.Effect, Params: json.RawMessage(a.Params),
		Timeout: w.leaseOf(ctx, a), Agent: w.opts.Agent, Compensate: h.compensate,
		NotDoneStatuses: h.notDone, Classify: h.classify}
	if a.Reference != nil {
		spec.Reference = *a.Reference
	}
	log := w.log.With("action_id", a.ID, "key", a.Key, "tool", a.Tool, "status", a.Status)
	log.InfoContext(ctx, "arbiter worker: picked up action")
	out, err := w.c.Guard(ctx, spec, h.run)
	var inProgress *InProgressError
	var held *HeldError
	var unknown *OutcomeUnknownError
	switch {
	case err == nil && out.Compensated:
		log.InfoContext(ctx, "arbiter worker: compensated", "attempt", out.Attempt, "external_ref", out.ExternalRef)
	case err == nil && out.Ran:
		log.InfoContext(ctx, "arbiter worker: ran and recorded succeeded", "attempt", out.Attempt, "external_ref", out.ExternalRef)
	case err == nil:
		log.InfoContext(ctx, "arbiter worker: already finished; replayed", "attempt", out.Attempt)
	case errors.As(err, &inProgress):
		log.InfoContext(ctx, "arbiter worker: another worker is running it", "attempt", inProgress.Attempt)
	case errors.As(err, &held):
		log.WarnContext(ctx, "arbiter worker: held for an operator", "url", held.URL)
	case out != nil && out.Ran:
		log.WarnContext(ctx, "arbiter worker: ran and recorded failed", "attempt", out.Attempt, "err", err)
	case errors.As(err, &unknown) && unknown.Reported:
		log.WarnContext(ctx, "arbiter worker: ran and recorded outcome_unknown, for a lookup and an operator",
			"attempt", unknown.Attempt, "err", err)
	default:
		log.WarnContext(ctx, "arbiter worker: could not handle the action", "err", err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if err == nil || out != nil {
		delete(w.delays, a.ID)
		return
	}
	// Still waiting (say, the compensation failed): try it again later, not
	// at every poll.
	d := w.delays[a.ID]
	d.failures++
	d.until = time.Now().Add(max(w.opts.Poll, w.c.backoff.pause(d.failures)))
	w.delays[a.ID] = d
}

// lookedUp keeps a lookup that could not be asked or reported for a later
// poll, with backoff.
func (w *Worker) lookedUp(a Action, err error) {
	if err == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.log.Warn("arbiter worker: could not look up the action", "action_id", a.ID, "key", a.Key, "err", err)
	d := w.delays[a.ID]
	d.failures++
	d.until = time.Now().Add(max(w.opts.Poll, w.c.backoff.pause(d.failures)))
	w.delays[a.ID] = d
}

// forgetDelays drops the backoff of actions that no longer wait (another
// worker or an operator resolved them), so the map does not grow.
func (w *Worker) forgetDelays(waiting []Action) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for id := range w.delays {
		if !slices.ContainsFunc(waiting, func(a Action) bool { return a.ID == id }) {
			delete(w.delays, id)
		}
	}
}

// leaseOf returns the lease the agent asked for in the action's last
// intent, so the retry runs under the same terms; 0 (the server's default)
// if the timeline cannot tell.
func (w *Worker) leaseOf(ctx context.Context, a Action) time.Duration {
	entries, err := w.c.Entries(ctx, a.ID)
	if err != nil {
		return 0
	}
	for _, e := range slices.Backward(entries) {
		if e.Type != TypeIntent {
			continue
		}
		p, err := e.DecodePayload()
		if in, ok := p.(*record.IntentPayload); err == nil && ok && in.Timeout >= 1 {
			return time.Duration(in.Timeout * float64(time.Second))
		}
		return 0
	}
	return 0
}
