-- A big synthetic ledger for the bigledger section of bench/run-limit,
-- written by the server itself (INSERT ... SELECT FROM generate_series) in
-- chunks, on a database `arbiter migrate` made:
--
--   psql "$DB_URL" -v actions=10000000 -f bench/seed-big.sql
--
-- It adds :actions actions (default 10 million; on a ledger it seeded
-- before, numbered after the last one there) in 20 namespaces (big-00 to
-- big-19, keys unique in each) created over the last 90 days, oldest first,
-- with time-ordered ids as the ledger's UUIDv7 are, and 3 to 7 entries each
-- (5 on average) with their seq and the action's entry_seq. Statuses: about
-- 91% succeeded, 5% failed, 2% confirmed, 0.5% each compensated, abandoned
-- and denied, 0.1% timed out, 0.01% each retry and compensation requested,
-- and awaiting approval (among the newest 2%, with the approval's expiry
-- ahead); one action in 5,000 has a key_reused alert and one in 20,000 a
-- stale_outcome alert. The secondary indexes are dropped during the load
-- and built again after it; the foreign keys are not checked during it (the
-- rows are consistent by construction). It ends with VACUUM ANALYZE.
\set ON_ERROR_STOP on
\if :{?actions}
\else
\set actions 10000000
\endif
\if :{?chunk}
\else
\set chunk 1000000
\endif
SELECT set_config('seed_big.actions', :'actions', false), set_config('seed_big.chunk', :'chunk', false),
	set_config('seed_big.start', (now() - interval '90 days')::text, false);
SET maintenance_work_mem = '512MB';
-- Rows written here are consistent by construction: skip the foreign keys'
-- triggers rather than check 50 million of them one by one.
SET session_replication_role = replica;

INSERT INTO namespaces (name, created_at)
SELECT 'big-' || lpad(i::text, 2, '0'), now() - interval '91 days' FROM generate_series(0, 19) AS i
ON CONFLICT (name) DO NOTHING;

-- The ledger's ids: 48 bits of milliseconds, then version 7; n and k make
-- them unique.
CREATE OR REPLACE FUNCTION pg_temp.big_uuid(ts timestamptz, n bigint, k int) RETURNS uuid LANGUAGE sql IMMUTABLE AS $$
	SELECT (lpad(to_hex((extract(epoch FROM ts) * 1000)::bigint), 12, '0') || '7' || lpad(to_hex(k), 3, '0') ||
		'8' || lpad(to_hex(n), 15, '0'))::uuid $$;

-- The secondary indexes (those no constraint owns) go during the load. The
-- list is kept in a table until they are built again, so that a run that
-- fails midway leaves it for the next run to finish.
CREATE TABLE IF NOT EXISTS seed_big_indexes (indexname text PRIMARY KEY, indexdef text NOT NULL);
INSERT INTO seed_big_indexes
SELECT i.indexname, i.indexdef FROM pg_indexes i
WHERE i.schemaname = 'public' AND i.tablename IN ('actions', 'entries')
	AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = format('%I', i.indexname)::regclass)
ON CONFLICT (indexname) DO NOTHING;
SELECT 'DROP INDEX IF EXISTS ' || quote_ident(indexname) FROM seed_big_indexes \gexec

CREATE TEMP TABLE big_chunk (g bigint PRIMARY KEY, c timestamptz NOT NULL, k int NOT NULL, st text NOT NULL);

DO $$
DECLARE
	n bigint := current_setting('seed_big.actions')::bigint;
	chunk bigint := current_setting('seed_big.chunk')::bigint;
	base bigint := coalesce((SELECT max(substr(key, 3)::bigint) FROM actions WHERE namespace = 'big-00' AND key LIKE 'k-%'), 0);
	start timestamptz := current_setting('seed_big.start')::timestamptz;
	span interval := interval '90 days';
	lo bigint := 1;
	t0 timestamptz;
