package evidence_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
	"github.com/arbiter-ledger/arbiter/services/evidence"
	"github.com/arbiter-ledger/arbiter/services/record"
)

var admin = services.Principal{Kind: "api_key", Role: services.RoleAdmin}

// refunds records n refunds (intent, then succeeded) of keys prefix:i, in
// batches.
func (e *logEnv) refunds(t *testing.T, prefix string, n int) {
	t.Helper()
	for _, typ := range []string{"intent", "succeeded"} {
		for start := 0; start < n; start += services.MaxBatchEntries {
			var raws [][]byte
			for i := start; i < min(n, start+services.MaxBatchEntries); i++ {
				body := fmt.Sprintf(`{"key":"%s:%d","type":"intent","tool":"payments.refund","effect":"keyed","params":{"amount":%d}}`, prefix, i, i)
				if typ == "succeeded" {
					body = fmt.Sprintf(`{"key":"%s:%d","type":"succeeded","attempt":1,"result":{"ok":true}}`, prefix, i)
				}
				raws = append(raws, []byte(body))
			}
			res, err := e.l.Submit(context.Background(), e.agent, raws)
			require.NoError(t, err)
			for _, r := range res {
				require.NotEqual(t, record.OutcomeRejected, r.Outcome, "%+v", r.Error)
			}
		}
	}
}

// checkpoint logs everything pending and returns the checkpoint signed.
func (e *logEnv) checkpoint(t *testing.T, want int) evidence.Checkpoint {
	t.Helper()
	require.Equal(t, want, e.logged(t, want, 30*time.Second))
	lc, err := e.st.Driver().LogCheckpoint(context.Background(), -1)
	require.NoError(t, err)
	require.NotNil(t, lc)
	c, err := evidence.Open(lc.Note, e.key.Verifier)
	require.NoError(t, err)
	return c
}

// TestProofsAgainstCheckpoints: every pass that grew the tree signs a
// checkpoint; an entry's proof checks against it with tlog alone; two
// checkpoints taken before and after 10,000 more entries and a retention
// run are consistent; and entries carry their log index.
func TestProofsAgainstCheckpoints(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		ctx := context.Background()
		e := newLogEnv(t, st)
		log := evidence.NewLog(st.Driver(), e.key)
		_, err := log.Checkpoint(ctx, -1)
		require.ErrorIs(t, err, services.ErrNotFound, "no checkpoint before the first entry")

		e.refunds(t, "first", 10)
		first := e.checkpoint(t, 20)
		require.Equal(t, int64(20), first.Size)
		require.Equal(t, evidence.DefaultOrigin, first.Origin)

		page, err := e.l.List(ctx, e.agent, services.ActionFilter{Limit: 1})
		require.NoError(t, err)
		a := page.Actions[0]
		entries, err := e.l.Entries(ctx, e.agent, a.ID)
		require.NoError(t, err)
		require.NotNil(t, entries[0].LogIndex, "a logged entry carries its log index")
		leaf, err := evidence.Leaf(a.Namespace, a.ID, a.Key, *entries[0])
		require.NoError(t, err)

		_, err = log.Proof(ctx, e.agent, entries[0].ID, -1)
		require.ErrorIs(t, err, services.ErrForbidden, "agents write; they do not read proofs")
		reader := services.Principal{Kind: "api_key", Role: services.RoleReader, Namespace: "payments"}
		p, err := log.Proof(ctx, reader, entries[0].ID, -1)
		require.NoError(t, err)
		require.Equal(t, *entries[0].LogIndex, p.LogIndex)
		require.Equal(t, evidence.LeafHash(leaf).String(), p.LeafHash)
		require.NoError(t, checkInclusion(p, leaf, e.key.Verifier))
		other := services.Principal{Kind: "api_key", Role: services.RoleReader, Namespace: "support"}
		_, err = log.Proof(ctx, other, entries[0].ID, -1)
		require.ErrorIs(t, err, services.ErrNotFound, "another namespace's entry is not found")
		_, err = log.Proof(ctx, reader, entries[0].ID, 51_213_750_913)
		require.ErrorIs(t, err, services.ErrNotFound, "a size past 32 bits is no checkpoint, not a failed query")

		e.refunds(t, "more", 5000)
		require.Equal(t, 10000, e.logged(t, 10000, time.Minute))
		pruned, err := e.l.Prune(ctx, time.Now().Add(time.Minute))
		require.NoError(t, err)
		require.Equal(t, int64(5010), pruned, "retention deletes every succeeded refund")
		e.refunds(t, "after", 1)
		second := e.checkpoint(t, 2)
		require.Equal(t, int64(10022), second.Size)

		proof, err := log.Consistency(ctx, first.Size, second.Size)
		require.NoError(t, err)
		hs := make(tlog.TreeProof, len(proof))
		for i, s := range proof {
			hs[i], err = tlog.ParseHash(s)
			require.NoError(t, err)
		}
		require.NoError(t, tlog.CheckTree(hs, second.Size, second.Root, first.Size, first.Root),
			"the checkpoint before is a prefix of the one after, retention or not")
		require.Error(t, tlog.CheckTree(hs, second.Size, second.Root, first.Size, second.Root), "a wrong root does not check")

		// The proof of the pruned entry against the old checkpoint still
		// answers: retention kept its leaf... but not its entry, so it
		// is no longer found by id.
		_, err = log.Proof(ctx, reader, entries[0].ID, first.Size)
		require.ErrorIs(t, err, services.ErrNotFound)
		rep, err := evidence.VerifyDatabase(ctx, st.Driver(), e.key.Verifier, evidence.VerifyOptions{})
		require.NoError(t, err)
		require.True(t, rep.OK(), "retention is not tampering: %v", rep.Problems)
		require.Equal(t, int64(10022), rep.Checked)
	})
}

