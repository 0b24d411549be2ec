package evidence_test

import (
	"crypto/sha256"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/arbiter-ledger/arbiter/services/evidence"
	"github.com/arbiter-ledger/arbiter/services/record"
)

func entry(payload string) record.Entry {
	at := time.Date(2026, 12, 3, 17, 0, 0, 123456000, time.UTC)
	attempt := 1
	return record.Entry{ID: "0193a1f0-0000-7000-8000-000000000001", Seq: 2, Type: record.TypeSucceeded,
		Actor: record.Actor{Kind: record.ActorAgent, Name: "refund-bot"}, Attempt: &attempt,
		Payload: json.RawMessage(payload), OccurredAt: &at, RecordedAt: at.Add(time.Millisecond)}
}

func TestLeafIsCanonical(t *testing.T) {
	a, err := evidence.Leaf("payments", "0193a1f0-0000-7000-8000-00000000000a", "refund:order-8812",
		entry(`{ "result": {"refund_id": "re_1", "amount": 10.50}, "external_ref": "re_1" }`))
	require.NoError(t, err)
	require.Equal(t, `{"action_id":"0193a1f0-0000-7000-8000-00000000000a","actor":{"kind":"agent","name":"refund-bot"},`+
		`"attempt":1,"id":"0193a1f0-0000-7000-8000-000000000001","key":"refund:order-8812","namespace":"payments",`+
		`"occurred_at":"2026-12-03T17:00:00.123456Z","payload":{"external_ref":"re_1","result":{"amount":10.5,"refund_id":"re_1"}},`+
		`"recorded_at":"2026-12-03T17:00:00.124456Z","seq":2,"type":"succeeded"}`, string(a))
	// The same entry with its payload written another way is the same leaf.
	b, err := evidence.Leaf("payments", "0193a1f0-0000-7000-8000-00000000000a", "refund:order-8812",
		entry(`{"external_ref":"re_1","result":{"amount":10.5,"refund_id":"re_1"}}`))
	require.NoError(t, err)
	require.Equal(t, a, b)
	// RFC 6962: a leaf's hash is SHA-256 of 0x00 and the leaf.
	want := sha256.Sum256(append([]byte{0}, a...))
	require.Equal(t, tlog.Hash(want), evidence.LeafHash(a))
}

func TestKeyIsMadeOnceAndKept(t *testing.T) {
	path := filepath.Join(t.TempDir(), "arbiter-data", "log.key")
	k, err := evidence.LoadOrCreateKey(path, evidence.DefaultOrigin)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(k.Verifier, evidence.DefaultOrigin+"+"), k.Verifier)
	st, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm())

	again, err := evidence.LoadOrCreateKey(path, evidence.DefaultOrigin)
	require.NoError(t, err)
	require.Equal(t, k.Verifier, again.Verifier)

	_, err = evidence.LoadOrCreateKey(path, "example.com/other")
	require.ErrorContains(t, err, `is for the log "arbiter.local/log", not "example.com/other"`)

	require.NoError(t, os.WriteFile(path, []byte("not a key\n"), 0o600))
	_, err = evidence.LoadOrCreateKey(path, evidence.DefaultOrigin)
	require.ErrorContains(t, err, "does not hold a signing key")
}

func TestCheckpointSignedAndOpened(t *testing.T) {
	k, err := evidence.LoadOrCreateKey(filepath.Join(t.TempDir(), "log.key"), evidence.DefaultOrigin)
	require.NoError(t, err)
	root := tlog.RecordHash([]byte("leaf"))
	msg, err := evidence.Sign(k, evidence.Checkpoint{Origin: evidence.DefaultOrigin, Size: 1, Root: root})
	require.NoError(t, err)
	// The C2SP tlog-checkpoint body, then the signature line.
	require.True(t, strings.HasPrefix(string(msg), "arbiter.local/log\n1\n"+root.String()+"\n\n— arbiter.local/log "), string(msg))

	c, err := evidence.Open(msg, k.Verifier)
	require.NoError(t, err)
	require.Equal(t, evidence.Checkpoint{Origin: evidence.DefaultOrigin, Size: 1, Root: root}, c)

	// The verifier key derived from the signing key checks what it signs.
	v, err := note.NewVerifier(k.Verifier)
	require.NoError(t, err)
	_, err = note.Open(msg, note.VerifierList(v))
	require.NoError(t, err)

	tampered := []byte(strings.Replace(string(msg), "\n1\n", "\n2\n", 1))
	_, err = evidence.Open(tampered, k.Verifier)
	require.Error(t, err)

	other, err := evidence.LoadOrCreateKey(filepath.Join(t.TempDir(), "log.key"), evidence.DefaultOrigin)
	require.NoError(t, err)
	_, err = evidence.Open(msg, other.Verifier)
	require.Error(t, err)
}

// TestProofsOfATree builds a tree with tlog's stored hashes, as the log
// keeps them, and checks every inclusion and a consistency proof.
func TestProofsOfATree(t *testing.T) {
	var stored []tlog.Hash
	reader := tlog.HashReaderFunc(func(ix []int64) ([]tlog.Hash, error) {
		out := make([]tlog.Hash, len(ix))
		for i, x := range ix {
			out[i] = stored[x]
		}
		return out, nil
	})
	var leaves [][]byte
	for i := range 13 {
		leaf, err := evidence.Leaf("payments", "a", "k", entry(`{"n":`+string(rune('0'+i%10))+`}`))
		require.NoError(t, err)
		hs, err := tlog.StoredHashes(int64(i), leaf, reader)
		require.NoError(t, err)
		stored = append(stored, hs...)
		leaves = append(leaves, leaf)
	}
	require.Equal(t, tlog.StoredHashCount(13), int64(len(stored)))
	root, err := tlog.TreeHash(13, reader)
	require.NoError(t, err)
	for i, leaf := range leaves {
		p, err := tlog.ProveRecord(13, int64(i), reader)
		require.NoError(t, err)
		require.NoError(t, tlog.CheckRecord(p, 13, root, int64(i), evidence.LeafHash(leaf)))
	}
	old, err := tlog.TreeHash(5, reader)
	require.NoError(t, err)
	p, err := tlog.ProveTree(13, 5, reader)
	require.NoError(t, err)
	require.NoError(t, tlog.CheckTree(p, 13, root, 5, old))
}
