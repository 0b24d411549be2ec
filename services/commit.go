package services

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"
)

// change is one state change of an action: the entry to append and, unless
// next is nil, the action's new state. Changes are written by commitIn (one
// change), insertIntents (new actions, together) and commitSet (changes to
// many actions, together), the only code that writes the actions table.
type change struct {
	prev   *Action // as read; nil when the intent creates the action
	next   *Action // the new state; nil when only an entry is appended
	entry  Entry   // Seq is assigned by commit
	events []string
}

// errLostRace means the action changed (or was created) between the read and
// the write; the caller reads again and decides again.
var errLostRace = errors.New("ledger: action changed concurrently")

// dbtx is what ledger work reads and writes through: the connection pools,
// or one transaction.
type dbtx interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// unit is where one piece of ledger work runs: a single change on the pools
// (each write its own statement or transaction), or a batch of entries in one
// transaction, which then reads through it too, so a later entry sees what an
// earlier one wrote, and pays for one commit.
type unit struct {
	r, w    dbtx
	inTx    bool
	alerted bool // a change wrote alerts: wake the dispatcher once committed
}

// single is the unit of a change that stands alone.
func (l *Ledger) single() *unit { return &unit{r: l.st.rsq, w: l.st.wsq} }

// commit writes one change that stands alone and wakes the dispatcher if it
// wrote alerts.
func (l *Ledger) commit(ctx context.Context, ch *change) (*Action, *Entry, error) {
	u := l.single()
	act, e, err := l.commitIn(ctx, u, ch)
	if err == nil && u.alerted {
		l.wakeDispatcher()
	}
	return act, e, err
}

func (l *Ledger) wakeDispatcher() {
	if l.alerted != nil {
		l.alerted()
	}
}

// commitIn writes a change atomically: the entry is appended and the action
// updated (or created) in one statement on PostgreSQL and one transaction on
// SQLite (or within the unit's transaction), conditional on the version that
// was read. Every change bumps the action's entry sequence, which also orders
// the timeline.
func (l *Ledger) commitIn(ctx context.Context, u *unit, ch *change) (*Action, *Entry, error) {
	var (
		act *Action
		err error
	)
	switch {
	case ch.prev == nil && l.st.Dialect == Postgres:
		act, err = l.insertPostgres(ctx, u.w, ch)
	case l.st.Dialect == Postgres:
		act, err = l.updatePostgres(ctx, u.w, ch)
	default:
		err = l.sqliteTx(ctx, u, func(tx dbtx) error {
			var err error
			if ch.prev == nil {
				act, err = l.insertSQLite(ctx, tx, ch)
			} else {
				act, err = l.updateSQLite(ctx, tx, ch)
			}
			return err
		})
	}
	if err != nil {
		return nil, nil, err
	}
	if len(ch.events) > 0 {
		u.alerted = true
	}
	e := ch.entry
	e.Seq = act.entrySeq
	return act, &e, nil
}

func newID() string { return uuid.Must(uuid.NewV7()).String() }

// jsonArg passes JSON to the driver: raw bytes for jsonb, text for SQLite.
func (l *Ledger) jsonArg(b []byte) any {
	if b == nil {
		return nil
	}
	if l.st.Dialect == SQLite {
		return string(b)
	}
	return b
}

func (l *Ledger) entryArgs(ch *change, actionID, namespace string) []any {
	e := &ch.entry
	return []any{e.ID, actionID, namespace, e.Type, e.Actor.Kind, e.Actor.Name, e.Attempt,
		l.jsonArg(e.Payload), e.OccurredAt, e.RecordedAt}
}

const pgInsert = `
WITH a AS (
	INSERT INTO actions (id, namespace, key, tool, effect, status, attempt, version, lease_until,
		reference, agent, run_id, fingerprint, params, result, external_ref, retriable, entry_seq,
		created_at, updated_at)
	VALUES ($1, $2, $3, $4, $5, $6, $7, 1, $8, $9, $10, $11, $12, $13, NULL, NULL, false, 1, $14, $14)
	ON CONFLICT (namespace, key) DO NOTHING
	RETURNING id, namespace
)
INSERT INTO entries (id, action_id, namespace, seq, type, actor_kind, actor_name, attempt, payload,
	occurred_at, recorded_at)
SELECT $15, a.id, a.namespace, 1, $16, $17, $18, $19, $20, $21, $22 FROM a
RETURNING seq`

