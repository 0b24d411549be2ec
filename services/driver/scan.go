package driver

import (
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/arbiter-ledger/arbiter/services/record"
)

// Helpers for driver implementations: both databases are reached through
// database/sql and store the same columns, so reading a row back is the
// same; the SQL that selects it is each driver's own.

// Scanner is a row to scan: *sql.Row or *sql.Rows.
type Scanner interface{ Scan(dest ...any) error }

// ScanAction reads the columns of the actions table in the order every
// driver's actionColumns lists them, after the head columns, if any.
func ScanAction(row Scanner, head ...any) (*record.Action, error) {
	var a record.Action
	var lease, deadline sql.NullTime
	var params, result, approval, recon, limits []byte
	err := row.Scan(append(head, &a.ID, &a.Namespace, &a.Key, &a.Tool, &a.Effect, &a.Status, &a.Attempt, &a.Version,
		&lease, &deadline, &a.Reference, &a.Agent, &a.RunID, &a.Fingerprint, &params, &result, &a.ExternalRef,
		&a.Retriable, &a.EntrySeq, &a.CreatedAt, &a.UpdatedAt, &approval, &recon, &limits)...)
	if err != nil {
		return nil, err
	}
	if a.Approval, err = record.UnmarshalStoredApproval(approval); err != nil {
		return nil, err
	}
	if a.Reconciliation, err = record.UnmarshalStoredReconciliation(recon); err != nil {
		return nil, err
	}
	if a.Limits, err = record.UnmarshalLimits(limits); err != nil {
		return nil, err
	}
	a.LeaseUntil, a.Deadline = UTCOrNil(lease), UTCOrNil(deadline)
	a.CreatedAt, a.UpdatedAt = a.CreatedAt.UTC(), a.UpdatedAt.UTC()
	a.Params = params
	if len(result) > 0 && string(result) != "null" {
		a.Result = result
	}
	return &a, nil
}

// ScanActions reads every row of a query of actions and closes rows.
func ScanActions(rows *sql.Rows, err error) ([]*record.Action, error) {
	return ScanActionsUpTo(rows, err, 0)
}

