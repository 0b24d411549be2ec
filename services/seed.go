package services

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"
)

// SeedRequest describes a synthetic ledger for benchmarks and query-plan
// tests: Actions actions in namespace "seed" (finished ones, spread over
// tools and agents), of which TimedOut are timed out, and one action with
// LongTimeline entries.
type SeedRequest struct {
	Actions      int
	TimedOut     int
	LongTimeline int
}

// SeedResult names what Seed made.
type SeedResult struct {
	Namespace    string
	LongActionID string
	Took         time.Duration
}

// Seed fills the database with synthetic actions in bulk, with set-based SQL
// rather than through the ledger, so that a million actions take seconds.
// It is for benchmarks and tests only: it writes no alerts.
func (s *Store) Seed(ctx context.Context, r SeedRequest) (SeedResult, error) {
	start := time.Now()
	if r.Actions < 1 || r.TimedOut < 0 || r.TimedOut > r.Actions || r.LongTimeline < 0 {
		return SeedResult{}, Errorf(CodeInvalid, "seed: need 1 or more actions and at most that many timed out")
	}
	const ns = "seed"
	if err := NewKeys(s).EnsureNamespace(ctx, ns); err != nil {
		return SeedResult{}, err
	}
	now := utcNow()
	var stmts []string
	if s.Dialect == Postgres {
		stmts = []string{
			// Time-ordered ids, like the UUIDv7 the ledger makes: inserts
			// append to the indexes instead of scattering.
			`CREATE OR REPLACE FUNCTION pg_temp.seed_uuid(ts timestamptz, n bigint, k int) RETURNS uuid LANGUAGE sql IMMUTABLE AS $$
				SELECT (lpad(to_hex((extract(epoch FROM ts) * 1000)::bigint), 12, '0') || '7' || lpad(to_hex(k), 3, '0') ||
					'8' || lpad(to_hex(n), 15, '0'))::uuid $$`,
			fmt.Sprintf(`INSERT INTO actions (id, namespace, key, tool, effect, status, attempt, version, lease_until,
				reference, agent, fingerprint, params, result, retriable, entry_seq, created_at, updated_at)
			SELECT pg_temp.seed_uuid($1::timestamptz - (g || ' seconds')::interval, g, 0), 'seed', 'seed:' || g, 'tool.' || (g %% 20), 'keyed',
				CASE WHEN g <= %d THEN 'timed_out' ELSE 'succeeded' END, 1, 2,
				CASE WHEN g <= %d THEN $1::timestamptz - interval '1 minute' END,
				'ref-' || g, 'agent-' || (g %% 50), md5(g::text), jsonb_build_object('n', g), '{"ok": true}', false, 2,
				$1::timestamptz - (g || ' seconds')::interval, $1::timestamptz - (g || ' seconds')::interval
			FROM generate_series(1, %d) AS g`, r.TimedOut, r.TimedOut, r.Actions),
			`INSERT INTO entries (id, action_id, namespace, seq, type, actor_kind, actor_name, attempt, payload, recorded_at)
			SELECT pg_temp.seed_uuid(created_at, substr(key, 6)::bigint, s.seq), id, namespace, s.seq,
				CASE WHEN s.seq = 1 THEN 'intent' WHEN status = 'timed_out' THEN 'timed_out' ELSE 'succeeded' END,
				CASE WHEN s.seq = 2 AND status = 'timed_out' THEN 'system' ELSE 'agent' END, agent, 1, '{}',
				created_at + (s.seq || ' milliseconds')::interval
			FROM actions, (VALUES (1), (2)) AS s(seq)
			WHERE namespace = 'seed' AND key LIKE 'seed:%' ORDER BY id, s.seq`,
		}
	} else {
		stmts = []string{
			fmt.Sprintf(`WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < %d)
			INSERT INTO actions (id, namespace, key, tool, effect, status, attempt, version, lease_until,
				reference, agent, fingerprint, params, result, retriable, entry_seq, created_at, updated_at)
			SELECT lower(hex(randomblob(4)) || '-' || hex(randomblob(2)) || '-7' || substr(hex(randomblob(2)), 2) || '-8' ||
				substr(hex(randomblob(2)), 2) || '-' || hex(randomblob(6))),
				'seed', 'seed:' || n, 'tool.' || (n %% 20), 'keyed',
				CASE WHEN n <= %d THEN 'timed_out' ELSE 'succeeded' END, 1, 2,
				CASE WHEN n <= %d THEN ?1 END, 'ref-' || n, 'agent-' || (n %% 50), hex(randomblob(16)),
				json_object('n', n), '{"ok":true}', 0, 2, ?1, ?1
			FROM g`, r.Actions, r.TimedOut, r.TimedOut),
			`INSERT INTO entries (id, action_id, namespace, seq, type, actor_kind, actor_name, attempt, payload, recorded_at)
			SELECT lower(hex(randomblob(16))), id, namespace, 1, 'intent', 'agent', agent, 1, '{}', created_at FROM actions
			WHERE namespace = 'seed' AND key LIKE 'seed:%'`,
			`INSERT INTO entries (id, action_id, namespace, seq, type, actor_kind, actor_name, attempt, payload, recorded_at)
			SELECT lower(hex(randomblob(16))), id, namespace, 2, CASE status WHEN 'timed_out' THEN 'timed_out' ELSE 'succeeded' END,
				CASE status WHEN 'timed_out' THEN 'system' ELSE 'agent' END, agent, 1, '{}', updated_at FROM actions
			WHERE namespace = 'seed' AND key LIKE 'seed:%'`,
		}
	}
	// One connection: the helper function lives in its session.
	conn, err := s.wsq.Conn(ctx)
	if err != nil {
		return SeedResult{}, dbError("seed", err)
	}
	defer conn.Close()
	for _, q := range stmts {
		var args []any
		if strings.Contains(q, "$1") || strings.Contains(q, "?1") {
			args = []any{now}
		}
		if _, err := conn.ExecContext(ctx, q, args...); err != nil {
			return SeedResult{}, dbError("seed", err)
		}
	}
	res := SeedResult{Namespace: ns}
	if r.LongTimeline > 0 {
		id, err := s.seedLongTimeline(ctx, conn, r.LongTimeline, now)
		if err != nil {
			return SeedResult{}, err
		}
		res.LongActionID = id
	}
	if s.Dialect == Postgres {
		if _, err := conn.ExecContext(ctx, `ANALYZE actions; ANALYZE entries`); err != nil {
			return SeedResult{}, dbError("seed: analyze", err)
		}
	} else if _, err := conn.ExecContext(ctx, `ANALYZE`); err != nil {
		return SeedResult{}, dbError("seed: analyze", err)
	}
	res.Took = time.Since(start)
	return res, nil
}

