package pgdriver

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/arbiter-ledger/arbiter/services/driver"
)

// A group of new intents charged to limit groups this process has read or
// written before is judged from memory (LimitUseKept) and written in one
// autocommitted statement instead of a transaction of four round trips.
// It judges only while no counting charge of a group can have left the
// window (GroupState.Next). The statement first locks the groups' rows, in
// the order LimitUse takes their locks (migration 00020), and writes the
// actions, their charges and the groups' new use only if every row is
// still the version judged against (gate). Another
// replica's charge, a charge that started or stopped counting, a row this
// process never saw: the statement writes nothing, ActionInsertMany fails
// with ErrKeptStale, and the ledger judges the intents again under the
// groups' locks, which keeps the rows it then writes here again.

// keptMax bounds the rows kept: beyond it, any one is forgotten for each
// new one (a group forgotten is judged under its lock next time).
const keptMax = 1 << 16

// keptGroups is each group's row as this process last read or wrote it.
type keptGroups struct {
	mu sync.Mutex
	m  map[driver.GroupKey]driver.GroupState
}

// keptRow is a group's row as a statement left it.
type keptRow struct {
	key driver.GroupKey
	st  driver.GroupState
}

func (k *keptGroups) put(rows []keptRow) {
	if len(rows) == 0 {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.m == nil {
		k.m = make(map[driver.GroupKey]driver.GroupState)
	}
	for _, r := range rows {
		if _, ok := k.m[r.key]; !ok && len(k.m) >= keptMax {
			for old := range k.m {
				delete(k.m, old)
				break
			}
		}
		k.m[r.key] = r.st
	}
}

func (k *keptGroups) drop(keys []driver.GroupKey) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, key := range keys {
		delete(k.m, key)
	}
}

// LimitUseKept answers from the kept rows (see above). Call it on an
// executor of its own (Driver.Executor), not in a transaction.
func (e *executor) LimitUseKept(ps []driver.LimitUseParams) ([]float64, bool) {
	if e.inTx || e.groups == nil {
		return nil, false
	}
	used := make([]float64, len(ps))
	judged := make(map[driver.GroupKey]driver.GroupState, len(ps))
	e.groups.mu.Lock()
	defer e.groups.mu.Unlock()
	for i, p := range ps {
		k := driver.GroupKey{LimitID: p.LimitID, Group: p.Group}
		st, ok := e.groups.m[k]
		// A row kept for another window, or not read for a whole window,
		// is summed again under the lock (driver.KeptUse); one whose
		// earliest counting charge may have left the window is read again
		// under it.
		if !ok || st.Window != p.Window || st.AgedTo.Before(p.Since.Add(-p.Window)) ||
			(!st.Next.IsZero() && !p.Since.Before(st.Next)) {
			return nil, false
		}
		used[i], judged[k] = max(0, st.Used), st
	}
	e.judged = judged
	return used, true
}

// insertCharged runs a charged insert (q with args, then chargedRows'
// arguments) and reads what it returns: the actions inserted, each group's
// row as written, and whether the gate refused.
func (e *executor) insertCharged(ctx context.Context, q string, args []any, chs []*driver.Change) (map[string]bool, error) {
	groups := e.kept
	if !e.inTx {
		if e.judged == nil {
			return nil, fmt.Errorf("pgdriver: charges outside a transaction without LimitUseKept")
		}
		groups, e.judged = e.judged, nil
	}
	defer clear(e.kept) // written now, or left to the next read
	keys, more, err := chargeArgs(chs, groups, !e.inTx)
	if err != nil {
		return nil, err
	}
	rows, err := e.q.QueryContext(ctx, q, append(args, more...)...)
	if err != nil {
		return nil, err
	}
	inserted, wrote, stale, err := readCharged(rows, groups)
	if err != nil {
		return nil, err
	}
	nextCharges(wrote, chs, inserted)
	switch {
	case stale:
		e.groups.drop(keys)
		return nil, driver.ErrKeptStale
	case e.inTx:
		e.written = append(e.written, wrote...)
	default:
		e.groups.put(wrote)
	}
	return inserted, nil
}

