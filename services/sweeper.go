package services

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// SweepBatch bounds the actions one sweep round times out, in one statement.
// 1,000 timed out 100,000 leases about 20% faster than 500 (2,000: another
// 10%, with twice as long a hold on each batch's rows).
const SweepBatch = 1000

// sweepInFlight is how many batches Sweep writes at once, each on its own
// connection, while it reads the next one.
const sweepInFlight = 2

// Sweep times out in-progress actions whose lease has passed, in batches of
// at most SweepBatch, until none is left, and returns how many it timed out.
// Each batch is written as one set (commitSet: one statement on PostgreSQL,
// one transaction on SQLite), each action conditional on the version read,
// so with several processes on one database each lease is timed out exactly
// once: the loser of a race finds the version changed and skips the action.
// Batches are read in lease order, each after the last one read, so a batch
// still being written is not read again; an action skipped because it lost
// a race and is still due is taken by the next sweep.
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
	batches := make(chan []*Action)
	for range sweepInFlight {
		wg.Go(func() {
			for due := range batches {
				if ctx.Err() != nil {
					continue
				}
				n, err := l.timeOut(ctx, due)
				total.Add(int64(n))
				if err != nil {
					fail(err)
				}
			}
		})
	}
	var after *Action
	for {
		due, err := l.dueActions(ctx, l.now(), after)
		if err != nil {
			fail(err)
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

// timeOut times out a batch of due actions as one set and returns how many
// it timed out. The state machine decides each change; the entries and
// alerts are stamped just before the set is written.
func (l *Ledger) timeOut(ctx context.Context, due []*Action) (int, error) {
	now := l.now()
	chs := make([]*change, 0, len(due))
	for _, a := range due {
		pl := expire(&step{now: now, act: a})
		if pl.next == nil {
			continue
		}
		chs = append(chs, &change{prev: a, next: pl.next, events: pl.events, entry: Entry{
			ID: newID(), Type: pl.record.typ, Actor: Actor{Kind: "system", Name: "sweeper"},
			Attempt: pl.record.attempt, Payload: marshalPayload(pl.record.payload), RecordedAt: now,
		}})
	}
	u := l.single()
	done, err := l.commitSet(ctx, u, chs)
	if err != nil {
		return 0, err
	}
	if u.alerted {
		l.wakeDispatcher()
	}
	return len(done), nil
}

// dueActions reads up to SweepBatch in-progress actions whose lease passed
// by now, in lease order (then id), after the action after if it is set.
// It reads the partial index on live leases.
func (l *Ledger) dueActions(ctx context.Context, now time.Time, after *Action) ([]*Action, error) {
	q := `SELECT ` + actionColumns + ` FROM actions WHERE status = 'in_progress' AND lease_until <= $1`
	args := []any{now}
	if after != nil && after.LeaseUntil != nil {
		q += ` AND lease_until >= $2 AND (lease_until > $2 OR id > $3)`
		args = append(args, *after.LeaseUntil, after.ID)
	}
	q += ` ORDER BY lease_until, id LIMIT ` + fmt.Sprint(SweepBatch)
	rows, err := l.st.rsq.QueryContext(ctx, l.st.rebind(q), args...)
	if err != nil {
		return nil, dbError("sweeper: find expired leases", err)
	}
	defer rows.Close()
	var out []*Action
	for rows.Next() {
		a, err := scanAction(rows)
		if err != nil {
			return nil, dbError("sweeper: find expired leases", err)
		}
		out = append(out, a)
	}
	return out, dbErrorOrNil("sweeper: find expired leases", rows.Err())
}

func dbErrorOrNil(what string, err error) error {
	if err == nil {
		return nil
	}
	return dbError(what, err)
}

// Prune deletes terminal actions, and their entries, last changed before
// cutoff. Unresolved actions are never pruned, even if a decision moves one
// back out of a terminal status while the prune runs.
func (l *Ledger) Prune(ctx context.Context, cutoff time.Time) (int64, error) {
	const terminal = `status IN ('succeeded', 'failed', 'confirmed', 'compensated', 'abandoned')`
	q := `DELETE FROM actions WHERE id IN (SELECT id FROM actions WHERE ` + terminal + ` AND updated_at < $1
		ORDER BY updated_at LIMIT 1000) AND ` + terminal + ` AND updated_at < $1`
	total, err := l.deleteInBatches(ctx, q, cutoff)
	if err != nil {
		return total, err
	}
	// Webhook messages go with the same horizon, once none of their
	// deliveries is still pending; deliveries and attempts cascade.
	_, err = l.deleteInBatches(ctx, `DELETE FROM webhook_messages WHERE id IN (SELECT m.id FROM webhook_messages m
		WHERE m.created_at < $1 AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.message_id = m.id
		AND d.state = 'pending') LIMIT 1000)`, cutoff)
	return total, err
}

// deleteInBatches runs a DELETE of at most 1,000 rows until it deletes fewer.
func (l *Ledger) deleteInBatches(ctx context.Context, q string, cutoff time.Time) (int64, error) {
	var total int64
	for {
		res, err := l.st.wsq.ExecContext(ctx, l.st.rebind(q), cutoff.UTC())
		if err != nil {
			return total, dbError("retention: prune", err)
		}
		n, _ := res.RowsAffected()
		total += n
		if n < 1000 {
			return total, nil
		}
	}
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
				log.Error("retention: prune failed", "err", err)
			} else if n > 0 {
				log.Info("retention: pruned terminal actions", "actions", n)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
