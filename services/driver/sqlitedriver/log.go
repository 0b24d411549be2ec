package sqlitedriver

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/arbiter-ledger/arbiter/services/driver"
)

// The evidence log on SQLite (migration 00020): the single writer commits
// in the order it inserts, so a trigger's queue (log_queue, numbered by
// AUTOINCREMENT, never twice) is the order entries join the log. A pass is
// a transaction on the writer.

var _ driver.Logger = (*Driver)(nil)

func (d *Driver) LogBegin(ctx context.Context) (driver.LogTx, bool, error) {
	tx, err := d.wsq.BeginTx(ctx, nil)
	if err != nil {
		return nil, false, err
	}
	return &logTx{tx: tx}, true, nil
}

type logTx struct {
	tx   *sql.Tx
	last int64 // the queue's last number LogPending read
}

func (t *logTx) Commit() error   { return t.tx.Commit() }
func (t *logTx) Rollback() error { return t.tx.Rollback() }

func (t *logTx) LogSize(ctx context.Context) (int64, error) {
	var n int64
	err := t.tx.QueryRowContext(ctx, `SELECT coalesce((SELECT size FROM log_state WHERE id = 1), 0)`).Scan(&n)
	return n, err
}

func (t *logTx) LogPending(ctx context.Context, limit int) ([]driver.LogEntry, error) {
	rows, err := t.tx.QueryContext(ctx, `SELECT `+driver.LogEntryColumns+`, q.n
		FROM log_queue q JOIN entries e ON e.id = q.entry_id JOIN actions a ON a.id = e.action_id
		ORDER BY q.n LIMIT ?`, limit)
	if err != nil {
		return nil, fmt.Errorf("sqlitedriver: entries to log: %w", err)
	}
	return driver.ScanLogEntries(rows, &t.last)
}

func (t *logTx) LogHashes(ctx context.Context, indexes []int64) ([]tlog.Hash, error) {
	return readHashes(ctx, t.tx, indexes)
}

func (d *Driver) LogStoredHashes(ctx context.Context, indexes []int64) ([]tlog.Hash, error) {
	return readHashes(ctx, d.rsq, indexes)
}

func readHashes(ctx context.Context, q querier, indexes []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(indexes))
	pos := make(map[int64][]int, len(indexes))
	args := make([]any, len(indexes))
	for i, x := range indexes {
		pos[x], args[i] = append(pos[x], i), x
	}
	if len(indexes) == 0 {
		return out, nil
	}
	rows, err := q.QueryContext(ctx, `SELECT idx, hash FROM log_hashes WHERE idx IN (?`+strings.Repeat(",?", len(indexes)-1)+`)`, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlitedriver: log hashes: %w", err)
	}
	defer rows.Close()
	found := 0
	for rows.Next() {
		var x int64
		var b []byte
		if err := rows.Scan(&x, &b); err != nil {
			return nil, err
		}
		if len(b) != tlog.HashSize {
			return nil, fmt.Errorf("sqlitedriver: log hash %d is %d bytes", x, len(b))
		}
		for _, i := range pos[x] {
			copy(out[i][:], b)
			found++
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if found != len(indexes) {
		return nil, fmt.Errorf("sqlitedriver: %d of %d log hashes missing", len(indexes)-found, len(indexes))
	}
	return out, nil
}

func (t *logTx) LogAppend(ctx context.Context, leaves []driver.LogLeaf, from int64, hashes []tlog.Hash, size int64) error {
	for _, l := range leaves {
		if _, err := t.tx.ExecContext(ctx, `INSERT INTO log_leaves (log_index, entry_id, leaf_hash) VALUES (?, ?, ?)`,
			l.Index, l.EntryID, l.Hash[:]); err != nil {
			return fmt.Errorf("sqlitedriver: append to the log: %w", err)
		}
	}
	for i, h := range hashes {
		if _, err := t.tx.ExecContext(ctx, `INSERT INTO log_hashes (idx, hash) VALUES (?, ?)`, from+int64(i), h[:]); err != nil {
			return fmt.Errorf("sqlitedriver: append to the log: %w", err)
		}
	}
	if _, err := t.tx.ExecContext(ctx, `DELETE FROM log_queue WHERE n <= ?`, t.last); err != nil {
		return fmt.Errorf("sqlitedriver: log queue: %w", err)
	}
	_, err := t.tx.ExecContext(ctx, `INSERT INTO log_state (id, size) VALUES (1, ?) ON CONFLICT (id) DO UPDATE SET size = excluded.size`, size)
	return err
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
	at := c.SignedAt.UTC()
	if _, err := t.tx.ExecContext(ctx, `INSERT INTO log_checkpoints (size, note, signed_at) VALUES (?, ?, ?)`,
		c.Size, string(c.Note), at); err != nil {
		return fmt.Errorf("sqlitedriver: keep a checkpoint: %w", err)
	}
	if _, err := t.tx.ExecContext(ctx, `INSERT INTO log_state (id, size, verifier_key) VALUES (1, ?, ?)
		ON CONFLICT (id) DO UPDATE SET verifier_key = coalesce(log_state.verifier_key, excluded.verifier_key)`, c.Size,
		verifierKey); err != nil {
		return fmt.Errorf("sqlitedriver: keep a checkpoint: %w", err)
	}
	return logAlert(ctx, t.tx, alert, at)
}

func (d *Driver) LogAlert(ctx context.Context, alert driver.Alert, at time.Time) error {
	return logAlert(ctx, d.wsq, alert, at)
}

// logAlert writes an alert of the log for every enabled endpoint
// subscribed to its type, whatever their namespaces: the log is the whole
// deployment's.
func logAlert(ctx context.Context, q querier, alert driver.Alert, at time.Time) error {
	at = at.UTC()
	rows, err := q.QueryContext(ctx, `SELECT id FROM webhook_endpoints w WHERE w.enabled
		AND EXISTS (SELECT 1 FROM json_each(w.event_types) WHERE value = ?)`, string(alert.Type))
	endpoints, err := driver.ScanIDs(rows, err)
	if err != nil || len(endpoints) == 0 {
		return err
	}
	if _, err := q.ExecContext(ctx, `INSERT INTO webhook_messages (id, event_type, payload, created_at) VALUES (?, ?, ?, ?)`,
		alert.ID, string(alert.Type), string(alert.Body()), at); err != nil {
		return fmt.Errorf("sqlitedriver: an alert of the log: %w", err)
	}
	for _, ep := range endpoints {
		if _, err := q.ExecContext(ctx, `INSERT INTO webhook_deliveries (id, message_id, endpoint_id, state,
			attempts, next_attempt_at, created_at, updated_at) VALUES (?, ?, ?, 'pending', 0, ?, ?, ?)`,
			driver.NewID(), alert.ID, ep, at, at, at); err != nil {
			return fmt.Errorf("sqlitedriver: an alert of the log: %w", err)
		}
	}
	return nil
}

func (d *Driver) LogCheckpoint(ctx context.Context, n int64) (*driver.LogCheckpoint, error) {
	return checkpoint(ctx, d.rsq, n)
}

func checkpoint(ctx context.Context, q querier, n int64) (*driver.LogCheckpoint, error) {
	var c driver.LogCheckpoint
	var note string
	err := q.QueryRowContext(ctx, `SELECT size, note, signed_at FROM log_checkpoints
		WHERE ? < 0 OR size = ? ORDER BY size DESC LIMIT 1`, n, n).Scan(&c.Size, &note, &c.SignedAt)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("sqlitedriver: read a checkpoint: %w", err)
	}
	c.Note, c.SignedAt = []byte(note), c.SignedAt.UTC()
	return &c, nil
}

