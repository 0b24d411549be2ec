package pgdriver

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/arbiter-ledger/arbiter/services/driver"
)

// counting is the condition of a charge c that counts, its action a
// joined, charges at or before $since excluded (driver.LimitUncounted).
func counting(since string) string {
	return `c.charged_at > ` + since + ` AND a.status NOT IN (` + driver.LiteralList(driver.LimitUncounted) + `)
		AND NOT (c.held AND a.status = 'awaiting_approval')`
}

// countingNow is the condition of a charge c that counts with its action
// a's status now, whatever its age.
var countingNow = `a.status NOT IN (` + driver.LiteralList(driver.LimitUncounted) + `)
	AND NOT (c.held AND a.status = 'awaiting_approval')`

// LimitUse answers the groups' kept use (driver.KeptUse). The rows as
// they are now are written with the charges, in the statement that inserts
// the actions (ActionInsertMany); a transaction that writes no charge leaves them as they were,
// which the next reader finds the same.
func (e *executor) LimitUse(ctx context.Context, ps []driver.LimitUseParams) ([]float64, error) {
	if !e.inTx {
		return nil, fmt.Errorf("pgdriver: limit use outside a transaction")
	}
	used, keys, states, err := driver.KeptUse(ctx, &groupStore{e: e}, ps)
	if err != nil {
		return nil, err
	}
	if e.kept == nil {
		e.kept = map[driver.GroupKey]driver.GroupState{}
	}
	for i, k := range keys {
		e.kept[k] = states[i]
	}
	return used, nil
}

// LimitFlipsApply keeps the groups' use right (driver.ApplyFlips).
func (e *executor) LimitFlipsApply(ctx context.Context, fs []driver.LimitFlip) error {
	if !e.inTx {
		return fmt.Errorf("pgdriver: limit flips outside a transaction")
	}
	if err := e.saveKept(ctx); err != nil { // what LimitUse read, before the flips change it
		return err
	}
	return driver.ApplyFlips(ctx, &groupStore{e: e}, fs)
}

// saveKept writes the rows LimitUse read and no charge has written yet.
func (e *executor) saveKept(ctx context.Context) error {
	if len(e.kept) == 0 {
		return nil
	}
	keys, states := make([]driver.GroupKey, 0, len(e.kept)), make([]driver.GroupState, 0, len(e.kept))
	for k, st := range e.kept {
		keys, states = append(keys, k), append(states, st)
	}
	clear(e.kept)
	return (&groupStore{e: e}).SaveGroups(ctx, keys, states)
}

// groupStore is limit_groups on PostgreSQL: each step one statement for
// every group at once. The locks are taken by the read that follows them
// (limit_groups_locked, migrations 00019 and 00020, which also locks the
// rows), in the same round trip.
type groupStore struct {
	e     *executor
	locks []int64
}

// LockGroups notes the locks for Groups to take, in the order given.
func (s *groupStore) LockGroups(_ context.Context, locks []int64) error {
	s.locks = locks
	return nil
}

func groupArrays(keys []driver.GroupKey) (strs, strs) {
	ids, groups := make(strs, len(keys)), make(strs, len(keys))
	for i, k := range keys {
		ids[i], groups[i] = k.LimitID, k.Group
	}
	return ids, groups
}

// uncounted are driver.LimitUncounted as the database names them.
var uncounted = func() strs {
	out := make(strs, len(driver.LimitUncounted))
	for i, st := range driver.LimitUncounted {
		out[i] = string(st)
	}
	return out
}()

// Groups takes the locks LockGroups noted, then reads the rows
// (limit_groups_locked): one round trip.
func (s *groupStore) Groups(ctx context.Context, keys []driver.GroupKey, since []time.Time) ([]driver.GroupState, error) {
	ids, groups := groupArrays(keys)
	until := make(otime, len(keys))
	for i := range since {
		t := since[i].UTC()
		until[i] = &t
	}
	locks := int64s(s.locks)
	if locks == nil {
		locks = int64s{}
	}
	s.locks = nil
	rows, err := s.e.q.QueryContext(ctx, `SELECT * FROM limit_groups_locked($1::uuid[], $2::text[], $3::timestamptz[], $4::bigint[], $5::text[])`,
		ids, groups, until, locks, uncounted)
	if err != nil {
		return nil, fmt.Errorf("pgdriver: lock and read limit groups: %w", err)
	}
	defer rows.Close()
	out := make([]driver.GroupState, len(keys))
	for rows.Next() {
		var i, window int
		var st driver.GroupState
		var next sql.NullTime
		if err := rows.Scan(&i, &st.Used, &st.AgedTo, &window, &st.Left, &next, &st.Version); err != nil {
			return nil, err
		}
		st.Found, st.AgedTo, st.Window = true, st.AgedTo.UTC(), time.Duration(window)*time.Second
		if next.Valid {
			st.Next = next.Time.UTC()
		}
		out[i-1] = st
	}
	return out, rows.Err()
}

func (s *groupStore) SumCounting(ctx context.Context, keys []driver.GroupKey, since []time.Time) ([]float64, error) {
	ids, groups := groupArrays(keys)
	froms := make(times, len(keys))
	for i := range keys {
		froms[i] = since[i].UTC()
	}
	rows, err := s.e.q.QueryContext(ctx, `SELECT w.i, coalesce(sum(c.amount), 0)
		FROM unnest($1::uuid[], $2::text[], $3::timestamptz[]) WITH ORDINALITY AS w(limit_id, grp, since, i)
		JOIN limit_charges c ON c.limit_id = w.limit_id AND c.group_key = w.grp AND c.charged_at > w.since
		JOIN actions a ON a.id = c.action_id
		WHERE `+countingNow+`
		GROUP BY w.i`, ids, groups, froms)
	if err != nil {
		return nil, fmt.Errorf("pgdriver: sum limit charges: %w", err)
	}
	defer rows.Close()
	used := make([]float64, len(keys))
	for rows.Next() {
		var i int
		var u float64
		if err := rows.Scan(&i, &u); err != nil {
			return nil, err
		}
		used[i-1] = u
	}
	return used, rows.Err()
}