// checkInclusion checks a proof answer as a client would: the note's
// signature, then the leaf's inclusion in its tree.
func checkInclusion(p *evidence.Proof, leaf []byte, vkey string) error {
	c, err := evidence.Open([]byte(p.Checkpoint), vkey)
	if err != nil {
		return err
	}
	hs := make(tlog.RecordProof, len(p.Inclusion))
	for i, s := range p.Inclusion {
		if hs[i], err = tlog.ParseHash(s); err != nil {
			return err
		}
	}
	return tlog.CheckRecord(hs, c.Size, c.Root, p.LogIndex, evidence.LeafHash(leaf))
}

// TestVerifyDatabaseNamesEachChange: an edited payload, a deleted entry,
// an entry inserted behind the log and two entries swapped in it are each
// named; the untouched database verifies.
func TestVerifyDatabaseNamesEachChange(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		ctx := context.Background()
		e := newLogEnv(t, st)
		e.refunds(t, "refund", 10)
		e.checkpoint(t, 20)
		rep, err := evidence.VerifyDatabase(ctx, st.Driver(), e.key.Verifier, evidence.VerifyOptions{})
		require.NoError(t, err)
		require.True(t, rep.OK(), "%v", rep.Problems)
		require.Equal(t, int64(20), rep.Checked)

		other, err := evidence.LoadOrCreateKey(filepath.Join(t.TempDir(), "other.key"), evidence.DefaultOrigin)
		require.NoError(t, err)
		_, err = evidence.VerifyDatabase(ctx, st.Driver(), other.Verifier, evidence.VerifyOptions{})
		require.Error(t, err, "a checkpoint is only believed with its own key")

		ids, _ := e.leaves(t)
		db := st.GormWriter()
		require.NoError(t, db.Exec(`UPDATE entries SET payload = '{"params":{"amount":9999}}' WHERE id = ?`, ids[3]).Error)
		require.NoError(t, db.Exec(`DELETE FROM entries WHERE id = ?`, ids[5]).Error)
		// Swap the log's 7th and 9th leaves, entry and leaf hash.
		require.NoError(t, db.Exec(`UPDATE log_leaves SET entry_id = ? WHERE log_index = 7`, "00000000-0000-0000-0000-000000000001").Error)
		require.NoError(t, db.Exec(`UPDATE log_leaves SET entry_id = ? WHERE log_index = 9`, ids[7]).Error)
		require.NoError(t, db.Exec(`UPDATE log_leaves SET entry_id = ? WHERE log_index = 7`, ids[9]).Error)
		require.NoError(t, db.Exec(`UPDATE log_leaves SET leaf_hash = (SELECT leaf_hash FROM log_leaves WHERE log_index = 9)
			WHERE log_index = 7`).Error)
		// An entry written behind the log's back: with an old transaction
		// id on PostgreSQL, out of the writer's queue on SQLite.
		var actionID string
		require.NoError(t, db.Raw(`SELECT action_id FROM entries WHERE id = ?`, ids[0]).Row().Scan(&actionID))
		inserted := "0193f1a2-7c4e-7b1a-9d2e-5f6a7b8c9d0e"
		if st.Dialect == services.Postgres {
			require.NoError(t, db.Exec(`INSERT INTO entries (id, action_id, namespace, seq, type, actor_kind, actor_name, attempt, payload, recorded_at, txid)
				VALUES (?, ?, 'payments', 3, 'note', 'agent', 'refund-bot', 1, '{"message":"approved by phone"}', now(), 1)`, inserted, actionID).Error)
		} else {
			require.NoError(t, db.Exec(`INSERT INTO entries (id, action_id, namespace, seq, type, actor_kind, actor_name, attempt, payload, recorded_at)
				VALUES (?, ?, 'payments', 3, 'note', 'agent', 'refund-bot', 1, '{"message":"approved by phone"}', CURRENT_TIMESTAMP)`, inserted, actionID).Error)
			require.NoError(t, db.Exec(`DELETE FROM log_queue WHERE entry_id = ?`, inserted).Error)
		}

		rep, err = evidence.VerifyDatabase(ctx, st.Driver(), e.key.Verifier, evidence.VerifyOptions{})
		require.NoError(t, err)
		got := map[string]string{}
		for _, p := range rep.Problems {
			k := p.EntryID
			if p.LogIndex != nil {
				k = fmt.Sprint(*p.LogIndex)
			}
			got[k] = p.Kind
		}
		require.Equal(t, map[string]string{"3": "edited", "5": "deleted", "7": "reordered", "9": "reordered", inserted: "inserted"}, got,
			"%v", rep.Problems)
		for _, p := range rep.Problems {
			if p.Kind != "deleted" {
				require.NotEmpty(t, p.Key, "the problem names the action's key: %v", p)
			}
		}
	})
}

