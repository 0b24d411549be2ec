package evidence

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"

	"github.com/google/uuid"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/driver"
	"github.com/arbiter-ledger/arbiter/services/record"
)

// Log answers what readers ask of the evidence log: its key, its
// checkpoints and proofs against them (SPEC "Evidence").
type Log struct {
	drv driver.Logger
	// verifier is the verifier key of this process's signing key; "" when
	// it has none (then the log's own record of it is answered).
	verifier string
}

// NewLog reads the log of a driver; key is this process's signing key, or
// nil.
func NewLog(drv driver.Logger, key *Key) *Log {
	l := &Log{drv: drv}
	if key != nil {
		l.verifier = key.Verifier
	}
	return l
}

// VerifierKey is the key that checks the log's checkpoints, in the note
// format (origin+hash+base64): this process's, else the one the log
// recorded at its first checkpoint. Before both it is not found.
func (l *Log) VerifierKey(ctx context.Context) (string, error) {
	if l.verifier != "" {
		return l.verifier, nil
	}
	v, err := l.drv.LogVerifierKeyOf(ctx)
	if err != nil {
		return "", services.DBError("evidence: read the verifier key", err)
	}
	if v == "" {
		return "", ErrNoKey
	}
	return v, nil
}

// ErrNoKey is answered when no signing key is known yet.
var ErrNoKey = services.Errorf(services.CodeNotFound, "the evidence log has no signing key yet: serve makes one at its first start")

// ErrNoCheckpoint is answered when the log has signed no checkpoint yet.
var ErrNoCheckpoint = services.Errorf(services.CodeNotFound, "the evidence log has signed no checkpoint yet (one is signed within 10 s of the first entry)")

// Checkpoint is the newest signed checkpoint, or the one of tree size n
// when n >= 0.
func (l *Log) Checkpoint(ctx context.Context, n int64) (*driver.LogCheckpoint, error) {
	c, err := l.drv.LogCheckpoint(ctx, n)
	if err != nil {
		return nil, services.DBError("evidence: read a checkpoint", err)
	}
	if c == nil && n >= 0 {
		return nil, services.Errorf(services.CodeNotFound, "no checkpoint of tree size %d: sizes are those of signed checkpoints", n)
	}
	if c == nil {
		return nil, ErrNoCheckpoint
	}
	return c, nil
}

// hashReader reads the log's stored hashes from the database.
func (l *Log) hashReader(ctx context.Context) tlog.HashReader {
	return tlog.HashReaderFunc(func(ix []int64) ([]tlog.Hash, error) {
		return l.drv.LogStoredHashes(ctx, ix)
	})
}

// Proof is an entry's inclusion proof (SPEC: GET
// /v1/audit/entries/{id}/proof).
type Proof struct {
	LogIndex   int64    `json:"log_index"`
	TreeSize   int64    `json:"tree_size"`
	LeafHash   string   `json:"leaf_hash"`
	Inclusion  []string `json:"inclusion"`
	Checkpoint string   `json:"checkpoint"`
}

// Proof proves an entry's inclusion in the newest checkpoint, or in the
// one of tree size n when n >= 0. Readers of the entry's namespace,
// operators and admins may ask; agents write.
func (l *Log) Proof(ctx context.Context, p services.Principal, entryID string, n int64) (*Proof, error) {
	if p.CanWrite() {
		return nil, services.Errorf(services.CodeForbidden, "agent keys write entries; proofs are for readers, operators and admins")
	}
	if _, err := uuid.Parse(entryID); err != nil {
		return nil, services.Errorf(services.CodeNotFound, "no logged entry %q", entryID)
	}
	leaf, ns, err := l.drv.LogLeafOf(ctx, entryID)
	if err != nil {
		return nil, services.DBError("evidence: read a leaf", err)
	}
	if leaf == nil || !p.Sees(ns) {
		// Logged within 2 s of its commit: not found is also "not yet".
		return nil, services.Errorf(services.CodeNotFound, "no logged entry %s (entries join the log within 2 s of their commit)", entryID)
	}
	c, err := l.Checkpoint(ctx, n)
	if err != nil {
		return nil, err
	}
	if leaf.Index >= c.Size {
		return nil, services.Errorf(services.CodeNotFound, "entry %s is at log index %d, after the checkpoint of size %d: the next checkpoint (within 10 s) includes it",
			entryID, leaf.Index, c.Size)
	}
	proof, err := tlog.ProveRecord(c.Size, leaf.Index, l.hashReader(ctx))
	if err != nil {
		return nil, services.DBError("evidence: prove an entry", err)
	}
	return &Proof{LogIndex: leaf.Index, TreeSize: c.Size, LeafHash: leaf.Hash.String(), Inclusion: hashStrings(proof),
		Checkpoint: string(c.Note)}, nil
}

