package services

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/arbiter-ledger/arbiter/services/driver"
	"github.com/arbiter-ledger/arbiter/services/record"
)

// SweepBatch bounds the actions one sweep round times out, in one statement:
// faster than smaller batches, and larger ones gain little for holding each
// batch's rows longer (docs/benchmarks.md, "The sweeper: leases, an
// endpoint, approval expiries", "Batch size").
const SweepBatch = 1000

// sweepInFlight is how many batches Sweep writes at once, each on its own
// connection, while it reads the next one. Three rather than two took less
// wall time for the same CPU time per action (docs/benchmarks.md, "The
// sweeper: leases, an endpoint, approval expiries", "What changed", 3).
const sweepInFlight = 3

// Sweep asks the rules table what each passed deadline means (today: a
// lease that passed times its action out), in batches of at most
// SweepBatch, until none is left, and returns how many actions it changed.
// Each batch is written as one set (one statement on PostgreSQL, one
// transaction on SQLite), each action conditional on the version read, so
// with several processes on one database each deadline is acted on exactly
// once: the loser of a race finds the version changed and skips the action.
// Batches are read in deadline order, each after the last one read, so a
// batch still being written is not read again; an action skipped because
// it lost a race and is still due is taken by the next sweep.
func (l *Ledger) Sweep(ctx context.Context) (int, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		total    atomic.Int64
		mu       sync.Mutex
		firstErr error
		wg       sync.WaitGroup
	)
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if firstErr == nil {
			firstErr = err
			cancel()
		}
	}
	batches := make(chan []*record.Action)
	for range sweepInFlight {
		wg.Go(func() {
			for due := range batches {
				if ctx.Err() != nil {
					continue
				}
				n, err := l.passDeadlines(ctx, due)
				total.Add(int64(n))
				if err != nil {
					fail(err)
				}
			}
		})
	}
	var after *record.Action
	for {
		due, err := l.st.ex.ActionDueList(ctx, &driver.ActionDueListParams{Now: l.now(), After: after, Limit: SweepBatch})
		if err != nil {
			fail(DBError("sweeper: find passed deadlines", err))
			break
		}
		if len(due) == 0 {
			break
		}
		select {
		case batches <- due:
		case <-ctx.Done():
		}
		if len(due) < SweepBatch || ctx.Err() != nil {
			break
		}
		after = due[len(due)-1]
	}
	close(batches)
	wg.Wait()
	return int(total.Load()), firstErr
}

// passDeadlines decides a batch of actions whose deadline passed, each by
// the rules table's evDeadline row for its status, writes the changes as one
// set and returns how many it wrote. The entries and alerts are stamped
// just before the set is written.
func (l *Ledger) passDeadlines(ctx context.Context, due []*record.Action) (int, error) {
	now := l.now()
	actor := record.Actor{Kind: record.ActorSystem, Name: "sweeper"}
	chs := make([]*driver.Change, 0, len(due))
	for _, a := range due {
		r, ok := l.rules[evDeadline][a.Status]
		if !ok {
			continue // the deadlines and rules tables disagree; a test keeps them in step
		}
		pl := r(&step{now: now, ns: a.Namespace, act: a, actor: actor})
		if pl.record == nil {
			continue
		}
		chs = append(chs, l.newChange(a, pl, actor, nil, now))
	}
	if len(chs) == 0 {
		return 0, nil
	}
	u := l.single()
	written, err := l.write(ctx, u, chs)
	if err != nil {
		return 0, err
	}
	if u.alerted {
		l.wakeDispatcher()
	}
	n := 0
	for _, w := range written {
		if w {
			n++
		}
	}
	return n, nil
}

// Prune deletes terminal actions, and their entries, last changed before
// cutoff. Unresolved actions are never pruned, even if a decision moves one
// back out of a terminal status while the prune runs.
//
// It deletes in batches of 1,000 and rests between batches for PruneRest
// times as long as the last batch took, so that a large backlog (the first
// prune of a big ledger, or a shortened retention) is removed at a pace the
// ledger's writers hardly notice instead of in one burst that halves them.
func (l *Ledger) Prune(ctx context.Context, cutoff time.Time) (int64, error) {
	total, err := pruneInBatches(ctx, l.st.ex.ActionPrune, &driver.PruneParams{
		Statuses: record.TerminalStatuses, Before: cutoff, Limit: 1000})
	if err != nil {
		return total, err
	}
	// Webhook messages go with the same horizon, once none of their
	// deliveries is still pending; deliveries and attempts cascade.
	_, err = pruneInBatches(ctx, l.st.ex.MessagePrune, &driver.PruneParams{Before: cutoff, Limit: 1000})
	return total, err
}

// PruneRest is how long retention rests after a full batch, as a multiple
// of the time the batch took: at 3 it deletes a quarter of the time.
const PruneRest = 3

// pruneInBatches runs one batch of retention until it deletes fewer than
// its limit, resting PruneRest times each full batch's duration between
// batches.
func pruneInBatches(ctx context.Context, batch func(context.Context, *driver.PruneParams) (int64, error), p *driver.PruneParams) (int64, error) {
	var total int64
	for {
		start := time.Now()
		n, err := batch(ctx, p)
		if err != nil {
			return total, DBError("retention: prune", err)
		}
		total += n
		if n < int64(p.Limit) {
			return total, nil
		}
		select {
		case <-ctx.Done():
			return total, DBError("retention: prune", ctx.Err())
		case <-time.After(time.Since(start) * PruneRest):
		}
	}
}

// DBErrorOrNil is DBError, or nil for a nil err.
func DBErrorOrNil(what string, err error) error {
	if err == nil {
		return nil
	}
	return DBError(what, err)
}

// RunSweeper sweeps every interval and prunes past retention every hour
// (retention 0 keeps everything), until ctx ends. Failures are logged and
// retried on the next tick.
func (l *Ledger) RunSweeper(ctx context.Context, log *slog.Logger, interval, retention time.Duration, onSweep func(int, error)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	var lastPrune time.Time
	for {
		n, err := l.Sweep(ctx)
		if onSweep != nil {
			onSweep(n, err)
		}
		switch {
		case err != nil && ctx.Err() == nil:
			log.Error("sweeper: sweep failed", "err", err)
		case n > 0:
			log.Info("sweeper: timed out expired leases", "actions", n)
		}
		if retention > 0 && time.Since(lastPrune) > time.Hour {
			lastPrune = time.Now()
			if n, err := l.Prune(ctx, l.now().Add(-retention)); err != nil && ctx.Err() == nil {
				log.Error("retention: prune failed", "err", err, "actions", n, "took", time.Since(lastPrune).Round(time.Millisecond))
			} else if n > 0 {
				log.Info("retention: pruned terminal actions", "actions", n, "took", time.Since(lastPrune).Round(time.Millisecond))
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
