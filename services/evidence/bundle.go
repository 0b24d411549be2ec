package evidence

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/jsontext"
)

// A bundle (SPEC "Export and offline verification") is NDJSON: a head line
// with the checkpoint and its verifier key, then one line per entry with
// its leaf, the leaf decoded, its log index and its inclusion proof in the
// checkpoint's tree.

// BundleHead is a bundle's first line.
type BundleHead struct {
	Checkpoint  string `json:"checkpoint"`
	VerifierKey string `json:"verifier_key"`
}

// BundleLine is one entry of a bundle.
type BundleLine struct {
	Leaf      string          `json:"leaf"`
	Entry     json.RawMessage `json:"entry"`
	LogIndex  int64           `json:"log_index"`
	Inclusion []string        `json:"inclusion"`
}

// exportPage is how many entries an export reads at once.
const exportPage = 1000

// ExportQuery says what an export covers: one namespace, entries recorded
// in [Since, Until) (zero: unbounded).
type ExportQuery struct {
	Namespace    string
	Since, Until time.Time
	// Progress, when set, is told how many entries are written so far.
	Progress func(n int)
}

// ExportResult counts what an export wrote, and the entries of the range
// logged after the checkpoint, which the next export covers.
type ExportResult struct {
	Entries  int
	TreeSize int64
	Later    int
}

// Export writes the bundle of q's entries against the newest checkpoint.
// Readers of the namespace, operators and admins may export it. Each leaf
// is written again from the entry's row as it is now: an entry changed
// since it was logged fails verification.
func (l *Log) Export(ctx context.Context, p services.Principal, w io.Writer, q ExportQuery) (*ExportResult, error) {
	if p.CanWrite() || !p.Sees(q.Namespace) {
		return nil, services.Errorf(services.CodeForbidden, "exporting %q needs a reader, operator or admin of it", q.Namespace)
	}
	if q.Namespace == "" {
		return nil, services.Errorf(services.CodeInvalid, "namespace is required")
	}
	c, err := l.Checkpoint(ctx, -1)
	if err != nil {
		return nil, err
	}
	vkey := l.verifier
	if vkey == "" {
		if vkey, err = l.drv.LogVerifierKeyOf(ctx); err != nil {
			return nil, services.DBError("evidence: read the verifier key", err)
		}
	}
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	if err := enc.Encode(BundleHead{Checkpoint: string(c.Note), VerifierKey: vkey}); err != nil {
		return nil, err
	}
	res := &ExportResult{TreeSize: c.Size}
	r := cachedReader(l.hashReader(ctx))
	after := int64(-1)
	for {
		page, err := l.drv.LogNamespace(ctx, q.Namespace, q.Since, q.Until, after, exportPage)
		if err != nil {
			return nil, services.DBError("evidence: read entries to export", err)
		}
		for _, le := range page {
			after = le.Leaf.Index
			if le.Leaf.Index >= c.Size {
				res.Later++
				continue
			}
			leaf, err := Leaf(le.Entry.Namespace, le.Entry.ActionID, le.Entry.Key, le.Entry.Entry)
			if err != nil {
				return nil, err
			}
			proof, err := tlog.ProveRecord(c.Size, le.Leaf.Index, r)
			if err != nil {
				return nil, services.DBError("evidence: prove an entry", err)
			}
			if err := enc.Encode(BundleLine{Leaf: base64.StdEncoding.EncodeToString(leaf), Entry: leaf,
				LogIndex: le.Leaf.Index, Inclusion: hashStrings(proof)}); err != nil {
				return nil, err
			}
			res.Entries++
			if q.Progress != nil {
				q.Progress(res.Entries)
			}
		}
		if len(page) < exportPage {
			break
		}
	}
	return res, bw.Flush()
}

