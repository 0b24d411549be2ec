// Package dbtest gives tests real, freshly migrated databases: a SQLite file
// in the test's temporary directory, and a PostgreSQL database of its own
// on the server named by ARBITER_TEST_DATABASE_URL (default
// postgres://postgres@127.0.0.1:5432/postgres). Each test gets its own
// database, so tests run in parallel without sharing state. Both are copies
// of a template migrated once, and a PostgreSQL copy a test is done with is
// emptied for the next (pool.go, reuse.go).
package dbtest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/arbiter-ledger/arbiter/services"
)

// DefaultPostgresURL is used when ARBITER_TEST_DATABASE_URL is unset.
const DefaultPostgresURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// AdminURL is the PostgreSQL server tests create their databases on.
func AdminURL() string {
	if u := os.Getenv("ARBITER_TEST_DATABASE_URL"); u != "" {
		return u
	}
	return DefaultPostgresURL
}

// PostgresURL creates an empty database for t and returns its URL. The
// database is dropped when t ends. A test fails (never skips) when PostgreSQL
// cannot be reached: `make test` finds or starts one.
func PostgresURL(t testing.TB) string {
	t.Helper()
	return postgres(t).create(t, false)
}

// MigratedPostgresURL creates a fully migrated database for t, a copy of the
// template Open uses, and returns its URL. The database is dropped when t
// ends.
func MigratedPostgresURL(t testing.TB) string {
	t.Helper()
	return postgres(t).create(t, true)
}

// SQLiteURL returns a database URL for a new SQLite file in t's temporary
// directory.
func SQLiteURL(t testing.TB) string {
	return "sqlite:" + filepath.Join(t.TempDir(), "arbiter.db")
}

// Open opens a fresh, fully migrated database of the given dialect for t: a
// copy of a template migrated once (pool.go), on PostgreSQL perhaps one an
// earlier test used and that was emptied since (reuse.go).
func Open(t testing.TB, d services.Dialect) *services.Store {
	t.Helper()
	var u string
	if d == services.Postgres {
		u = postgres(t).migrated(t)
	} else {
		b, err := sqliteTemplate()
		if err != nil {
			t.Fatalf("dbtest: migrate the SQLite template: %v", err)
		}
		u = SQLiteURL(t)
		if err := os.WriteFile(strings.TrimPrefix(u, "sqlite:"), b, 0o644); err != nil {
			t.Fatalf("dbtest: %v", err)
		}
	}
	st, err := services.Open(context.Background(), u)
	if err != nil {
		t.Fatalf("dbtest: open %s: %v", d, err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func postgres(t testing.TB) *pg {
	t.Helper()
	p, err := pgOnce()
	if err != nil {
		t.Fatalf("dbtest: PostgreSQL at %s (set ARBITER_TEST_DATABASE_URL, or run `make test`): %v", AdminURL(), err)
	}
	return p
}

// Dialects are the databases every behaviour test runs against.
var Dialects = []services.Dialect{services.Postgres, services.SQLite}

// Each runs fn as a parallel subtest per dialect, each with its own fresh
// database.
func Each(t *testing.T, fn func(t *testing.T, st *services.Store)) {
	t.Helper()
	for _, d := range Dialects {
		t.Run(strings.ToLower(string(d)), func(t *testing.T) {
			t.Parallel()
			fn(t, Open(t, d))
		})
	}
}