// seedLongTimeline makes one action with n entries (an intent, then notes).
func (s *Store) seedLongTimeline(ctx context.Context, conn *sql.Conn, n int, now time.Time) (string, error) {
	id := newID()
	_, err := conn.ExecContext(ctx, s.rebind(`INSERT INTO actions (id, namespace, key, tool, effect, status, attempt,
		version, fingerprint, params, retriable, entry_seq, created_at, updated_at)
		VALUES ($1, 'seed', 'seed:long-timeline', 'tool.long', 'keyed', 'succeeded', 1, 2, 'long', '{}', false, $2, $3, $3)`),
		id, n, now)
	if err != nil {
		return "", dbError("seed: long timeline", err)
	}
	q := `INSERT INTO entries (id, action_id, namespace, seq, type, actor_kind, actor_name, attempt, payload, recorded_at)
		SELECT gen_random_uuid(), $1, 'seed', g, CASE WHEN g = 1 THEN 'intent' ELSE 'note' END, 'agent', 'seed', 1,
			jsonb_build_object('message', 'note ' || g), $2::timestamptz + (g || ' milliseconds')::interval
		FROM generate_series(1, $3::int) AS g`
	if s.Dialect == SQLite {
		q = `WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < ?3)
		INSERT INTO entries (id, action_id, namespace, seq, type, actor_kind, actor_name, attempt, payload, recorded_at)
		SELECT lower(hex(randomblob(16))), ?1, 'seed', n, CASE WHEN n = 1 THEN 'intent' ELSE 'note' END, 'agent', 'seed', 1,
			json_object('message', 'note ' || n), ?2 FROM g`
	}
	if _, err := conn.ExecContext(ctx, q, id, now, n); err != nil {
		return "", dbError("seed: long timeline", err)
	}
	return id, nil
}