func (l *Ledger) insertPostgres(ctx context.Context, db dbtx, ch *change) (*Action, error) {
	n := ch.next
	e := &ch.entry
	var seq int
	err := db.QueryRowContext(ctx, pgInsert,
		n.ID, n.Namespace, n.Key, n.Tool, n.Effect, n.Status, n.Attempt, n.LeaseUntil,
		n.Reference, n.Agent, n.runID, n.fingerprint, l.jsonArg(n.Params), n.CreatedAt,
		e.ID, e.Type, e.Actor.Kind, e.Actor.Name, e.Attempt, l.jsonArg(e.Payload), e.OccurredAt, e.RecordedAt,
	).Scan(&seq)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, errLostRace
	}
	if err != nil {
		return nil, dbError("ledger: create action", err)
	}
	act := n.clone()
	act.Version, act.entrySeq = 1, seq
	return act, nil
}

const pgUpdate = `
WITH a AS (
	UPDATE actions SET status = $3, attempt = $4, version = $5, lease_until = $6, result = $7,
		external_ref = $8, retriable = $9, updated_at = $10, entry_seq = entry_seq + 1
	WHERE id = $1 AND version = $2
	RETURNING id, namespace, entry_seq
)
INSERT INTO entries (id, action_id, namespace, seq, type, actor_kind, actor_name, attempt, payload,
	occurred_at, recorded_at)
SELECT $11, a.id, a.namespace, a.entry_seq, $12, $13, $14, $15, $16, $17, $18 FROM a
RETURNING seq`

// pgOutbox ends a statement whose CTE "a" returns changed actions (id,
// namespace, entry_seq, recorded_at, and alerts: a JSON array of {id, type,
// payload} as text): it writes each alert as a message, with the entry's seq
// filled in, and one delivery per enabled endpoint that subscribes to the
// event type and the namespace. A message no endpoint subscribes to is not
// written: messages are only ever read through their deliveries.
const pgOutbox = `), m AS (
	INSERT INTO webhook_messages (id, event_type, namespace, action_id, payload, created_at)
	SELECT ev.id, ev.type, a.namespace, a.id, jsonb_set(ev.payload, '{data,entry,seq}', to_jsonb(a.entry_seq)),
		a.recorded_at
	FROM a, jsonb_to_recordset(a.alerts::jsonb) AS ev(id uuid, type text, payload jsonb)
	WHERE EXISTS (SELECT 1 FROM webhook_endpoints WHERE enabled) -- checked once: no endpoint, no JSON to parse
		AND EXISTS (SELECT 1 FROM webhook_endpoints w WHERE w.enabled AND w.event_types ? ev.type
		AND (w.namespaces = '[]'::jsonb OR w.namespaces ? a.namespace))
	RETURNING id, event_type, namespace, created_at
), d AS (
	INSERT INTO webhook_deliveries (id, message_id, endpoint_id, state, attempts, next_attempt_at, created_at, updated_at)
	SELECT gen_random_uuid(), m.id, w.id, 'pending', 0, m.created_at, m.created_at, m.created_at
	FROM m JOIN webhook_endpoints w ON w.enabled AND w.event_types ? m.event_type
		AND (w.namespaces = '[]'::jsonb OR w.namespaces ? m.namespace)
)`

// pgUpdateWithOutbox is pgUpdate plus the alerts of the change (pgOutbox).
const pgUpdateWithOutbox = `
WITH a AS (
	UPDATE actions SET status = $3, attempt = $4, version = $5, lease_until = $6, result = $7,
		external_ref = $8, retriable = $9, updated_at = $10, entry_seq = entry_seq + 1
	WHERE id = $1 AND version = $2
	RETURNING id, namespace, entry_seq, $18::timestamptz AS recorded_at, $19::text AS alerts
), e AS (
	INSERT INTO entries (id, action_id, namespace, seq, type, actor_kind, actor_name, attempt, payload,
		occurred_at, recorded_at)
	SELECT $11, a.id, a.namespace, a.entry_seq, $12, $13, $14, $15, $16, $17, $18 FROM a
	RETURNING seq
` + pgOutbox + `
SELECT seq FROM e`

