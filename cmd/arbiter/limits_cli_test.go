package main_test

import (
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services/dbtest"
)

// TestLimitsCLI: an admin keeps a per-customer refund budget from the
// command line; an intent over it is denied; an operator reads the usage
// but cannot change the limit; a change makes a new version.
func TestLimitsCLI(t *testing.T) {
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

	require.Contains(t, admin("limits", "create", "--namespace", "payments", "--name", "bad", "--tools", "payments.refund",
		"--window", "3600", "--max", "100", "--amount", `params.customer + "!"`).fails(t), "invalid_limit")
	require.Contains(t, op("limits", "create", "--namespace", "payments", "--name", "x", "--tools", "*", "--window", "60", "--max", "1").fails(t),
		"forbidden", "only admins write limits")

	out := admin("limits", "create", "--namespace", "payments", "--name", "refunds per customer", "--tools", "payments.refund",
		"--amount", "params.amount", "--group-by", "params.customer", "--window", "3600", "--max", "100", "--over", "deny").ok(t)
	m := regexp.MustCompile(`^created limit "refunds per customer" \(version 1\) in payments\n([0-9a-f-]{36})\n$`).FindStringSubmatch(out)
	require.NotNil(t, m, out)
	id := m[1]

	for i, c := range []struct {
		key, customer string
		amount        int
		status        int
	}{{"refund:1", "c_1", 60, 201}, {"refund:2", "c_1", 50, 409}, {"refund:3", "c_2", 30, 201}} {
		status, res := post(t, p.url+"/v1/entries", agentKey, `{"key":"`+c.key+`","type":"intent","tool":"payments.refund","params":{"amount":`+
			strconv.Itoa(c.amount)+`,"customer":"`+c.customer+`"}}`)
		require.Equal(t, c.status, status, "intent %d: %v", i, res)
	}

	lines := tableLines(op("limits", "list").ok(t))
	require.Len(t, lines, 2)
	require.Regexp(t, `^ID\s+NAMESPACE\s+NAME\s+TOOLS\s+AMOUNT\s+GROUP BY\s+MAX\s+WINDOW\s+OVER\s+MODE\s+ENABLED\s+VERSION$`, lines[0])
	require.Regexp(t, `payments\s+refunds per customer\s+payments.refund\s+params.amount\s+params.customer\s+100\s+3600s\s+deny\s+enforce\s+true\s+1$`, lines[1])

	lines = tableLines(op("limits", "usage", id).ok(t))
	require.Equal(t, "max 100 per group within 3600s; 2 groups counting", lines[0])
	require.Regexp(t, `^GROUP\s+USED\s+OF MAX\s+ACTIONS\s+OLDEST LEAVES IN$`, lines[1])
	require.Regexp(t, `^c_1\s+60\s+60%\s+1\s+(59m[0-5]\ds|1h0m0s)$`, lines[2], "the denied refund counts nothing")
	require.Regexp(t, `^c_2\s+30\s+30%\s+1\s+(59m[0-5]\ds|1h0m0s)$`, lines[3])
	require.Len(t, tableLines(op("limits", "usage", id, "--group", "c_2").ok(t)), 3)

	require.Contains(t, op("limits", "update", id, "--max", "200").fails(t), "forbidden")
	require.Equal(t, "limit \"refunds per customer\" is now version 2\n", admin("limits", "update", id, "--max", "200", "--mode", "shadow").ok(t))
	lines = tableLines(op("limits", "versions", id).ok(t))
	require.Len(t, lines, 3)
	require.Regexp(t, `\s+100\s+3600s\s+deny\s+enforce\s+true\s+1$`, lines[1])
	require.Regexp(t, `\s+200\s+3600s\s+deny\s+shadow\s+true\s+2$`, lines[2])

	require.Equal(t, "deleted limit "+id+"\n", admin("limits", "delete", id).ok(t))
	require.Contains(t, op("limits", "usage", id).fails(t), "not_found")
}
