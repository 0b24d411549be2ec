package evidence

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/arbiter-ledger/arbiter/services/driver"
	"github.com/arbiter-ledger/arbiter/services/record"
)

// PassSize bounds the entries one pass of the sequencer logs.
const PassSize = 5000

// CheckpointEvery is how often at most a checkpoint is signed (SPEC: at
// most every 10 s when the tree grew).
const CheckpointEvery = 10 * time.Second

// Sequencer appends committed entries to the log, in the order their
// driver says they were committed, each once, and signs checkpoints. Any
// number of processes may run one: the driver lets one pass run at a time
// (driver.Logger).
type Sequencer struct {
	drv driver.Logger
	cfg SequencerConfig
	// refusedLogged is when a refusal to sign was last logged.
	refusedLogged time.Time
}

// SequencerConfig says how a sequencer signs.
type SequencerConfig struct {
	// Key signs checkpoints; nil signs none.
	Key *Key
	// Every is the least time between two checkpoints (CheckpointEvery
	// in serve; 0 signs on every pass that grew the tree).
	Every time.Duration
	// Log tells of failed passes and of refusals to sign.
	Log *slog.Logger
	// OnCheckpoint is told of each checkpoint signed; OnRefused of each
	// pass that would have signed with a key other than the log's.
	OnCheckpoint func(size int64)
	OnRefused    func()
}

// NewSequencer sequences the log of a driver.
func NewSequencer(drv driver.Logger, cfg SequencerConfig) *Sequencer {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Sequencer{drv: drv, cfg: cfg}
}

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
	if err != nil {
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
	if len(es) > 0 {
		size += int64(len(es))
		if err := tx.LogAppend(ctx, leaves, base, added, size); err != nil {
			return 0, err
		}
	}
	if err := s.checkpoint(ctx, tx, size, reader); err != nil {
		return 0, err
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("evidence: commit a pass: %w", err)
	}
	done = true
	return len(es), nil
}

// checkpoint signs the tree of size n when it grew since the newest
// checkpoint and that one is at least Every old. A replica whose key is
// not the one the log's checkpoints are signed with refuses: verifiers
// know one key.
func (s *Sequencer) checkpoint(ctx context.Context, tx driver.LogTx, n int64, r tlog.HashReader) error {
	if s.cfg.Key == nil || n == 0 {
		return nil
	}
	last, err := tx.LogLatest(ctx)
	if err != nil {
		return err
	}
	now := time.Now().UTC()
	if last != nil && (last.Size >= n || now.Sub(last.SignedAt) < s.cfg.Every) {
		return nil
	}
	vkey, err := tx.LogVerifierKey(ctx)
	if err != nil {
		return err
	}
	if vkey != "" && vkey != s.cfg.Key.Verifier {
		if s.cfg.OnRefused != nil {
			s.cfg.OnRefused()
		}
		if now.Sub(s.refusedLogged) >= time.Minute {
			s.refusedLogged = now
			s.cfg.Log.Error("evidence log: this replica's signing key is not the log's: it signs no checkpoint",
				"log_key", vkey, "this_key", s.cfg.Key.Verifier)
		}
		return nil
	}
	root, err := tlog.TreeHash(n, r)
	if err != nil {
		return fmt.Errorf("evidence: tree hash of %d: %w", n, err)
	}
	note, err := Sign(s.cfg.Key, Checkpoint{Origin: s.cfg.Key.Signer.Name(), Size: n, Root: root})
	if err != nil {
		return err
	}
	alert := driver.Alert{ID: driver.NewID(), Type: record.EventAuditCheckpoint, Build: func() json.RawMessage {
		return alertBody(record.EventAuditCheckpoint, now, alertData{Checkpoint: string(note)})
	}}
	if err := tx.LogAddCheckpoint(ctx, driver.LogCheckpoint{Size: n, Note: note, SignedAt: now}, s.cfg.Key.Verifier, alert); err != nil {
		return err
	}
	if s.cfg.OnCheckpoint != nil {
		s.cfg.OnCheckpoint(n)
	}
	return nil
}

// alertData is the data of the log's alerts (SPEC: data.checkpoint).
type alertData struct {
	Checkpoint string `json:"checkpoint,omitempty"`
	// Mismatch is what the hourly self-check found (audit.mismatch).
	Mismatch *Report `json:"mismatch,omitempty"`
}

// alertBody is a standard webhook body, as services.MessageBody writes
// them for actions.
func alertBody(ev record.EventType, at time.Time, data alertData) json.RawMessage {
	raw, err := json.Marshal(struct {
		Type      record.EventType `json:"type"`
		Timestamp time.Time        `json:"timestamp"`
		Data      alertData        `json:"data"`
	}{ev, at, data})
	if err != nil {
		panic("evidence: marshal an alert: " + err.Error())
	}
	return raw
}

// Run passes every interval until ctx ends, at once again while passes
// come back full. Failures are logged and retried on the next tick.
func (s *Sequencer) Run(ctx context.Context, interval time.Duration) {
	log := s.cfg.Log
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
