package sqlitedriver

import (
	"context"
	"fmt"
	"time"

	"github.com/arbiter-ledger/arbiter/services/driver"
)

// counting is the condition of a charge c that counts, its action a
// joined (driver.LimitUncounted), charges at or before the parameter
// excluded.
var counting = `c.charged_at > ? AND a.status NOT IN (` + driver.LiteralList(driver.LimitUncounted) + `)
	AND NOT (c.held AND a.status = 'awaiting_approval')`

// LimitUse sums each group's counted charges on the writer: the single
// writer decides one charge at a time, so it needs no lock of its own, and
// it sees the charges its own transaction wrote.
func (e *executor) LimitUse(ctx context.Context, ps []driver.LimitUseParams) ([]float64, error) {
	used := make([]float64, len(ps))
	for i, p := range ps {
		err := e.w.QueryRowContext(ctx, `SELECT coalesce(sum(c.amount), 0) FROM limit_charges c
			JOIN actions a ON a.id = c.action_id
			WHERE c.limit_id = ? AND c.group_key = ? AND `+counting, p.LimitID, p.Group, p.Since.UTC()).Scan(&used[i])
		if err != nil {
			return nil, fmt.Errorf("sqlitedriver: limit use: %w", err)
		}
	}
	return used, nil
}

func (e *executor) LimitChargeInsert(ctx context.Context, cs []driver.LimitCharge) error {
	if len(cs) == 0 {
		return nil
	}
	q := `INSERT INTO limit_charges (limit_id, group_key, action_id, amount, charged_at, held) VALUES `
	args := make([]any, 0, 6*len(cs))
	for i, c := range cs {
		if i > 0 {
			q += ", "
		}
		q += "(?, ?, ?, ?, ?, ?)"
		args = append(args, c.LimitID, c.Group, c.ActionID, c.Amount, c.ChargedAt.UTC(), c.Held)
	}
	if _, err := e.w.ExecContext(ctx, q, args...); err != nil {
		return fmt.Errorf("sqlitedriver: record limit charges: %w", err)
	}
	return nil
}

func (e *executor) LimitUsage(ctx context.Context, p *driver.LimitUsageParams) ([]*driver.LimitGroupUse, error) {
	rows, err := e.r.QueryContext(ctx, `SELECT c.group_key, sum(c.amount), count(*), min(c.charged_at)
		FROM limit_charges c JOIN actions a ON a.id = c.action_id
		WHERE c.limit_id = ? AND (? = '' OR c.group_key = ?) AND `+counting+`
		GROUP BY c.group_key ORDER BY 2 DESC, 1 LIMIT ?`, p.LimitID, p.Group, p.Group, p.Since.UTC(), p.Limit)
	if err != nil {
		return nil, fmt.Errorf("sqlitedriver: limit usage: %w", err)
	}
	defer rows.Close()
	var out []*driver.LimitGroupUse
	for rows.Next() {
		var g driver.LimitGroupUse
		var oldest string
		if err := rows.Scan(&g.Group, &g.Used, &g.Actions, &oldest); err != nil {
			return nil, err
		}
		t, err := time.Parse("2006-01-02 15:04:05.999999999-07:00", oldest)
		if err != nil {
			return nil, fmt.Errorf("sqlitedriver: read oldest charge time %q: %w", oldest, err)
		}
		g.OldestAt = t.UTC()
		out = append(out, &g)
	}
	return out, rows.Err()
}

func (e *executor) LimitGroupCharges(ctx context.Context, p *driver.LimitUsageParams) ([]*driver.LimitGroupCharge, error) {
	rows, err := e.r.QueryContext(ctx, `SELECT a.id, a.key, a.tool, a.status, c.amount, c.charged_at, c.held
		FROM limit_charges c JOIN actions a ON a.id = c.action_id
		WHERE c.limit_id = ? AND c.group_key = ? AND c.charged_at > ?
		ORDER BY c.charged_at DESC, a.id DESC LIMIT ?`, p.LimitID, p.Group, p.Since.UTC(), p.Limit)
	if err != nil {
		return nil, fmt.Errorf("sqlitedriver: limit group charges: %w", err)
	}
	return driver.ScanLimitGroupCharges(rows)
}

// breakerCounts reads the recent actions of a namespace through its id
// index: ids are UUIDv7, so those created at or after the second parameter
// sort at or above the id made of that time.
var breakerCounts = `SELECT tool,
	sum(CASE WHEN status = 'in_progress' AND lease_until > ?4 THEN 0 ELSE 1 END),
	sum(CASE WHEN status = 'timed_out' OR (status = 'in_progress' AND lease_until <= ?4)
		OR (status <> 'in_progress' AND EXISTS (SELECT 1 FROM entries e WHERE e.action_id = a.id
			AND e.type IN ('timed_out', 'outcome_unknown'))) THEN 1 ELSE 0 END),
	sum(CASE WHEN status = 'failed' THEN 1 ELSE 0 END)
	FROM actions a
	WHERE namespace = ?1 AND id >= ?3 AND created_at >= ?2
		AND status NOT IN (` + driver.LiteralList(driver.BreakerUnsettled) + `)
	GROUP BY tool ORDER BY tool`

func (e *executor) BreakerCounts(ctx context.Context, p *driver.BreakerCountParams) ([]*driver.ToolOutcomes, error) {
	rows, err := e.r.QueryContext(ctx, breakerCounts, p.Namespace, p.Since.UTC(), driver.IDAt(p.Since), p.Now.UTC())
	if err != nil {
		return nil, fmt.Errorf("sqlitedriver: breaker counts: %w", err)
	}
	return driver.ScanToolOutcomes(rows)
}
