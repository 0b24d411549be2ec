package main_test

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services/dbtest"
)

// TestOperatorCLIBulkDecide: `arbiter decide --filter … DECISION` counts
// with --dry-run, refuses more than --max-count, and decides each action
// with its own decision entry.
func TestOperatorCLIBulkDecide(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	env := []string{"ARBITER_DATABASE_URL=" + dbtest.SQLiteURL(t), "ARBITER_SWEEP_INTERVAL=100ms"}
	p := serve(t, dir, env)
	agentKey := createKey(t, dir, env, "--namespace", "payments", "--name", "refund-bot", "--role", "agent")
	operatorKey := createKey(t, dir, env, "--namespace", "payments", "--name", "on-call", "--role", "operator")
	op := operatorCLI(t, p.url, operatorKey)

	// Four refunds whose workers died, and one that succeeded.
	var es []string
	for i := range 4 {
		es = append(es, fmt.Sprintf(`{"key":"refund:order-%d","type":"intent","tool":"payments.refund","effect":"keyed","timeout":1}`, i))
	}
	es = append(es, `{"key":"refund:order-ok","type":"intent","tool":"payments.refund","effect":"keyed"}`,
		`{"key":"refund:order-ok","type":"succeeded","attempt":1}`)
	status, m := post(t, p.url+"/v1/entries", agentKey, `{"entries":[`+strings.Join(es, ",")+`]}`)
	require.Equal(t, 200, status, "%v", m)
	require.Eventually(t, func() bool {
		return len(tableLines(op("actions", "list", "--status", "timed_out").ok(t))) == 5
	}, 10*time.Second, 100*time.Millisecond)

	out := op("decide", "--filter", "tool=payments.refund,since=1h", "abandon", "--dry-run").ok(t)
	lines := tableLines(out)
	require.Equal(t, "abandon would apply to 4 of the 5 actions matched (dry run: nothing was written)", lines[0])
	require.Regexp(t, `^ID\s+STATUS\s+NAMESPACE\s+KEY`, lines[1])
	require.Len(t, lines, 7, out)
	for _, l := range lines[2:6] {
		require.Regexp(t, `^[0-9a-f-]{36}\s+timed_out\s+payments\s+refund:order-\d\s`, l)
	}
	require.Equal(t, "to apply it: the same command without --dry-run, with --reason … --max-count 4", lines[6])
	require.Len(t, tableLines(op("actions", "list", "--status", "timed_out").ok(t)), 5, "the dry run wrote nothing")

	stderr := op("decide", "--filter", "tool=payments.refund", "abandon", "--reason", "PSP outage", "--max-count", "3").fails(t)
	require.Contains(t, stderr, "arbiter: too_many_matched: the decision abandon is allowed on 4 of the 5 actions matched, more than max_count 3")
	require.Len(t, tableLines(op("actions", "list", "--status", "timed_out").ok(t)), 5, "the refusal wrote nothing")

	out = op("decide", "--filter", "status=timed_out", "--filter", "status=succeeded,tool=payments.refund", "abandon",
		"--reason", "PSP outage: none of these went out", "--max-count", "4").ok(t)
	lines = tableLines(out)
	require.Equal(t, "abandon: applied to 4 actions, skipped 1", lines[0])
	require.Regexp(t, `^  skipped [0-9a-f-]{36}: invalid_transition$`, lines[1])
	require.Len(t, tableLines(op("actions", "list", "--status", "abandoned").ok(t)), 5)
	shown := op("actions", "show", "--key", "refund:order-2").ok(t)
	require.Regexp(t, `(?m)^3\s+\S+Z\s+operator on-call\s+decision\s+1\s+\{.*"decision":"abandon".*"reason":"PSP outage: none of these went out".*\}$`, shown)

	// --json for scripts; ids as criteria.
	id := regexp.MustCompile(`(?m)^ID\s+(\S+)$`).FindStringSubmatch(shown)[1]
	var res struct {
		Applied int `json:"applied"`
		Skipped []struct {
			ID   string `json:"id"`
			Code string `json:"code"`
		} `json:"skipped"`
	}
	require.NoError(t, json.Unmarshal([]byte(op("decide", "--filter", "id="+id, "confirm", "--reason", "r", "--max-count", "1", "--json").ok(t)), &res))
	require.Zero(t, res.Applied)
	require.Len(t, res.Skipped, 1)
	require.Equal(t, id, res.Skipped[0].ID)
	require.Equal(t, "invalid_transition", res.Skipped[0].Code)

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"decide", "--filter", "status=timed_out", "abandon", "--max-count", "5"}, "--reason must say why"},
		{[]string{"decide", "--filter", "status=timed_out", "abandon", "--reason", "r"}, "--max-count is required"},
		{[]string{"decide", "--filter", "colour=red", "abandon", "--dry-run"}, `unknown criterion "colour"`},
		{[]string{"decide", "--filter", "status", "abandon", "--dry-run"}, `give name=value`},
		{[]string{"decide", "--filter", "since=yesterday", "abandon", "--dry-run"}, `--filter since "yesterday": give an RFC 3339 time`},
		{[]string{"decide", "--filter", ",", "abandon", "--dry-run"}, "names no criterion"},
		{[]string{"decide", "--filter", "status=timed_out", id, "abandon", "--dry-run"}, "with --filter, name the decision alone"},
		{[]string{"decide", "--filter", "status=timed_out", "undo", "--dry-run"}, `unknown decision "undo"`},
		{[]string{"decide", id, "abandon", "--reason", "r", "--dry-run"}, "--dry-run and --max-count go with --filter"},
		{[]string{"decide", "--filter", "status=lost", "abandon", "--dry-run"}, `arbiter: invalid: filter.status: unknown status "lost"`},
		{[]string{"decide", "--filter", "namespace=billing", "abandon", "--dry-run"}, "arbiter: not_found: "},
		{[]string{"decide", "--filter", "status=timed_out", "abandon", "--reason", "r", "--max-count", "1001"}, "arbiter: invalid: "},
	} {
		require.Contains(t, op(c.args...).fails(t), c.want, "%v", c.args)
	}
	require.Regexp(t, `^arbiter: forbidden: `, operatorCLI(t, p.url, agentKey)("decide", "--filter", "status=abandoned", "abandon", "--dry-run").fails(t))
}