// TestBundleVerifiesOffline: an exported bundle verifies with the
// verifier key alone, and one byte of one leaf changed is the bad line
// named.
func TestBundleVerifiesOffline(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		ctx := context.Background()
		e := newLogEnv(t, st)
		e.refunds(t, "refund", 6)
		e.checkpoint(t, 12)
		log := evidence.NewLog(st.Driver(), e.key)
		var buf bytes.Buffer
		res, err := log.Export(ctx, admin, &buf, evidence.ExportQuery{Namespace: "payments"})
		require.NoError(t, err)
		require.Equal(t, 12, res.Entries)
		lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
		require.Len(t, lines, 13)
		var head evidence.BundleHead
		require.NoError(t, json.Unmarshal([]byte(lines[0]), &head))
		require.Equal(t, e.key.Verifier, head.VerifierKey)

		ok, err := evidence.VerifyBundle(strings.NewReader(buf.String()), e.key.Verifier)
		require.NoError(t, err)
		require.Equal(t, 12, ok.Entries)

		_, err = log.Export(ctx, e.agent, &bytes.Buffer{}, evidence.ExportQuery{Namespace: "payments"})
		require.ErrorIs(t, err, services.ErrForbidden)
		var empty bytes.Buffer
		res, err = log.Export(ctx, admin, &empty, evidence.ExportQuery{Namespace: "payments", Since: time.Now().Add(time.Hour)})
		require.NoError(t, err)
		require.Zero(t, res.Entries, "a range with no entries is a head alone")

		// One byte of the fifth line's leaf, changed in its entry too, so
		// only the proof can tell.
		var line evidence.BundleLine
		require.NoError(t, json.Unmarshal([]byte(lines[4]), &line))
		leaf, err := base64.StdEncoding.DecodeString(line.Leaf)
		require.NoError(t, err)
		bad := bytes.Replace(leaf, []byte(`refund-bot`), []byte(`refund-bou`), 1)
		require.NotEqual(t, leaf, bad)
		line.Leaf, line.Entry = base64.StdEncoding.EncodeToString(bad), bad
		raw, err := json.Marshal(line)
		require.NoError(t, err)
		tampered := append([]string{}, lines...)
		tampered[4] = string(raw)
		_, err = evidence.VerifyBundle(strings.NewReader(strings.Join(tampered, "\n")), e.key.Verifier)
		var bl *evidence.BadLine
		require.ErrorAs(t, err, &bl)
		require.Equal(t, 5, bl.Line)
		require.Equal(t, line.LogIndex, bl.LogIndex)
		require.Contains(t, err.Error(), "not in the checkpoint's tree")

		// The entry changed and not the leaf: a bad line too.
		require.NoError(t, json.Unmarshal([]byte(lines[2]), &line))
		line.Entry = bytes.Replace(line.Entry, []byte(`"seq":`), []byte(`"seq":9`), 1)
		raw, err = json.Marshal(line)
		require.NoError(t, err)
		tampered = append([]string{}, lines...)
		tampered[2] = string(raw)
		_, err = evidence.VerifyBundle(strings.NewReader(strings.Join(tampered, "\n")), e.key.Verifier)
		require.ErrorContains(t, err, "line 3")
		require.ErrorContains(t, err, "not what the leaf decodes to")

		other, err := evidence.LoadOrCreateKey(filepath.Join(t.TempDir(), "other.key"), evidence.DefaultOrigin)
		require.NoError(t, err)
		_, err = evidence.VerifyBundle(strings.NewReader(buf.String()), other.Verifier)
		require.ErrorContains(t, err, "line 1")
	})
}

