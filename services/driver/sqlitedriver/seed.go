package sqlitedriver

import (
	"context"
	"fmt"

	"github.com/arbiter-ledger/arbiter/services/driver"
)

// seedRange numbers the part's actions, for its entries.
const seedRange = `WITH RECURSIVE g(n) AS (SELECT ? UNION ALL SELECT n + 1 FROM g WHERE n < ?) `

// Seed writes the synthetic ledger with set-based SQL (recursive CTEs). It
// writes no alerts.
func (d *Driver) Seed(ctx context.Context, p *driver.SeedParams) (string, error) {
	to := p.From + p.Actions - 1
	stmts := []struct {
		q    string
		args []any
	}{
		{fmt.Sprintf(`WITH RECURSIVE g(n) AS (SELECT %d UNION ALL SELECT n + 1 FROM g WHERE n < %d)
		INSERT INTO actions (`+actionColumns+`)
		SELECT lower(hex(randomblob(4)) || '-' || hex(randomblob(2)) || '-7' || substr(hex(randomblob(2)), 2) || '-8' ||
			substr(hex(randomblob(2)), 2) || '-' || hex(randomblob(6))),
			?, 'seed:' || n, 'tool.' || (n %% 20), 'keyed',
			CASE WHEN n <= %d THEN 'timed_out' ELSE 'succeeded' END, 1, 2,
			CASE WHEN n <= %d THEN ? END, NULL, 'ref-' || n, 'agent-' || (n %% 50), NULL, hex(randomblob(16)),
			json_object('n', n), '{"ok":true}', NULL, 0, 2, ?, ?, NULL, NULL, NULL
		FROM g`, p.From, to, p.TimedOut, p.TimedOut), []any{p.Namespace, p.Now, p.Now, p.Now}},
		{seedRange + `INSERT INTO entries (` + entryColumns + `)
		SELECT lower(hex(randomblob(16))), id, namespace, 1, 'intent', 'agent', agent, 1, '{}', NULL, created_at
		FROM g JOIN actions ON namespace = ? AND key = 'seed:' || n`, []any{p.From, to, p.Namespace}},
		{seedRange + `INSERT INTO entries (` + entryColumns + `)
		SELECT lower(hex(randomblob(16))), id, namespace, 2, CASE status WHEN 'timed_out' THEN 'timed_out' ELSE 'succeeded' END,
			CASE status WHEN 'timed_out' THEN 'system' ELSE 'agent' END, agent, 1, '{}', NULL, updated_at
		FROM g JOIN actions ON namespace = ? AND key = 'seed:' || n`, []any{p.From, to, p.Namespace}},
	}
	var longID string
	if p.Last && p.LongTimeline > 0 {
		longID = driver.NewID()
		stmts = append(stmts, struct {
			q    string
			args []any
		}{`INSERT INTO actions (` + actionColumns + `)
			VALUES (?, ?, 'seed:long-timeline', 'tool.long', 'keyed', 'succeeded', 1, 2, NULL, NULL, NULL, NULL, NULL,
				'long', '{}', NULL, NULL, 0, ?, ?, ?, NULL, NULL, NULL)`, []any{longID, p.Namespace, p.LongTimeline, p.Now, p.Now}}, struct {
			q    string
			args []any
		}{`WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < ?)
			INSERT INTO entries (` + entryColumns + `)
			SELECT lower(hex(randomblob(16))), ?, ?, n, CASE WHEN n = 1 THEN 'intent' ELSE 'note' END, 'agent', 'seed', 1,
				json_object('message', 'note ' || n), NULL, ? FROM g`, []any{p.LongTimeline, longID, p.Namespace, p.Now}})
	}
	if p.Last {
		stmts = append(stmts, struct {
			q    string
			args []any
		}{`ANALYZE`, nil})
	}
	for _, s := range stmts {
		if _, err := d.wsq.ExecContext(ctx, s.q, s.args...); err != nil {
			return "", fmt.Errorf("sqlitedriver: seed: %w", err)
		}
	}
	return longID, nil
}
