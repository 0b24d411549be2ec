package evidence

import (
	"context"
	"fmt"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/arbiter-ledger/arbiter/services/driver"
)

// Checking the live database (SPEC "Checking the live database"): every
// logged entry's leaf is written again from its row and proved against
// the newest checkpoint with the tree's own stored hashes. A leaf that
// does not prove is named: deleted (its entry is gone and retention did
// not prune it), reordered (it proves at another log index) or edited.
// Entries not logged that the log has passed are named inserted.

// Problem is one change found since the log took an entry.
type Problem struct {
	// Kind is edited, deleted, inserted, reordered or tree (the log's own
	// stored hashes or leaf rows were changed).
	Kind      string `json:"kind"`
	LogIndex  *int64 `json:"log_index,omitempty"`
	EntryID   string `json:"entry_id,omitempty"`
	Namespace string `json:"namespace,omitempty"`
	Key       string `json:"key,omitempty"`
	Seq       int    `json:"seq,omitempty"`
	Detail    string `json:"detail"`
}

func (p Problem) String() string {
	s := p.Kind
	if p.LogIndex != nil {
		s += fmt.Sprintf(": log index %d", *p.LogIndex)
	}
	if p.Key != "" {
		s += fmt.Sprintf(", namespace %q, key %q, seq %d", p.Namespace, p.Key, p.Seq)
	}
	if p.EntryID != "" {
		s += ", entry " + p.EntryID
	}
	return s + ": " + p.Detail
}

// Report is what a check found.
type Report struct {
	TreeSize int64 `json:"tree_size"`
	// From is the first log index checked (0: the whole log).
	From int64 `json:"from"`
	// Checked counts the leaves checked; Later those logged after the
	// checkpoint, checked against their stored leaf hashes only.
	Checked  int64     `json:"checked"`
	Later    int64     `json:"later"`
	Problems []Problem `json:"problems"`
	At       time.Time `json:"at"`
}

// OK reports whether the check found nothing changed.
func (r *Report) OK() bool { return len(r.Problems) == 0 }

// VerifyOptions bound a check.
type VerifyOptions struct {
	// Newest checks only the newest this many leaves of the checkpoint's
	// tree (0: all), as serve's hourly self-check does.
	Newest int64
	// Progress, when set, is told the leaves checked so far.
	Progress func(n int64)
	// Total, when set, is told how many leaves the check will read.
	Total func(n int64)
}

// verifyPage is how many leaves a check reads at once.
const verifyPage = 5000

// mismatch is a leaf that did not prove at its index.
type mismatch struct {
	le        driver.LoggedEntry
	derived   tlog.Hash
	stored    tlog.Hash // the tree's own leaf hash at the index
	authentic bool      // stored proves at the index
}

