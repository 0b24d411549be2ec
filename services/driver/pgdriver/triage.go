package pgdriver

import (
	"context"
	"fmt"
	"strings"

	"github.com/arbiter-ledger/arbiter/services/driver"
	"github.com/arbiter-ledger/arbiter/services/record"
)

// The triage reads spell their statuses and entry types as literals
// (literalList), exactly as the partial indexes of migration 00003 do, so
// the planner can prove the indexes apply.

func scope(p *driver.TriageParams, column string, argN int) (string, []any) {
	var cond string
	var args []any
	if p.Namespace != "" {
		cond, args = fmt.Sprintf(" AND %s = $%d", column, argN), []any{p.Namespace}
	}
	if len(p.Namespaces) > 0 {
		ph := make([]string, len(p.Namespaces))
		for i, ns := range p.Namespaces {
			args = append(args, ns)
			ph[i] = fmt.Sprintf("$%d", argN+len(args)-1)
		}
		cond += fmt.Sprintf(" AND %s IN (%s)", column, strings.Join(ph, ", "))
	}
	return cond, args
}

// unreviewed keeps the alerts (entries e) that no acknowledge decision
// after them cleared: an operator's "I looked at it".
const unreviewed = ` AND NOT EXISTS (SELECT 1 FROM entries r WHERE r.action_id = e.action_id AND r.seq > e.seq
	AND r.type = 'decision' AND r.payload->>'decision' = 'acknowledge')`

func (e *executor) TriageCounts(ctx context.Context, p *driver.TriageParams) (map[record.Status]int64, error) {
	cond, args := scope(p, "namespace", 1)
	rows, err := e.q.QueryContext(ctx, `SELECT status, count(*) FROM actions WHERE status IN (`+
		driver.LiteralList(p.Statuses)+`)`+cond+` GROUP BY status`, args...)
	return driver.CountRows[record.Status](rows, err)
}

func (e *executor) TriageWaiting(ctx context.Context, p *driver.TriageParams) ([]*record.Action, error) {
	cond, args := scope(p, "namespace", 1)
	return driver.ScanActions(e.q.QueryContext(ctx, `SELECT `+actionColumns+` FROM actions WHERE status IN (`+
		driver.LiteralList(p.Statuses)+`)`+cond+fmt.Sprintf(` ORDER BY updated_at, id LIMIT %d`, p.Limit), args...))
}

func (e *executor) TriageAlertCounts(ctx context.Context, p *driver.TriageParams) (map[record.EntryType]int64, error) {
	cond, args := scope(p, "e.namespace", 2)
	rows, err := e.q.QueryContext(ctx, `SELECT e.type, count(*) FROM entries e WHERE e.type IN (`+driver.LiteralList(p.AlertTypes)+
		`) AND e.recorded_at >= $1`+cond+unreviewed+` GROUP BY e.type`, append([]any{p.Since}, args...)...)
	return driver.CountRows[record.EntryType](rows, err)
}

func (e *executor) TriageAlerts(ctx context.Context, p *driver.TriageParams) ([]*driver.TriageAlert, error) {
	cond, args := scope(p, "e.namespace", 2)
	rows, err := e.q.QueryContext(ctx, `SELECT e.type, e.recorded_at, `+driver.Prefixed("a", actionColumns)+`
		FROM entries e JOIN actions a ON a.id = e.action_id
		WHERE e.type IN (`+driver.LiteralList(p.AlertTypes)+`) AND e.recorded_at >= $1`+cond+unreviewed+
		fmt.Sprintf(` ORDER BY e.recorded_at, e.id LIMIT %d`, p.Limit), append([]any{p.Since}, args...)...)
	return driver.ScanTriageAlerts(rows, err)
}

// TriageStamp reads two partial indexes, so it stays cheap enough to poll
// every second.
func (e *executor) TriageStamp(ctx context.Context, p *driver.TriageParams) (string, error) {
	var n, m int64
	var newest, newestAlert string
	cond, args := scope(p, "namespace", 1)
	err := e.q.QueryRowContext(ctx, `SELECT count(*), COALESCE(CAST(max(updated_at) AS text), '')
		FROM actions WHERE status IN (`+driver.LiteralList(p.Statuses)+`)`+cond, args...).Scan(&n, &newest)
	if err != nil {
		return "", err
	}
	alertCond, alertArgs := scope(p, "e.namespace", 2)
	err = e.q.QueryRowContext(ctx, `SELECT count(*), COALESCE(CAST(max(e.recorded_at) AS text), '')
		FROM entries e WHERE e.type IN (`+driver.LiteralList(p.AlertTypes)+`) AND e.recorded_at >= $1`+alertCond+unreviewed,
		append([]any{p.Since}, alertArgs...)...).Scan(&m, &newestAlert)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%d|%s|%d|%s", n, newest, m, newestAlert), nil
}

func (e *executor) ReviewPending(ctx context.Context, ids []string, p *driver.TriageParams) ([]string, error) {
	rows, err := e.q.QueryContext(ctx, `SELECT DISTINCT e.action_id::text FROM entries e
		WHERE e.action_id = ANY($1::text[]::uuid[]) AND e.type IN (`+driver.LiteralList(p.AlertTypes)+`) AND e.recorded_at >= $2`+unreviewed,
		strs(ids), p.Since)
	return driver.ScanIDs(rows, err)
}
