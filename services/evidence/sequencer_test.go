package evidence_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/stretchr/testify/require"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/accounts"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
	"github.com/arbiter-ledger/arbiter/services/evidence"
	"github.com/arbiter-ledger/arbiter/services/record"
)

type logEnv struct {
	st    *services.Store
	l     *services.Ledger
	agent services.Principal
	key   *evidence.Key
	seq   *evidence.Sequencer
}

func newLogEnv(t *testing.T, st *services.Store) *logEnv {
	t.Helper()
	_, secret, err := accounts.NewKeys(st).CreateKey(context.Background(),
		accounts.CreateKeyRequest{Namespace: "payments", Name: "refund-bot", Role: services.RoleAgent})
	require.NoError(t, err)
	agent, err := accounts.NewKeys(st).Authenticate(context.Background(), secret)
	require.NoError(t, err)
	key, err := evidence.LoadOrCreateKey(filepath.Join(t.TempDir(), "log.key"), evidence.DefaultOrigin)
	require.NoError(t, err)
	// Every 0: each pass that grew the tree signs a checkpoint.
	return &logEnv{st: st, l: services.NewLedger(st, services.LedgerConfig{}), agent: agent, key: key,
		seq: evidence.NewSequencer(st.Driver(), evidence.SequencerConfig{Key: key})}
}

func (e *logEnv) send(t *testing.T, raw string) {
	t.Helper()
	res, err := e.l.Submit(context.Background(), e.agent, [][]byte{[]byte(raw)})
	require.NoError(t, err)
	require.NotEqual(t, record.OutcomeRejected, res[0].Outcome, "%s: %+v", raw, res[0].Error)
}

// logged passes until the log took want entries or wait is over, and
// reports how many it took.
func (e *logEnv) logged(t *testing.T, want int, wait time.Duration) int {
	t.Helper()
	total := 0
	deadline := time.Now().Add(wait)
	for total < want && time.Now().Before(deadline) {
		n, err := e.seq.Pass(context.Background())
		require.NoError(t, err)
		total += n
		if total < want {
			time.Sleep(50 * time.Millisecond)
		}
	}
	return total
}

// leaves reads the log's leaves in order: entry ids and leaf hashes.
func (e *logEnv) leaves(t *testing.T) ([]string, []tlog.Hash) {
	t.Helper()
	rows, err := e.st.Gorm().Raw(`SELECT log_index, entry_id, leaf_hash FROM log_leaves ORDER BY log_index`).Rows()
	require.NoError(t, err)
	defer rows.Close()
	var ids []string
	var hs []tlog.Hash
	for rows.Next() {
		var i int64
		var id string
		var b []byte
		require.NoError(t, rows.Scan(&i, &id, &b))
		require.Equal(t, int64(len(ids)), i, "log indexes are contiguous from 0")
		var h tlog.Hash
		copy(h[:], b)
		ids, hs = append(ids, id), append(hs, h)
	}
	require.NoError(t, rows.Err())
	return ids, hs
}

// root is the tree's hash as the database's stored hashes give it.
func (e *logEnv) root(t *testing.T, n int64) tlog.Hash {
	t.Helper()
	h, err := tlog.TreeHash(n, tlog.HashReaderFunc(func(ix []int64) ([]tlog.Hash, error) {
		out := make([]tlog.Hash, len(ix))
		for i, x := range ix {
			var b []byte
			if err := e.st.Gorm().Raw(`SELECT hash FROM log_hashes WHERE idx = ?`, x).Row().Scan(&b); err != nil {
				return nil, fmt.Errorf("stored hash %d: %w", x, err)
			}
			copy(out[i][:], b)
		}
		return out, nil
	}))
	require.NoError(t, err)
	return h
}

