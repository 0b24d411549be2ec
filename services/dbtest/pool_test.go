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

// A database whose owner's lock is free (its binary exited) is dropped by the
// next sweep; one whose owner still runs is kept. So is a template in use.
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
	// Templates of other migrations: one no binary uses, one another uses.
	unused, used := "arbiter_template_d100000000000000", "arbiter_template_d300000000000000"
	_, err = live.ExecContext(ctx, "SELECT pg_advisory_lock_shared($1, $2)", templateClass, templateKey("d300000000000000"))
	require.NoError(t, err)
	for _, name := range []string{unused, used} {
		_, err := p.admin.ExecContext(ctx, "CREATE DATABASE "+name+" IS_TEMPLATE true")
		require.NoError(t, err)
		t.Cleanup(func() {
			p.admin.Exec("ALTER DATABASE " + name + " WITH IS_TEMPLATE false")
			p.admin.Exec("DROP DATABASE IF EXISTS " + name)
		})
	}
	p.sweep(ctx)
	exists := func(name string) bool {
		var n int
		require.NoError(t, p.admin.QueryRowContext(ctx, "SELECT count(*) FROM pg_database WHERE datname = $1", name).Scan(&n))
		return n == 1
	}
	require.False(t, exists(names[dead]), "left by a binary that died")
	require.True(t, exists(names[running]), "its binary still runs")
	require.False(t, exists(unused), "a template no binary uses")
	require.True(t, exists(used), "a template a binary uses")
	require.True(t, exists(p.template), "this binary's template")
}

// A copy handed back is emptied and handed out again: the next test gets the
// same database with no rows and every connection of the last test ended,
// and a copy whose schema a test changed is dropped, not reused. Not
// parallel, so that no other test takes the copy in between.
func TestReusedCopyIsEmpty(t *testing.T) {
	ctx := context.Background()
	var name string
	var leftOpen *services.Store
	t.Run("writes", func(t *testing.T) {
		st := Open(t, services.Postgres)
		require.NoError(t, st.Gorm().Raw("SELECT current_database()").Scan(&name).Error)
		require.NoError(t, st.GormWriter().Exec(`INSERT INTO namespaces (name, created_at) VALUES ('payments', now());
			INSERT INTO users (id, email, role, password_hash, created_at, updated_at)
			VALUES (gen_random_uuid(), 'a@example.com', 'admin', 'x', now(), now())`).Error)
		var err error
		leftOpen, err = services.Open(ctx, databaseURL(name))
		require.NoError(t, err)
		require.NoError(t, leftOpen.Ping(ctx))
	})
	require.NotNil(t, leftOpen)
	defer leftOpen.Close()
	t.Run("reuses", func(t *testing.T) {
		st := Open(t, services.Postgres)
		var again string
		require.NoError(t, st.Gorm().Raw("SELECT current_database()").Scan(&again).Error)
		require.Equal(t, name, again, "the copy is reused")
		for _, table := range []string{"namespaces", "users"} {
			var n int
			require.NoError(t, st.Gorm().Raw("SELECT count(*) FROM "+table).Scan(&n).Error)
			require.Zero(t, n, table)
		}
		require.Error(t, leftOpen.Gorm().Exec("SELECT 1").Error, "the last test's connection was ended")
		require.NoError(t, st.GormWriter().Exec("CREATE TABLE only_here (id integer)").Error)
	})
	t.Run("not reused after a schema change", func(t *testing.T) {
		st := Open(t, services.Postgres)
		var again string
		require.NoError(t, st.Gorm().Raw("SELECT current_database()").Scan(&again).Error)
		require.NotEqual(t, name, again)
		require.False(t, st.Gorm().Migrator().HasTable("only_here"))
	})
}
