package services

import (
	"context"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"time"
)

// The triage queue is what needs a person now: actions waiting for a
// decision or for an agent to act on one, and recent alerts whose effect may
// have happened twice.

// TriageStatuses are the statuses that wait on a person or on an agent
// picking up a person's decision.
var TriageStatuses = []Status{StatusTimedOut, StatusRetryRequested, StatusCompensationRequested}

// TriageAlerts are the entry types shown as alerts on the triage queue.
var TriageAlerts = []string{TypeKeyReused, TypeStaleOutcome}

// TriageAlertWindow is how far back alerts stay on the queue: they carry no
// acknowledgement, so they age out.
const TriageAlertWindow = 7 * 24 * time.Hour

// The conditions below are spelled exactly as the partial indexes of
// migration 00003 are, so that both databases prove the index applies.
const (
	triageStatusCond = `status IN ('timed_out', 'retry_requested', 'compensation_requested')`
	triageAlertCond  = `type IN ('key_reused', 'stale_outcome')`
)

// TriageItem is one row of the queue.
type TriageItem struct {
	// Kind is the action's status, or the alert's entry type when Alert.
	Kind  string
	Alert bool
	// Since is when the action last changed (for a waiting action, when it
	// entered its status, unless late entries were recorded since) or when
	// the alert was recorded.
	Since  time.Time
	Action *Action
}

// Triage is the queue with the counts shown above it.
type Triage struct {
	Items []TriageItem // oldest first, at most the limit
	// Waiting is the number of items in the whole queue, beyond the limit.
	Waiting int
	Counts  map[string]int64 // open actions per status (OpenStatuses)
	Total   int64            // open actions
	Alerts  map[string]int64 // alerts per entry type within the window
	At      time.Time        // the ledger's time when the queue was read
}

// DefaultTriageLimit is the queue length shown when the caller does not say.
const DefaultTriageLimit = 100

// Triage returns the queue p may see, oldest first, and counts per status.
func (l *Ledger) Triage(ctx context.Context, p Principal, limit int) (*Triage, error) {
	if limit <= 0 {
		limit = DefaultTriageLimit
	}
	limit = min(limit, MaxListLimit)
	now := l.now()
	t := &Triage{At: now}
	var err error
	if t.Counts, err = l.countsFor(ctx, p); err != nil {
		return nil, err
	}
	for _, n := range t.Counts {
		t.Total += n
	}
	for _, s := range TriageStatuses {
		t.Waiting += int(t.Counts[string(s)])
	}
	since := now.Add(-TriageAlertWindow)
	if t.Alerts, err = l.countAlerts(ctx, p, since); err != nil {
		return nil, err
	}
	for _, n := range t.Alerts {
		t.Waiting += int(n)
	}
	waiting, err := l.waitingActions(ctx, p, limit)
	if err != nil {
		return nil, err
	}
	alerts, err := l.recentAlerts(ctx, p, since, limit)
	if err != nil {
		return nil, err
	}
	t.Items = append(waiting, alerts...)
	slices.SortStableFunc(t.Items, func(a, b TriageItem) int { return a.Since.Compare(b.Since) })
	if len(t.Items) > limit {
		t.Items = t.Items[:limit]
	}
	return t, nil
}

// namespaceScope returns the condition and argument that keep a query in p's
// namespace, or nothing for a global principal.
func namespaceScope(p Principal, column string, argN int) (string, []any) {
	if p.Global() {
		return "", nil
	}
	return fmt.Sprintf(" AND %s = $%d", column, argN), []any{p.Namespace}
}

// OpenStatuses are the statuses counted on the triage page: actions still
// running and those waiting on a person. Each is served by a partial index
// (actions_lease_idx, actions_triage_idx), so counting stays cheap with
// millions of finished actions; finished statuses are counted on demand in
// the action list and in metrics.
var OpenStatuses = []Status{StatusInProgress, StatusTimedOut, StatusRetryRequested, StatusCompensationRequested}

// countsFor counts open actions per status in what p may see.
func (l *Ledger) countsFor(ctx context.Context, p Principal) (map[string]int64, error) {
	out := map[string]int64{}
	scope, args := namespaceScope(p, "namespace", 1)
	queries := []string{
		`SELECT status, count(*) FROM actions WHERE status IN ('timed_out', 'retry_requested', 'compensation_requested')` +
			scope + ` GROUP BY status`,
		`SELECT status, count(*) FROM actions WHERE status = 'in_progress'` + scope + ` GROUP BY status`,
	}
	for _, s := range OpenStatuses {
		out[string(s)] = 0
	}
	for _, q := range queries {
		rows, err := l.st.rsq.QueryContext(ctx, l.st.rebind(q), args...)
		if err != nil {
			return nil, dbError("triage: count actions", err)
		}
		for rows.Next() {
			var s string
			var n int64
			if err := rows.Scan(&s, &n); err != nil {
				rows.Close()
				return nil, dbError("triage: count actions", err)
			}
			out[s] = n
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, dbError("triage: count actions", err)
		}
	}
	return out, nil
}

