package services_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
)

// TestMigrationsKeepWhatWasThere: the migrations that change data do to a
// database written by the version before them what they say: 00011 drops
// the passed lease an action kept from before its compensation was
// requested (a compensation's lease now means one is running), and 00013
// gives every viewer and operator their role in every namespace.
func TestMigrationsKeepWhatWasThere(t *testing.T) {
	t.Parallel()
	for _, d := range dbtest.Dialects {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			u := dbtest.SQLiteURL(t)
			if d == services.Postgres {
				u = dbtest.PostgresURL(t)
			}
			st, err := services.Open(ctx, u)
			require.NoError(t, err)
			t.Cleanup(func() { st.Close() })
			require.NoError(t, st.MigrateTo(ctx, 10))
			db := st.GormWriter()
			at := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
			require.NoError(t, db.Exec(`INSERT INTO namespaces (name, created_at) VALUES ('payments', ?)`, at).Error)
			for _, a := range []struct{ id, key, status string }{
				{"01930000-0000-7000-8000-000000000001", "comp", "compensation_requested"},
				{"01930000-0000-7000-8000-000000000002", "late", "timed_out"},
			} {
				require.NoError(t, db.Exec(`INSERT INTO actions (id, namespace, key, tool, effect, status, attempt, version,
					lease_until, fingerprint, params, retriable, entry_seq, created_at, updated_at)
					VALUES (?, 'payments', ?, 'payments.refund', 'keyed', ?, 1, 3, ?, 'fp', '{}', false, 3, ?, ?)`,
					a.id, a.key, a.status, at.Add(time.Minute), at, at).Error)
			}
			require.NoError(t, st.MigrateTo(ctx, 12))
			for _, u := range []struct{ id, email, role string }{
				{"01930000-0000-7000-8000-0000000000a1", "ana@example.com", "operator"},
				{"01930000-0000-7000-8000-0000000000a2", "bo@example.com", "viewer"},
				{"01930000-0000-7000-8000-0000000000a3", "root@example.com", "admin"},
			} {
				require.NoError(t, db.Exec(`INSERT INTO users (id, email, password_hash, role, created_at, updated_at)
					VALUES (?, ?, 'x', ?, ?, ?)`, u.id, u.email, u.role, at, at).Error)
			}
			_, err = st.Migrate(ctx)
			require.NoError(t, err)

			var leases []struct {
				Key        string
				LeaseUntil *time.Time
			}
			require.NoError(t, db.Raw(`SELECT key, lease_until FROM actions ORDER BY key`).Scan(&leases).Error)
			require.Len(t, leases, 2)
			require.Equal(t, "comp", leases[0].Key)
			require.Nil(t, leases[0].LeaseUntil, "a compensation requested before 00011 holds no lease")
			require.NotNil(t, leases[1].LeaseUntil, "a timed-out action keeps the lease that passed")

			var ms []struct{ Email, Namespace, Role string }
			require.NoError(t, db.Raw(`SELECT u.email, m.namespace, m.role FROM memberships m JOIN users u ON u.id = m.user_id
				ORDER BY u.email`).Scan(&ms).Error)
			require.Equal(t, []struct{ Email, Namespace, Role string }{
				{"ana@example.com", "*", "operator"}, {"bo@example.com", "*", "viewer"},
			}, ms, "viewers and operators keep their role everywhere; admins need no membership")
		})
	}
}
