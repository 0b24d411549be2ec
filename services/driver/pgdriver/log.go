package pgdriver

import (
	"context"
	"database/sql"
	"fmt"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/arbiter-ledger/arbiter/services/driver"
)

// The evidence log on PostgreSQL (migration 00021). Transactions commit in
// any order, so an entry's id says nothing of when it became visible. Each
// entry keeps the id of the transaction that wrote it (txid), and a pass
// logs, in (txid, id) order, only entries of transactions below the oldest
// one of this database still running (horizon): every one of those has
// ended, so none can still commit behind the cursor. A long writing
// transaction holds the log back until it ends, no longer.

// logLock is the advisory lock of the pass: one process sequences at a
// time, and another takes over the moment its connection is gone.
const logLock = int64(0x61726269746c6f67) // "arbitlog"

var _ driver.Logger = (*Driver)(nil)

func (d *Driver) LogBegin(ctx context.Context) (driver.LogTx, bool, error) {
	tx, err := d.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, false, err
	}
	var ok bool
	if err := tx.QueryRowContext(ctx, `SELECT pg_try_advisory_xact_lock($1)`, logLock).Scan(&ok); err != nil || !ok {
		tx.Rollback()
		return nil, false, err
	}
	return &logTx{tx: tx}, true, nil
}

type logTx struct {
	tx *sql.Tx
	// Where LogPending ended, for LogAppend to keep.
	cursorTxid int64
	cursorID   *string
}

func (t *logTx) Commit() error   { return t.tx.Commit() }
func (t *logTx) Rollback() error { return t.tx.Rollback() }

func (t *logTx) LogSize(ctx context.Context) (int64, error) {
	var n int64
	err := t.tx.QueryRowContext(ctx, `SELECT size FROM log_state WHERE id = 1`).Scan(&n)
	return n, err
}

func (t *logTx) LogPending(ctx context.Context, limit int) ([]driver.LogEntry, error) {
	horizon, err := t.horizon(ctx)
	if err != nil {
		return nil, err
	}
	var cursorID sql.NullString
	if err := t.tx.QueryRowContext(ctx, `SELECT cursor_txid, cursor_id FROM log_state WHERE id = 1`).
		Scan(&t.cursorTxid, &cursorID); err != nil {
		return nil, fmt.Errorf("pgdriver: log state: %w", err)
	}
	from := "00000000-0000-0000-0000-000000000000"
	if cursorID.Valid {
		from = cursorID.String
	}
	var lastTxid int64
	rows, err := t.tx.QueryContext(ctx, `SELECT a.namespace, e.action_id, a.key,
			e.id, e.seq, e.type, e.actor_kind, e.actor_name, e.attempt, e.payload, e.occurred_at, e.recorded_at, e.txid
		FROM entries e JOIN actions a ON a.id = e.action_id
		WHERE e.txid >= $1 AND (e.txid, e.id) > ($1, $2::uuid) AND e.txid < $3
		ORDER BY e.txid, e.id LIMIT $4`, t.cursorTxid, from, horizon, limit)
	if err != nil {
		return nil, fmt.Errorf("pgdriver: entries to log: %w", err)
	}
	es, err := driver.ScanLogEntries(rows, &lastTxid)
	if err != nil {
		return nil, fmt.Errorf("pgdriver: entries to log: %w", err)
	}
	if len(es) > 0 {
		id := es[len(es)-1].Entry.ID
		t.cursorTxid, t.cursorID = lastTxid, &id
	} else if cursorID.Valid {
		t.cursorID = &cursorID.String
	}
	return es, nil
}

// horizon is the oldest transaction of this database still running, or
// the next one to begin when none runs: every transaction of this
// database below it has ended. The snapshot's xmin would do, but it is the
// whole server's, and an open transaction of another database (another
// application's, or a test's) would hold this log back.
//
// The next transaction id is read first, in a statement of its own; then
// each transaction still running holds the lock of its own id (pg_locks,
// which every role may read) in a session of some database
// (pg_stat_activity.datid), or is prepared (pg_prepared_xacts). One that
// ends between the two reads has ended; one that begins after has an id
// above the first. pg_locks names 32-bit ids: each is taken back to its
// 64-bit id as the one at or below the next id with the same low 32 bits.
func (t *logTx) horizon(ctx context.Context) (int64, error) {
	var next int64
	if err := t.tx.QueryRowContext(ctx, `SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint`).Scan(&next); err != nil {
		return 0, fmt.Errorf("pgdriver: log horizon: %w", err)
	}
	var h int64
	err := t.tx.QueryRowContext(ctx, `SELECT coalesce(min($1::bigint - (($1::bigint % 4294967296) - x + 4294967296) % 4294967296), $1::bigint)
		FROM (
			SELECT l.transactionid::text::bigint AS x FROM pg_locks l JOIN pg_stat_activity s ON s.pid = l.pid
			WHERE l.locktype = 'transactionid' AND l.mode = 'ExclusiveLock' AND l.granted
				AND s.datid = (SELECT oid FROM pg_database WHERE datname = current_database())
			UNION ALL
			SELECT p.transaction::text::bigint FROM pg_prepared_xacts p WHERE p.database = current_database()
		) running`, next).Scan(&h)
	if err != nil {
		return 0, fmt.Errorf("pgdriver: log horizon: %w", err)
	}
	return h, nil
}

func (t *logTx) LogHashes(ctx context.Context, indexes []int64) ([]tlog.Hash, error) {
	rows, err := t.tx.QueryContext(ctx, `SELECT w.i, h.hash FROM unnest($1::bigint[]) WITH ORDINALITY AS w(idx, i)
		JOIN log_hashes h ON h.idx = w.idx`, int64s(indexes))
	if err != nil {
		return nil, fmt.Errorf("pgdriver: log hashes: %w", err)
	}
	defer rows.Close()
	out := make([]tlog.Hash, len(indexes))
	found := 0
	for rows.Next() {
		var i int
		var b []byte
		if err := rows.Scan(&i, &b); err != nil {
			return nil, err
		}
		if len(b) != tlog.HashSize {
			return nil, fmt.Errorf("pgdriver: log hash %d is %d bytes", indexes[i-1], len(b))
		}
		copy(out[i-1][:], b)
		found++
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if found != len(indexes) {
		return nil, fmt.Errorf("pgdriver: %d of %d log hashes missing", len(indexes)-found, len(indexes))
	}
	return out, nil
}

func (t *logTx) LogAppend(ctx context.Context, leaves []driver.LogLeaf, from int64, hashes []tlog.Hash, size int64) error {
	idx, ids := make(int64s, len(leaves)), make(strs, len(leaves))
	lh := make([][]byte, len(leaves))
	for i, l := range leaves {
		idx[i], ids[i], lh[i] = l.Index, l.EntryID, l.Hash[:]
	}
	hidx := make(int64s, len(hashes))
	for i := range hashes {
		hidx[i] = from + int64(i)
	}
	_, err := t.tx.ExecContext(ctx, `WITH l AS (
			INSERT INTO log_leaves (log_index, entry_id, leaf_hash)
			SELECT * FROM unnest($1::bigint[], $2::uuid[], $3::bytea[])
		), h AS (
			INSERT INTO log_hashes (idx, hash) SELECT * FROM unnest($4::bigint[], $5::bytea[])
		)
		UPDATE log_state SET size = $6, cursor_txid = $7, cursor_id = $8 WHERE id = 1`,
		idx, ids, lh, hidx, driver.HashBytes(hashes), size, t.cursorTxid, t.cursorID)
	if err != nil {
		return fmt.Errorf("pgdriver: append to the log: %w", err)
	}
	return nil
}
