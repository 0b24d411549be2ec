package web_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
	"github.com/arbiter-ledger/arbiter/services/driver"
)

// failMany records n refunds in namespace ns that failed for good, in
// batches, and returns their ids.
func failMany(t *testing.T, e *env, agent string, prefix string, n int) []string {
	t.Helper()
	var ids []string
	for start := 0; start < n; start += services.MaxBatchEntries / 2 {
		var es []string
		for i := start; i < min(n, start+services.MaxBatchEntries/2); i++ {
			key := fmt.Sprintf("%s:%d", prefix, i)
			es = append(es, fmt.Sprintf(`{"key":%q,"type":"intent","tool":"payments.refund","effect":"keyed"}`, key),
				fmt.Sprintf(`{"key":%q,"type":"failed","attempt":1,"error":"card declined"}`, key))
		}
		status, m := e.do("POST", "/v1/entries", agent, `{"entries":[`+strings.Join(es, ",")+`]}`)
		require.Equal(t, 200, status, "%v", m)
		for _, r := range m["results"].([]any) {
			res := r.(map[string]any)
			require.NotEqual(t, "rejected", res["outcome"], "%v", res)
			if res["type"] == "failed" {
				ids = append(ids, res["action"].(map[string]any)["id"].(string))
			}
		}
	}
	return ids
}

// ledgerWrites counts entries and outbox messages, to show a refusal wrote
// nothing.
func ledgerWrites(t *testing.T, st *services.Store) [2]int {
	t.Helper()
	var n [2]int
	for i, table := range []string{"entries", "webhook_messages"} {
		require.NoError(t, st.Gorm().Raw(`SELECT count(*) FROM `+table).Scan(&n[i]).Error)
	}
	return n
}

func quoted(ids []string) string {
	return `"` + strings.Join(ids, `","`) + `"`
}

// TestBulkDecisionsAPI: a dry run counts, then the decision applies to each
// action with its own entry; the answers have the documented shapes.
func TestBulkDecisionsAPI(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newEnv(t, st)
		agent := e.key("payments", "refund-bot", services.RoleAgent)
		op := e.key("payments", "on-call", services.RoleOperator)
		failed := failMany(t, e, agent, "refund", 30)
		status, m := e.do("POST", "/v1/entries", agent, `{"key":"refund:ok","type":"intent","tool":"payments.refund"}`)
		require.Equal(t, 201, status, "%v", m)
		before := ledgerWrites(t, st)

		status, m = e.do("POST", "/v1/decisions", op, `{"filter":{"tool":"payments.refund"},"decision":"abandon","dry_run":true}`)
		require.Equal(t, 200, status, "%v", m)
		require.EqualValues(t, 31, m["matched"])
		require.EqualValues(t, 30, m["allowed"])
		require.Len(t, m["sample"], 20)
		require.Equal(t, "failed", m["sample"].([]any)[0].(map[string]any)["status"])
		require.ElementsMatch(t, []string{"matched", "allowed", "sample"}, keysOf(m))
		require.Equal(t, before, ledgerWrites(t, st), "a dry run writes nothing")

		status, m = e.do("POST", "/v1/decisions", op,
			`{"filter":{"tool":"payments.refund","status":["failed","in_progress"]},"decision":"abandon","reason":"card network outage","max_count":30}`)
		require.Equal(t, 200, status, "%v", m)
		require.EqualValues(t, 30, m["applied"])
		require.Len(t, m["skipped"], 1)
		require.Equal(t, "invalid_transition", m["skipped"].([]any)[0].(map[string]any)["code"])
		require.ElementsMatch(t, []string{"applied", "skipped"}, keysOf(m))
		require.Equal(t, [2]int{before[0] + 30, before[1]}, ledgerWrites(t, st), "one entry per action (no endpoint: no messages)")

		for _, id := range failed[:3] {
			status, m = e.do("GET", "/v1/actions/"+id+"/entries", op, "")
			require.Equal(t, 200, status)
			es := m["entries"].([]any)
			last := es[len(es)-1].(map[string]any)
			require.Equal(t, "decision", last["type"])
			require.Equal(t, map[string]any{"kind": "operator", "name": "on-call", "via": "api_key:on-call"}, last["actor"])
			require.Equal(t, "card network outage", last["payload"].(map[string]any)["reason"])
		}

		// ids that are not in this namespace are not_found, like ids that
		// do not exist.
		other := e.key("billing", "invoice-bot", services.RoleAgent)
		theirs := failMany(t, e, other, "invoice", 2)
		missing := driver.NewID()
		status, m = e.do("POST", "/v1/decisions", op, `{"filter":{"ids":[`+quoted(append(theirs, missing))+`]},`+
			`"decision":"abandon","reason":"r","max_count":5}`)
		require.Equal(t, 200, status, "%v", m)
		require.EqualValues(t, 0, m["applied"])
		require.ElementsMatch(t, []any{
			map[string]any{"id": theirs[0], "code": "not_found"},
			map[string]any{"id": theirs[1], "code": "not_found"},
			map[string]any{"id": missing, "code": "not_found"},
		}, m["skipped"])
		admin := e.key("", "root", services.RoleAdmin)
		status, m = e.do("POST", "/v1/decisions", admin, `{"filter":{"ids":[`+quoted(theirs)+`]},"decision":"abandon","reason":"r","max_count":2}`)
		require.Equal(t, 200, status, "%v", m)
		require.EqualValues(t, 2, m["applied"], "admins decide in every namespace")
	})
}

