package evidence

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/arbiter-ledger/arbiter/services/driver"
)

// PassSize bounds the entries one pass of the sequencer logs.
const PassSize = 5000

// Sequencer appends committed entries to the log, in the order their
// driver says they were committed, each once. Any number of processes may
// run one: the driver lets one pass run at a time (driver.Logger).
type Sequencer struct {
	drv driver.Logger
}

// NewSequencer sequences the log of a driver.
func NewSequencer(drv driver.Logger) *Sequencer { return &Sequencer{drv: drv} }

// Pass logs up to PassSize entries and reports how many; 0 also when
// another process holds the pass.
func (s *Sequencer) Pass(ctx context.Context) (int, error) {
	tx, ok, err := s.drv.LogBegin(ctx)
	if err != nil {
		return 0, fmt.Errorf("evidence: begin a pass: %w", err)
	}
	if !ok {
		return 0, nil
	}
	done := false
	defer func() {
		if !done {
			tx.Rollback()
		}
	}()
	size, err := tx.LogSize(ctx)
	if err != nil {
		return 0, fmt.Errorf("evidence: log size: %w", err)
	}
	es, err := tx.LogPending(ctx, PassSize)
	if err != nil || len(es) == 0 {
		return 0, err
	}
	// tlog numbers the stored hashes; the new ones begin where the tree's
	// end. Those before are read once each from the database.
	base := tlog.StoredHashCount(size)
	var added []tlog.Hash
	read := map[int64]tlog.Hash{}
	reader := tlog.HashReaderFunc(func(ix []int64) ([]tlog.Hash, error) {
		var missing []int64
		for _, x := range ix {
			if _, ok := read[x]; x < base && !ok {
				missing = append(missing, x)
			}
		}
		if len(missing) > 0 {
			hs, err := tx.LogHashes(ctx, missing)
			if err != nil {
				return nil, err
			}
			for i, x := range missing {
				read[x] = hs[i]
			}
		}
		out := make([]tlog.Hash, len(ix))
		for i, x := range ix {
			if x >= base {
				out[i] = added[x-base]
			} else {
				out[i] = read[x]
			}
		}
		return out, nil
	})
	leaves := make([]driver.LogLeaf, len(es))
	for i, le := range es {
		leaf, err := Leaf(le.Namespace, le.ActionID, le.Key, le.Entry)
		if err != nil {
			return 0, err
		}
		n := size + int64(i)
		hs, err := tlog.StoredHashes(n, leaf, reader)
		if err != nil {
			return 0, fmt.Errorf("evidence: hash leaf %d: %w", n, err)
		}
		added = append(added, hs...)
		leaves[i] = driver.LogLeaf{Index: n, EntryID: le.Entry.ID, Hash: LeafHash(leaf)}
	}
	if err := tx.LogAppend(ctx, leaves, base, added, size+int64(len(es))); err != nil {
		return 0, err
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("evidence: commit a pass: %w", err)
	}
	done = true
	return len(es), nil
}

// Run passes every interval until ctx ends, at once again while passes
// come back full. Failures are logged and retried on the next tick.
func (s *Sequencer) Run(ctx context.Context, log *slog.Logger, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		for {
			n, err := s.Pass(ctx)
			if err != nil && ctx.Err() == nil {
				log.Error("evidence log: pass failed", "err", err)
			}
			if err != nil || n < PassSize {
				break
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
