package driver

import (
	"context"
	"database/sql"
	"fmt"
	"time"

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
	// LogVerifierKey is the verifier key of the log's checkpoints; "" before
	// the first.
	LogVerifierKey(ctx context.Context) (string, error)
	// LogLatest is the newest checkpoint, or nil.
	LogLatest(ctx context.Context) (*LogCheckpoint, error)
	// LogAddCheckpoint keeps a checkpoint signed by the key of verifierKey
	// (recorded with the first) and writes its alert (audit.checkpoint)
	// for every enabled endpoint subscribed to it.
	LogAddCheckpoint(ctx context.Context, c LogCheckpoint, verifierKey string, alert Alert) error
	Commit() error
	Rollback() error
}

// LogCheckpoint is a signed checkpoint as the database keeps it.
type LogCheckpoint struct {
	Size     int64
	Note     []byte
	SignedAt time.Time
}

// LoggedEntry is a leaf of the log with its entry as the tables hold it
// now: Entry is nil when the entry is gone (Pruned: retention deleted it).
type LoggedEntry struct {
	Leaf   LogLeaf
	Pruned bool
	Entry  *LogEntry
}

// Logger is a driver that keeps the evidence log.
type Logger interface {
	// LogBegin starts a pass; ok is false when another process is
	// sequencing now.
	LogBegin(ctx context.Context) (tx LogTx, ok bool, err error)

	// LogCheckpoint is the checkpoint of the tree of size n, or the newest
	// one when n < 0; nil when there is none.
	LogCheckpoint(ctx context.Context, n int64) (*LogCheckpoint, error)
	// LogVerifierKeyOf is the verifier key the log's checkpoints are
	// signed with; "" before the first.
	LogVerifierKeyOf(ctx context.Context) (string, error)
	// LogStoredHashes reads stored hashes by their tlog index.
	LogStoredHashes(ctx context.Context, indexes []int64) ([]tlog.Hash, error)
	// LogLeafOf is the leaf of an entry and its namespace, or nil when it
	// is not logged or is gone.
	LogLeafOf(ctx context.Context, entryID string) (*LogLeaf, string, error)
	// LogRange reads up to limit leaves from log index from on, in order,
	// each with its entry.
	LogRange(ctx context.Context, from int64, limit int) ([]LoggedEntry, error)
	// LogNamespace reads up to limit logged entries of a namespace
	// recorded in [since, until) (zero times: unbounded), after log index
	// after, in log order.
	LogNamespace(ctx context.Context, namespace string, since, until time.Time, after int64, limit int) ([]LoggedEntry, error)
	// LogAlert writes an alert of the log (audit.mismatch) for every
	// enabled endpoint subscribed to it.
	LogAlert(ctx context.Context, alert Alert, at time.Time) error
	// LogPassedOver reads up to limit entries that are not logged although
	// the log has passed them: entries written into its history.
	LogPassedOver(ctx context.Context, limit int) ([]LogEntry, error)
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

// LogEntryColumns are the columns ScanLogEntries and ScanLoggedEntries read
// of entries e and actions a.
const LogEntryColumns = `a.namespace, e.action_id, a.key, e.id, e.seq, e.type, e.actor_kind, e.actor_name,
	e.attempt, e.payload, e.occurred_at, e.recorded_at`

// ScanLoggedEntries reads (log index, entry id, leaf hash, pruned, then
// LogEntryColumns, NULL where the entry is gone) and closes rows.
func ScanLoggedEntries(rows *sql.Rows, err error) ([]LoggedEntry, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []LoggedEntry
	for rows.Next() {
		var le LoggedEntry
		var hash []byte
		var ns, actionID, key, id, typ, kind, name sql.NullString
		var seq, attempt sql.NullInt64
		var payload []byte
		var occurred, recorded sql.NullTime
		if err := rows.Scan(&le.Leaf.Index, &le.Leaf.EntryID, &hash, &le.Pruned, &ns, &actionID, &key, &id, &seq, &typ,
			&kind, &name, &attempt, &payload, &occurred, &recorded); err != nil {
			return nil, err
		}
		if len(hash) != tlog.HashSize {
			return nil, fmt.Errorf("driver: the leaf hash of log index %d is %d bytes", le.Leaf.Index, len(hash))
		}
		copy(le.Leaf.Hash[:], hash)
		if id.Valid {
			e := &LogEntry{Namespace: ns.String, ActionID: actionID.String, Key: key.String}
			e.Entry = record.Entry{ID: id.String, Seq: int(seq.Int64), Type: record.EntryType(typ.String),
				Actor: record.Actor{Kind: record.ActorKind(kind.String), Name: name.String}, Payload: payload,
				OccurredAt: UTCOrNil(occurred), RecordedAt: recorded.Time.UTC()}
			if attempt.Valid {
				n := int(attempt.Int64)
				e.Entry.Attempt = &n
			}
			e.Entry.Actor.Via = record.ActorVia(e.Entry.Type, payload)
			le.Entry = e
		}
		out = append(out, le)
	}
	return out, rows.Err()
}