func keysOf(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestBulkDecisionsBadInput: every refusal is a 4xx with its stable code,
// and nothing is written.
func TestBulkDecisionsBadInput(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newEnv(t, st)
		agent := e.key("payments", "refund-bot", services.RoleAgent)
		op := e.key("payments", "on-call", services.RoleOperator)
		reader := e.key("payments", "auditor", services.RoleReader)
		ids := failMany(t, e, agent, "refund", services.MaxBulkActions+1)
		tooMany := `"` + strings.Join(ids, `","`) + `"`
		before := ledgerWrites(t, st)
		cases := []struct {
			name, key, body string
			status          int
			code            string
		}{
			{"without a filter", op, `{"decision":"abandon","reason":"r","max_count":5}`, 400, "invalid"},
			{"with an empty filter", op, `{"filter":{},"decision":"abandon","reason":"r","max_count":5}`, 400, "invalid"},
			{"with a null filter", op, `{"filter":null,"decision":"abandon","reason":"r","max_count":5}`, 400, "invalid"},
			{"without a reason", op, `{"filter":{"status":["failed"]},"decision":"abandon","max_count":5}`, 400, "invalid"},
			{"with a blank reason", op, `{"filter":{"status":["failed"]},"decision":"abandon","reason":" ","max_count":5}`, 400, "invalid"},
			{"without max_count", op, `{"filter":{"status":["failed"]},"decision":"abandon","reason":"r"}`, 400, "invalid"},
			{"with max_count over 1000", op, `{"filter":{"status":["failed"]},"decision":"abandon","reason":"r","max_count":1001}`, 400, "invalid"},
			{"with over 1000 ids", op, `{"filter":{"ids":[` + tooMany + `]},"decision":"abandon","reason":"r","max_count":1000}`, 400, "invalid"},
			{"allowed on over 1000 actions", op, `{"filter":{"status":["failed"]},"decision":"abandon","reason":"r","max_count":1000}`, 409, "too_many_matched"},
			{"allowed on more than max_count", op, `{"filter":{"status":["failed"]},"decision":"abandon","reason":"r","max_count":3}`, 409, "too_many_matched"},
			{"with an unknown field", op, `{"filter":{"status":["failed"]},"decision":"abandon","reason":"r","max_count":5,"force":true}`, 400, "invalid"},
			{"with an unknown filter field", op, `{"filter":{"statuses":["failed"]},"decision":"abandon","reason":"r","max_count":5}`, 400, "invalid"},
			{"with a filter field in capitals", op, `{"filter":{"Status":["failed"]},"decision":"abandon","reason":"r","max_count":5}`, 400, "invalid"},
			{"with a repeated field", op, `{"filter":{"status":["failed"]},"decision":"abandon","decision":"confirm","reason":"r","max_count":5}`, 400, "invalid"},
			{"with a bad time", op, `{"filter":{"since":"yesterday"},"decision":"abandon","reason":"r","max_count":5}`, 400, "invalid"},
			{"with a status that is not a list", op, `{"filter":{"status":"failed"},"decision":"abandon","reason":"r","max_count":5}`, 400, "invalid"},
			{"with an unknown decision", op, `{"filter":{"status":["failed"]},"decision":"undo","reason":"r","max_count":5}`, 400, "invalid"},
			{"with a malformed body", op, `{"filter":`, 400, "invalid_json"},
			{"with an empty body", op, ``, 400, "invalid_json"},
			{"with an array body", op, `[]`, 400, "invalid"},
			{"for another namespace", op, `{"filter":{"namespace":"billing"},"decision":"abandon","reason":"r","max_count":5}`, 404, "not_found"},
			{"from a reader", reader, `{"filter":{"status":["failed"]},"decision":"abandon","reason":"r","max_count":5}`, 403, "forbidden"},
			{"from an agent", agent, `{"filter":{"status":["failed"]},"decision":"abandon","dry_run":true}`, 403, "forbidden"},
			{"without a key", "", `{"filter":{"status":["failed"]},"decision":"abandon","dry_run":true}`, 401, "unauthorized"},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				status, m := e.do("POST", "/v1/decisions", tc.key, tc.body)
				require.Equal(t, tc.status, status, "%v", m)
				require.Equal(t, tc.code, errCode(m), "%v", m)
				msg, _ := m["error"].(map[string]any)["message"].(string)
				require.NotEmpty(t, msg)
				require.Equal(t, before, ledgerWrites(t, st), "nothing written")
			})
		}
		status, m := e.do("GET", "/v1/decisions", op, "")
		require.Equal(t, 405, status, "%v", m)
		require.Equal(t, "method_not_allowed", errCode(m))
	})
}