// ScanActionsUpTo reads the rows of a query of actions until their
// ActionBytes reach maxBytes (every row when it is 0) and closes rows.
func ScanActionsUpTo(rows *sql.Rows, err error, maxBytes int) ([]*record.Action, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*record.Action
	used := 0
	for rows.Next() {
		a, err := ScanAction(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
		if used += ActionBytes(a); maxBytes > 0 && used >= maxBytes {
			break
		}
	}
	return out, rows.Err()
}

// recordOverhead is about what the fixed fields of an action or an entry
// (ids, times, names, keys) add to its JSON.
const recordOverhead = 512

// ActionBytes is about how much an action adds to an answer: what it
// carries that a client chose the size of (params, result, approval) and
// the rest as a constant. Pages are bounded by it.
func ActionBytes(a *record.Action) int {
	n := recordOverhead + len(a.Key) + len(a.Params) + len(a.Result)
	if a.Reference != nil {
		n += len(*a.Reference)
	}
	if a.ExternalRef != nil {
		n += len(*a.ExternalRef)
	}
	if a.Approval != nil {
		n += 256 * (1 + len(a.Approval.Approvals))
	}
	return n
}

// EntryBytes is about how much an entry adds to an answer (see
// ActionBytes).
func EntryBytes(e *record.Entry) int {
	return recordOverhead + len(e.Actor.Name) + len(e.Payload)
}

// OneAction turns a read of one action that found no row into ErrNotFound.
func OneAction(a *record.Action, err error) (*record.Action, error) {
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	return a, err
}

// ScanEntries reads a timeline (id, seq, type, actor kind, actor name,
// attempt, payload, occurred at, recorded at, log index) and closes rows.
func ScanEntries(rows *sql.Rows, err error) ([]*record.Entry, error) {
	return ScanEntriesUpTo(rows, err, 0)
}

// ScanEntriesUpTo reads the rows of a query of entries until their
// EntryBytes reach maxBytes (every row when it is 0) and closes rows.
func ScanEntriesUpTo(rows *sql.Rows, err error, maxBytes int) ([]*record.Entry, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []*record.Entry{}
	used := 0
	for rows.Next() {
		var en record.Entry
		var occurred sql.NullTime
		var payload []byte
		if err := rows.Scan(&en.ID, &en.Seq, &en.Type, &en.Actor.Kind, &en.Actor.Name, &en.Attempt, &payload,
			&occurred, &en.RecordedAt, &en.LogIndex); err != nil {
			return nil, err
		}
		en.Payload, en.OccurredAt, en.RecordedAt = payload, UTCOrNil(occurred), en.RecordedAt.UTC()
		en.Actor.Via = record.ActorVia(en.Type, payload)
		out = append(out, &en)
		if used += EntryBytes(&en); maxBytes > 0 && used >= maxBytes {
			break
		}
	}
	return out, rows.Err()
}

// CountRows reads (key, count) rows into a map and closes rows.
func CountRows[K ~string](rows *sql.Rows, err error) (map[K]int64, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[K]int64{}
	for rows.Next() {
		var k K
		var n int64
		if err := rows.Scan(&k, &n); err != nil {
			return nil, err
		}
		out[k] = n
	}
	return out, rows.Err()
}

// UTCOrNil is a nullable time in UTC, or nil.
func UTCOrNil(t sql.NullTime) *time.Time {
	if !t.Valid {
		return nil
	}
	u := t.Time.UTC()
	return &u
}

// LiteralList spells vocabulary constants as SQL literals, so that a
// condition reads exactly as a partial index's. It refuses anything but
// lowercase letters and underscores.
func LiteralList[T ~string](xs []T) string {
	quoted := make([]string, len(xs))
	for i, x := range xs {
		for _, c := range x {
			if (c < 'a' || c > 'z') && c != '_' {
				panic(fmt.Sprintf("driver: %q is not a vocabulary constant", x))
			}
		}
		quoted[i] = "'" + string(x) + "'"
	}
	return strings.Join(quoted, ", ")
}

// Prefixed qualifies every column of a column list with a table alias.
func Prefixed(alias, columns string) string {
	cols := strings.Split(columns, ",")
	for i, c := range cols {
		cols[i] = alias + "." + strings.TrimSpace(c)
	}
	return strings.Join(cols, ", ")
}

// JSONText passes JSON as text, or NULL for none: SQLite would store bytes
// as a blob, and PostgreSQL casts text to jsonb.
func JSONText(b []byte) *string {
	if b == nil {
		return nil
	}
	s := string(b)
	return &s
}

// ScanTriageAlerts reads (entry type, recorded at, the action's columns)
// rows and closes rows.
func ScanTriageAlerts(rows *sql.Rows, err error) ([]*TriageAlert, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*TriageAlert
	for rows.Next() {
		var t TriageAlert
		if t.Action, err = ScanAction(rows, &t.Type, &t.RecordedAt); err != nil {
			return nil, err
		}
		t.RecordedAt = t.RecordedAt.UTC()
		out = append(out, &t)
	}
	return out, rows.Err()
}

// ScanIDs reads a statement's single column of ids, in order, and closes
// the rows. err is the statement's own error, passed on.
func ScanIDs(rows *sql.Rows, err error) ([]string, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// ScanToolOutcomes reads BreakerCounts' rows: tool, settled, unknown,
// failed.
func ScanToolOutcomes(rows *sql.Rows) ([]*ToolOutcomes, error) {
	defer rows.Close()
	var out []*ToolOutcomes
	for rows.Next() {
		var t ToolOutcomes
		if err := rows.Scan(&t.Tool, &t.Settled, &t.Unknown, &t.Failed); err != nil {
			return nil, err
		}
		out = append(out, &t)
	}
	return out, rows.Err()
}

// ScanLimitGroupCharges reads LimitGroupCharges' rows: action id, key,
// tool, status, amount, charged_at, held.
func ScanLimitGroupCharges(rows *sql.Rows) ([]*LimitGroupCharge, error) {
	defer rows.Close()
	var out []*LimitGroupCharge
	for rows.Next() {
		var c LimitGroupCharge
		if err := rows.Scan(&c.ActionID, &c.Key, &c.Tool, &c.Status, &c.Amount, &c.ChargedAt, &c.Held); err != nil {
			return nil, err
		}
		c.ChargedAt = c.ChargedAt.UTC()
		out = append(out, &c)
	}
	return out, rows.Err()
}