// TestReplicaWithAnotherKeyDoesNotSign: the log's checkpoints are signed
// with one key; a replica started with another logs entries and refuses
// to sign.
func TestReplicaWithAnotherKeyDoesNotSign(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newLogEnv(t, st)
		e.refunds(t, "refund", 1)
		e.checkpoint(t, 2)
		other, err := evidence.LoadOrCreateKey(filepath.Join(t.TempDir(), "other.key"), evidence.DefaultOrigin)
		require.NoError(t, err)
		refused := 0
		e.seq = evidence.NewSequencer(st.Driver(), evidence.SequencerConfig{Key: other, OnRefused: func() { refused++ }})
		e.refunds(t, "more", 1)
		require.Equal(t, 2, e.logged(t, 2, 10*time.Second))
		require.Equal(t, 1, refused)
		lc, err := st.Driver().LogCheckpoint(context.Background(), -1)
		require.NoError(t, err)
		require.Equal(t, int64(2), lc.Size, "no checkpoint of the other key")
	})
}

// TestBundleVerifiedFromSpecInPython: a verifier written from SPEC alone,
// in another language (testdata/verify_bundle.py), accepts an exported
// bundle and rejects it with one byte of one leaf changed.
func TestBundleVerifiedFromSpecInPython(t *testing.T) {
	t.Parallel()
	if out, err := exec.Command("python3", "-c", "import cryptography").CombinedOutput(); err != nil {
		t.Fatalf("the Python verifier needs Python 3 with cryptography (pip install -r services/evidence/testdata/requirements.txt): %v\n%s", err, out)
	}
	st := dbtest.Open(t, services.SQLite)
	e := newLogEnv(t, st)
	e.refunds(t, "refund", 9)
	e.checkpoint(t, 18)
	var buf bytes.Buffer
	_, err := evidence.NewLog(st.Driver(), e.key).Export(context.Background(), admin, &buf, evidence.ExportQuery{Namespace: "payments"})
	require.NoError(t, err)
	dir := t.TempDir()
	run := func(bundle string) (string, error) {
		path := filepath.Join(dir, "bundle.ndjson")
		require.NoError(t, os.WriteFile(path, []byte(bundle), 0o600))
		out, err := exec.Command("python3", "testdata/verify_bundle.py", path, e.key.Verifier).CombinedOutput()
		return string(out), err
	}
	out, err := run(buf.String())
	require.NoError(t, err, out)
	require.Equal(t, "ok: 18 entries in the tree of size 18\n", out)

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	for _, i := range []int{1, 7, 18} {
		var line evidence.BundleLine
		require.NoError(t, json.Unmarshal([]byte(lines[i]), &line))
		leaf, err := base64.StdEncoding.DecodeString(line.Leaf)
		require.NoError(t, err)
		bad := bytes.Replace(leaf, []byte(`refund-bot`), []byte(`refund-boT`), 1)
		line.Leaf, line.Entry = base64.StdEncoding.EncodeToString(bad), bad
		raw, err := json.Marshal(line)
		require.NoError(t, err)
		tampered := append([]string{}, lines...)
		tampered[i] = string(raw)
		out, err := run(strings.Join(tampered, "\n"))
		require.Error(t, err, "line %d changed: %s", i+1, out)
		require.Contains(t, out, fmt.Sprintf("line %d (log index %d", i+1, line.LogIndex))
		require.Contains(t, out, "not in the checkpoint's tree")
	}
	other, err := evidence.LoadOrCreateKey(filepath.Join(dir, "other.key"), evidence.DefaultOrigin)
	require.NoError(t, err)
	path := filepath.Join(dir, "bundle.ndjson")
	require.NoError(t, os.WriteFile(path, buf.Bytes(), 0o600))
	out2, err := exec.Command("python3", "testdata/verify_bundle.py", path, other.Verifier).CombinedOutput()
	require.Error(t, err)
	require.Contains(t, string(out2), "line 1 (the checkpoint): the checkpoint is not signed by the verifier key")
}
