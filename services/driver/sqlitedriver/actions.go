package sqlitedriver

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/arbiter-ledger/arbiter/services/driver"
	"github.com/arbiter-ledger/arbiter/services/record"
)

// The column lists of the two ledger tables, each written once: every read
// of actions selects actionColumns (scanAction reads them in this order),
// and every write of a whole row names them in the same order.
const (
	actionColumns = `id, namespace, key, tool, effect, status, attempt, version, lease_until, deadline,
	reference, agent, run_id, fingerprint, params, result, external_ref, retriable, entry_seq,
	created_at, updated_at, approval, reconciliation, limits`
	entryColumns = `id, action_id, namespace, seq, type, actor_kind, actor_name, attempt, payload,
	occurred_at, recorded_at`
	actionRow = `(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	entryRow  = `(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
)

func actionArgs(a *record.Action) []any {
	return []any{a.ID, a.Namespace, a.Key, a.Tool, string(a.Effect), string(a.Status), a.Attempt, a.Version,
		a.LeaseUntil, a.Deadline, a.Reference, a.Agent, a.RunID, a.Fingerprint, string(a.Params), driver.JSONText(a.Result),
		a.ExternalRef, a.Retriable, a.EntrySeq, a.CreatedAt, a.UpdatedAt, driver.JSONText(a.Approval.MarshalStored()),
		driver.JSONText(a.Reconciliation.MarshalStored()), driver.JSONText(record.MarshalLimits(a.Limits))}
}

func entryArgs(en *record.Entry, a *record.Action) []any {
	return []any{en.ID, a.ID, a.Namespace, en.Seq, string(en.Type), string(en.Actor.Kind), en.Actor.Name, en.Attempt,
		string(en.Payload), en.OccurredAt, en.RecordedAt}
}

func (e *executor) ActionGetByID(ctx context.Context, id string) (*record.Action, error) {
	return driver.OneAction(driver.ScanAction(e.r.QueryRowContext(ctx, `SELECT `+actionColumns+` FROM actions WHERE id = ?`, id)))
}

func (e *executor) ActionGetByKey(ctx context.Context, namespace, key string) (*record.Action, error) {
	return driver.OneAction(driver.ScanAction(e.r.QueryRowContext(ctx,
		`SELECT `+actionColumns+` FROM actions WHERE namespace = ? AND key = ?`, namespace, key)))
}

func (e *executor) ActionList(ctx context.Context, p *driver.ActionListParams) ([]*record.Action, error) {
	var where []string
	var args []any
	add := func(cond string, vs ...any) {
		where, args = append(where, cond), append(args, vs...)
	}
	if p.Namespace != "" {
		add("namespace = ?", p.Namespace)
	}
	if len(p.Namespaces) > 0 {
		for _, ns := range p.Namespaces {
			args = append(args, ns)
		}
		where = append(where, "namespace IN (?"+strings.Repeat(", ?", len(p.Namespaces)-1)+")")
	}
	if len(p.Statuses) > 0 {
		ph := make([]string, len(p.Statuses))
		for i, s := range p.Statuses {
			ph[i] = "?"
			args = append(args, string(s))
		}
		where = append(where, "status IN ("+strings.Join(ph, ", ")+")")
	}
	for _, f := range [...]struct{ column, v string }{{"tool", p.Tool}, {"agent", p.Agent}} {
		switch {
		case driver.IsPattern(f.v):
			add(f.column+" GLOB ?", driver.GlobPattern(f.v))
		case f.v != "":
			add(f.column+" = ?", f.v)
		}
	}
	if p.Since != nil {
		add("created_at >= ?", p.Since.UTC())
	}
	if p.Until != nil {
		add("created_at < ?", p.Until.UTC())
	}
	if prefix, ok := driver.SearchPrefix(p.Search); ok {
		end := driver.PrefixEnd(prefix)
		add("((key >= ? AND key < ?) OR (reference >= ? AND reference < ?))", prefix, end, prefix, end)
	} else if p.Search != "" {
		add("(key = ? OR reference = ?)", p.Search, p.Search)
	}
	if len(p.IDs) > 0 {
		ph := make([]string, len(p.IDs))
		for i, id := range p.IDs {
			ph[i] = "?"
			args = append(args, id)
		}
		where = append(where, "id IN ("+strings.Join(ph, ", ")+")")
	}
	if p.BeforeID != "" {
		add("id < ?", p.BeforeID)
	}
	q := `SELECT ` + actionColumns + ` FROM actions`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, " AND ")
	}
	q += fmt.Sprintf(` ORDER BY id DESC LIMIT %d`, p.Limit)
	rows, err := e.r.QueryContext(ctx, q, args...)
	return driver.ScanActionsUpTo(rows, err, p.MaxBytes)
}

