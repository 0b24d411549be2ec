package dbtest

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
)

// Each copy is fully migrated and a test's own: a table made in one is not
// in the next.
func TestOpenGivesAMigratedDatabaseOfItsOwn(t *testing.T) {
	t.Parallel()
	for _, d := range Dialects {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			first, second := Open(t, d), Open(t, d)
			for _, st := range []*services.Store{first, second} {
				s, err := st.Schema(ctx)
				require.NoError(t, err)
				require.True(t, s.UpToDate(), "%+v", s)
				require.NotZero(t, s.Current)
			}
			require.NoError(t, first.GormWriter().Exec("CREATE TABLE only_here (id integer)").Error)
			require.True(t, first.Gorm().Migrator().HasTable("only_here"))
			require.False(t, second.Gorm().Migrator().HasTable("only_here"))
		})
	}
}

// PostgresURL stays empty, for the tests of migrations themselves.
func TestPostgresURLIsEmpty(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := services.Open(ctx, PostgresURL(t))
	require.NoError(t, err)
	defer st.Close()
	s, err := st.Schema(ctx)
	require.NoError(t, err)
	require.Zero(t, s.Current)
}

// A database whose owner's lock is free (its binary died) is dropped by the
// next sweep; one whose owner still runs is kept.
func TestSweepDropsWhatDeadBinariesLeft(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := postgres(t)
	live, err := p.admin.Conn(ctx)
	require.NoError(t, err)
	defer live.Close()
	const dead, running = 2147483001, 2147483003
	_, err = live.ExecContext(ctx, "SELECT pg_advisory_lock($1, $2)", lockClass, running)
	require.NoError(t, err)
	names := map[int]string{}
	for _, owner := range []int{dead, running} {
		names[owner] = fmt.Sprintf("arbiter_pool_%d_1", owner)
		_, err := p.admin.ExecContext(ctx, "CREATE DATABASE "+names[owner])
		require.NoError(t, err)
		t.Cleanup(func() { p.admin.Exec("DROP DATABASE IF EXISTS " + names[owner] + " WITH (FORCE)") })
	}
	p.sweep(ctx)
	exists := func(name string) bool {
		var n int
		require.NoError(t, p.admin.QueryRowContext(ctx, "SELECT count(*) FROM pg_database WHERE datname = $1", name).Scan(&n))
		return n == 1
	}
	require.False(t, exists(names[dead]), "left by a binary that died")
	require.True(t, exists(names[running]), "its binary still runs")
}
