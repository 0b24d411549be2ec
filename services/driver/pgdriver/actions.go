package pgdriver

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

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
)

func (e *executor) ActionGetByID(ctx context.Context, id string) (*record.Action, error) {
	return driver.OneAction(driver.ScanAction(e.q.QueryRowContext(ctx, `SELECT `+actionColumns+` FROM actions WHERE id = $1`, id)))
}

func (e *executor) ActionGetByKey(ctx context.Context, namespace, key string) (*record.Action, error) {
	return driver.OneAction(driver.ScanAction(e.q.QueryRowContext(ctx,
		`SELECT `+actionColumns+` FROM actions WHERE namespace = $1 AND key = $2`, namespace, key)))
}

func (e *executor) ActionList(ctx context.Context, p *driver.ActionListParams) ([]*record.Action, error) {
	var where []string
	var args []any
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, strings.ReplaceAll(cond, "?", fmt.Sprintf("$%d", len(args))))
	}
	if p.Namespace != "" {
		add("namespace = ?", p.Namespace)
	}
	if len(p.Namespaces) > 0 {
		ph := make([]string, len(p.Namespaces))
		for i, ns := range p.Namespaces {
			args = append(args, ns)
			ph[i] = fmt.Sprintf("$%d", len(args))
		}
		where = append(where, "namespace IN ("+strings.Join(ph, ", ")+")")
	}
	switch {
	case len(p.Statuses) > 0 && !slices.ContainsFunc(p.Statuses, func(s record.Status) bool { return !s.Valid() }):
		// Spelled as literals, so the plan is made for these statuses: as a
		// parameter, a prepared statement's generic plan reads the newest
		// actions by id and filters them, which for a rare status (one in a
		// thousand or fewer) reads tens of thousands of rows, or all of
		// them, instead of the status index.
		where = append(where, "status IN ("+driver.LiteralList(p.Statuses)+")")
	case len(p.Statuses) > 0:
		ph := make([]string, len(p.Statuses))
		for i, s := range p.Statuses {
			args = append(args, string(s))
			ph[i] = fmt.Sprintf("$%d", len(args))
		}
		where = append(where, "status IN ("+strings.Join(ph, ", ")+")")
	}
	for _, f := range [...]struct{ column, v string }{{"tool", p.Tool}, {"agent", p.Agent}} {
		switch {
		case driver.IsPattern(f.v):
			add(f.column+` LIKE ? ESCAPE '\'`, driver.LikePattern(f.v))
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
	// In the "C" collation, as the indexes of migration 00023 are: there a
	// prefix is a range of the index.
	if prefix, ok := driver.SearchPrefix(p.Search); ok {
		args = append(args, prefix, driver.PrefixEnd(prefix))
		lo, hi := len(args)-1, len(args)
		where = append(where, fmt.Sprintf(`((key COLLATE "C" >= $%d AND key COLLATE "C" < $%d) OR (reference COLLATE "C" >= $%d AND reference COLLATE "C" < $%d))`, lo, hi, lo, hi))
	} else if p.Search != "" {
		add(`(key COLLATE "C" = ? OR reference COLLATE "C" = ?)`, p.Search)
	}
	if len(p.IDs) > 0 {
		ph := make([]string, len(p.IDs))
		for i, id := range p.IDs {
			args = append(args, id)
			ph[i] = fmt.Sprintf("$%d", len(args))
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
	rows, err := e.q.QueryContext(ctx, q, args...)
	return driver.ScanActionsUpTo(rows, err, p.MaxBytes)
}

// outbox ends a statement whose CTE src returns changed actions (id,
// namespace, entry_seq, recorded_at, and alerts: a JSON array of {id, type,
// payload} as text): it writes each alert as a message, with the entry's
// seq filled in, and one delivery per enabled endpoint that subscribes to
// the event type and the namespace. A message no endpoint subscribes to is
// not written: messages are only ever read through their deliveries.
func outbox(src string) string {
	return `m AS (
	INSERT INTO webhook_messages (id, event_type, namespace, action_id, payload, created_at)
	SELECT ev.id, ev.type, a.namespace, a.id, jsonb_set(ev.payload, '{data,entry,seq}', to_jsonb(a.entry_seq)),
		a.recorded_at
	FROM ` + src + ` a, jsonb_to_recordset(a.alerts::jsonb) AS ev(id uuid, type text, payload jsonb)
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
}

// insertRows is the rows of ActionInsertMany as arrays, in (namespace, key)
// order, so concurrent statements meet shared keys in the same order.
const insertRows = `v AS (
	SELECT * FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::int[],
		$8::timestamptz[], $9::timestamptz[], $10::text[], $11::text[], $12::text[], $13::text[], $14::text[],
		$15::text[], $16::text[], $17::bool[], $18::timestamptz[],
		$19::uuid[], $20::text[], $21::text[], $22::text[], $23::int[], $24::text[], $25::timestamptz[], $26::text[],
		$27::text[], $28::text[], $29::text[])
	AS v(id, namespace, key, tool, effect, status, attempt, lease_until, deadline, reference, agent, run_id,
		fingerprint, params, result, external_ref, retriable, created_at,
		entry_id, entry_type, actor_kind, actor_name, entry_attempt, payload, occurred_at, alerts, approval,
		reconciliation, limits)
), a AS (
	INSERT INTO actions (` + actionColumns + `)
	SELECT id, namespace, key, tool, effect, status, attempt, 1, lease_until, deadline, reference, agent, run_id,
		fingerprint, params::jsonb, result::jsonb, external_ref, retriable, 1, created_at, created_at, approval::jsonb,
		reconciliation::jsonb, limits::jsonb
	FROM v
	ON CONFLICT (namespace, key) DO NOTHING
	RETURNING id, namespace
), e AS (
	INSERT INTO entries (` + entryColumns + `)
	SELECT v.entry_id, v.id, v.namespace, 1, v.entry_type, v.actor_kind, v.actor_name, v.entry_attempt,
		v.payload::jsonb, v.occurred_at, v.created_at FROM v JOIN a ON a.id = v.id
)`

// insertMany creates actions with their first entries in one statement. A
// key that already exists is left alone (ON CONFLICT DO NOTHING) and its id
// is not returned.
const insertMany = `WITH ` + insertRows + `
SELECT id FROM a`

// insertManyCharged is insertMany, with its alerts or not, that also
// writes the new actions' limit charges (chargedRows); gated, it writes
// only if the groups are as judged (LimitUseKept).
func insertManyCharged(alerted, gate bool) string {
	return insertManyChargedSQL[b2i(alerted)][b2i(gate)]
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

var insertManyChargedSQL = func() (q [2][2]string) {
	q[0][0] = `WITH ` + insertRows + chargedRows + chargedResult
	q[1][0] = `WITH ` + insertRows + chargedRows + `, alerted AS (
	SELECT a.id, a.namespace, 1 AS entry_seq, v.created_at AS recorded_at, v.alerts
	FROM a JOIN v ON v.id = a.id WHERE v.alerts IS NOT NULL
), ` + outbox("alerted") + chargedResult
	q[0][1], q[1][1] = gated(q[0][0]), gated(q[1][0])
	return q
}()

// charged reports whether a change among chs has limit charges.
func charged(chs []*driver.Change) bool {
	for _, ch := range chs {
		if len(ch.Charges) > 0 {
			return true
		}
	}
	return false
}

// insertManyWithAlerts is insertMany that also writes the alerts.
var insertManyWithAlerts = `WITH ` + insertRows + `, alerted AS (
	SELECT a.id, a.namespace, 1 AS entry_seq, v.created_at AS recorded_at, v.alerts
	FROM a JOIN v ON v.id = a.id WHERE v.alerts IS NOT NULL
), ` + outbox("alerted") + `
SELECT id FROM a`

// FlatArray spares pgx finding each slice's element type by reflection.
type (
	strs     = pgtype.FlatArray[string]
	opts     = pgtype.FlatArray[*string]
	ints     = pgtype.FlatArray[int]
	oints    = pgtype.FlatArray[*int]
	times    = pgtype.FlatArray[time.Time]
	otime    = pgtype.FlatArray[*time.Time]
	bools    = pgtype.FlatArray[bool]
	pgFloats = pgtype.FlatArray[float64]
	int64s   = pgtype.FlatArray[int64]
)

func (e *executor) ActionInsertMany(ctx context.Context, chs []*driver.Change) ([]bool, error) {
	order := driver.FirstPerKey(chs)
	n := len(order)
	var (
		ids, nss, keys, tools, effects, statuses = make(strs, 0, n), make(strs, 0, n), make(strs, 0, n), make(strs, 0, n), make(strs, 0, n), make(strs, 0, n)
		attempts, entryAttempts                  = make(ints, 0, n), make(oints, 0, n)
		leases, deadlines, occurred              = make(otime, 0, n), make(otime, 0, n), make(otime, 0, n)
		refs, agents, runs, results, extRefs     = make(opts, 0, n), make(opts, 0, n), make(opts, 0, n), make(opts, 0, n), make(opts, 0, n)
		fps, params, entryIDs, types, kinds      = make(strs, 0, n), make(strs, 0, n), make(strs, 0, n), make(strs, 0, n), make(strs, 0, n)
		actors, payloads                         = make(strs, 0, n), make(strs, 0, n)
		alerts, approvals, recons, limits        = make(opts, 0, n), make(opts, 0, n), make(opts, 0, n), make(opts, 0, n)
		retriable                                = make(bools, 0, n)
		created                                  = make(times, 0, n)
		byID                                     = make(map[string]int, n)
		alerted                                  bool
	)
	for _, i := range order {
		a, en := chs[i].Next, &chs[i].Entry
		byID[a.ID] = i
		ids, nss, keys, tools = append(ids, a.ID), append(nss, a.Namespace), append(keys, a.Key), append(tools, a.Tool)
		effects, statuses, attempts = append(effects, string(a.Effect)), append(statuses, string(a.Status)), append(attempts, a.Attempt)
		leases, deadlines = append(leases, a.LeaseUntil), append(deadlines, a.Deadline)
		refs, agents, runs = append(refs, a.Reference), append(agents, a.Agent), append(runs, a.RunID)
		fps, params, results = append(fps, a.Fingerprint), append(params, string(a.Params)), append(results, driver.JSONText(a.Result))
		extRefs, retriable, created = append(extRefs, a.ExternalRef), append(retriable, a.Retriable), append(created, a.CreatedAt)
		entryIDs, types, kinds, actors = append(entryIDs, en.ID), append(types, string(en.Type)), append(kinds, string(en.Actor.Kind)),
			append(actors, en.Actor.Name)
		entryAttempts, payloads, occurred = append(entryAttempts, en.Attempt), append(payloads, string(en.Payload)), append(occurred, en.OccurredAt)
		alerts, approvals = append(alerts, alertsJSON(chs[i].Alerts)), append(approvals, driver.JSONText(a.Approval.MarshalStored()))
		recons, limits = append(recons, driver.JSONText(a.Reconciliation.MarshalStored())), append(limits, driver.JSONText(record.MarshalLimits(a.Limits)))
		alerted = alerted || len(chs[i].Alerts) > 0
	}
	q := insertMany
	if alerted {
		q = insertManyWithAlerts
	}
	args := []any{ids, nss, keys, tools, effects, statuses, attempts,
		leases, deadlines, refs, agents, runs, fps, params, results, extRefs, retriable, created,
		entryIDs, types, kinds, actors, entryAttempts, payloads, occurred, alerts, approvals, recons, limits}
	var inserted map[string]bool
	var err error
	if charged(chs) {
		inserted, err = e.insertCharged(ctx, insertManyCharged(alerted, !e.inTx), args, chs)
	} else {
		inserted, err = returnedIDs(e.q.QueryContext(ctx, q, args...))
	}
	if errors.Is(err, driver.ErrKeptStale) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("pgdriver: create actions: %w", err)
	}
	written := make([]bool, len(chs))
	for id := range inserted {
		i := byID[id]
		written[i] = true
		chs[i].Entry.Seq, chs[i].Next.EntrySeq = 1, 1
	}
	return written, nil
}

// alertsJSON is the JSON array of a change's alerts that the outbox reads
// with jsonb_to_recordset; the payloads are already JSON.
func alertsJSON(alerts []driver.Alert) *string {
	if len(alerts) == 0 {
		return nil
	}
	var b strings.Builder
	b.WriteByte('[')
	for i, m := range alerts {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"id":%q,"type":%q,"payload":`, m.ID, m.Type)
		b.Write(m.Body())
		b.WriteByte('}')
	}
	b.WriteByte(']')
	s := b.String()
	return &s
}