BEGIN
	-- On a ledger seeded before, the new actions' numbers (and keys)
	-- follow the highest one there.
	WHILE lo <= n LOOP
		t0 := clock_timestamp();
		-- The chunk's actions, which both inserts read: h picks the
		-- status, k (3 to 7) the number of entries.
		TRUNCATE big_chunk;
		INSERT INTO big_chunk
		SELECT g, c, k, st FROM (SELECT g, start + span * ((g - base - 1)::float8 / n) AS c, (3 + g % 5)::int AS k,
			CASE WHEN h < 10 THEN 'timed_out'
				WHEN h < 15 AND g - base > n * 0.98 THEN 'awaiting_approval'
				WHEN h = 15 THEN 'retry_requested'
				WHEN h = 16 THEN 'compensation_requested'
				WHEN h < 517 THEN 'failed'
				WHEN h < 717 THEN 'confirmed'
				WHEN h < 767 THEN 'compensated'
				WHEN h < 817 THEN 'abandoned'
				WHEN h < 867 THEN 'denied'
				ELSE 'succeeded' END AS st
			FROM (SELECT g, (g * 7919) % 10000 AS h FROM generate_series(base + lo, base + least(lo + chunk - 1, n)) AS g) AS x) AS a;
		-- One row per action.
		INSERT INTO actions (id, namespace, key, tool, effect, status, attempt, version, lease_until, deadline,
			reference, agent, run_id, fingerprint, params, result, external_ref, retriable, entry_seq,
			created_at, updated_at, approval, reconciliation)
		SELECT pg_temp.big_uuid(c, g, 0), 'big-' || lpad((g % 20)::text, 2, '0'), 'k-' || lpad(g::text, 10, '0'),
			'tool.' || (g % 37), CASE WHEN g % 4 = 0 THEN 'idempotent' ELSE 'keyed' END, st, 1, k,
			NULL, CASE WHEN st = 'awaiting_approval' THEN c + interval '7 days' END,
			CASE WHEN g % 3 = 0 THEN 'ref-' || g END, 'agent-' || (g % 50), 'run-' || (g / 10), md5(g::text),
			jsonb_build_object('to', 'user' || (g % 1000) || '@example.com', 'amount', g % 997),
			CASE WHEN st IN ('succeeded', 'confirmed', 'compensated') THEN '{"ok": true}'::jsonb
				WHEN st = 'failed' THEN '{"error": "upstream said no"}'::jsonb END,
			CASE WHEN st IN ('succeeded', 'confirmed') THEN 'ext-' || g END, st = 'failed', k,
			c, c + (k || ' seconds')::interval,
			CASE WHEN st = 'awaiting_approval' THEN jsonb_build_object('required', 1, 'approvals', '[]'::jsonb,
				'expires_at', c + interval '7 days', 'escalate_at', NULL, 'policies', '[]'::jsonb, 'rejection', NULL) END,
			NULL
		FROM big_chunk;

		-- Entries: the intent first, heartbeats or notes, the outcome last
		-- (none for an action still awaiting approval, whose last is a note).
		INSERT INTO entries (id, action_id, namespace, seq, type, actor_kind, actor_name, attempt, payload,
			occurred_at, recorded_at)
		SELECT pg_temp.big_uuid(c + (s || ' seconds')::interval, g, s), pg_temp.big_uuid(c, g, 0),
			'big-' || lpad((g % 20)::text, 2, '0'), s, ty,
			CASE WHEN ty IN ('timed_out', 'key_reused', 'stale_outcome') THEN 'system'
				WHEN ty = 'decision' THEN 'user' ELSE 'agent' END,
			CASE WHEN ty IN ('timed_out', 'key_reused', 'stale_outcome') THEN 'arbiter'
				WHEN ty = 'decision' THEN 'ops@example.com' ELSE 'agent-' || (g % 50) END,
			1,
			CASE ty WHEN 'intent' THEN jsonb_build_object('tool', 'tool.' || (g % 37))
				WHEN 'note' THEN '{"message": "working"}'::jsonb
				WHEN 'succeeded' THEN '{"result": {"ok": true}}'::jsonb
				WHEN 'failed' THEN '{"error": "upstream said no"}'::jsonb
				ELSE '{}'::jsonb END,
			CASE WHEN ty IN ('intent', 'succeeded', 'failed', 'note', 'heartbeat') THEN c + (s || ' seconds')::interval END,
			c + (s || ' seconds')::interval
		FROM (SELECT g, c, s,
			CASE WHEN s = 1 THEN 'intent'
				WHEN s = k THEN CASE st WHEN 'succeeded' THEN 'succeeded' WHEN 'failed' THEN 'failed'
					WHEN 'timed_out' THEN 'timed_out' WHEN 'awaiting_approval' THEN 'note'
					WHEN 'retry_requested' THEN 'decision' WHEN 'compensation_requested' THEN 'decision'
					WHEN 'confirmed' THEN 'decision' WHEN 'abandoned' THEN 'decision' WHEN 'denied' THEN 'decision'
					ELSE 'compensated' END
				WHEN s = 2 AND g % 5000 = 0 THEN 'key_reused'
				WHEN s = 2 AND g % 20000 = 1 THEN 'stale_outcome'
				WHEN s % 2 = 0 THEN 'heartbeat' ELSE 'note' END AS ty
			FROM big_chunk AS a,
				generate_series(1, a.k) AS s) AS e;
		COMMIT;
		RAISE NOTICE 'seed-big: actions % to % in %', lo, least(lo + chunk - 1, n), clock_timestamp() - t0;
		lo := lo + chunk;
	END LOOP;
END $$;

RESET session_replication_role;
\timing on
SELECT indexdef FROM seed_big_indexes \gexec
DROP TABLE seed_big_indexes;
\timing off
VACUUM ANALYZE actions;
VACUUM ANALYZE entries;
VACUUM ANALYZE namespaces;
SELECT status, count(*) FROM actions GROUP BY status ORDER BY count(*) DESC;
SELECT count(*) AS entries FROM entries;
SELECT pg_size_pretty(pg_database_size(current_database())) AS database_size;