// VerifyDatabase checks the live tables against the newest checkpoint,
// which must be signed by verifierKey.
func VerifyDatabase(ctx context.Context, drv driver.Logger, verifierKey string, o VerifyOptions) (*Report, error) {
	lc, err := drv.LogCheckpoint(ctx, -1)
	if err != nil {
		return nil, fmt.Errorf("evidence: read the checkpoint: %w", err)
	}
	if lc == nil {
		return nil, fmt.Errorf("evidence: the log has signed no checkpoint yet")
	}
	c, err := Open(lc.Note, verifierKey)
	if err != nil {
		return nil, err
	}
	rep := &Report{TreeSize: c.Size, At: time.Now().UTC()}
	if o.Newest > 0 && o.Newest < c.Size {
		rep.From = c.Size - o.Newest
	}
	if o.Total != nil {
		o.Total(c.Size - rep.From)
	}
	stored := cachedReader(tlog.HashReaderFunc(func(ix []int64) ([]tlog.Hash, error) { return drv.LogStoredHashes(ctx, ix) }))
	var bad []mismatch
	next := rep.From
	for {
		page, err := drv.LogRange(ctx, next, verifyPage)
		if err != nil {
			return nil, fmt.Errorf("evidence: read leaves: %w", err)
		}
		if err := prefetch(stored, c.Size, next, next+int64(len(page))); err != nil {
			return nil, fmt.Errorf("evidence: read the tree: %w", err)
		}
		for _, le := range page {
			for ; next < le.Leaf.Index && next < c.Size; next++ {
				i := next
				rep.Problems = append(rep.Problems, Problem{Kind: "tree", LogIndex: &i, Detail: "the log's leaf row is gone"})
			}
			next = le.Leaf.Index + 1
			derived := le.Leaf.Hash // a pruned entry is its kept leaf
			if le.Entry != nil {
				leaf, err := Leaf(le.Entry.Namespace, le.Entry.ActionID, le.Entry.Key, le.Entry.Entry)
				if err != nil {
					return nil, err
				}
				derived = LeafHash(leaf)
			}
			if le.Leaf.Index >= c.Size {
				rep.Later++
				if derived != le.Leaf.Hash && le.Entry != nil {
					rep.Problems = append(rep.Problems, problem("edited", le, "the entry is not what was logged (after the checkpoint)"))
				} else if le.Entry == nil && !le.Pruned {
					rep.Problems = append(rep.Problems, problem("deleted", le, "the entry is gone, and retention did not prune it"))
				}
				continue
			}
			rep.Checked++
			proof, err := tlog.ProveRecord(c.Size, le.Leaf.Index, stored)
			if err != nil {
				return nil, fmt.Errorf("evidence: prove log index %d: %w", le.Leaf.Index, err)
			}
			if tlog.CheckRecord(proof, c.Size, c.Root, le.Leaf.Index, derived) == nil && (le.Entry != nil || le.Pruned) {
				continue
			}
			hs, err := stored.ReadHashes([]int64{tlog.StoredHashIndex(0, le.Leaf.Index)})
			if err != nil {
				return nil, fmt.Errorf("evidence: read the tree: %w", err)
			}
			bad = append(bad, mismatch{le: le, derived: derived, stored: hs[0],
				authentic: tlog.CheckRecord(proof, c.Size, c.Root, le.Leaf.Index, hs[0]) == nil})
		}
		if o.Progress != nil {
			o.Progress(rep.Checked)
		}
		if len(page) < verifyPage {
			break
		}
	}
	for ; next < c.Size; next++ {
		i := next
		rep.Problems = append(rep.Problems, Problem{Kind: "tree", LogIndex: &i, Detail: "the log's leaf row is gone"})
	}
	rep.Problems = append(rep.Problems, classify(bad)...)
	over, err := drv.LogPassedOver(ctx, 1000)
	if err != nil {
		return nil, fmt.Errorf("evidence: read entries the log passed over: %w", err)
	}
	for _, e := range over {
		rep.Problems = append(rep.Problems, Problem{Kind: "inserted", EntryID: e.Entry.ID, Namespace: e.Namespace, Key: e.Key,
			Seq: e.Entry.Seq, Detail: "the entry is not in the log, which has passed where it stands"})
	}
	return rep, nil
}

// classify names what happened to each leaf that did not prove.
func classify(bad []mismatch) []Problem {
	at := map[tlog.Hash]int64{}
	for _, m := range bad {
		if m.authentic {
			at[m.stored] = m.le.Leaf.Index
		}
	}
	var out []Problem
	for _, m := range bad {
		switch j, moved := at[m.derived]; {
		case !m.authentic:
			out = append(out, problem("tree", m.le, "the log's stored hashes do not prove against the checkpoint"))
		case m.le.Entry == nil:
			out = append(out, problem("deleted", m.le, "the entry is gone, and retention did not prune it"))
		case moved && j != m.le.Leaf.Index:
			out = append(out, problem("reordered", m.le, fmt.Sprintf("the entry was logged at log index %d", j)))
		default:
			out = append(out, problem("edited", m.le, "the entry is not what was logged"))
		}
	}
	return out
}

func problem(kind string, le driver.LoggedEntry, detail string) Problem {
	i := le.Leaf.Index
	p := Problem{Kind: kind, LogIndex: &i, EntryID: le.Leaf.EntryID, Detail: detail}
	if le.Entry != nil {
		p.Namespace, p.Key, p.Seq = le.Entry.Namespace, le.Entry.Key, le.Entry.Entry.Seq
	}
	return p
}

// prefetch reads, in one go, the stored hashes the proofs of leaves
// [from, to) of a tree of size n use: the nodes at each level around the
// range.
func prefetch(r tlog.HashReader, n, from, to int64) error {
	if from >= to || from >= n {
		return nil
	}
	var ix []int64
	for level := 0; int64(1)<<level <= n; level++ {
		lo, hi := (from>>level)-1, ((to-1)>>level)+1
		for k := max(lo, 0); k <= hi; k++ {
			if (k+1)<<level <= n {
				ix = append(ix, tlog.StoredHashIndex(level, k))
			}
		}
	}
	_, err := r.ReadHashes(ix)
	return err
}
