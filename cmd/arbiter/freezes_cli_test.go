package main_test

import (
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services/dbtest"
)

// TestFreezeCLI: the on-call operator freezes refunds from the command
// line; a reader cannot; a new refund waits while the freeze holds and goes
// ahead once it is lifted; a freeze is lifted once, and never without a
// reason.
func TestFreezeCLI(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	env := []string{"ARBITER_DATABASE_URL=" + dbtest.SQLiteURL(t)}
	p := serve(t, dir, env)
	agentKey := createKey(t, dir, env, "--namespace", "payments", "--name", "refund-bot", "--role", "agent")
	createUser(t, dir, env, "oncall@example.com", "operator")
	operatorKey := createKey(t, dir, env, "--namespace", "payments", "--name", "on-call", "--role", "operator", "--owner", "oncall@example.com")
	readerKey := createKey(t, dir, env, "--namespace", "payments", "--name", "auditor", "--role", "reader")
	op, reader := operatorCLI(t, p.url, operatorKey), operatorCLI(t, p.url, readerKey)

	require.Contains(t, reader("freeze", "start", "--namespace", "payments", "--reason", "x").fails(t), "forbidden")
	require.Contains(t, op("freeze", "start", "--namespace", "payments", "--tools", "payments.*").fails(t), "--reason",
		"a freeze says why")

	out := op("freeze", "start", "--namespace", "payments", "--tools", "payments.*", "--reason", "refund provider double-charging").ok(t)
	m := regexp.MustCompile(`^started freeze of payments\.\* in payments: refund provider double-charging\n([0-9a-f-]{36})\n$`).
		FindStringSubmatch(out)
	require.NotNil(t, m, out)
	id := m[1]

	intent := `{"key":"refund:1","type":"intent","tool":"payments.refund","params":{"amount":10}}`
	status, res := post(t, p.url+"/v1/entries", agentKey, intent)
	require.Equal(t, 202, status, "%v", res)
	require.Equal(t, "pending_approval", res["outcome"], "%v", res)

	lines := tableLines(reader("freeze", "list", "--active").ok(t))
	require.Len(t, lines, 2)
	require.Regexp(t, `^ID\s+NAMESPACE\s+TOOLS\s+REASON\s+BY\s+STARTED\s+LIFTED$`, lines[0])
	require.Regexp(t, `^`+id+`\s+payments\s+payments\.\*\s+refund provider double-charging\s+oncall@example\.com\s+\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\s+-$`, lines[1])
	require.Regexp(t, `(?m)^BY\s+oncall@example\.com \(api_key:on-call\)$`, reader("freeze", "show", id).ok(t), "who, and how")

	require.Contains(t, reader("freeze", "lift", id, "--reason", "x").fails(t), "forbidden")
	require.Regexp(t, `^lifted freeze `+id+` of payments\.\* in payments after \d+s: provider fixed\n$`,
		op("freeze", "lift", id, "--reason", "provider fixed").ok(t))
	status, res = post(t, p.url+"/v1/entries", agentKey, intent)
	require.Equal(t, 201, status, "the lift let the refund go: %v", res)
	require.Contains(t, op("freeze", "lift", id, "--reason", "again").fails(t), "conflict")

	require.Len(t, tableLines(reader("freeze", "list", "--active").ok(t)), 1, "no freeze holds")
	lines = tableLines(reader("freeze", "list", "--namespace", "payments").ok(t))
	require.Len(t, lines, 2)
	require.Regexp(t, `\s+\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\s+\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$`, lines[1])
	show := reader("freeze", "show", id).ok(t)
	require.Regexp(t, `(?m)^LIFTED BY\s+oncall@example\.com \(api_key:on-call\)$`, show)
	require.Regexp(t, `(?m)^LIFT REASON\s+provider fixed$`, show)
}

// TestBreakersCLI: an admin sets a breaker on the mailer from the command
// line; an operator cannot; a share above 1 is refused; a change makes a
// new version; a deleted breaker is gone.
func TestBreakersCLI(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	env := []string{"ARBITER_DATABASE_URL=" + dbtest.SQLiteURL(t)}
	p := serve(t, dir, env)
	createKey(t, dir, env, "--namespace", "shop", "--name", "mail-bot", "--role", "agent")
	createUser(t, dir, env, "oncall@example.com", "operator")
	createUser(t, dir, env, "admin@example.com", "admin")
	operatorKey := createKey(t, dir, env, "--namespace", "shop", "--name", "on-call", "--role", "operator", "--owner", "oncall@example.com")
	adminKey := createKey(t, dir, env, "--name", "ops-admin", "--role", "admin", "--owner", "admin@example.com")
	admin, op := operatorCLI(t, p.url, adminKey), operatorCLI(t, p.url, operatorKey)

	require.Contains(t, op("breakers", "create", "--namespace", "shop", "--name", "x", "--tools", "mail.*", "--max-unknown-ratio", "0.3").fails(t),
		"forbidden", "only admins manage breakers")
	require.Contains(t, admin("breakers", "create", "--namespace", "shop", "--name", "bad", "--tools", "mail.*", "--max-unknown-ratio", "1.5").fails(t),
		"invalid_breaker")

	out := admin("breakers", "create", "--namespace", "shop", "--name", "mailer", "--tools", "mail.*", "--max-unknown-ratio", "0.3",
		"--min-actions", "5").ok(t)
	m := regexp.MustCompile(`^created breaker "mailer" \(version 1\) in shop\n([0-9a-f-]{36})\n$`).FindStringSubmatch(out)
	require.NotNil(t, m, out)
	id := m[1]

	lines := tableLines(op("breakers", "list").ok(t))
	require.Len(t, lines, 2)
	require.Regexp(t, `^ID\s+NAMESPACE\s+NAME\s+TOOLS\s+WINDOW\s+MIN\s+ACTIONS\s+TIMED OUT\s+FAILED\s+MAX UNKNOWN\s+MAX FAILED\s+STATE\s+ENABLED\s+VERSION$`, lines[0])
	require.Regexp(t, `^`+id+`\s+shop\s+mailer\s+mail\.\*\s+300s\s+5\s+0\s+0\s+0\s+30%\s+-\s+closed\s+true\s+1$`, lines[1])

	require.Contains(t, op("breakers", "update", id, "--window", "600").fails(t), "forbidden")
	require.Equal(t, "breaker \"mailer\" is now version 2\n", admin("breakers", "update", id, "--window", "600", "--max-failure-ratio", "0.5").ok(t))
	lines = tableLines(op("breakers", "versions", id).ok(t))
	require.Len(t, lines, 3)
	require.Regexp(t, `\s+300s\s+5\s+-\s+-\s+-\s+30%\s+-\s+-\s+true\s+1$`, lines[1])
	require.Regexp(t, `\s+600s\s+5\s+-\s+-\s+-\s+30%\s+50%\s+-\s+true\s+2$`, lines[2])

	require.Equal(t, "deleted breaker "+id+"\n", admin("breakers", "delete", id).ok(t))
	require.Contains(t, op("breakers", "versions", id).ok(t), "VERSION", "a deleted breaker's versions stay readable")
	require.Len(t, tableLines(op("breakers", "list").ok(t)), 1)
}
