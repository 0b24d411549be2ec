package main_test

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services/dbtest"
)

// cliResult is what one run of an operator command printed.
type cliResult struct {
	stdout, stderr string
	err            error
}

// operatorCLI runs operator commands against the server at url with key,
// from the environment as an operator would.
func operatorCLI(t *testing.T, url, key string) func(args ...string) cliResult {
	return func(args ...string) cliResult {
		t.Helper()
		out, errOut, err := runArbiter(t, t.TempDir(), []string{"ARBITER_URL=" + url, "ARBITER_API_KEY=" + key}, "", args...)
		return cliResult{out, errOut, err}
	}
}

func (r cliResult) ok(t *testing.T) string {
	t.Helper()
	require.NoError(t, r.err, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	return r.stdout
}

// fails requires a non-zero exit and returns standard error.
func (r cliResult) fails(t *testing.T) string {
	t.Helper()
	require.Error(t, r.err, "stdout:\n%s", r.stdout)
	return r.stderr
}

func tableLines(out string) []string { return strings.Split(strings.TrimRight(out, "\n"), "\n") }

type listedAction struct {
	ID      string `json:"id"`
	Key     string `json:"key"`
	Status  string `json:"status"`
	Effect  string `json:"effect"`
	Version int    `json:"version"`
	Attempt int    `json:"attempt"`
}

func TestOperatorCLI(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	env := []string{"ARBITER_DATABASE_URL=" + dbtest.SQLiteURL(t), "ARBITER_SWEEP_INTERVAL=100ms"}
	p := serve(t, dir, env)
	agentKey := createKey(t, dir, env, "--namespace", "payments", "--name", "refund-bot", "--role", "agent")
	operatorKey := createKey(t, dir, env, "--namespace", "payments", "--name", "on-call", "--role", "operator")
	adminKey := createKey(t, dir, env, "--name", "ops-admin", "--role", "admin")
	op, admin, agent := operatorCLI(t, p.url, operatorKey), operatorCLI(t, p.url, adminKey), operatorCLI(t, p.url, agentKey)

	// A refund that succeeded, and an email whose worker died: it times out.
	status, m := post(t, p.url+"/v1/entries", agentKey,
		`{"key":"refund:order-8812","type":"intent","tool":"payments.refund","effect":"keyed","params":{"order":"8812","amount":1999},"reference":"order 8812"}`)
	require.Equal(t, 201, status, "%v", m)
	status, m = post(t, p.url+"/v1/entries", agentKey,
		`{"key":"refund:order-8812","type":"succeeded","attempt":1,"result":{"refund":"re_1"},"external_ref":"re_1"}`)
	require.Equal(t, 200, status, "%v", m)
	status, m = post(t, p.url+"/v1/entries", agentKey,
		`{"key":"email:welcome:cust-42","type":"intent","tool":"email.send","effect":"unkeyed","timeout":1}`)
	require.Equal(t, 201, status, "%v", m)
	var email listedAction
	require.Eventually(t, func() bool {
		require.NoError(t, json.Unmarshal([]byte(op("actions", "show", "--key", "email:welcome:cust-42", "--json").ok(t)),
			&struct {
				Action *listedAction `json:"action"`
			}{&email}))
		return email.Status == "timed_out"
	}, 10*time.Second, 100*time.Millisecond)

	t.Run("list", func(t *testing.T) {
		lines := tableLines(op("actions", "list").ok(t))
		require.Len(t, lines, 3, lines)
		require.Regexp(t, `^ID\s+STATUS\s+NAMESPACE\s+KEY\s+TOOL\s+EFFECT\s+ATTEMPT\s+UPDATED\s+AGE\s+REFERENCE$`, lines[0])
		require.Regexp(t, `^`+email.ID+`\s+timed_out\s+payments\s+email:welcome:cust-42\s+email.send\s+unkeyed\s+1\s+\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\s+\d+s\s+-$`, lines[1])
		require.Regexp(t, `^[0-9a-f-]{36}\s+succeeded\s+payments\s+refund:order-8812\s+payments.refund\s+keyed\s+1\s+\S+\s+\S+\s+order 8812$`, lines[2])
		for _, col := range []string{"STATUS", "KEY", "EFFECT", "REFERENCE"} {
			i := strings.Index(lines[0], col)
			require.NotEqual(t, byte(' '), lines[1][i], "column %s is aligned", col)
			require.Equal(t, byte(' '), lines[1][i-1], "column %s is aligned", col)
		}

		var page struct {
			Actions    []listedAction `json:"actions"`
			NextCursor *string        `json:"next_cursor"`
		}
		require.NoError(t, json.Unmarshal([]byte(op("actions", "list", "--json").ok(t)), &page))
		require.Len(t, page.Actions, 2)
		require.Equal(t, email.ID, page.Actions[0].ID)
		require.Equal(t, "refund:order-8812", page.Actions[1].Key)
		require.Empty(t, page.NextCursor)

		for _, c := range []struct {
			args []string
			keys []string
		}{
			{[]string{"--status", "timed_out"}, []string{"email:welcome:cust-42"}},
			{[]string{"--status", "timed_out", "--status", "succeeded"}, []string{"email:welcome:cust-42", "refund:order-8812"}},
			{[]string{"--status", "succeeded,timed_out"}, []string{"email:welcome:cust-42", "refund:order-8812"}},
			{[]string{"--tool", "payments.refund"}, []string{"refund:order-8812"}},
			{[]string{"--agent", "refund-bot", "--q", "order 8812"}, []string{"refund:order-8812"}},
			{[]string{"--q", "email:welcome:cust-42"}, []string{"email:welcome:cust-42"}},
			{[]string{"--since", "1h"}, []string{"email:welcome:cust-42", "refund:order-8812"}},
			{[]string{"--since", time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}, nil},
			{[]string{"--namespace", "payments", "--until", "1h"}, nil},
		} {
			require.NoError(t, json.Unmarshal([]byte(admin(append([]string{"actions", "list", "--json"}, c.args...)...).ok(t)), &page), c.args)
			var keys []string
			for _, a := range page.Actions {
				keys = append(keys, a.Key)
			}
			require.Equal(t, c.keys, keys, "%v", c.args)
		}
		r := op("actions", "list", "--until", "1h")
		require.Len(t, tableLines(r.ok(t)), 1, "the header only")
		require.Contains(t, r.stderr, "no actions match")

		// Pages: the cursor to go on is on standard error, the table alone
		// on standard output.
		r = op("actions", "list", "--limit", "1")
		lines = tableLines(r.ok(t))
		require.Len(t, lines, 2)
		require.Contains(t, lines[1], email.ID)
		cursor := regexp.MustCompile(`more: add --cursor (\S+)`).FindStringSubmatch(r.stderr)
		require.NotNil(t, cursor, r.stderr)
		r = op("actions", "list", "--limit", "1", "--cursor", cursor[1])
		lines = tableLines(r.ok(t))
		require.Len(t, lines, 2)
		require.Contains(t, lines[1], "refund:order-8812")
		require.NotContains(t, r.stderr, "more:")

		require.Contains(t, agent("actions", "list", "--status", "timed_out").ok(t), email.ID, "agents read their namespace")
	})

	t.Run("show", func(t *testing.T) {
		out := op("actions", "show", email.ID).ok(t)
		for _, want := range []string{
			`(?m)^ID\s+` + email.ID + `$`,
			`(?m)^KEY\s+email:welcome:cust-42$`,
			`(?m)^STATUS\s+timed_out$`,
			`(?m)^EFFECT\s+unkeyed$`,
			`(?m)^VERSION\s+2$`,
			`(?m)^DECISIONS\s+arbiter decide ` + email.ID + ` confirm\|retry\|compensate\|abandon --reason … --expected-version 2$`,
			`(?m)^DASHBOARD\s+` + regexp.QuoteMeta(p.url+"/actions/"+email.ID) + `$`,
			`(?m)^SEQ\s+RECORDED\s+ACTOR\s+TYPE\s+ATTEMPT\s+DETAILS$`,
			`(?m)^1\s+\S+Z\s+agent refund-bot\s+intent\s+1\s+\{.*"tool":"email.send".*\}$`,
			`(?m)^2\s+\S+Z\s+system \S+\s+timed_out\s+1\s+\{"lease_until":.*\}$`,
		} {
			require.Regexp(t, want, out)
		}

		byKey := op("actions", "show", "--key", "email:welcome:cust-42").ok(t)
		require.Equal(t, stripAges(out), stripAges(byKey))
		require.Equal(t, stripAges(out), stripAges(admin("actions", "show", "--key", "email:welcome:cust-42", "--namespace", "payments").ok(t)))

		var shown struct {
			Action  listedAction `json:"action"`
			Entries []struct {
				Type string `json:"type"`
			} `json:"entries"`
		}
		require.NoError(t, json.Unmarshal([]byte(op("actions", "show", email.ID, "--json").ok(t)), &shown))
		require.Equal(t, email.ID, shown.Action.ID)
		require.Len(t, shown.Entries, 2)
		require.Equal(t, "intent", shown.Entries[0].Type)
		require.Equal(t, "timed_out", shown.Entries[1].Type)

		require.Regexp(t, `^arbiter: not_found: `, op("actions", "show", "--key", "email:nobody").fails(t))
		require.Regexp(t, `^arbiter: invalid: `, admin("actions", "show", "--key", "email:welcome:cust-42").fails(t),
			"an admin key must name the namespace")
		require.Contains(t, op("actions", "show").fails(t), "name the action: `arbiter actions show ID` or")
		require.Contains(t, op("actions", "show", email.ID, "--key", "k").fails(t), "name the action")
		require.Contains(t, op("actions", "show", email.ID, "--namespace", "payments").fails(t), "--namespace goes with --key")
	})

	t.Run("decide", func(t *testing.T) {
		// An unkeyed retry needs the acknowledgement; the refusal changes
		// nothing.
		stderr := op("decide", email.ID, "retry", "--reason", "customer says no email arrived").fails(t)
		require.Contains(t, stderr, "arbiter: duplicate_risk_unacknowledged: ")
		require.Contains(t, stderr, "pass --acknowledge-duplicate-risk")
		require.Regexp(t, `(?m)^STATUS\s+timed_out$`, op("actions", "show", email.ID).ok(t))

		stderr = op("decide", email.ID, "retry", "--reason", "stale page", "--acknowledge-duplicate-risk", "--expected-version", "1").fails(t)
		require.Contains(t, stderr, "arbiter: version_conflict: ")

		out := op("decide", email.ID, "retry", "--reason", "customer says no email arrived",
			"--acknowledge-duplicate-risk", "--expected-version", "2").ok(t)
		require.Equal(t, "retry: action "+email.ID+" (key email:welcome:cust-42) is now retry_requested, version 3\n"+
			"the agent's next intent for the key (or its worker) runs attempt 2 with the same key\n", out)
		shown := op("actions", "show", email.ID).ok(t)
		require.Regexp(t, `(?m)^3\s+\S+Z\s+operator on-call\s+decision\s+1\s+\{.*"decision":"retry".*"reason":"customer says no email arrived".*\}$`, shown)

		// --json for scripts, with evidence for a confirm.
		var decided struct {
			Action listedAction `json:"action"`
			Entry  struct {
				Type    string          `json:"type"`
				Payload json.RawMessage `json:"payload"`
			} `json:"entry"`
		}
		require.NoError(t, json.Unmarshal([]byte(admin("decide", email.ID, "confirm", "--reason", "the provider's log shows it sent",
			"--external-ref", "msg_1", "--result", `{"message":"msg_1"}`, "--json").ok(t)), &decided))
		require.Equal(t, "confirmed", decided.Action.Status)
		require.Equal(t, "decision", decided.Entry.Type)
		var payload map[string]any
		require.NoError(t, json.Unmarshal(decided.Entry.Payload, &payload))
		require.Equal(t, "msg_1", payload["external_ref"])
		require.Equal(t, map[string]any{"message": "msg_1"}, payload["result"])

		refund := tableLines(op("actions", "list", "--tool", "payments.refund").ok(t))[1][:36]
		require.Regexp(t, `^arbiter: invalid_transition: `, op("decide", refund, "abandon", "--reason", "x").fails(t))
		require.Regexp(t, `^arbiter: forbidden: `, agent("decide", refund, "compensate", "--reason", "x").fails(t))
		require.Regexp(t, `^arbiter: not_found: `, op("decide", "01a22c4d-0000-7000-8000-000000000000", "abandon", "--reason", "x").fails(t))
	})

	t.Run("bad input", func(t *testing.T) {
		for _, c := range []struct {
			run  func(...string) cliResult
			args []string
			want string
		}{
			{op, []string{"decide", email.ID, "undo", "--reason", "x"}, `unknown decision "undo": use one of confirm, retry, compensate, mark_compensated, abandon, approve, reject`},
			{op, []string{"decide", email.ID, "abandon"}, "--reason must say why"},
			{op, []string{"decide", email.ID, "abandon", "--reason", "  "}, "--reason must say why"},
			{op, []string{"decide", email.ID, "--reason", "x"}, "name the action and the decision: `arbiter decide ID DECISION --reason …`"},
			{op, []string{"decide", email.ID, "confirm", "--reason", "x", "--result", "{"}, "--result is not valid JSON"},
			{op, []string{"decide", email.ID, "abandon", "--reason", "x", "--expected-version", "two"}, "--expected-version"},
			{op, []string{"actions", "list", "--since", "yesterday"}, "--since \"yesterday\": give an RFC 3339 time"},
			{op, []string{"actions", "list", "--status", "lost"}, "arbiter: invalid: "},
			{op, []string{"actions", "list", "--limit", "501"}, "arbiter: invalid: "},
			{operatorCLI(t, p.url, ""), []string{"actions", "list"}, "no API key: set ARBITER_API_KEY or pass --api-key"},
			{operatorCLI(t, p.url, "ak_wrong"), []string{"actions", "list"}, "arbiter: unauthorized: "},
			{operatorCLI(t, "http://127.0.0.1:1", operatorKey), []string{"actions", "list"}, "cannot reach Arbiter at http://127.0.0.1:1"},
		} {
			require.Contains(t, c.run(c.args...).fails(t), c.want, "%v", c.args)
		}
	})
}

var ages = regexp.MustCompile(`\(\d+[smhd] ago\)`)

// stripAges drops the relative times, which may tick between two runs.
func stripAges(s string) string { return ages.ReplaceAllString(s, "") }