// updateMany writes changes to many actions in one statement: the new
// states and the entries come in as parallel arrays sorted by id, each
// action's alerts as one JSON array. Only a row that still has the version
// read is updated: one that another writer changed meanwhile drops out,
// with its entry and alerts. The update returns what the inserts need, so
// nothing is joined again.
//
// The conditions are written "x = ANY(ARRAY[y])", not "x = y", so that they
// are not join clauses the planner can hash or merge: it then has to walk
// the arrays and find each row by primary key, in the arrays' order. With
// plain equalities it hashes the arrays and scans every action whenever its
// estimates make that look cheaper (a few hundred ids, fewer than a few
// hundred thousand actions, or no statistics yet), which is slower at any
// size and locks rows in no particular order. In the arrays' order, two sets
// that share actions lock them in the same order and wait for each other
// instead of deadlocking.
var updateMany = updateManySQL(false)

// updateManyNoOutbox is updateMany for a set whose alerts were not built,
// because the last statement to look found no enabled endpoint. It writes
// only while that still holds: if an endpoint is enabled now, it writes
// nothing and returns a row of NULLs, and the set is written again with
// its alerts. The condition and that row read one snapshot, the
// statement's, so no alert an endpoint should get is skipped.
var updateManyNoOutbox = updateManySQL(true)

