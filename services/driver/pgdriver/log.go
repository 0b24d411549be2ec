package pgdriver

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

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
	err := t.tx.QueryRowContext(ctx, `SELECT coalesce((SELECT size FROM log_state WHERE id = 1), 0)`).Scan(&n)
	return n, err
}

func (t *logTx) LogPending(ctx context.Context, limit int) ([]driver.LogEntry, error) {
	horizon, err := t.horizon(ctx)
	if err != nil {
		return nil, err
	}
	var cursorID sql.NullString
	if err := t.tx.QueryRowContext(ctx, `SELECT coalesce((SELECT cursor_txid FROM log_state WHERE id = 1), 0), (SELECT cursor_id FROM log_state WHERE id = 1)`).
		Scan(&t.cursorTxid, &cursorID); err != nil {
		return nil, fmt.Errorf("pgdriver: log state: %w", err)
	}
	from := "00000000-0000-0000-0000-000000000000"
	if cursorID.Valid {
		from = cursorID.String
	}
	var lastTxid int64
	rows, err := t.tx.QueryContext(ctx, `SELECT `+driver.LogEntryColumns+`, e.txid
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
	return readHashes(ctx, t.tx, indexes)
}

func (d *Driver) LogStoredHashes(ctx context.Context, indexes []int64) ([]tlog.Hash, error) {
	return readHashes(ctx, d.db, indexes)
}

func readHashes(ctx context.Context, q querier, indexes []int64) ([]tlog.Hash, error) {
	rows, err := q.QueryContext(ctx, `SELECT w.i, h.hash FROM unnest($1::bigint[]) WITH ORDINALITY AS w(idx, i)
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
		INSERT INTO log_state (id, size, cursor_txid, cursor_id) VALUES (1, $6, $7, $8)
		ON CONFLICT (id) DO UPDATE SET size = excluded.size, cursor_txid = excluded.cursor_txid, cursor_id = excluded.cursor_id`,
		idx, ids, lh, hidx, driver.HashBytes(hashes), size, t.cursorTxid, t.cursorID)
	if err != nil {
		return fmt.Errorf("pgdriver: append to the log: %w", err)
	}
	return nil
}

func (t *logTx) LogVerifierKey(ctx context.Context) (string, error) {
	var k sql.NullString
	err := t.tx.QueryRowContext(ctx, `SELECT (SELECT verifier_key FROM log_state WHERE id = 1)`).Scan(&k)
	return k.String, err
}

func (t *logTx) LogLatest(ctx context.Context) (*driver.LogCheckpoint, error) {
	return checkpoint(ctx, t.tx, -1)
}

func (t *logTx) LogAddCheckpoint(ctx context.Context, c driver.LogCheckpoint, verifierKey string, alert driver.Alert) error {
	_, err := t.tx.ExecContext(ctx, `WITH c AS (
			INSERT INTO log_checkpoints (size, note, signed_at) VALUES ($1, $2, $3)
		)
		INSERT INTO log_state (id, size, cursor_txid, verifier_key) VALUES (1, $1, 0, $4)
		ON CONFLICT (id) DO UPDATE SET verifier_key = coalesce(log_state.verifier_key, excluded.verifier_key)`,
		c.Size, string(c.Note), c.SignedAt.UTC(), verifierKey)
	if err != nil {
		return fmt.Errorf("pgdriver: keep a checkpoint: %w", err)
	}
	return logAlert(ctx, t.tx, alert, c.SignedAt)
}

func (d *Driver) LogAlert(ctx context.Context, alert driver.Alert, at time.Time) error {
	return logAlert(ctx, d.db, alert, at)
}

// logAlert writes an alert of the log for every enabled endpoint
// subscribed to its type, whatever their namespaces: the log is the whole
// deployment's.
func logAlert(ctx context.Context, q querier, alert driver.Alert, at time.Time) error {
	var any bool
	if err := q.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM webhook_endpoints w WHERE w.enabled AND w.event_types ? $1)`,
		string(alert.Type)).Scan(&any); err != nil || !any {
		return err
	}
	_, err := q.ExecContext(ctx, `WITH m AS (
			INSERT INTO webhook_messages (id, event_type, payload, created_at) VALUES ($1, $2, $3::jsonb, $4)
		)
		INSERT INTO webhook_deliveries (id, message_id, endpoint_id, state, attempts, next_attempt_at, created_at, updated_at)
		SELECT gen_random_uuid(), $1, w.id, 'pending', 0, $4, $4, $4
		FROM webhook_endpoints w WHERE w.enabled AND w.event_types ? $2`,
		alert.ID, string(alert.Type), string(alert.Body()), at.UTC())
	if err != nil {
		return fmt.Errorf("pgdriver: an alert of the log: %w", err)
	}
	return nil
}

