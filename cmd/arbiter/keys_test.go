package main_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
)

// TestKeysOwner: `keys create --owner EMAIL` ties a key to a user, who must
// exist; `keys list` shows each key's owner.
func TestKeysOwner(t *testing.T) {
	t.Parallel()
	for _, d := range dbtest.Dialects {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			dbURL := dbtest.SQLiteURL(t)
			if d == services.Postgres {
				dbURL = dbtest.PostgresURL(t)
				_, stderr, err := runArbiter(t, dir, []string{"ARBITER_DATABASE_URL=" + dbURL}, "", "migrate")
				require.NoError(t, err, stderr)
			}
			env := []string{"ARBITER_DATABASE_URL=" + dbURL}
			run := func(stdin string, args ...string) (string, string, error) {
				return runArbiter(t, dir, env, stdin, args...)
			}

			out, stderr, err := run("", "keys", "create", "--namespace", "payments", "--name", "on-call", "--role", "operator",
				"--owner", "alice@example.com")
			require.Error(t, err, out)
			require.Contains(t, stderr, `no user has email "alice@example.com"`)
			require.NotContains(t, out, "ak_", "no key was made")

			_, stderr, err = run("a long password\n", "users", "create", "--email", "alice@example.com", "--role", "operator", "--password-stdin")
			require.NoError(t, err, stderr)
			out, stderr, err = run("", "keys", "create", "--namespace", "payments", "--name", "on-call", "--role", "operator",
				"--owner", "Alice@example.com")
			require.NoError(t, err, stderr)
			require.Contains(t, out, `created operator key "on-call" (namespace payments, owned by alice@example.com)`)
			out, stderr, err = run("", "keys", "create", "--namespace", "payments", "--name", "bot", "--role", "agent")
			require.NoError(t, err, stderr)
			require.Contains(t, out, "(namespace payments, no owner)")

			out, stderr, err = run("", "keys", "list")
			require.NoError(t, err, stderr)
			lines := strings.Split(strings.TrimSpace(out), "\n")
			require.Len(t, lines, 3)
			require.Contains(t, lines[0], "OWNER")
			require.Equal(t, "OWNER", strings.Fields(lines[0])[5])
			require.Equal(t, "-", strings.Fields(lines[1])[5], "the agent key has no owner")
			require.Equal(t, "alice@example.com", strings.Fields(lines[2])[5])
			out, stderr, err = run("", "keys", "list", "--json")
			require.NoError(t, err, stderr)
			var rows []map[string]any
			require.NoError(t, json.Unmarshal([]byte(out), &rows), out)
			require.Nil(t, rows[0]["owner"])
			require.Equal(t, "alice@example.com", rows[1]["owner"])
		})
	}
}

// createUser runs `arbiter users create` for a person who will own keys.
func createUser(t *testing.T, dir string, env []string, email, role string) {
	t.Helper()
	_, stderr, err := runArbiter(t, dir, env, "a long password\n", "users", "create", "--email", email, "--role", role, "--password-stdin")
	require.NoError(t, err, stderr)
}