const anyEndpoint = `EXISTS (SELECT 1 FROM webhook_endpoints WHERE enabled)`

// updateManySQL writes updateMany, or updateManyNoOutbox. updateMany
// returns a row of NULLs when no endpoint is enabled, so that the next set
// need not build its alerts.
func updateManySQL(noOutbox bool) string {
	cond, tail := "", `
UNION ALL SELECT NULL, NULL WHERE NOT `+anyEndpoint
	if noOutbox {
		cond, tail = ` AND NOT `+anyEndpoint, `
UNION ALL SELECT NULL, NULL WHERE `+anyEndpoint
	}
	q := `
WITH a AS (
	UPDATE actions a SET status = v.status, attempt = v.attempt, version = v.new_version,
		lease_until = v.lease_until, deadline = v.deadline, result = v.result::jsonb, external_ref = v.external_ref,
		retriable = v.retriable, updated_at = v.updated_at, approval = v.approval::jsonb,
		reconciliation = v.reconciliation::jsonb, entry_seq = a.entry_seq + 1
	FROM unnest($1::text[], $2::int[], $3::text[], $4::int[], $5::int[], $6::timestamptz[], $7::timestamptz[],
		$8::text[], $9::text[], $10::bool[], $11::timestamptz[], $12::text[], $13::text[], $14::text[], $15::text[],
		$16::int[], $17::text[], $18::timestamptz[], $19::timestamptz[], $20::text[], $21::text[], $22::text[])
		AS v(id, version, status, attempt, new_version, lease_until, deadline, result, external_ref, retriable,
			updated_at, entry_id, entry_type, actor_kind, actor_name, entry_attempt, payload, occurred_at,
			recorded_at, alerts, approval, reconciliation)
	WHERE a.id = ANY(ARRAY[v.id::uuid]) AND a.version = ANY(ARRAY[v.version])` + cond + `
	RETURNING a.id, a.namespace, a.entry_seq, v.entry_id, v.entry_type, v.actor_kind, v.actor_name,
		v.entry_attempt, v.payload, v.occurred_at, v.recorded_at, v.alerts
), e AS (
	INSERT INTO entries (` + entryColumns + `)
	SELECT a.entry_id::uuid, a.id, a.namespace, a.entry_seq, a.entry_type, a.actor_kind, a.actor_name,
		a.entry_attempt, a.payload::jsonb, a.occurred_at, a.recorded_at
	FROM a
)`
	if !noOutbox {
		q += `, ` + outbox("a")
	}
	return q + `
SELECT id::text, entry_seq FROM a` + tail
}