// ActionInsertMany writes the new actions in one statement and the entries
// of those created in another, then their alerts, in one transaction on
// the writer connection, which no other writer can interleave with.
func (e *executor) ActionInsertMany(ctx context.Context, chs []*driver.Change) ([]bool, error) {
	order := driver.FirstPerKey(chs)
	written := make([]bool, len(chs))
	err := e.inTx(ctx, func(q querier) error {
		var b strings.Builder
		b.WriteString(`INSERT INTO actions (` + actionColumns + `) VALUES `)
		args := make([]any, 0, 22*len(order))
		byID := make(map[string]int, len(order))
		for k, i := range order {
			if k > 0 {
				b.WriteString(", ")
			}
			b.WriteString(actionRow)
			n := chs[i].Next
			n.Version, n.EntrySeq, n.UpdatedAt = 1, 1, n.CreatedAt
			byID[n.ID] = i
			args = append(args, actionArgs(n)...)
		}
		b.WriteString(" ON CONFLICT (namespace, key) DO NOTHING RETURNING id")
		rows, err := q.QueryContext(ctx, b.String(), args...)
		if err != nil {
			return err
		}
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return err
			}
			written[byID[id]] = true
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		b.Reset()
		b.WriteString(`INSERT INTO entries (` + entryColumns + `) VALUES `)
		args = args[:0]
		for _, i := range order {
			if !written[i] {
				continue
			}
			if len(args) > 0 {
				b.WriteString(", ")
			}
			b.WriteString(entryRow)
			chs[i].Entry.Seq = 1
			args = append(args, entryArgs(&chs[i].Entry, chs[i].Next)...)
		}
		if len(args) == 0 {
			return nil
		}
		if _, err := q.ExecContext(ctx, b.String(), args...); err != nil {
			return err
		}
		for _, i := range order {
			if written[i] {
				if err := insertCharges(ctx, q, chs[i].Charges); err != nil {
					return err
				}
				if err := writeAlerts(ctx, q, chs[i]); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sqlitedriver: create actions: %w", err)
	}
	return written, nil
}

// ActionUpdateMany writes each change as a compare-and-set of the action,
// then its entry and alerts, all in one transaction. A change that lost its
// race has written nothing (its compare-and-set is its first write), and
// any other failure rolls the whole set back.
func (e *executor) ActionUpdateMany(ctx context.Context, chs []*driver.Change) ([]bool, error) {
	written := make([]bool, len(chs))
	err := e.inTx(ctx, func(q querier) error {
		for i, ch := range chs {
			n := ch.Next
			var seq int
			err := q.QueryRowContext(ctx, `UPDATE actions SET status = ?, attempt = ?, version = ?,
				lease_until = ?, deadline = ?, result = ?, external_ref = ?, retriable = ?, updated_at = ?,
				approval = ?, reconciliation = ?, entry_seq = entry_seq + 1 WHERE id = ? AND version = ? RETURNING entry_seq`,
				string(n.Status), n.Attempt, n.Version, n.LeaseUntil, n.Deadline, driver.JSONText(n.Result), n.ExternalRef,
				n.Retriable, n.UpdatedAt, driver.JSONText(n.Approval.MarshalStored()),
				driver.JSONText(n.Reconciliation.MarshalStored()), n.ID, ch.Prev.Version).Scan(&seq)
			if errors.Is(err, sql.ErrNoRows) {
				written[i] = false
				continue
			}
			if err != nil {
				return err
			}
			ch.Entry.Seq, n.EntrySeq = seq, seq
			if _, err := q.ExecContext(ctx, `INSERT INTO entries (`+entryColumns+`) VALUES `+entryRow,
				entryArgs(&ch.Entry, n)...); err != nil {
				return err
			}
			if err := writeAlerts(ctx, q, ch); err != nil {
				return err
			}
			written[i] = true
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sqlitedriver: update actions: %w", err)
	}
	return written, nil
}

// writeAlerts writes each alert of a written change as a message, with
// data.entry.seq filled in, and one delivery per enabled endpoint that
// subscribes to the event type and the namespace. A message no endpoint
// subscribes to is not written: nothing would ever read it.
func writeAlerts(ctx context.Context, q querier, ch *driver.Change) error {
	for _, m := range ch.Alerts {
		endpoints, err := subscribers(ctx, q, string(m.Type), ch.Next.Namespace)
		if err != nil {
			return err
		}
		if len(endpoints) == 0 {
			continue
		}
		now := ch.Entry.RecordedAt
		if _, err := q.ExecContext(ctx, `INSERT INTO webhook_messages (id, event_type, namespace, action_id, payload,
			created_at) VALUES (?, ?, ?, ?, json_set(?, '$.data.entry.seq', ?), ?)`,
			m.ID, string(m.Type), ch.Next.Namespace, ch.Next.ID, string(m.Body()), ch.Entry.Seq, now); err != nil {
			return err
		}
		for _, ep := range endpoints {
			if _, err := q.ExecContext(ctx, `INSERT INTO webhook_deliveries (id, message_id, endpoint_id, state,
				attempts, next_attempt_at, created_at, updated_at) VALUES (?, ?, ?, 'pending', 0, ?, ?, ?)`,
				driver.NewID(), m.ID, ep, now, now, now); err != nil {
				return err
			}
		}
	}
	return nil
}

// subscribers returns the enabled endpoints that subscribe to the event
// type and the namespace.
func subscribers(ctx context.Context, q querier, eventType, namespace string) ([]string, error) {
	rows, err := q.QueryContext(ctx, `SELECT id FROM webhook_endpoints w WHERE w.enabled
		AND EXISTS (SELECT 1 FROM json_each(w.event_types) WHERE value = ?)
		AND (json_array_length(w.namespaces) = 0 OR EXISTS (SELECT 1 FROM json_each(w.namespaces) WHERE value = ?))`,
		eventType, namespace)
	return driver.ScanIDs(rows, err)
}

func (e *executor) ActionDueList(ctx context.Context, p *driver.ActionDueListParams) ([]*record.Action, error) {
	q := `SELECT ` + actionColumns + ` FROM actions WHERE deadline <= ?`
	args := []any{p.Now}
	if p.After != nil && p.After.Deadline != nil {
		q += ` AND deadline >= ? AND (deadline > ? OR id > ?)`
		args = append(args, *p.After.Deadline, *p.After.Deadline, p.After.ID)
	}
	q += fmt.Sprintf(` ORDER BY deadline, id LIMIT %d`, p.Limit)
	return driver.ScanActions(e.r.QueryContext(ctx, q, args...))
}

// ActionLeftStatus passes the ids as one JSON array: a statement per call,
// whatever the number of ids.
func (e *executor) ActionLeftStatus(ctx context.Context, ids []string, status record.Status) ([]string, error) {
	list, err := json.Marshal(ids)
	if err != nil {
		return nil, err
	}
	rows, err := e.r.QueryContext(ctx, `SELECT w.value FROM json_each(?) AS w
		WHERE NOT EXISTS (SELECT 1 FROM actions a WHERE a.id = w.value AND a.status = ?)`, string(list), string(status))
	return driver.ScanIDs(rows, err)
}

func (e *executor) ActionCountByStatus(ctx context.Context) (map[record.Status]int64, error) {
	rows, err := e.r.QueryContext(ctx, `SELECT status, count(*) FROM actions GROUP BY status`)
	return driver.CountRows[record.Status](rows, err)
}

// ActionPrune deletes one batch; the condition is checked again on delete,
// so an action a decision moved out of a terminal status meanwhile stays.
func (e *executor) ActionPrune(ctx context.Context, p *driver.PruneParams) (int64, error) {
	in := driver.LiteralList(p.Statuses)
	batch := fmt.Sprintf(`SELECT id FROM actions WHERE status IN (%s) AND updated_at < ? ORDER BY updated_at LIMIT %d`, in, p.Limit)
	// The evidence log keeps the leaves of what retention deletes, marked
	// so: an entry gone without the mark was deleted by someone else.
	if _, err := e.w.ExecContext(ctx, `UPDATE log_leaves SET pruned = 1 WHERE entry_id IN (SELECT id FROM entries
		WHERE action_id IN (`+batch+`))`, p.Before.UTC()); err != nil {
		return 0, err
	}
	res, err := e.w.ExecContext(ctx, fmt.Sprintf(`DELETE FROM actions WHERE id IN (`+batch+`)
		AND status IN (%s) AND updated_at < ?`, in), p.Before.UTC(), p.Before.UTC())
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (e *executor) EntryList(ctx context.Context, p *driver.EntryListParams) ([]*record.Entry, error) {
	q := `SELECT id, seq, type, actor_kind, actor_name, attempt, payload, occurred_at, recorded_at,
		(SELECT log_index FROM log_leaves l WHERE l.entry_id = entries.id)
		FROM entries WHERE action_id = ?`
	args := []any{p.ActionID}
	if p.AfterSeq > 0 {
		args = append(args, p.AfterSeq)
		q += ` AND seq > ` + `?`
	}
	if p.BeforeSeq > 0 {
		args = append(args, p.BeforeSeq)
		q += ` AND seq < ` + `?`
	}
	if p.Newest {
		q += ` ORDER BY seq DESC`
	} else {
		q += ` ORDER BY seq`
	}
	if p.Limit > 0 {
		q += fmt.Sprintf(` LIMIT %d`, p.Limit)
	}
	rows, err := e.r.QueryContext(ctx, q, args...)
	return driver.ScanEntriesUpTo(rows, err, p.MaxBytes)
}

func (e *executor) EntryOutcomeExists(ctx context.Context, p *driver.EntryOutcomeExistsParams) (bool, error) {
	var found bool
	err := e.r.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM entries WHERE action_id = ? AND attempt = ?
		AND (type = ? OR (type = 'late_result' AND json_extract(payload, '$.type') = ?)))`,
		p.ActionID, p.Attempt, string(p.Type), string(p.Type)).Scan(&found)
	return found, err
}

func (e *executor) EntryCountByType(ctx context.Context, typ record.EntryType) (int, error) {
	var n int
	err := e.r.QueryRowContext(ctx, `SELECT count(*) FROM entries WHERE type = ?`, string(typ)).Scan(&n)
	return n, err
}
