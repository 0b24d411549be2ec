package pgdriver

import (
	"context"
	"fmt"

	"github.com/arbiter-ledger/arbiter/services/driver"
)

// counting is the condition of a charge c that counts, its action a
// joined, charges at or before $since excluded (driver.LimitUncounted).
func counting(since string) string {
	return `c.charged_at > ` + since + ` AND a.status NOT IN (` + driver.LiteralList(driver.LimitUncounted) + `)
		AND NOT (c.held AND a.status = 'awaiting_approval')`
}

var limitUse = `SELECT w.i, coalesce(sum(c.amount), 0)
	FROM unnest($1::uuid[], $2::text[], $3::timestamptz[]) WITH ORDINALITY AS w(limit_id, grp, since, i)
	JOIN limit_charges c ON c.limit_id = w.limit_id AND c.group_key = w.grp
	JOIN actions a ON a.id = c.action_id
	WHERE ` + counting("w.since") + `
	GROUP BY w.i`

// LimitUse takes each group's advisory lock in one statement, in the order
// given (a function scan of the array yields its elements in order), then
// sums the groups' counted charges in one more: under READ COMMITTED that
// statement's snapshot is taken after every lock is held, so it sees each
// charge committed by whoever held a lock before.
func (e *executor) LimitUse(ctx context.Context, ps []driver.LimitUseParams) ([]float64, error) {
	if !e.inTx {
		return nil, fmt.Errorf("pgdriver: limit use outside a transaction")
	}
	ids, groups, since, locks := make(strs, len(ps)), make(strs, len(ps)), make(times, len(ps)), make(int64s, len(ps))
	for i, p := range ps {
		ids[i], groups[i], since[i], locks[i] = p.LimitID, p.Group, p.Since.UTC(), p.Lock
	}
	if _, err := e.q.ExecContext(ctx, `SELECT count(pg_advisory_xact_lock(k)) FROM unnest($1::bigint[]) AS t(k)`, locks); err != nil {
		return nil, fmt.Errorf("pgdriver: lock limit groups: %w", err)
	}
	rows, err := e.q.QueryContext(ctx, limitUse, ids, groups, since)
	if err != nil {
		return nil, fmt.Errorf("pgdriver: limit use: %w", err)
	}
	defer rows.Close()
	used := make([]float64, len(ps))
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

func (e *executor) LimitChargeInsert(ctx context.Context, cs []driver.LimitCharge) error {
	if len(cs) == 0 {
		return nil
	}
	ids, groups, actions := make(strs, len(cs)), make(strs, len(cs)), make(strs, len(cs))
	amounts, at, held := make(pgFloats, len(cs)), make(times, len(cs)), make(bools, len(cs))
	for i, c := range cs {
		ids[i], groups[i], actions[i], amounts[i], at[i], held[i] = c.LimitID, c.Group, c.ActionID, c.Amount, c.ChargedAt.UTC(), c.Held
	}
	_, err := e.q.ExecContext(ctx, `INSERT INTO limit_charges (limit_id, group_key, action_id, amount, charged_at, held)
		SELECT * FROM unnest($1::uuid[], $2::text[], $3::uuid[], $4::float8[], $5::timestamptz[], $6::bool[])`,
		ids, groups, actions, amounts, at, held)
	if err != nil {
		return fmt.Errorf("pgdriver: record limit charges: %w", err)
	}
	return nil
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
