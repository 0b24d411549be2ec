package pgdriver

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/arbiter-ledger/arbiter/services/driver"
)

// Seed writes the synthetic ledger with set-based SQL, so that a million
// actions take seconds. It writes no alerts.
func (d *Driver) Seed(ctx context.Context, p *driver.SeedParams) (string, error) {
	stmts := []string{
		// Time-ordered ids, like the UUIDv7 the ledger makes: inserts
		// append to the indexes instead of scattering.
		`CREATE OR REPLACE FUNCTION pg_temp.seed_uuid(ts timestamptz, n bigint, k int) RETURNS uuid LANGUAGE sql IMMUTABLE AS $$
			SELECT (lpad(to_hex((extract(epoch FROM ts) * 1000)::bigint), 12, '0') || '7' || lpad(to_hex(k), 3, '0') ||
				'8' || lpad(to_hex(n), 15, '0'))::uuid $$`,
		fmt.Sprintf(`INSERT INTO actions (`+actionColumns+`)
		SELECT pg_temp.seed_uuid($1::timestamptz - (g || ' seconds')::interval, g, 0), $2, 'seed:' || g, 'tool.' || (g %% 20), 'keyed',
			CASE WHEN g <= %d THEN 'timed_out' ELSE 'succeeded' END, 1, 2,
			CASE WHEN g <= %d THEN $1::timestamptz - interval '1 minute' END, NULL,
			'ref-' || g, 'agent-' || (g %% 50), NULL, md5(g::text), jsonb_build_object('n', g), '{"ok": true}', NULL, false, 2,
			$1::timestamptz - (g || ' seconds')::interval, $1::timestamptz - (g || ' seconds')::interval, NULL, NULL, NULL
		FROM generate_series(%d, %d) AS g`, p.TimedOut, p.TimedOut, p.From, p.From+p.Actions-1),
		`INSERT INTO entries (` + entryColumns + `)
		SELECT pg_temp.seed_uuid(created_at, substr(key, 6)::bigint, s.seq), id, namespace, s.seq,
			CASE WHEN s.seq = 1 THEN 'intent' WHEN status = 'timed_out' THEN 'timed_out' ELSE 'succeeded' END,
			CASE WHEN s.seq = 2 AND status = 'timed_out' THEN 'system' ELSE 'agent' END, agent, 1, '{}', NULL,
			created_at + (s.seq || ' milliseconds')::interval
		FROM generate_series($2::int, $3::int) AS g JOIN actions ON namespace = $1 AND key = 'seed:' || g, (VALUES (1), (2)) AS s(seq)
		ORDER BY id, s.seq`,
	}
	// One connection: the helper function lives in its session.
	conn, err := d.db.Conn(ctx)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	args := [][]any{nil, {p.Now, p.Namespace}, {p.Namespace, p.From, p.From + p.Actions - 1}}
	for i, q := range stmts {
		if _, err := conn.ExecContext(ctx, q, args[i]...); err != nil {
			return "", fmt.Errorf("pgdriver: seed: %w", err)
		}
	}
	var longID string
	if !p.Last {
		return "", nil
	}
	if p.LongTimeline > 0 {
		longID = uuid.Must(uuid.NewV7()).String()
		if _, err := conn.ExecContext(ctx, `INSERT INTO actions (`+actionColumns+`)
			VALUES ($1, $2, 'seed:long-timeline', 'tool.long', 'keyed', 'succeeded', 1, 2, NULL, NULL, NULL, NULL, NULL,
				'long', '{}', NULL, NULL, false, $3, $4, $4, NULL, NULL, NULL)`, longID, p.Namespace, p.LongTimeline, p.Now); err != nil {
			return "", fmt.Errorf("pgdriver: seed a long timeline: %w", err)
		}
		if _, err := conn.ExecContext(ctx, `INSERT INTO entries (`+entryColumns+`)
			SELECT gen_random_uuid(), $1, $2, g, CASE WHEN g = 1 THEN 'intent' ELSE 'note' END, 'agent', 'seed', 1,
				jsonb_build_object('message', 'note ' || g), NULL, $3::timestamptz + (g || ' milliseconds')::interval
			FROM generate_series(1, $4::int) AS g`, longID, p.Namespace, p.Now, p.LongTimeline); err != nil {
			return "", fmt.Errorf("pgdriver: seed a long timeline: %w", err)
		}
	}
	if _, err := conn.ExecContext(ctx, `ANALYZE actions; ANALYZE entries`); err != nil {
		return "", fmt.Errorf("pgdriver: seed: analyze: %w", err)
	}
	return longID, nil
}