func (d *Driver) LogLeafOf(ctx context.Context, entryID string) (*driver.LogLeaf, string, error) {
	l := driver.LogLeaf{EntryID: entryID}
	var h []byte
	var ns string
	err := d.rsq.QueryRowContext(ctx, `SELECT l.log_index, l.leaf_hash, a.namespace FROM log_leaves l
		JOIN entries e ON e.id = l.entry_id JOIN actions a ON a.id = e.action_id WHERE l.entry_id = ?`, entryID).Scan(&l.Index, &h, &ns)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("sqlitedriver: read a leaf: %w", err)
	}
	copy(l.Hash[:], h)
	return &l, ns, nil
}

func (d *Driver) LogRange(ctx context.Context, from int64, limit int) ([]driver.LoggedEntry, error) {
	rows, err := d.rsq.QueryContext(ctx, `SELECT l.log_index, l.entry_id, l.leaf_hash, l.pruned, `+driver.LogEntryColumns+`
		FROM log_leaves l LEFT JOIN entries e ON e.id = l.entry_id LEFT JOIN actions a ON a.id = e.action_id
		WHERE l.log_index >= ? ORDER BY l.log_index LIMIT ?`, from, limit)
	return driver.ScanLoggedEntries(rows, err)
}

func (d *Driver) LogNamespace(ctx context.Context, ns string, since, until time.Time, after int64, limit int) ([]driver.LoggedEntry, error) {
	q := `SELECT l.log_index, l.entry_id, l.leaf_hash, l.pruned, ` + driver.LogEntryColumns + `
		FROM actions a JOIN entries e ON e.action_id = a.id JOIN log_leaves l ON l.entry_id = e.id
		WHERE a.namespace = ? AND l.log_index > ?`
	args := []any{ns, after}
	if !since.IsZero() {
		q += ` AND e.recorded_at >= ?`
		args = append(args, since.UTC())
	}
	if !until.IsZero() {
		q += ` AND e.recorded_at < ?`
		args = append(args, until.UTC())
	}
	rows, err := d.rsq.QueryContext(ctx, q+` ORDER BY l.log_index LIMIT ?`, append(args, limit)...)
	return driver.ScanLoggedEntries(rows, err)
}

// LogPassedOver finds entries the log passed over. On SQLite every entry written is queued (a trigger), so
// one neither queued nor logged was written past the queue, and one below
// a logged entry of its action was written into the log's history.
func (d *Driver) LogPassedOver(ctx context.Context, limit int) ([]driver.LogEntry, error) {
	rows, err := d.rsq.QueryContext(ctx, `SELECT `+driver.LogEntryColumns+`
		FROM entries e JOIN actions a ON a.id = e.action_id
		WHERE NOT EXISTS (SELECT 1 FROM log_leaves l WHERE l.entry_id = e.id)
			AND (NOT EXISTS (SELECT 1 FROM log_queue q WHERE q.entry_id = e.id)
				OR EXISTS (SELECT 1 FROM entries f JOIN log_leaves l ON l.entry_id = f.id
					WHERE f.action_id = e.action_id AND f.seq > e.seq))
		ORDER BY e.id LIMIT ?`, limit)
	if err != nil {
		return nil, fmt.Errorf("sqlitedriver: entries the log passed over: %w", err)
	}
	return driver.ScanLogEntries(rows)
}

func (d *Driver) LogVerifierKeyOf(ctx context.Context) (string, error) {
	var k sql.NullString
	err := d.rsq.QueryRowContext(ctx, `SELECT (SELECT verifier_key FROM log_state WHERE id = 1)`).Scan(&k)
	return k.String, err
}
