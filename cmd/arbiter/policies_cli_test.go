package main_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services/dbtest"
)

// TestPoliciesCLI: an admin creates and tests a policy from the command
// line, an intent it catches is held, and an operator approves it.
func TestPoliciesCLI(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	env := []string{"ARBITER_DATABASE_URL=" + dbtest.SQLiteURL(t)}
	p := serve(t, dir, env)
	agentKey := createKey(t, dir, env, "--namespace", "payments", "--name", "refund-bot", "--role", "agent")
	createUser(t, dir, env, "oncall@example.com", "operator")
	createUser(t, dir, env, "admin@example.com", "admin")
	operatorKey := createKey(t, dir, env, "--namespace", "payments", "--name", "on-call", "--role", "operator", "--owner", "oncall@example.com")
	adminKey := createKey(t, dir, env, "--name", "ops-admin", "--role", "admin", "--owner", "admin@example.com")
	admin, op := operatorCLI(t, p.url, adminKey), operatorCLI(t, p.url, operatorKey)

	status, m := post(t, p.url+"/v1/entries", agentKey,
		`{"key":"refund:order-1","type":"intent","tool":"payments.refund","params":{"amount":250000}}`)
	require.Equal(t, 201, status, "%v", m)
	require.Contains(t, op("policies", "test", "--namespace", "payments", "--tools", "payments.*", "--condition", "true").fails(t),
		"forbidden", "only admins run chosen conditions over the ledger")
	out := admin("policies", "test", "--namespace", "payments", "--tools", "payments.*", "--condition", "params.amount > 100000").ok(t)
	require.Contains(t, out, "would have caught 1 of the last 1 first intents")
	require.Contains(t, out, "refund:order-1")

	stderr := admin("policies", "create", "--name", "bad", "--namespace", "payments", "--tools", "payments.*",
		"--condition", "params.amount >").fails(t)
	require.Contains(t, stderr, "invalid_policy")
	require.Contains(t, op("policies", "create", "--name", "x", "--namespace", "payments", "--tools", "*").fails(t), "forbidden")

	out = admin("policies", "create", "--name", "large refunds", "--namespace", "payments", "--tools", "payments.refund*,payments.charge",
		"--condition", "params.amount > 100000", "--approvals", "2", "--escalate-after", "600").ok(t)
	require.Regexp(t, `^created policy "large refunds" \(version 1\) in payments\n[0-9a-f-]{36}\n$`, out)
	lines := tableLines(op("policies", "list").ok(t))
	require.Len(t, lines, 2)
	require.Regexp(t, `^ID\s+NAMESPACE\s+NAME\s+TOOLS\s+CONDITION\s+APPROVALS\s+EXPIRES\s+ESCALATES\s+ENABLED\s+VERSION$`, lines[0])
	require.Regexp(t, `payments\s+large refunds\s+payments.refund\*,payments.charge\s+params.amount > 100000\s+2\s+86400s\s+600s\s+true\s+1$`, lines[1])

	status, m = post(t, p.url+"/v1/entries", agentKey,
		`{"key":"refund:order-2","type":"intent","tool":"payments.refund","params":{"amount":250000}}`)
	require.Equal(t, 202, status, "%v", m)
	id := m["action"].(map[string]any)["id"].(string)
	out = op("decide", id, "approve").ok(t)
	require.Contains(t, out, "awaiting_approval")
}