// cachedReader keeps the hashes a reader read: the proofs of neighbouring
// entries share most of theirs.
func cachedReader(r tlog.HashReader) tlog.HashReader {
	seen := map[int64]tlog.Hash{}
	return tlog.HashReaderFunc(func(ix []int64) ([]tlog.Hash, error) {
		var missing []int64
		for _, x := range ix {
			if _, ok := seen[x]; !ok {
				missing = append(missing, x)
			}
		}
		if len(missing) > 0 {
			if len(seen) > 1<<20 {
				clear(seen)
			}
			hs, err := r.ReadHashes(missing)
			if err != nil {
				return nil, err
			}
			for i, x := range missing {
				seen[x] = hs[i]
			}
		}
		out := make([]tlog.Hash, len(ix))
		for i, x := range ix {
			out[i] = seen[x]
		}
		return out, nil
	})
}

// BadLine is the first line of a bundle that does not verify.
type BadLine struct {
	Line     int
	LogIndex int64
	Key      string
	Seq      int
	Why      string
}

func (b *BadLine) Error() string {
	if b.Line == 1 {
		return fmt.Sprintf("line 1 (the checkpoint): %s", b.Why)
	}
	return fmt.Sprintf("line %d (log index %d, key %q, seq %d): %s", b.Line, b.LogIndex, b.Key, b.Seq, b.Why)
}

// BundleResult says what a bundle proved.
type BundleResult struct {
	Entries  int
	TreeSize int64
	Origin   string
}

// VerifyBundle checks a bundle with no server and no database: the
// checkpoint's signature by verifierKey, then each line's leaf against its
// decoded entry and its inclusion in the checkpoint's tree. It returns the
// first bad line as a *BadLine.
func VerifyBundle(r io.Reader, verifierKey string) (*BundleResult, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 64<<20)
	if !sc.Scan() {
		if err := sc.Err(); err != nil {
			return nil, err
		}
		return nil, &BadLine{Line: 1, Why: "the bundle is empty"}
	}
	var head BundleHead
	if err := json.Unmarshal(sc.Bytes(), &head); err != nil || head.Checkpoint == "" {
		return nil, &BadLine{Line: 1, Why: "not a bundle's head ({\"checkpoint\", \"verifier_key\"})"}
	}
	c, err := Open([]byte(head.Checkpoint), verifierKey)
	if err != nil {
		return nil, &BadLine{Line: 1, Why: err.Error()}
	}
	res := &BundleResult{TreeSize: c.Size, Origin: c.Origin}
	last := int64(-1)
	for n := 2; sc.Scan(); n++ {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		if err := verifyLine(sc.Bytes(), c, n, &last); err != nil {
			return nil, err
		}
		res.Entries++
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return res, nil
}

func verifyLine(raw []byte, c Checkpoint, n int, last *int64) error {
	var line BundleLine
	if err := json.Unmarshal(raw, &line); err != nil {
		return &BadLine{Line: n, LogIndex: -1, Why: "not a bundle line: " + err.Error()}
	}
	var id struct {
		Key string `json:"key"`
		Seq int    `json:"seq"`
	}
	_ = json.Unmarshal(line.Entry, &id)
	bad := func(why string) error {
		return &BadLine{Line: n, LogIndex: line.LogIndex, Key: id.Key, Seq: id.Seq, Why: why}
	}
	leaf, err := decodeLeaf(line.Leaf)
	if err != nil {
		return bad(err.Error())
	}
	// The entry must be what the leaf decodes to: compared as documents,
	// while the hash is of the leaf's bytes as given.
	want, err1 := jsontext.Canonical(leaf)
	got, err2 := jsontext.Canonical(line.Entry)
	if err1 != nil || err2 != nil || !bytes.Equal(want, got) {
		return bad("the entry is not what the leaf decodes to")
	}
	if line.LogIndex <= *last {
		return bad("log indexes must increase along the bundle")
	}
	*last = line.LogIndex
	if line.LogIndex >= c.Size {
		return bad(fmt.Sprintf("log index beyond the checkpoint's tree (size %d)", c.Size))
	}
	proof, err := parseHashes(line.Inclusion)
	if err != nil {
		return bad(err.Error())
	}
	if err := tlog.CheckRecord(proof, c.Size, c.Root, line.LogIndex, LeafHash(leaf)); err != nil {
		return bad("the leaf is not in the checkpoint's tree at its log index")
	}
	return nil
}