func (s *groupStore) SaveGroups(ctx context.Context, keys []driver.GroupKey, states []driver.GroupState) error {
	ids, groups := groupArrays(keys)
	used, aged, windows := make(pgFloats, len(keys)), make(times, len(keys)), make(ints, len(keys))
	for i, st := range states {
		used[i], aged[i], windows[i] = st.Used, st.AgedTo.UTC(), int(st.Window/time.Second)
	}
	_, err := s.e.q.ExecContext(ctx, `INSERT INTO limit_groups (limit_id, group_key, used, aged_to, window_seconds)
		SELECT * FROM unnest($1::uuid[], $2::text[], $3::float8[], $4::timestamptz[], $5::int[])
		ON CONFLICT (limit_id, group_key) DO UPDATE
		SET used = excluded.used, aged_to = excluded.aged_to, window_seconds = excluded.window_seconds`,
		ids, groups, used, aged, windows)
	if err != nil {
		return fmt.Errorf("pgdriver: write limit groups: %w", err)
	}
	return nil
}

func (s *groupStore) ChargesOf(ctx context.Context, actionIDs []string) ([]driver.LimitCharge, error) {
	rows, err := s.e.q.QueryContext(ctx, `SELECT limit_id, group_key, action_id, amount, charged_at, held
		FROM limit_charges WHERE action_id = ANY($1::uuid[])`, strs(actionIDs))
	if err != nil {
		return nil, fmt.Errorf("pgdriver: read charges: %w", err)
	}
	defer rows.Close()
	var out []driver.LimitCharge
	for rows.Next() {
		var c driver.LimitCharge
		if err := rows.Scan(&c.LimitID, &c.Group, &c.ActionID, &c.Amount, &c.ChargedAt, &c.Held); err != nil {
			return nil, err
		}
		c.ChargedAt = c.ChargedAt.UTC()
		out = append(out, c)
	}
	return out, rows.Err()
}

var limitUsage = `SELECT c.group_key, sum(c.amount), count(*), min(c.charged_at)
	FROM limit_charges c JOIN actions a ON a.id = c.action_id
	WHERE c.limit_id = $1 AND ($3 = '' OR c.group_key = $3) AND ` + counting("$2") + `
	GROUP BY c.group_key ORDER BY 2 DESC, 1 LIMIT $4`

func (e *executor) LimitUsage(ctx context.Context, p *driver.LimitUsageParams) ([]*driver.LimitGroupUse, error) {
	rows, err := e.q.QueryContext(ctx, limitUsage, p.LimitID, p.Since.UTC(), p.Group, p.Limit)
	if err != nil {
		return nil, fmt.Errorf("pgdriver: limit usage: %w", err)
	}
	defer rows.Close()
	var out []*driver.LimitGroupUse
	for rows.Next() {
		var g driver.LimitGroupUse
		if err := rows.Scan(&g.Group, &g.Used, &g.Actions, &g.OldestAt); err != nil {
			return nil, err
		}
		g.OldestAt = g.OldestAt.UTC()
		out = append(out, &g)
	}
	return out, rows.Err()
}

func (e *executor) LimitGroupCharges(ctx context.Context, p *driver.LimitUsageParams) ([]*driver.LimitGroupCharge, error) {
	rows, err := e.q.QueryContext(ctx, `SELECT a.id, a.key, a.tool, a.status, c.amount, c.charged_at, c.held
		FROM limit_charges c JOIN actions a ON a.id = c.action_id
		WHERE c.limit_id = $1 AND c.group_key = $2 AND c.charged_at > $3
		ORDER BY c.charged_at DESC, a.id DESC LIMIT $4`, p.LimitID, p.Group, p.Since.UTC(), p.Limit)
	if err != nil {
		return nil, fmt.Errorf("pgdriver: limit group charges: %w", err)
	}
	return driver.ScanLimitGroupCharges(rows)
}

// breakerCounts reads the recent actions of a namespace through its id
// index: ids are UUIDv7, so those created at or after $2 sort at or above
// the id $3 made of that time.
var breakerCounts = `SELECT tool,
	count(*) FILTER (WHERE NOT (status = 'in_progress' AND lease_until > $4)),
	count(*) FILTER (WHERE status = 'timed_out' OR (status = 'in_progress' AND lease_until <= $4)
		OR (status <> 'in_progress' AND EXISTS (SELECT 1 FROM entries e WHERE e.action_id = a.id
			AND e.type IN ('timed_out', 'outcome_unknown')))),
	count(*) FILTER (WHERE status = 'failed')
	FROM actions a
	WHERE namespace = $1 AND id >= $3 AND created_at >= $2
		AND status NOT IN (` + driver.LiteralList(driver.BreakerUnsettled) + `)
	GROUP BY tool ORDER BY tool`

func (e *executor) BreakerCounts(ctx context.Context, p *driver.BreakerCountParams) ([]*driver.ToolOutcomes, error) {
	rows, err := e.q.QueryContext(ctx, breakerCounts, p.Namespace, p.Since.UTC(), driver.IDAt(p.Since), p.Now.UTC())
	if err != nil {
		return nil, fmt.Errorf("pgdriver: breaker counts: %w", err)
	}
	return driver.ScanToolOutcomes(rows)
}