func (l *Ledger) countAlerts(ctx context.Context, p Principal, since time.Time) (map[string]int64, error) {
	scope, args := namespaceScope(p, "namespace", 2)
	q := `SELECT type, count(*) FROM entries WHERE ` + triageAlertCond + ` AND recorded_at >= $1` + scope + ` GROUP BY type`
	rows, err := l.st.rsq.QueryContext(ctx, l.st.rebind(q), append([]any{since}, args...)...)
	if err != nil {
		return nil, dbError("triage: count alerts", err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for _, typ := range TriageAlerts {
		out[typ] = 0
	}
	for rows.Next() {
		var typ string
		var n int64
		if err := rows.Scan(&typ, &n); err != nil {
			return nil, dbError("triage: count alerts", err)
		}
		out[typ] = n
	}
	return out, dbErrorOrNil("triage: count alerts", rows.Err())
}

func (l *Ledger) waitingActions(ctx context.Context, p Principal, limit int) ([]TriageItem, error) {
	scope, args := namespaceScope(p, "namespace", 1)
	q := `SELECT ` + actionColumns + ` FROM actions WHERE ` + triageStatusCond + scope +
		fmt.Sprintf(` ORDER BY updated_at, id LIMIT %d`, limit)
	rows, err := l.st.rsq.QueryContext(ctx, l.st.rebind(q), args...)
	if err != nil {
		return nil, dbError("triage: read waiting actions", err)
	}
	defer rows.Close()
	var out []TriageItem
	for rows.Next() {
		a, err := scanAction(rows)
		if err != nil {
			return nil, dbError("triage: read waiting actions", err)
		}
		out = append(out, TriageItem{Kind: string(a.Status), Since: a.UpdatedAt, Action: a})
	}
	return out, dbErrorOrNil("triage: read waiting actions", rows.Err())
}

func (l *Ledger) recentAlerts(ctx context.Context, p Principal, since time.Time, limit int) ([]TriageItem, error) {
	scope, args := namespaceScope(p, "e.namespace", 2)
	q := `SELECT e.type, e.recorded_at, ` + prefixed("a", actionColumns) + `
		FROM entries e JOIN actions a ON a.id = e.action_id
		WHERE e.` + triageAlertCond + ` AND e.recorded_at >= $1` + scope +
		fmt.Sprintf(` ORDER BY e.recorded_at, e.id LIMIT %d`, limit)
	rows, err := l.st.rsq.QueryContext(ctx, l.st.rebind(q), append([]any{since}, args...)...)
	if err != nil {
		return nil, dbError("triage: read alerts", err)
	}
	defer rows.Close()
	var out []TriageItem
	for rows.Next() {
		it := TriageItem{Alert: true}
		a, err := scanAction(headScanner{row: rows, head: []any{&it.Kind, &it.Since}})
		if err != nil {
			return nil, dbError("triage: read alerts", err)
		}
		it.Since, it.Action = it.Since.UTC(), a
		out = append(out, it)
	}
	return out, dbErrorOrNil("triage: read alerts", rows.Err())
}

// headScanner scans leading columns into head and the rest into what the
// caller asks for, so scanAction can read a joined row.
type headScanner struct {
	row  scanner
	head []any
}

func (s headScanner) Scan(dest ...any) error {
	return s.row.Scan(slices.Concat(s.head, dest)...)
}

// prefixed qualifies every column of a column list with a table alias.
func prefixed(alias, columns string) string {
	cols := strings.Split(columns, ",")
	for i, c := range cols {
		cols[i] = alias + "." + strings.TrimSpace(c)
	}
	return strings.Join(cols, ", ")
}

// TriageStamp returns a short value that changes whenever the queue of any
// namespace changes: an action enters, leaves or changes in a waiting status,
// or an alert is recorded or ages out. It reads two partial indexes, so it
// stays cheap enough to poll every second.
func (l *Ledger) TriageStamp(ctx context.Context) (string, error) {
	var n, m int64
	var newest, newestAlert string
	err := l.st.rsq.QueryRowContext(ctx, `SELECT count(*), COALESCE(CAST(max(updated_at) AS text), '')
		FROM actions WHERE `+triageStatusCond).Scan(&n, &newest)
	if err != nil {
		return "", dbError("triage: read stamp", err)
	}
	q := `SELECT count(*), COALESCE(CAST(max(recorded_at) AS text), '')
		FROM entries WHERE ` + triageAlertCond + ` AND recorded_at >= $1`
	err = l.st.rsq.QueryRowContext(ctx, l.st.rebind(q), l.now().Add(-TriageAlertWindow)).Scan(&m, &newestAlert)
	if err != nil {
		return "", dbError("triage: read stamp", err)
	}
	h := fnv.New64a()
	fmt.Fprintf(h, "%d|%s|%d|%s", n, newest, m, newestAlert)
	return fmt.Sprintf("%016x", h.Sum64()), nil
}