// ActionUpdateMany runs updateMany. Standing alone, a deadlock with a
// writer that locks rows in another order (a batch of entries in one
// transaction) aborts the whole statement, which is then run again as it
// was: it is conditional throughout.
//
// While the last set written found no enabled endpoint, a set is written
// first without its alerts (updateManyNoOutbox), whose bodies are then
// never built; if an endpoint is enabled by then, it is written again with
// them.
func (e *executor) ActionUpdateMany(ctx context.Context, chs []*driver.Change) ([]bool, error) {
	k := len(chs)
	var (
		ids, statuses, entryIDs, entryTypes, kinds, actors, payloads = make(strs, k), make(strs, k), make(strs, k),
			make(strs, k), make(strs, k), make(strs, k), make(strs, k)
		versions, attempts, newVersions = make(ints, k), make(ints, k), make(ints, k)
		leases, deadlines, occurred     = make(otime, k), make(otime, k), make(otime, k)
		results, externalRefs, alerts   = make(opts, k), make(opts, k), make(opts, k)
		approvals, recons               = make(opts, k), make(opts, k)
		retriable                       = make(bools, k)
		updatedAt, recordedAt           = make(times, k), make(times, k)
		entryAttempts                   = make(oints, k)
		byID                            = make(map[string]int, k)
		alerted                         bool
	)
	// Every set locks its rows in id order.
	order := make([]int, k)
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(x, y int) int { return strings.Compare(chs[x].Prev.ID, chs[y].Prev.ID) })
	for j, i := range order {
		ch := chs[i]
		n, en := ch.Next, &ch.Entry
		byID[n.ID] = i
		ids[j], versions[j], statuses[j], attempts[j], newVersions[j] = n.ID, ch.Prev.Version, string(n.Status), n.Attempt, n.Version
		leases[j], deadlines[j], results[j], externalRefs[j] = n.LeaseUntil, n.Deadline, driver.JSONText(n.Result), n.ExternalRef
		retriable[j], updatedAt[j] = n.Retriable, n.UpdatedAt
		entryIDs[j], entryTypes[j], kinds[j], actors[j] = en.ID, string(en.Type), string(en.Actor.Kind), en.Actor.Name
		entryAttempts[j], payloads[j], occurred[j], recordedAt[j] = en.Attempt, string(en.Payload), en.OccurredAt, en.RecordedAt
		approvals[j] = driver.JSONText(n.Approval.MarshalStored())
		recons[j] = driver.JSONText(n.Reconciliation.MarshalStored())
		alerted = alerted || len(ch.Alerts) > 0
	}
	withAlerts := func() {
		for j, i := range order {
			alerts[j] = alertsJSON(chs[i].Alerts)
		}
	}
	noOutbox := alerted && e.noEndpoint.Load()
	q := updateMany
	if noOutbox {
		q = updateManyNoOutbox
	} else {
		withAlerts()
	}
	args := []any{ids, versions, statuses, attempts, newVersions, leases, deadlines, results, externalRefs, retriable,
		updatedAt, entryIDs, entryTypes, kinds, actors, entryAttempts, payloads, occurred, recordedAt, alerts, approvals, recons}
	for try := 1; ; try++ {
		seqs, marked, err := returnedSeqs(e.q.QueryContext(ctx, q, args...))
		if !e.inTx && ClassifyError(err) == driver.ErrorDeadlock && try < 5 && ctx.Err() == nil {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("pgdriver: update actions: %w", err)
		}
		// updateMany marks that no endpoint is enabled; updateManyNoOutbox
		// that one is, and that it wrote nothing.
		e.noEndpoint.Store(marked != noOutbox)
		if noOutbox && marked {
			noOutbox, q = false, updateMany
			withAlerts()
			try = 0
			continue
		}
		written := make([]bool, k)
		for id, seq := range seqs {
			i := byID[id]
			written[i] = true
			chs[i].Entry.Seq, chs[i].Next.EntrySeq = seq, seq
		}
		return written, nil
	}
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

