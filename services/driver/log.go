package driver

import (
	"context"
	"database/sql"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/arbiter-ledger/arbiter/services/record"
)

// The evidence log (services/evidence): each driver keeps the tree beside
// the entries and says which entries join it next, in the order they were
// committed.

// LogEntry is an entry the log takes next, with what its leaf holds of its
// action.
type LogEntry struct {
	Namespace, ActionID, Key string
	Entry                    record.Entry
}

// LogLeaf is an entry as the log holds it.
type LogLeaf struct {
	Index   int64
	EntryID string
	Hash    tlog.Hash
}

// LogTx is one pass of the sequencer: a transaction that the driver gives
// to one process at a time (LogLogger.LogBegin).
type LogTx interface {
	// LogSize is the tree's size.
	LogSize(ctx context.Context) (int64, error)
	// LogPending reads up to limit entries that are committed and not yet
	// logged, in the order they join the log; it notes where they end for
	// LogAppend.
	LogPending(ctx context.Context, limit int) ([]LogEntry, error)
	// LogHashes reads stored hashes by their tlog index.
	LogHashes(ctx context.Context, indexes []int64) ([]tlog.Hash, error)
	// LogAppend writes the leaves of what LogPending read, the stored
	// hashes from index from on, and the tree's new size.
	LogAppend(ctx context.Context, leaves []LogLeaf, from int64, hashes []tlog.Hash, size int64) error
	Commit() error
	Rollback() error
}

// Logger is a driver that keeps the evidence log.
type Logger interface {
	// LogBegin starts a pass; ok is false when another process is
	// sequencing now.
	LogBegin(ctx context.Context) (tx LogTx, ok bool, err error)
}

// ScanLogEntries reads (namespace, action id, key, then the timeline's
// columns as ScanEntries reads them) and closes rows.
func ScanLogEntries(rows *sql.Rows, extra ...any) ([]LogEntry, error) {
	defer rows.Close()
	var out []LogEntry
	for rows.Next() {
		var le LogEntry
		en := &le.Entry
		var occurred sql.NullTime
		var payload []byte
		dest := []any{&le.Namespace, &le.ActionID, &le.Key, &en.ID, &en.Seq, &en.Type, &en.Actor.Kind, &en.Actor.Name,
			&en.Attempt, &payload, &occurred, &en.RecordedAt}
		if err := rows.Scan(append(dest, extra...)...); err != nil {
			return nil, err
		}
		en.Payload, en.OccurredAt, en.RecordedAt = payload, UTCOrNil(occurred), en.RecordedAt.UTC()
		en.Actor.Via = record.ActorVia(en.Type, payload)
		out = append(out, le)
	}
	return out, rows.Err()
}

// HashBytes passes stored hashes as bytes.
func HashBytes(hs []tlog.Hash) [][]byte {
	out := make([][]byte, len(hs))
	for i := range hs {
		out[i] = hs[i][:]
	}
	return out
}
