package accounts_test

import (
	"context"
	"crypto/sha256"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/accounts"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
)

// TestKeysWrittenBefore00016HaveNoOwner: keys that existed before owners
// did keep working, for everything but approving.
func TestKeysWrittenBefore00016HaveNoOwner(t *testing.T) {
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
			require.NoError(t, st.MigrateTo(ctx, 15))
			db := st.GormWriter()
			at := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
			require.NoError(t, db.Exec(`INSERT INTO namespaces (name, created_at) VALUES ('payments', ?)`, at).Error)
			require.NoError(t, db.Exec(`INSERT INTO users (id, email, password_hash, role, created_at, updated_at)
				VALUES ('01930000-0000-7000-8000-0000000000a1', 'alice@example.com', 'x', 'admin', ?, ?)`, at, at).Error)
			secret := "ak_before00016secretsecretsecret"
			sum := sha256sum(secret)
			require.NoError(t, db.Exec(`INSERT INTO api_keys (id, namespace, name, role, prefix, hash, created_at)
				VALUES ('01930000-0000-7000-8000-0000000000b1', 'payments', 'on-call', 'operator', ?, ?, ?)`,
				secret[:11], sum, at).Error)
			_, err = st.Migrate(ctx)
			require.NoError(t, err)

			keys := accounts.NewKeys(st)
			p, err := keys.Authenticate(ctx, secret)
			require.NoError(t, err, "an old key still authenticates")
			require.Equal(t, services.RoleOperator, p.Role)
			require.Empty(t, p.OwnerID, "and has no owner")
			list, err := keys.ListKeys(ctx)
			require.NoError(t, err)
			require.Len(t, list, 1)
			require.Nil(t, list[0].OwnerID)
			require.Nil(t, list[0].Owner)

			// New keys may belong to the user who was there.
			m, secret2, err := keys.CreateKey(ctx, accounts.CreateKeyRequest{Namespace: "payments", Name: "on-call",
				Role: services.RoleOperator, Owner: "Alice@Example.com"})
			require.NoError(t, err)
			require.Equal(t, "alice@example.com", m.Owner.Email)
			p, err = keys.Authenticate(ctx, secret2)
			require.NoError(t, err)
			require.Equal(t, "01930000-0000-7000-8000-0000000000a1", p.OwnerID)
			require.Equal(t, "alice@example.com", p.OwnerEmail)
			list, err = keys.ListKeys(ctx)
			require.NoError(t, err)
			require.Equal(t, "alice@example.com", list[0].Owner.Email, "the list shows the owner")
		})
	}
}

func TestKeyOwnerMustBeAUser(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		ctx := context.Background()
		keys := accounts.NewKeys(st)
		_, _, err := keys.CreateKey(ctx, accounts.CreateKeyRequest{Namespace: "payments", Name: "on-call",
			Role: services.RoleOperator, Owner: "bob@example.com"})
		require.ErrorIs(t, err, services.ErrInvalid)
		require.Contains(t, err.Error(), `no user has email "bob@example.com"`)
		_, _, err = keys.CreateKey(ctx, accounts.CreateKeyRequest{Namespace: "payments", Name: "on-call",
			Role: services.RoleOperator, Owner: "not an email"})
		require.ErrorIs(t, err, services.ErrInvalid)
		list, err := keys.ListKeys(ctx)
		require.NoError(t, err)
		require.Empty(t, list, "nothing written")

		// A disabled owner's key keeps its role but gives no approvals.
		a := accounts.New(st)
		u, err := a.CreateUser(ctx, "carol@example.com", services.RoleOperator, "correct horse battery staple")
		require.NoError(t, err)
		_, secret, err := keys.CreateKey(ctx, accounts.CreateKeyRequest{Namespace: "payments", Name: "carol-cli",
			Role: services.RoleOperator, Owner: "carol@example.com"})
		require.NoError(t, err)
		require.NoError(t, st.GormWriter().Exec(`UPDATE users SET disabled_at = ? WHERE id = ?`, time.Now(), u.ID).Error)
		time.Sleep(1100 * time.Millisecond) // the authentication cache's lifetime
		p, err := keys.Authenticate(ctx, secret)
		require.NoError(t, err)
		require.Empty(t, p.OwnerID)
	})
}

func sha256sum(s string) []byte {
	sum := sha256.Sum256([]byte(s))
	return sum[:]
}