func readCharged(rows *sql.Rows, groups map[driver.GroupKey]driver.GroupState) (map[string]bool, []keptRow, bool, error) {
	defer rows.Close()
	inserted := map[string]bool{}
	var wrote []keptRow
	stale := false
	for rows.Next() {
		var kind string
		var id, group sql.NullString
		var used sql.NullFloat64
		var version sql.NullInt64
		if err := rows.Scan(&kind, &id, &group, &used, &version); err != nil {
			return nil, nil, false, err
		}
		switch kind {
		case "action":
			inserted[id.String] = true
		case "group":
			k := driver.GroupKey{LimitID: id.String, Group: group.String}
			st := groups[k]
			st.Found, st.Used, st.Left, st.Version = true, used.Float64, 0, version.Int64
			wrote = append(wrote, keptRow{k, st})
		case "stale":
			stale = true
		}
	}
	return inserted, wrote, stale, rows.Err()
}

// nextCharges moves each written group's Next to the earliest counting
// charge written, if it has none.
func nextCharges(wrote []keptRow, chs []*driver.Change, inserted map[string]bool) {
	index := make(map[driver.GroupKey]int, len(wrote))
	for i, r := range wrote {
		index[r.key] = i
	}
	for _, ch := range chs {
		for _, c := range ch.Charges {
			i, ok := index[driver.GroupKey{LimitID: c.LimitID, Group: c.Group}]
			if !ok || !c.Counts || !inserted[c.ActionID] {
				continue
			}
			if st := &wrote[i].st; st.Next.IsZero() || c.ChargedAt.Before(st.Next) {
				st.Next = c.ChargedAt.UTC()
			}
		}
	}
}

// chargeArgs are chargedRows' arguments: chs' charges and the groups'
// rows, in the order of their locks; versioned, also their versions and
// number for the gate.
func chargeArgs(chs []*driver.Change, groups map[driver.GroupKey]driver.GroupState, versioned bool) ([]driver.GroupKey, []any, error) {
	var (
		ids, grps, actions = strs{}, strs{}, strs{}
		amounts, at        = pgFloats{}, times{}
		held, counts       = bools{}, bools{}
	)
	for _, ch := range chs {
		for _, c := range ch.Charges {
			if _, ok := groups[driver.GroupKey{LimitID: c.LimitID, Group: c.Group}]; !ok {
				return nil, nil, fmt.Errorf("pgdriver: charge to limit %s group %q without reading its use first", c.LimitID, c.Group)
			}
			ids, grps, actions = append(ids, c.LimitID), append(grps, c.Group), append(actions, c.ActionID)
			amounts, at = append(amounts, c.Amount), append(at, c.ChargedAt.UTC())
			held, counts = append(held, c.Held), append(counts, c.Counts)
		}
	}
	keys := make([]driver.GroupKey, 0, len(groups))
	for k := range groups {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b driver.GroupKey) int {
		return cmp.Or(cmp.Compare(driver.GroupLock(a.LimitID, a.Group), driver.GroupLock(b.LimitID, b.Group)),
			cmp.Compare(a.LimitID, b.LimitID), cmp.Compare(a.Group, b.Group))
	})
	gids, ggroups := make(strs, len(keys)), make(strs, len(keys))
	used, aged, windows := make(pgFloats, len(keys)), make(times, len(keys)), make(ints, len(keys))
	for i, k := range keys {
		st := groups[k]
		gids[i], ggroups[i] = k.LimitID, k.Group
		used[i], aged[i], windows[i] = st.Used, st.AgedTo.UTC(), int(st.Window/time.Second)
	}
	args := []any{ids, grps, actions, amounts, at, held, counts, gids, ggroups, used, aged, windows}
	if versioned {
		versions := make(int64s, len(keys))
		for i, k := range keys {
			versions[i] = groups[k].Version
		}
		args = append(args, versions, len(keys))
	}
	return keys, args, nil
}

