package sqlitedriver

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

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
	err := t.tx.QueryRowContext(ctx, `SELECT size FROM log_state WHERE id = 1`).Scan(&n)
	return n, err
}

func (t *logTx) LogPending(ctx context.Context, limit int) ([]driver.LogEntry, error) {
	rows, err := t.tx.QueryContext(ctx, `SELECT a.namespace, e.action_id, a.key,
			e.id, e.seq, e.type, e.actor_kind, e.actor_name, e.attempt, e.payload, e.occurred_at, e.recorded_at, q.n
		FROM log_queue q JOIN entries e ON e.id = q.entry_id JOIN actions a ON a.id = e.action_id
		ORDER BY q.n LIMIT ?`, limit)
	if err != nil {
		return nil, fmt.Errorf("sqlitedriver: entries to log: %w", err)
	}
	return driver.ScanLogEntries(rows, &t.last)
}

func (t *logTx) LogHashes(ctx context.Context, indexes []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(indexes))
	pos := make(map[int64][]int, len(indexes))
	args := make([]any, len(indexes))
	for i, x := range indexes {
		pos[x], args[i] = append(pos[x], i), x
	}
	if len(indexes) == 0 {
		return out, nil
	}
	rows, err := t.tx.QueryContext(ctx, `SELECT idx, hash FROM log_hashes WHERE idx IN (?`+strings.Repeat(",?", len(indexes)-1)+`)`, args...)
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
	_, err := t.tx.ExecContext(ctx, `UPDATE log_state SET size = ? WHERE id = 1`, size)
	return err
}
