// Package dbtest gives tests real, freshly migrated databases: a SQLite file
// in the test's temporary directory, and a PostgreSQL database of its own
// created on the server named by ARBITER_TEST_DATABASE_URL (default
// postgres://postgres@127.0.0.1:5432/postgres). Each test gets its own
// database, so tests run in parallel without sharing state.
package dbtest

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

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

var counter atomic.Int64

// PostgresURL creates an empty database for t and returns its URL. The
// database is dropped when t ends. A test fails (never skips) when PostgreSQL
// cannot be reached: `make test` finds or starts one.
func PostgresURL(t testing.TB) string {
	t.Helper()
	admin, err := sql.Open("pgx", AdminURL())
	if err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	t.Cleanup(func() { admin.Close() })
	name := fmt.Sprintf("arbiter_test_%d_%d_%d", os.Getpid(), time.Now().UnixNano()%1e9, counter.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("dbtest: create database on %s (set ARBITER_TEST_DATABASE_URL, or run `make test`): %v", AdminURL(), err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := admin.ExecContext(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Logf("dbtest: drop %s: %v", name, err)
		}
	})
	u, err := url.Parse(AdminURL())
	if err != nil {
		t.Fatalf("dbtest: parse ARBITER_TEST_DATABASE_URL: %v", err)
	}
	u.Path = "/" + name
	return u.String()
}

// SQLiteURL returns a database URL for a new SQLite file in t's temporary
// directory.
func SQLiteURL(t testing.TB) string {
	return "sqlite:" + filepath.Join(t.TempDir(), "arbiter.db")
}

// Open opens and migrates a fresh database of the given dialect for t.
func Open(t testing.TB, d services.Dialect) *services.Store {
	t.Helper()
	u := SQLiteURL(t)
	if d == services.Postgres {
		u = PostgresURL(t)
	}
	st, err := services.Open(context.Background(), u)
	if err != nil {
		t.Fatalf("dbtest: open %s: %v", d, err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := st.Migrate(context.Background()); err != nil {
		t.Fatalf("dbtest: migrate %s: %v", d, err)
	}
	return st
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