func (l *Ledger) updatePostgres(ctx context.Context, db dbtx, ch *change) (*Action, error) {
	n := nextState(ch)
	e := &ch.entry
	q := pgUpdate
	args := []any{n.ID, ch.prev.Version, n.Status, n.Attempt, n.Version, n.LeaseUntil, l.jsonArg(n.Result),
		n.ExternalRef, n.retriable, n.UpdatedAt,
		e.ID, e.Type, e.Actor.Kind, e.Actor.Name, e.Attempt, l.jsonArg(e.Payload), e.OccurredAt, e.RecordedAt}
	if msgs := outboxFor(ch, n); len(msgs) > 0 {
		raw, _ := json.Marshal(msgs)
		q, args = pgUpdateWithOutbox, append(args, string(raw))
	}
	var seq int
	err := db.QueryRowContext(ctx, q, args...).Scan(&seq)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, errLostRace
	}
	if err != nil {
		return nil, dbError("ledger: update action", err)
	}
	n.entrySeq = seq
	return n, nil
}

// nextState is the action as it will be stored: the new state with a bumped
// version, or the unchanged state when only an entry is appended. Either way
// updated_at moves, so retention counts from the newest entry.
func nextState(ch *change) *Action {
	if ch.next == nil {
		n := ch.prev.clone()
		n.UpdatedAt = ch.entry.RecordedAt
		return n
	}
	n := ch.next.clone()
	n.Version = ch.prev.Version + 1
	n.UpdatedAt = ch.entry.RecordedAt
	return n
}

const sqliteInsertEntry = `INSERT INTO entries (id, action_id, namespace, seq, type, actor_kind,
	actor_name, attempt, payload, occurred_at, recorded_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`

func (l *Ledger) insertSQLite(ctx context.Context, tx dbtx, ch *change) (*Action, error) {
	n := ch.next
	res, err := tx.ExecContext(ctx, `INSERT INTO actions (id, namespace, key, tool, effect, status,
			attempt, version, lease_until, reference, agent, run_id, fingerprint, params, result,
			external_ref, retriable, entry_seq, created_at, updated_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, 1, ?, ?, ?, ?, ?, ?, NULL, NULL, false, 1, ?, ?)
			ON CONFLICT (namespace, key) DO NOTHING`,
		n.ID, n.Namespace, n.Key, n.Tool, n.Effect, n.Status, n.Attempt, n.LeaseUntil,
		n.Reference, n.Agent, n.runID, n.fingerprint, l.jsonArg(n.Params), n.CreatedAt, n.CreatedAt)
	if err != nil {
		return nil, err
	}
	if k, _ := res.RowsAffected(); k == 0 {
		return nil, errLostRace
	}
	args := l.entryArgs(ch, n.ID, n.Namespace)
	args = append(args[:3], append([]any{1}, args[3:]...)...)
	if _, err := tx.ExecContext(ctx, sqliteInsertEntry, args...); err != nil {
		return nil, err
	}
	act := n.clone()
	act.Version, act.entrySeq = 1, 1
	return act, nil
}

func (l *Ledger) updateSQLite(ctx context.Context, tx dbtx, ch *change) (*Action, error) {
	n := nextState(ch)
	var seq int
	err := tx.QueryRowContext(ctx, `UPDATE actions SET status = ?, attempt = ?, version = ?,
			lease_until = ?, result = ?, external_ref = ?, retriable = ?, updated_at = ?,
			entry_seq = entry_seq + 1 WHERE id = ? AND version = ? RETURNING entry_seq`,
		n.Status, n.Attempt, n.Version, n.LeaseUntil, l.jsonArg(n.Result), n.ExternalRef,
		n.retriable, n.UpdatedAt, n.ID, ch.prev.Version).Scan(&seq)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, errLostRace
	}
	if err != nil {
		return nil, err
	}
	args := l.entryArgs(ch, n.ID, n.Namespace)
	args = append(args[:3], append([]any{seq}, args[3:]...)...)
	if _, err := tx.ExecContext(ctx, sqliteInsertEntry, args...); err != nil {
		return nil, err
	}
	n.entrySeq = seq
	for _, m := range outboxFor(ch, n) {
		if err := insertMessageSQLite(ctx, tx, m, n, seq, ch.entry.RecordedAt); err != nil {
			return nil, err
		}
	}
	return n, nil
}

// sqliteTx runs fn in a write transaction on the single writer connection,
// or within the unit's transaction. A change that loses its race has
// written nothing (its compare-and-set is its first write), and any other
// failure ends the whole unit, so no savepoint is needed to keep the rest of
// a batch as it was.
func (l *Ledger) sqliteTx(ctx context.Context, u *unit, fn func(dbtx) error) error {
	if u.inTx {
		err := fn(u.w)
		if err != nil && !errors.Is(err, errLostRace) {
			return dbError("ledger: write", err)
		}
		return err
	}
	tx, err := l.st.wsq.BeginTx(ctx, nil)
	if err != nil {
		return dbError("ledger: begin", err)
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		if errors.Is(err, errLostRace) {
			return err
		}
		return dbError("ledger: write", err)
	}
	if err := tx.Commit(); err != nil {
		return dbError("ledger: commit", err)
	}
	return nil
}