// Consistency proves that the tree of size from is a prefix of the tree of
// size to (RFC 6962), both at most the newest checkpoint's size.
func (l *Log) Consistency(ctx context.Context, from, to int64) ([]string, error) {
	c, err := l.Checkpoint(ctx, -1)
	if err != nil {
		return nil, err
	}
	switch {
	case from < 1 || to < from:
		return nil, services.Errorf(services.CodeInvalid, "give 1 <= from <= to (tree sizes), got from=%d to=%d", from, to)
	case to > c.Size:
		return nil, services.Errorf(services.CodeNotFound, "to=%d is beyond the newest checkpoint (size %d)", to, c.Size)
	}
	proof, err := tlog.ProveTree(to, from, l.hashReader(ctx))
	if err != nil {
		return nil, services.DBError("evidence: prove consistency", err)
	}
	return hashStrings(proof), nil
}

// Mark is what the action page shows beside an entry.
type Mark struct {
	// Index is the entry's log index, or -1 before it joined the log.
	Index int64
	// State is MarkVerified, MarkPending or MarkChanged.
	State string
}

// The states of a Mark.
const (
	// MarkVerified: the entry, as stored now, proves at its index in the
	// newest checkpoint, whose signature checks.
	MarkVerified = "verified"
	// MarkPending: not logged yet, or logged after the newest checkpoint.
	MarkPending = "pending"
	// MarkChanged: the entry does not prove: it changed after it was
	// logged (or the checkpoint's signature does not check).
	MarkChanged = "changed"
)

// Marks proves each entry of one action against the newest checkpoint,
// from the entry as read now: an edited row does not verify.
func (l *Log) Marks(ctx context.Context, namespace, actionID, key string, entries []*record.Entry) (map[string]Mark, error) {
	marks := make(map[string]Mark, len(entries))
	logged := false
	for _, e := range entries {
		m := Mark{Index: -1, State: MarkPending}
		if e.LogIndex != nil {
			m.Index, logged = *e.LogIndex, true
		}
		marks[e.ID] = m
	}
	if !logged {
		return marks, nil
	}
	lc, err := l.drv.LogCheckpoint(ctx, -1)
	if err != nil {
		return nil, services.DBError("evidence: read a checkpoint", err)
	}
	if lc == nil {
		return marks, nil
	}
	vkey, err := l.VerifierKey(ctx)
	if err != nil {
		return nil, err
	}
	c, err := Open(lc.Note, vkey)
	r := cachedReader(l.hashReader(ctx)) // neighbours share most of a proof
	for _, e := range entries {
		m := marks[e.ID]
		if m.Index < 0 || m.Index >= c.Size && err == nil {
			continue
		}
		m.State = MarkChanged
		if err == nil {
			ok, perr := proves(r, c, namespace, actionID, key, e)
			if perr != nil {
				return nil, perr
			}
			if ok {
				m.State = MarkVerified
			}
		}
		marks[e.ID] = m
	}
	return marks, nil
}

// proves reports whether an entry's leaf, written again from e, proves
// at its index; err is a failure to read the tree.
func proves(r tlog.HashReader, c Checkpoint, namespace, actionID, key string, e *record.Entry) (bool, error) {
	leaf, err := Leaf(namespace, actionID, key, *e)
	if err != nil {
		return false, nil // a payload that is not JSON was not what was logged
	}
	proof, err := tlog.ProveRecord(c.Size, *e.LogIndex, r)
	if err != nil {
		return false, services.DBError("evidence: prove an entry", err)
	}
	return tlog.CheckRecord(proof, c.Size, c.Root, *e.LogIndex, LeafHash(leaf)) == nil, nil
}

func hashStrings(hs []tlog.Hash) []string {
	out := make([]string, len(hs))
	for i, h := range hs {
		out[i] = h.String()
	}
	return out
}

// parseHashes reads base64 hashes.
func parseHashes(ss []string) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(ss))
	for i, s := range ss {
		h, err := tlog.ParseHash(s)
		if err != nil {
			return nil, fmt.Errorf("hash %d of the proof: %w", i, err)
		}
		out[i] = h
	}
	return out, nil
}

// ParseSize reads a tree size of a query (size, from, to); "" is -1.
func ParseSize(name, s string) (int64, error) {
	if s == "" {
		return -1, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, services.Errorf(services.CodeInvalid, "%s must be a tree size (0 or more), got %q", name, s)
	}
	return n, nil
}

// decodeLeaf reads a bundle line's base64 leaf.
func decodeLeaf(s string) ([]byte, error) {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, errors.New("leaf is not base64")
	}
	return b, nil
}