// chargedRows writes the charges of the actions insertRows inserted, and
// the groups' rows LimitUse read with what the counting ones add ($30 on),
// returning each row as written.
const chargedRows = `, ch AS (
	INSERT INTO limit_charges (limit_id, group_key, action_id, amount, charged_at, held)
	SELECT x.limit_id, x.grp, x.action_id, x.amount, x.charged_at, x.held
	FROM unnest($30::uuid[], $31::text[], $32::uuid[], $33::float8[], $34::timestamptz[], $35::bool[])
		AS x(limit_id, grp, action_id, amount, charged_at, held)
	WHERE x.action_id IN (SELECT id FROM a)
), lg AS (
	INSERT INTO limit_groups (limit_id, group_key, used, aged_to, window_seconds)
	SELECT k.limit_id, k.grp, k.used + coalesce((SELECT sum(x.amount)
			FROM unnest($30::uuid[], $31::text[], $32::uuid[], $33::float8[], $36::bool[]) AS x(limit_id, grp, action_id, amount, counts)
			WHERE x.limit_id = k.limit_id AND x.grp = k.grp AND x.counts AND x.action_id IN (SELECT id FROM a)), 0),
		k.aged_to, k.window_seconds
	FROM unnest($37::uuid[], $38::text[], $39::float8[], $40::timestamptz[], $41::int[]) AS k(limit_id, grp, used, aged_to, window_seconds)
	ON CONFLICT (limit_id, group_key) DO UPDATE
	SET used = excluded.used, aged_to = excluded.aged_to, window_seconds = excluded.window_seconds
	RETURNING limit_id, group_key, used, version
)`

// gate locks the judged groups' rows in their order ($37 on, with each
// row's version $42 and their number $43) and is true only if each is
// still the version judged against. Under READ COMMITTED a row another
// transaction changed meanwhile is locked as it is now and checked again,
// so a changed row fails it. The join is written "= ANY(ARRAY[…])" so that
// the planner finds each row by its key rather than hashing the table (as
// updateMany does).
const gate = `gate AS (
	SELECT count(*) = $43 AS ok FROM (
		SELECT 1 FROM unnest($37::uuid[], $38::text[], $42::bigint[]) WITH ORDINALITY AS k(limit_id, grp, version, i)
		JOIN limit_groups g ON g.limit_id = ANY(ARRAY[k.limit_id]) AND g.group_key = ANY(ARRAY[k.grp])
		WHERE g.version = k.version
		ORDER BY k.i
		FOR UPDATE OF g
	) locked
), `

// chargedResult is what a charged insert returns: the actions inserted
// and the groups' rows written.
const chargedResult = `
SELECT 'action', id::text, NULL::text, NULL::float8, NULL::bigint FROM a
UNION ALL SELECT 'group', limit_id::text, group_key, used, version FROM lg`

// gated makes a charged insert write only if the gate holds, and say so.
func gated(q string) string {
	for _, r := range [...][2]string{
		{"WITH v AS (", "WITH " + gate + "v AS ("},
		{"\n\tFROM v\n\tON CONFLICT (namespace, key) DO NOTHING", "\n\tFROM v WHERE (SELECT ok FROM gate)\n\tON CONFLICT (namespace, key) DO NOTHING"},
		{"AS k(limit_id, grp, used, aged_to, window_seconds)\n\tON CONFLICT", "AS k(limit_id, grp, used, aged_to, window_seconds)\n\tWHERE (SELECT ok FROM gate)\n\tON CONFLICT"},
	} {
		if strings.Count(q, r[0]) != 1 {
			panic("pgdriver: gated: the charged insert changed shape: " + r[0])
		}
		q = strings.Replace(q, r[0], r[1], 1)
	}
	return q + `
UNION ALL SELECT 'stale', NULL, NULL, NULL, NULL WHERE NOT (SELECT ok FROM gate)`
}