func marshalPayload(p map[string]any) json.RawMessage {
	if p == nil {
		return json.RawMessage(`{}`)
	}
	b, err := json.Marshal(p)
	if err != nil {
		// Payloads are built from validated input; this cannot fail.
		panic(fmt.Sprintf("ledger: marshal payload: %v", err))
	}
	return b
}

func utcNow() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

// pgInsertIntents creates many actions with their first entries in one
// statement: the rows come in as arrays, in (namespace, key) order, so
// concurrent statements meet shared keys in the same order. A key that
// already exists is left alone (ON CONFLICT DO NOTHING) and its id is not
// returned; the caller decides that entry on the stored action instead.
const pgInsertIntents = `
WITH v AS (
	SELECT * FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[], $6::timestamptz[],
		$7::text[], $8::text[], $9::text[], $10::text[], $11::text[], $12::timestamptz[],
		$13::uuid[], $14::text[], $15::text[], $16::timestamptz[])
	AS v(id, namespace, key, tool, effect, lease_until, reference, agent, run_id, fingerprint, params,
		created_at, entry_id, actor_name, payload, occurred_at)
), a AS (
	INSERT INTO actions (id, namespace, key, tool, effect, status, attempt, version, lease_until,
		reference, agent, run_id, fingerprint, params, result, external_ref, retriable, entry_seq,
		created_at, updated_at)
	SELECT id, namespace, key, tool, effect, 'in_progress', 1, 1, lease_until, reference, agent, run_id,
		fingerprint, params::jsonb, NULL, NULL, false, 1, created_at, created_at FROM v
	ON CONFLICT (namespace, key) DO NOTHING
	RETURNING id
), e AS (
	INSERT INTO entries (id, action_id, namespace, seq, type, actor_kind, actor_name, attempt, payload,
		occurred_at, recorded_at)
	SELECT v.entry_id, v.id, v.namespace, 1, 'intent', 'agent', v.actor_name, 1, v.payload::jsonb,
		v.occurred_at, v.created_at FROM v JOIN a ON a.id = v.id
)
SELECT id FROM a`

// insertIntents writes the first entries of new actions (changes made by
// firstEntry) together and reports which were written: on PostgreSQL in one
// statement, on SQLite in two (the actions, then the entries of those
// created). Of several changes for one key only the first is tried; the
// others, like those whose key already existed, come back unwritten.
func (l *Ledger) insertIntents(ctx context.Context, db dbtx, chs []*change) ([]bool, error) {
	order := firstPerKey(chs)
	var (
		written []bool
		err     error
	)
	if l.st.Dialect == Postgres {
		written, err = l.insertIntentsPostgres(ctx, db, chs, order)
	} else {
		written, err = l.insertIntentsSQLite(ctx, db, chs, order)
	}
	if err != nil {
		return nil, dbError("ledger: create actions", err)
	}
	return written, nil
}

// firstPerKey returns the indexes of the first change for each key, in
// (namespace, key) order, the order in which writers lock keys.
func firstPerKey(chs []*change) []int {
	order := make([]int, len(chs))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		x, y := chs[a].next, chs[b].next
		return cmp.Or(strings.Compare(x.Namespace, y.Namespace), strings.Compare(x.Key, y.Key))
	})
	return slices.CompactFunc(order, func(a, b int) bool {
		return chs[a].next.Namespace == chs[b].next.Namespace && chs[a].next.Key == chs[b].next.Key
	})
}

