package drivertest

import (
	"context"
	"database/sql"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	_ "github.com/glebarez/go-sqlite"
	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
	"github.com/arbiter-ledger/arbiter/services/driver"
	"github.com/arbiter-ledger/arbiter/services/driver/pgdriver"
)

// raise is a statement that fails on PostgreSQL with the SQLSTATE named.
func raise(condition string) string {
	return "DO $$ BEGIN RAISE EXCEPTION 'raised' USING ERRCODE = '" + condition + "'; END $$"
}

// TestDriversClassifyTheirErrors: each driver tells a failure of its
// database (503) from a statement it refused (500), on errors its database
// really returns, and the services' DBError follows it.
func TestDriversClassifyTheirErrors(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		ctx, d := setup(t, st)
		m, err := d.Migrator()
		require.NoError(t, err)
		exec := func(q string) error {
			_, err := m.DB.ExecContext(ctx, q)
			require.Error(t, err, q)
			return err
		}
		type kind struct {
			err  error
			want driver.ErrorKind
		}
		cases := map[string]kind{
			"nil":            {nil, driver.ErrorOther},
			"not a database": {errors.New("boom"), driver.ErrorOther},
			"network":        {&net.OpError{Op: "read", Net: "tcp", Err: errors.New("reset")}, driver.ErrorUnavailable},
			"refused":        {exec("SELECT * FROM no_such_table"), driver.ErrorOther},
		}
		switch d.Name() {
		case "postgres":
			cases["deadlock"] = kind{exec(raise("deadlock_detected")), driver.ErrorDeadlock}
			cases["serialization"] = kind{exec(raise("serialization_failure")), driver.ErrorUnavailable}
			cases["too many connections"] = kind{exec(raise("too_many_connections")), driver.ErrorUnavailable}
			cases["shutting down"] = kind{exec(raise("admin_shutdown")), driver.ErrorUnavailable}
			cases["unique violation"] = kind{exec(raise("unique_violation")), driver.ErrorOther}
			// SQLite's words quoted by PostgreSQL do not make SQLite's error.
			cases["quoting SQLite"] = kind{exec("SELECT 'database is locked'::uuid"), driver.ErrorOther}
			_, refused := pgdriver.Open(ctx, "postgres://postgres@127.0.0.1:1/postgres?sslmode=disable&connect_timeout=5", nil)
			require.Error(t, refused)
			cases["connection refused"] = kind{refused, driver.ErrorUnavailable}
		case "sqlite":
			cases["busy"] = kind{sqliteBusy(t, ctx, d), driver.ErrorUnavailable}
			cases["unable to open"] = kind{sqliteCannotOpen(t, ctx), driver.ErrorUnavailable}
		default:
			t.Fatalf("no errors of %s to classify", d.Name())
		}
		for name, c := range cases {
			require.Equal(t, c.want, d.ClassifyError(c.err), "%s: %v", name, c.err)
			if c.err != nil {
				unavailable := errors.Is(services.DBError("test", c.err), services.ErrUnavailable)
				require.Equal(t, c.want != driver.ErrorOther, unavailable, "%s: %v", name, c.err)
			}
		}
	})
}

// sqliteBusy is the error of a second connection that writes while the
// driver holds the write lock, with no busy timeout to wait out.
func sqliteBusy(t *testing.T, ctx context.Context, d driver.Driver) error {
	tx, err := d.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback()
	insert(t, ctx, tx, newAction(opts{key: "k-busy"})) // the write lock, held until the rollback
	path := strings.TrimPrefix(d.Where(), "sqlite:")
	other, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(0)")
	require.NoError(t, err)
	defer other.Close()
	_, err = other.ExecContext(ctx, "BEGIN IMMEDIATE")
	require.Error(t, err)
	return err
}

// sqliteCannotOpen is the error of a database file that cannot be opened.
func sqliteCannotOpen(t *testing.T, ctx context.Context) error {
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "missing", "x.db")+"?mode=ro")
	require.NoError(t, err)
	defer db.Close()
	err = db.PingContext(ctx)
	require.Error(t, err)
	return err
}

// TestMigratorsTakeTurns: two processes migrating one PostgreSQL database
// at once both succeed, because the driver's migration lock makes them
// take turns.
func TestMigratorsTakeTurns(t *testing.T) {
	t.Parallel()
	u := dbtest.PostgresURL(t)
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range errs {
		st, err := services.Open(context.Background(), u)
		require.NoError(t, err)
		t.Cleanup(func() { st.Close() })
		wg.Go(func() { _, errs[i] = st.Migrate(context.Background()) })
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
}