// TestSequencerLogsEveryEntryOnce: every committed entry joins the log
// once, with contiguous indexes; each leaf hash is that of the entry as
// the API answers it; the stored hashes give the tree of those leaves.
func TestSequencerLogsEveryEntryOnce(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		ctx := context.Background()
		e := newLogEnv(t, st)
		var wg sync.WaitGroup
		for i := range 40 {
			wg.Go(func() {
				e.send(t, fmt.Sprintf(`{"key":"refund:%d","type":"intent","tool":"payments.refund","effect":"keyed","params":{"n":%d}}`, i, i))
				e.send(t, fmt.Sprintf(`{"key":"refund:%d","type":"succeeded","attempt":1,"result":{"refund_id":"re_%d"}}`, i, i))
			})
		}
		wg.Wait()
		require.Equal(t, 80, e.logged(t, 80, 15*time.Second))
		require.Zero(t, e.logged(t, 1, 200*time.Millisecond), "nothing is logged twice")

		e.send(t, `{"key":"refund:late","type":"intent","tool":"payments.refund","effect":"keyed","params":{"n":-1}}`)
		require.Equal(t, 1, e.logged(t, 1, 15*time.Second))

		ids, hashes := e.leaves(t)
		require.Len(t, ids, 81)
		want := map[string]tlog.Hash{}
		page, err := e.l.List(ctx, e.agent, services.ActionFilter{Limit: 100})
		require.NoError(t, err)
		for _, a := range page.Actions {
			entries, err := e.l.Entries(ctx, e.agent, a.ID)
			require.NoError(t, err)
			for _, en := range entries {
				leaf, err := evidence.Leaf(a.Namespace, a.ID, a.Key, *en)
				require.NoError(t, err)
				want[en.ID] = evidence.LeafHash(leaf)
			}
		}
		require.Len(t, want, 81)
		var stored []tlog.Hash
		mem := tlog.HashReaderFunc(func(ix []int64) ([]tlog.Hash, error) {
			out := make([]tlog.Hash, len(ix))
			for i, x := range ix {
				out[i] = stored[x]
			}
			return out, nil
		})
		for i, id := range ids {
			require.Equal(t, want[id], hashes[i], "leaf %d (entry %s)", i, id)
			hs, err := tlog.StoredHashesForRecordHash(int64(i), hashes[i], mem)
			require.NoError(t, err)
			stored = append(stored, hs...)
		}
		memRoot, err := tlog.TreeHash(81, mem)
		require.NoError(t, err)
		require.Equal(t, memRoot, e.root(t, 81))
	})
}

// TestSequencerWaitsForOlderTransactions (PostgreSQL): transactions commit
// in any order, so the log takes an entry only when every transaction that
// began writing before it has ended; nothing committing late is passed over,
// and the log follows the transactions' order.
func TestSequencerWaitsForOlderTransactions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := dbtest.Open(t, services.Postgres)
	e := newLogEnv(t, st)
	// A transaction of another database, open all along, holds nothing
	// of this log back.
	admin, err := sql.Open("pgx", dbtest.AdminURL())
	require.NoError(t, err)
	defer admin.Close()
	elsewhere, err := admin.BeginTx(ctx, nil)
	require.NoError(t, err)
	defer elsewhere.Rollback()
	var other string
	require.NoError(t, elsewhere.QueryRowContext(ctx, `SELECT pg_current_xact_id()::text`).Scan(&other))
	e.send(t, `{"key":"refund:1","type":"intent","tool":"payments.refund","effect":"keyed","params":{}}`)

	// A transaction of this database that has begun writing and not ended.
	older, err := st.Gorm().DB()
	require.NoError(t, err)
	tx, err := older.BeginTx(ctx, nil)
	require.NoError(t, err)
	defer tx.Rollback()
	var xid string
	require.NoError(t, tx.QueryRowContext(ctx, `SELECT pg_current_xact_id()::text`).Scan(&xid))

	e.send(t, `{"key":"refund:2","type":"intent","tool":"payments.refund","effect":"keyed","params":{}}`)
	n, err := e.seq.Pass(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n, "the entry written before the open transaction began, at once")
	require.Zero(t, e.logged(t, 1, time.Second), "not the entry after it while it is open")

	require.NoError(t, tx.Rollback())
	n, err = e.seq.Pass(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n, "once it ended, the entry after it, at once")

	rows, err := st.Gorm().Raw(`SELECT e.txid FROM log_leaves l JOIN entries e ON e.id = l.entry_id ORDER BY l.log_index`).Rows()
	require.NoError(t, err)
	defer rows.Close()
	var last int64
	for rows.Next() {
		var txid int64
		require.NoError(t, rows.Scan(&txid))
		require.GreaterOrEqual(t, txid, last, "the log follows the transactions' order")
		last = txid
	}
	require.NoError(t, rows.Err())
}