func (l *Ledger) insertIntentsPostgres(ctx context.Context, db dbtx, chs []*change, order []int) ([]bool, error) {
	n := len(order)
	var (
		ids, nss, keys, tools, effects = make([]string, 0, n), make([]string, 0, n), make([]string, 0, n), make([]string, 0, n), make([]string, 0, n)
		leases, created, occurred      = make([]*time.Time, 0, n), make([]time.Time, 0, n), make([]*time.Time, 0, n)
		refs, agents, runs             = make([]*string, 0, n), make([]*string, 0, n), make([]*string, 0, n)
		fps, params, entryIDs          = make([]string, 0, n), make([]string, 0, n), make([]string, 0, n)
		actors, payloads               = make([]string, 0, n), make([]string, 0, n)
		byID                           = make(map[string]int, n)
	)
	for _, i := range order {
		a, e := chs[i].next, &chs[i].entry
		byID[a.ID] = i
		ids, nss, keys, tools, effects = append(ids, a.ID), append(nss, a.Namespace), append(keys, a.Key),
			append(tools, a.Tool), append(effects, a.Effect)
		leases, refs, agents, runs = append(leases, a.LeaseUntil), append(refs, a.Reference), append(agents, a.Agent),
			append(runs, a.runID)
		fps, params, created = append(fps, a.fingerprint), append(params, string(a.Params)), append(created, a.CreatedAt)
		entryIDs, actors, payloads, occurred = append(entryIDs, e.ID), append(actors, e.Actor.Name),
			append(payloads, string(e.Payload)), append(occurred, e.OccurredAt)
	}
	// FlatArray spares pgx finding each slice's element type by reflection.
	type strs = pgtype.FlatArray[string]
	type opt = pgtype.FlatArray[*string]
	inserted, err := returnedIDs(db.QueryContext(ctx, pgInsertIntents, strs(ids), strs(nss), strs(keys), strs(tools),
		strs(effects), pgtype.FlatArray[*time.Time](leases), opt(refs), opt(agents), opt(runs), strs(fps),
		strs(params), pgtype.FlatArray[time.Time](created), strs(entryIDs), strs(actors), strs(payloads),
		pgtype.FlatArray[*time.Time](occurred)))
	if err != nil {
		return nil, err
	}
	return markWritten(inserted, byID, len(chs)), nil
}

// returnedIDs reads the single column of ids a statement returned.
func returnedIDs(rows *sql.Rows, err error) (map[string]bool, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	ids := map[string]bool{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids[id] = true
	}
	return ids, rows.Err()
}

// markWritten turns the ids a multi-row insert returned into a flag per
// change.
func markWritten(ids map[string]bool, byID map[string]int, n int) []bool {
	written := make([]bool, n)
	for id := range ids {
		written[byID[id]] = true
	}
	return written
}

// insertIntentsSQLite runs in a transaction on the writer connection, which
// no other writer can interleave with.
func (l *Ledger) insertIntentsSQLite(ctx context.Context, db dbtx, chs []*change, order []int) ([]bool, error) {
	const actionCols = 15
	var q strings.Builder
	q.WriteString(`INSERT INTO actions (id, namespace, key, tool, effect, status, attempt, version,
		lease_until, reference, agent, run_id, fingerprint, params, result, external_ref, retriable,
		entry_seq, created_at, updated_at) VALUES `)
	args := make([]any, 0, actionCols*len(order))
	byID := make(map[string]int, len(order))
	for k, i := range order {
		if k > 0 {
			q.WriteString(", ")
		}
		q.WriteString("(?, ?, ?, ?, ?, ?, ?, 1, ?, ?, ?, ?, ?, ?, NULL, NULL, false, 1, ?, ?)")
		n := chs[i].next
		byID[n.ID] = i
		args = append(args, n.ID, n.Namespace, n.Key, n.Tool, n.Effect, n.Status, n.Attempt, n.LeaseUntil,
			n.Reference, n.Agent, n.runID, n.fingerprint, l.jsonArg(n.Params), n.CreatedAt, n.CreatedAt)
	}
	q.WriteString(" ON CONFLICT (namespace, key) DO NOTHING RETURNING id")
	inserted, err := returnedIDs(db.QueryContext(ctx, q.String(), args...))
	if err != nil {
		return nil, err
	}
	written := markWritten(inserted, byID, len(chs))
	q.Reset()
	q.WriteString(`INSERT INTO entries (id, action_id, namespace, seq, type, actor_kind, actor_name,
		attempt, payload, occurred_at, recorded_at) VALUES `)
	args = args[:0]
	for _, i := range order {
		if !written[i] {
			continue
		}
		if len(args) > 0 {
			q.WriteString(", ")
		}
		q.WriteString("(?, ?, ?, 1, ?, ?, ?, ?, ?, ?, ?)")
		args = append(args, l.entryArgs(chs[i], chs[i].next.ID, chs[i].next.Namespace)...)
	}
	if len(args) > 0 {
		if _, err := db.ExecContext(ctx, q.String(), args...); err != nil {
			return nil, err
		}
	}
	return written, nil
}