// returnedSeqs reads (id, entry_seq) rows, and whether a row of NULLs was
// among them.
func returnedSeqs(rows *sql.Rows, err error) (map[string]int, bool, error) {
	if err != nil {
		return nil, false, err
	}
	defer rows.Close()
	seqs := map[string]int{}
	marked := false
	for rows.Next() {
		var id *string
		var seq *int
		if err := rows.Scan(&id, &seq); err != nil {
			return nil, false, err
		}
		if id == nil {
			marked = true
			continue
		}
		seqs[*id] = *seq
	}
	return seqs, marked, rows.Err()
}

// ActionDueList reads the partial index on (deadline, id): a batch after
// another is one range of it, the row comparison being its condition.
func (e *executor) ActionDueList(ctx context.Context, p *driver.ActionDueListParams) ([]*record.Action, error) {
	q := `SELECT ` + actionColumns + ` FROM actions WHERE deadline <= $1`
	args := []any{p.Now}
	if p.After != nil && p.After.Deadline != nil {
		q += ` AND (deadline, id) > ($2, $3::uuid)`
		args = append(args, *p.After.Deadline, p.After.ID)
	}
	q += fmt.Sprintf(` ORDER BY deadline, id LIMIT %d`, p.Limit)
	return driver.ScanActions(e.q.QueryContext(ctx, q, args...))
}

