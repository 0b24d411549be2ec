package sqlitedriver

import (
	"context"
	"fmt"
	"strings"

	"github.com/arbiter-ledger/arbiter/services/driver"
	"github.com/arbiter-ledger/arbiter/services/record"
)

// The triage reads spell their statuses and entry types as literals
// (literalList), exactly as the partial indexes of migration 00003 do, so
// SQLite can prove the indexes apply.

func scope(p *driver.TriageParams, column string) (string, []any) {
	var cond string
	var args []any
	if p.Namespace != "" {
		cond, args = fmt.Sprintf(" AND %s = ?", column), []any{p.Namespace}
	}
	if len(p.Namespaces) > 0 {
		for _, ns := range p.Namespaces {
			args = append(args, ns)
		}
		cond += fmt.Sprintf(" AND %s IN (?%s)", column, strings.Repeat(", ?", len(p.Namespaces)-1))
	}
	return cond, args
}

// unreviewed keeps the alerts (entries e) that no acknowledge decision
// after them cleared: an operator's "I looked at it".
const unreviewed = ` AND NOT EXISTS (SELECT 1 FROM entries r WHERE r.action_id = e.action_id AND r.seq > e.seq
	AND r.type = 'decision' AND json_extract(r.payload, '$.decision') = 'acknowledge')`

func (e *executor) TriageCounts(ctx context.Context, p *driver.TriageParams) (map[record.Status]int64, error) {
	cond, args := scope(p, "namespace")
	rows, err := e.r.QueryContext(ctx, `SELECT status, count(*) FROM actions WHERE status IN (`+
		driver.LiteralList(p.Statuses)+`)`+cond+` GROUP BY status`, args...)
	return driver.CountRows[record.Status](rows, err)
}

func (e *executor) TriageWaiting(ctx context.Context, p *driver.TriageParams) ([]*record.Action, error) {
	cond, args := scope(p, "namespace")
	return driver.ScanActions(e.r.QueryContext(ctx, `SELECT `+actionColumns+` FROM actions WHERE status IN (`+
		driver.LiteralList(p.Statuses)+`)`+cond+fmt.Sprintf(` ORDER BY updated_at, id LIMIT %d`, p.Limit), args...))
}

func (e *executor) TriageAlertCounts(ctx context.Context, p *driver.TriageParams) (map[record.EntryType]int64, error) {
	cond, args := scope(p, "e.namespace")
	rows, err := e.r.QueryContext(ctx, `SELECT e.type, count(*) FROM entries e WHERE e.type IN (`+driver.LiteralList(p.AlertTypes)+
		`) AND e.recorded_at >= ?`+cond+unreviewed+` GROUP BY e.type`, append([]any{p.Since}, args...)...)
	return driver.CountRows[record.EntryType](rows, err)
}

func (e *executor) TriageAlerts(ctx context.Context, p *driver.TriageParams) ([]*driver.TriageAlert, error) {
	cond, args := scope(p, "e.namespace")
	rows, err := e.r.QueryContext(ctx, `SELECT e.type, e.recorded_at, `+driver.Prefixed("a", actionColumns)+`
		FROM entries e JOIN actions a ON a.id = e.action_id
		WHERE e.type IN (`+driver.LiteralList(p.AlertTypes)+`) AND e.recorded_at >= ?`+cond+unreviewed+
		fmt.Sprintf(` ORDER BY e.recorded_at, e.id LIMIT %d`, p.Limit), append([]any{p.Since}, args...)...)
	return driver.ScanTriageAlerts(rows, err)
}

func (e *executor) TriageStamp(ctx context.Context, p *driver.TriageParams) (string, error) {
	var n, m int64
	var newest, newestAlert string
	cond, args := scope(p, "namespace")
	err := e.r.QueryRowContext(ctx, `SELECT count(*), COALESCE(CAST(max(updated_at) AS text), '')
		FROM actions WHERE status IN (`+driver.LiteralList(p.Statuses)+`)`+cond, args...).Scan(&n, &newest)
	if err != nil {
		return "", err
	}
	err = e.r.QueryRowContext(ctx, `SELECT count(*), COALESCE(CAST(max(e.recorded_at) AS text), '')
		FROM entries e WHERE e.type IN (`+driver.LiteralList(p.AlertTypes)+`) AND e.recorded_at >= ?`+cond+unreviewed,
		append([]any{p.Since}, args...)...).Scan(&m, &newestAlert)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%d|%s|%d|%s", n, newest, m, newestAlert), nil
}

func (e *executor) ReviewPending(ctx context.Context, ids []string, p *driver.TriageParams) ([]string, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	args := make([]any, 0, len(ids)+1)
	for _, id := range ids {
		args = append(args, id)
	}
	rows, err := e.r.QueryContext(ctx, `SELECT DISTINCT e.action_id FROM entries e
		WHERE e.action_id IN (?`+strings.Repeat(", ?", len(ids)-1)+`) AND e.type IN (`+driver.LiteralList(p.AlertTypes)+
		`) AND e.recorded_at >= ?`+unreviewed, append(args, p.Since)...)
	return driver.ScanIDs(rows, err)
}
