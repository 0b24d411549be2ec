package sqlitedriver

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/arbiter-ledger/arbiter/services/driver"
)

// counting is the condition of a charge c that counts, its action a
// joined (driver.LimitUncounted), charges at or before the parameter
// excluded.
var counting = `c.charged_at > ? AND a.status NOT IN (` + driver.LiteralList(driver.LimitUncounted) + `)
	AND NOT (c.held AND a.status = 'awaiting_approval')`

// countingNow is the condition of a charge c that counts with its action
// a's status now, whatever its age.
var countingNow = `a.status NOT IN (` + driver.LiteralList(driver.LimitUncounted) + `)
	AND NOT (c.held AND a.status = 'awaiting_approval')`

// LimitUseKept cannot answer: SQLite's single writer judges every charge
// in a transaction of its own already.
func (e *executor) LimitUseKept([]driver.LimitUseParams) ([]float64, bool) { return nil, false }

// LimitUse answers the groups' kept use (driver.KeptUse) on the writer:
// the single writer decides one charge at a time, so it needs no lock of
// its own, and it sees what its own transaction wrote.
func (e *executor) LimitUse(ctx context.Context, ps []driver.LimitUseParams) ([]float64, error) {
	s := groupStore{e.w}
	used, keys, states, err := driver.KeptUse(ctx, s, ps)
	if err != nil {
		return nil, err
	}
	if err := s.SaveGroups(ctx, keys, states); err != nil {
		return nil, err
	}
	return used, nil
}

// LimitFlipsApply keeps the groups' use right (driver.ApplyFlips).
func (e *executor) LimitFlipsApply(ctx context.Context, fs []driver.LimitFlip) error {
	return driver.ApplyFlips(ctx, groupStore{e.w}, fs)
}

// groupStore is limit_groups on SQLite, one statement per group.
type groupStore struct{ w querier }

func (groupStore) LockGroups(context.Context, []int64) error { return nil }

func (s groupStore) Groups(ctx context.Context, keys []driver.GroupKey, since []time.Time) ([]driver.GroupState, error) {
	out := make([]driver.GroupState, len(keys))
	for i, k := range keys {
		var window int
		var aged time.Time
		err := s.w.QueryRowContext(ctx, `SELECT used, aged_to, window_seconds FROM limit_groups
			WHERE limit_id = ? AND group_key = ?`, k.LimitID, k.Group).Scan(&out[i].Used, &aged, &window)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("sqlitedriver: read limit group: %w", err)
		}
		out[i].Found, out[i].AgedTo, out[i].Window = true, aged.UTC(), time.Duration(window)*time.Second
		if since == nil || !since[i].After(out[i].AgedTo) {
			continue
		}
		err = s.w.QueryRowContext(ctx, `SELECT coalesce(sum(c.amount), 0) FROM limit_charges c
			JOIN actions a ON a.id = c.action_id
			WHERE c.limit_id = ? AND c.group_key = ? AND c.charged_at > ? AND c.charged_at <= ? AND `+countingNow,
			k.LimitID, k.Group, out[i].AgedTo, since[i].UTC()).Scan(&out[i].Left)
		if err != nil {
			return nil, fmt.Errorf("sqlitedriver: sum what left a limit group: %w", err)
		}
	}
	return out, nil
}

func (s groupStore) SumCounting(ctx context.Context, keys []driver.GroupKey, since []time.Time) ([]float64, error) {
	used := make([]float64, len(keys))
	for i, k := range keys {
		err := s.w.QueryRowContext(ctx, `SELECT coalesce(sum(c.amount), 0) FROM limit_charges c
			JOIN actions a ON a.id = c.action_id
			WHERE c.limit_id = ? AND c.group_key = ? AND c.charged_at > ? AND `+countingNow,
			k.LimitID, k.Group, since[i].UTC()).Scan(&used[i])
		if err != nil {
			return nil, fmt.Errorf("sqlitedriver: sum limit charges: %w", err)
		}
	}
	return used, nil
}

func (s groupStore) SaveGroups(ctx context.Context, keys []driver.GroupKey, states []driver.GroupState) error {
	for i, k := range keys {
		st := states[i]
		if _, err := s.w.ExecContext(ctx, `INSERT INTO limit_groups (limit_id, group_key, used, aged_to, window_seconds)
			VALUES (?, ?, ?, ?, ?) ON CONFLICT (limit_id, group_key) DO UPDATE
			SET used = excluded.used, aged_to = excluded.aged_to, window_seconds = excluded.window_seconds`,
			k.LimitID, k.Group, st.Used, st.AgedTo.UTC(), int(st.Window/time.Second)); err != nil {
			return fmt.Errorf("sqlitedriver: write limit group: %w", err)
		}
	}
	return nil
}

func (s groupStore) ChargesOf(ctx context.Context, actionIDs []string) ([]driver.LimitCharge, error) {
	var out []driver.LimitCharge
	for _, id := range actionIDs {
		rows, err := s.w.QueryContext(ctx, `SELECT limit_id, group_key, action_id, amount, charged_at, held
			FROM limit_charges WHERE action_id = ?`, id)
		if err != nil {
			return nil, fmt.Errorf("sqlitedriver: read charges: %w", err)
		}
		for rows.Next() {
			var c driver.LimitCharge
			if err := rows.Scan(&c.LimitID, &c.Group, &c.ActionID, &c.Amount, &c.ChargedAt, &c.Held); err != nil {
				rows.Close()
				return nil, err
			}
			c.ChargedAt = c.ChargedAt.UTC()
			out = append(out, c)
		}
		if err := rows.Close(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// insertCharges records the charges of new actions and adds those that
// count to their groups' kept use.
func insertCharges(ctx context.Context, w querier, cs []driver.LimitCharge) error {
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
	if _, err := w.ExecContext(ctx, q, args...); err != nil {
		return fmt.Errorf("sqlitedriver: record limit charges: %w", err)
	}
	// What the charges that count add to their groups' kept use: the
	// groups' rows exist, read by LimitUse in this transaction.
	for _, c := range cs {
		if !c.Counts {
			continue
		}
		if _, err := w.ExecContext(ctx, `UPDATE limit_groups SET used = used + ? WHERE limit_id = ? AND group_key = ?`,
			c.Amount, c.LimitID, c.Group); err != nil {
			return fmt.Errorf("sqlitedriver: add charge to its group: %w", err)
		}
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