// ActionLeftStatus reads the ids given as one array: a statement per call,
// whatever the number of ids.
func (e *executor) ActionLeftStatus(ctx context.Context, ids []string, status record.Status) ([]string, error) {
	rows, err := e.q.QueryContext(ctx, `SELECT w.id FROM unnest($1::text[]) AS w(id)
		WHERE NOT EXISTS (SELECT 1 FROM actions a WHERE a.id = w.id::uuid AND a.status = $2)`, strs(ids), string(status))
	return driver.ScanIDs(rows, err)
}

func (e *executor) ActionCountByStatus(ctx context.Context) (map[record.Status]int64, error) {
	rows, err := e.q.QueryContext(ctx, `SELECT status, count(*) FROM actions GROUP BY status`)
	return driver.CountRows[record.Status](rows, err)
}

// ActionPrune deletes one batch, oldest first, with the entries of its
// actions (their evidence log leaves stay, marked pruned) in one statement rather than through the foreign key's cascade,
// one action at a time. The batch is locked (FOR UPDATE) as it is chosen, so
// an action a decision moved out of a terminal status meanwhile is not in
// it, and none leaves the batch before the delete. It starts at p.After
// and sets p.After to the newest updated_at it deleted: with autovacuum
// behind, the index still lists the batches already deleted, and a scan
// from the start would read them all again on every batch.
func (e *executor) ActionPrune(ctx context.Context, p *driver.PruneParams) (int64, error) {
	var after any
	if !p.After.IsZero() {
		after = p.After.UTC()
	}
	var n int64
	var last *time.Time
	err := e.q.QueryRowContext(ctx, fmt.Sprintf(`WITH batch AS (SELECT id, updated_at FROM actions
		WHERE status IN (%s) AND updated_at < $1 AND updated_at >= COALESCE($2::timestamptz, '-infinity')
		ORDER BY updated_at LIMIT %d FOR UPDATE),
	gone_entries AS (DELETE FROM entries WHERE action_id = ANY (ARRAY(SELECT id FROM batch)) RETURNING id),
	kept_leaves AS (UPDATE log_leaves SET pruned = true WHERE entry_id IN (SELECT id FROM gone_entries)),
	gone AS (DELETE FROM actions WHERE id = ANY (ARRAY(SELECT id FROM batch)) RETURNING updated_at)
	SELECT count(*), max(updated_at) FROM gone`, driver.LiteralList(p.Statuses), p.Limit),
		p.Before.UTC(), after).Scan(&n, &last)
	if err != nil {
		return 0, err
	}
	if last != nil {
		p.After = *last
	}
	return n, nil
}

func (e *executor) EntryList(ctx context.Context, p *driver.EntryListParams) ([]*record.Entry, error) {
	q := `SELECT id, seq, type, actor_kind, actor_name, attempt, payload, occurred_at, recorded_at,
		(SELECT log_index FROM log_leaves l WHERE l.entry_id = entries.id)
		FROM entries WHERE action_id = $1`
	args := []any{p.ActionID}
	if p.AfterSeq > 0 {
		args = append(args, p.AfterSeq)
		q += ` AND seq > ` + fmt.Sprintf("$%d", len(args))
	}
	if p.BeforeSeq > 0 {
		args = append(args, p.BeforeSeq)
		q += ` AND seq < ` + fmt.Sprintf("$%d", len(args))
	}
	if p.Newest {
		q += ` ORDER BY seq DESC`
	} else {
		q += ` ORDER BY seq`
	}
	if p.Limit > 0 {
		q += fmt.Sprintf(` LIMIT %d`, p.Limit)
	}
	rows, err := e.q.QueryContext(ctx, q, args...)
	return driver.ScanEntriesUpTo(rows, err, p.MaxBytes)
}

func (e *executor) EntryOutcomeExists(ctx context.Context, p *driver.EntryOutcomeExistsParams) (bool, error) {
	var found bool
	err := e.q.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM entries WHERE action_id = $1 AND attempt = $2
		AND (type = $3 OR (type = 'late_result' AND payload->>'type' = $3)))`,
		p.ActionID, p.Attempt, string(p.Type)).Scan(&found)
	return found, err
}

func (e *executor) EntryCountByType(ctx context.Context, typ record.EntryType) (int, error) {
	var n int
	err := e.q.QueryRowContext(ctx, `SELECT count(*) FROM entries WHERE type = $1`, string(typ)).Scan(&n)
	return n, err
}
