package services

import (
	"context"
	"fmt"
	"log/slog"
	"time"
)

// SweepBatch bounds the actions one sweep round times out.
const SweepBatch = 500

// Sweep times out in-progress actions whose lease has passed, in bounded
// batches, until none is left, and returns how many it timed out. Each batch
// is written as one set (commitSet: one statement on PostgreSQL, one
// transaction on SQLite), each action conditional on the version read, so
// with several processes on one database each lease is timed out exactly
// once: the loser of a race finds the version changed and skips the action.
func (l *Ledger) Sweep(ctx context.Context) (int, error) {
	total := 0
	for {
		due, err := l.dueActions(ctx, l.now())
		if err != nil {
			return total, err
		}
		// The entries and alerts are stamped when the batch is written.
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
			return total, err
		}
		total += len(done)
		if u.alerted {
			l.wakeDispatcher()
		}
		if len(due) < SweepBatch {
			return total, nil
		}
	}
}

func (l *Ledger) dueActions(ctx context.Context, now time.Time) ([]*Action, error) {
	q := `SELECT ` + actionColumns + ` FROM actions WHERE status = 'in_progress' AND lease_until <= $1
		ORDER BY lease_until LIMIT ` + fmt.Sprint(SweepBatch)
	rows, err := l.st.rsq.QueryContext(ctx, l.st.rebind(q), now)
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