func (d *Driver) LogCheckpoint(ctx context.Context, n int64) (*driver.LogCheckpoint, error) {
	return checkpoint(ctx, d.db, n)
}

func checkpoint(ctx context.Context, q querier, n int64) (*driver.LogCheckpoint, error) {
	var c driver.LogCheckpoint
	var note string
	err := q.QueryRowContext(ctx, `SELECT size, note, signed_at FROM log_checkpoints
		WHERE $1::bigint < 0 OR size = $1::bigint ORDER BY size DESC LIMIT 1`, n).Scan(&c.Size, &note, &c.SignedAt)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("pgdriver: read a checkpoint: %w", err)
	}
	c.Note, c.SignedAt = []byte(note), c.SignedAt.UTC()
	return &c, nil
}

func (d *Driver) LogLeafOf(ctx context.Context, entryID string) (*driver.LogLeaf, string, error) {
	l := driver.LogLeaf{EntryID: entryID}
	var h []byte
	var ns string
	err := d.db.QueryRowContext(ctx, `SELECT l.log_index, l.leaf_hash, a.namespace FROM log_leaves l
		JOIN entries e ON e.id = l.entry_id JOIN actions a ON a.id = e.action_id WHERE l.entry_id = $1`, entryID).Scan(&l.Index, &h, &ns)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("pgdriver: read a leaf: %w", err)
	}
	copy(l.Hash[:], h)
	return &l, ns, nil
}

// loggedFrom selects leaves with their entries, as ScanLoggedEntries reads
// them.
const loggedFrom = `SELECT l.log_index, l.entry_id, l.leaf_hash, l.pruned, ` + driver.LogEntryColumns + `
	FROM log_leaves l LEFT JOIN entries e ON e.id = l.entry_id LEFT JOIN actions a ON a.id = e.action_id`

func (d *Driver) LogRange(ctx context.Context, from int64, limit int) ([]driver.LoggedEntry, error) {
	rows, err := d.db.QueryContext(ctx, loggedFrom+` WHERE l.log_index >= $1 ORDER BY l.log_index LIMIT $2`, from, limit)
	return driver.ScanLoggedEntries(rows, err)
}

func (d *Driver) LogNamespace(ctx context.Context, ns string, since, until time.Time, after int64, limit int) ([]driver.LoggedEntry, error) {
	rows, err := d.db.QueryContext(ctx, `SELECT l.log_index, l.entry_id, l.leaf_hash, l.pruned, `+driver.LogEntryColumns+`
		FROM actions a JOIN entries e ON e.action_id = a.id JOIN log_leaves l ON l.entry_id = e.id
		WHERE a.namespace = $1 AND l.log_index > $2
			AND ($3::timestamptz IS NULL OR e.recorded_at >= $3) AND ($4::timestamptz IS NULL OR e.recorded_at < $4)
		ORDER BY l.log_index LIMIT $5`, ns, after, nullTime(since), nullTime(until), limit)
	return driver.ScanLoggedEntries(rows, err)
}

func (d *Driver) LogPassedOver(ctx context.Context, limit int) ([]driver.LogEntry, error) {
	rows, err := d.db.QueryContext(ctx, `SELECT `+driver.LogEntryColumns+`
		FROM entries e JOIN actions a ON a.id = e.action_id
		WHERE NOT EXISTS (SELECT 1 FROM log_leaves l WHERE l.entry_id = e.id)
			AND ((e.txid, e.id) <= (coalesce((SELECT cursor_txid FROM log_state WHERE id = 1), 0),
				coalesce((SELECT cursor_id FROM log_state WHERE id = 1), '00000000-0000-0000-0000-000000000000'::uuid))
				OR EXISTS (SELECT 1 FROM entries f JOIN log_leaves l ON l.entry_id = f.id
					WHERE f.action_id = e.action_id AND f.seq > e.seq))
		ORDER BY e.id LIMIT $1`, limit)
	if err != nil {
		return nil, fmt.Errorf("pgdriver: entries the log passed over: %w", err)
	}
	return driver.ScanLogEntries(rows)
}

func nullTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UTC()
}

func (d *Driver) LogVerifierKeyOf(ctx context.Context) (string, error) {
	var k sql.NullString
	err := d.db.QueryRowContext(ctx, `SELECT (SELECT verifier_key FROM log_state WHERE id = 1)`).Scan(&k)
	return k.String, err
}
