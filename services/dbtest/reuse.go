package dbtest

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"
)

// A migrated copy that a test is done with goes back to the pool once every
// connection to it is ended and its tables are emptied, and only if its
// schema is still the template's; otherwise it is dropped. The template has
// no rows outside goose's table, so empty tables are the template's state.

// copyDB is a migrated copy, with a connection of its own for emptying it.
type copyDB struct {
	name string
	db   *sql.DB
}

// templateShape is what a copy must still look like to be reused: its
// schema's fingerprint, and the query naming its tables that have rows.
type templateShape struct {
	fingerprint string
	withRows    string
	err         error
}

// schemaFingerprint covers every object a test could add, drop or change in
// the database, goose's record of applied migrations and the database's
// own settings.
const schemaFingerprint = `
WITH ns AS (
	SELECT oid, nspname FROM pg_namespace
	WHERE nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast')
		AND nspname NOT LIKE 'pg_temp_%' AND nspname NOT LIKE 'pg_toast_temp_%'
)
SELECT md5(string_agg(x, E'\n' ORDER BY x)) FROM (
	SELECT 'ns ' || nspname FROM ns
	UNION ALL SELECT 'rel ' || ns.nspname || '.' || c.relname || ' ' || c.relkind::text
		FROM pg_class c JOIN ns ON ns.oid = c.relnamespace
	UNION ALL SELECT 'col ' || c.oid::regclass || '.' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod)
			|| ' ' || a.attnotnull::text || ' ' || coalesce(pg_get_expr(d.adbin, d.adrelid), '')
		FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid JOIN ns ON ns.oid = c.relnamespace
		LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
		WHERE a.attnum > 0 AND NOT a.attisdropped
	UNION ALL SELECT 'con ' || conrelid::regclass || ' ' || conname || ' ' || pg_get_constraintdef(c.oid)
		FROM pg_constraint c JOIN ns ON ns.oid = c.connamespace
	UNION ALL SELECT 'idx ' || pg_get_indexdef(i.indexrelid)
		FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN ns ON ns.oid = c.relnamespace
	UNION ALL SELECT 'fn ' || p.oid::regprocedure::text || ' ' || md5(p.prosrc)
		FROM pg_proc p JOIN ns ON ns.oid = p.pronamespace
	UNION ALL SELECT 'type ' || t.oid::regtype::text FROM pg_type t JOIN ns ON ns.oid = t.typnamespace
	UNION ALL SELECT 'trg ' || tgrelid::regclass || ' ' || tgname FROM pg_trigger WHERE NOT tgisinternal
	UNION ALL SELECT 'ext ' || extname || ' ' || extversion FROM pg_extension
	UNION ALL SELECT 'seq ' || s.seqrelid::regclass || ' ' || pg_sequence_last_value(s.seqrelid)
		FROM pg_sequence s
	UNION ALL SELECT 'goose ' || version_id || ' ' || is_applied::text FROM goose_db_version
	UNION ALL SELECT 'set ' || array_to_string(setconfig, ',') FROM pg_db_role_setting
		WHERE setdatabase = (SELECT oid FROM pg_database WHERE datname = current_database())
) o(x)`

// migrated hands t a migrated copy, one a finished test emptied if there is
// one, and takes it back when t ends.
func (p *pg) migrated(t testing.TB) string {
	t.Helper()
	p.mu.Lock()
	var c *copyDB
	if n := len(p.free); n > 0 {
		c, p.free = p.free[n-1], p.free[:n-1]
	}
	p.mu.Unlock()
	if c == nil {
		c = p.newCopy(t)
	}
	t.Cleanup(func() { p.giveBack(t, c) })
	return databaseURL(c.name)
}

func (p *pg) newCopy(t testing.TB) *copyDB {
	t.Helper()
	name := fmt.Sprintf("arbiter_pool_%d_%d", p.owner, dbSeq.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := p.admin.ExecContext(ctx, "CREATE DATABASE "+name+" TEMPLATE "+p.template); err != nil {
		t.Fatalf("dbtest: create database on %s (set ARBITER_TEST_DATABASE_URL, or run `make test`): %v", AdminURL(), err)
	}
	c := &copyDB{name: name}
	var err error
	if c.db, err = sql.Open("pgx", databaseURL(name)); err != nil {
		p.drop(c)
		t.Fatalf("dbtest: %v", err)
	}
	c.db.SetMaxOpenConns(1)
	// The first copy, untouched yet, is the template's shape.
	p.schema.Do(func() { p.shape = readShape(ctx, c.db) })
	if p.shape.err != nil {
		p.drop(c)
		t.Fatalf("dbtest: read the template's schema: %v", p.shape.err)
	}
	return c
}

func readShape(ctx context.Context, db *sql.DB) templateShape {
	var s templateShape
	if s.err = db.QueryRowContext(ctx, schemaFingerprint).Scan(&s.fingerprint); s.err != nil {
		return s
	}
	rows, err := db.QueryContext(ctx, `SELECT quote_ident(tablename) FROM pg_tables
		WHERE schemaname = 'public' AND tablename <> 'goose_db_version' ORDER BY tablename`)
	if err != nil {
		s.err = err
		return s
	}
	defer rows.Close()
	var exists []string
	for rows.Next() {
		var table string
		if s.err = rows.Scan(&table); s.err != nil {
			return s
		}
		exists = append(exists, fmt.Sprintf("SELECT '%s' WHERE EXISTS (SELECT 1 FROM %s)", table, table))
	}
	s.err = rows.Err()
	s.withRows = strings.Join(exists, " UNION ALL ")
	return s
}

// giveBack empties c and returns it to the pool, or drops it when it cannot
// be made the template's again.
func (p *pg) giveBack(t testing.TB, c *copyDB) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.empty(ctx, c); err != nil {
		t.Logf("dbtest: %s dropped, not reused: %v", c.name, err)
		p.drop(c)
		return
	}
	p.mu.Lock()
	p.free = append(p.free, c)
	p.mu.Unlock()
}

func (p *pg) empty(ctx context.Context, c *copyDB) error {
	conn, err := c.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	// Whatever the test left connected (a store it did not close, a child
	// process) is ended, so nothing it does reaches the next test.
	// Ending is asynchronous; waiting for it frees their advisory locks too.
	for {
		var others int
		if err := conn.QueryRowContext(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid()`).Scan(&others); err != nil {
			return err
		}
		if others == 0 {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
	var fp string
	if err := conn.QueryRowContext(ctx, schemaFingerprint).Scan(&fp); err != nil {
		return err
	}
	if fp != p.shape.fingerprint {
		return fmt.Errorf("the test changed its schema")
	}
	rows, err := conn.QueryContext(ctx, p.shape.withRows)
	if err != nil {
		return err
	}
	var tables []string
	for rows.Next() {
		var table string
		if err := rows.Scan(&table); err != nil {
			rows.Close()
			return err
		}
		tables = append(tables, table)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	if len(tables) == 0 {
		return nil
	}
	_, err = conn.ExecContext(ctx, "TRUNCATE "+strings.Join(tables, ", ")+" CASCADE")
	return err
}

func (p *pg) drop(c *copyDB) {
	if c.db != nil {
		c.db.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p.admin.ExecContext(ctx, "DROP DATABASE IF EXISTS "+c.name+" WITH (FORCE)")
}
