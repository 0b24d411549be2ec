package web_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
)

// TestBadInput: every kind of bad input gets a 4xx with a specific code, and
// nothing is written.
func TestBadInput(t *testing.T) {
	t.Parallel()
	bigParams := `{"blob":"` + strings.Repeat("x", 64<<10) + `"}`
	bigBody := `{"key":"k","type":"note","message":"` + strings.Repeat("x", 1<<20) + `"}`
	var many strings.Builder
	many.WriteString(`{"entries":[`)
	for i := range 501 {
		if i > 0 {
			many.WriteString(",")
		}
		fmt.Fprintf(&many, `{"key":"k%d","type":"intent","tool":"t"}`, i)
	}
	many.WriteString(`]}`)

	cases := []struct {
		name   string
		body   string
		status int
		code   string
	}{
		{"malformed JSON", `{"key":`, 400, "invalid_json"},
		{"not an object", `[1,2]`, 400, "invalid_json"},
		{"empty body", ``, 400, "invalid_json"},
		{"trailing garbage", `{"key":"k","type":"intent","tool":"t"} x`, 400, "invalid_json"},
		{"unknown field", `{"key":"k","type":"intent","tool":"t","toll":"x"}`, 400, "invalid"},
		{"key as number", `{"key":42,"type":"intent","tool":"t"}`, 400, "invalid"},
		{"attempt as string", `{"key":"k","type":"heartbeat","attempt":"1"}`, 400, "invalid"},
		{"attempt fractional", `{"key":"k","type":"heartbeat","attempt":1.5}`, 400, "invalid"},
		{"retriable as string", `{"key":"k","type":"failed","attempt":1,"error":"x","retriable":"yes"}`, 400, "invalid"},
		{"occurred_at not RFC 3339", `{"key":"k","type":"note","message":"m","occurred_at":"yesterday"}`, 400, "invalid"},
		{"missing key", `{"type":"intent","tool":"t"}`, 400, "invalid"},
		{"missing type", `{"key":"k"}`, 400, "invalid"},
		{"missing tool", `{"key":"k","type":"intent"}`, 400, "invalid"},
		{"missing attempt on heartbeat", `{"key":"k","type":"heartbeat"}`, 400, "invalid"},
		{"missing attempt on succeeded", `{"key":"k","type":"succeeded"}`, 400, "invalid"},
		{"missing error on failed", `{"key":"k","type":"failed","attempt":1}`, 400, "invalid"},
		{"missing attempt on compensated", `{"key":"k","type":"compensated"}`, 400, "invalid"},
		{"missing message on note", `{"key":"k","type":"note"}`, 400, "invalid"},
		{"empty key", `{"key":"","type":"intent","tool":"t"}`, 400, "invalid"},
		{"key too long", `{"key":"` + strings.Repeat("k", 256) + `","type":"intent","tool":"t"}`, 400, "invalid"},
		{"key with newline", `{"key":"a\nb","type":"intent","tool":"t"}`, 400, "invalid"},
		{"key with NUL", `{"key":"a\u0000b","type":"intent","tool":"t"}`, 400, "invalid"},
		{"key with DEL", `{"key":"a\u007fb","type":"intent","tool":"t"}`, 400, "invalid"},
		{"tool too long", `{"key":"k","type":"intent","tool":"` + strings.Repeat("t", 129) + `"}`, 400, "invalid"},
		{"params over 64 KiB", `{"key":"k","type":"intent","tool":"t","params":` + bigParams + `}`, 400, "invalid"},
		{"params not an object", `{"key":"k","type":"intent","tool":"t","params":[1]}`, 400, "invalid"},
		{"timeout zero", `{"key":"k","type":"intent","tool":"t","timeout":0}`, 400, "invalid"},
		{"timeout too large", `{"key":"k","type":"intent","tool":"t","timeout":604801}`, 400, "invalid"},
		{"unknown type", `{"key":"k","type":"done"}`, 400, "invalid"},
		{"unknown effect", `{"key":"k","type":"intent","tool":"t","effect":"risky"}`, 400, "invalid"},
		{"field of another type", `{"key":"k","type":"intent","tool":"t","attempt":1}`, 400, "invalid"},
		{"body over 1 MiB", bigBody, 413, "body_too_large"},
		{"501 entries", many.String(), 400, "too_many_entries"},
		{"zero entries", `{"entries":[]}`, 400, "invalid"},
		{"entries not an array", `{"entries":{}}`, 400, "invalid"},
		{"unknown field beside entries", `{"entries":[{"key":"k","type":"intent","tool":"t"}],"x":1}`, 400, "invalid"},
	}
	decisionCases := []struct {
		name, body string
		status     int
		code       string
	}{
		{"unknown decision", `{"decision":"undo","reason":"r"}`, 400, "invalid"},
		{"no reason", `{"decision":"abandon"}`, 400, "invalid"},
		{"blank reason", `{"decision":"abandon","reason":"  "}`, 400, "invalid"},
		{"unknown field", `{"decision":"abandon","reason":"r","force":true}`, 400, "invalid"},
		{"malformed", `{"decision":`, 400, "invalid_json"},
		{"expected_version as string", `{"decision":"abandon","reason":"r","expected_version":"3"}`, 400, "invalid"},
	}
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newEnv(t, st)
		agent := e.key("payments", "refund-bot", services.RoleAgent)
		operator := e.key("payments", "ops", services.RoleOperator)
		for _, c := range cases {
			status, m := e.do("POST", "/v1/entries", agent, c.body)
			require.Equal(t, c.status, status, c.name)
			require.Equal(t, c.code, errCode(m), c.name)
			require.NotEmpty(t, m["error"].(map[string]any)["message"], c.name)
		}
		status, m := e.do("GET", "/v1/actions", agent, "")
		require.Equal(t, 200, status)
		require.Empty(t, m["actions"], "bad input wrote nothing")

		_, m = e.do("POST", "/v1/entries", agent, `{"key":"k","type":"intent","tool":"t"}`)
		id := m["action"].(map[string]any)["id"].(string)
		for _, c := range decisionCases {
			status, m := e.do("POST", "/v1/actions/"+id+"/decisions", operator, c.body)
			require.Equal(t, c.status, status, c.name)
			require.Equal(t, c.code, errCode(m), c.name)
		}
		status, m = e.do("GET", "/v1/actions/"+id+"/entries", agent, "")
		require.Equal(t, 200, status)
		require.Len(t, m["entries"], 1, "refused decisions wrote nothing")

		for _, q := range []string{"?limit=0", "?limit=501", "?limit=x", "?since=yesterday", "?status=bogus", "?cursor=zzz", "?colour=red"} {
			status, m := e.do("GET", "/v1/actions"+q, agent, "")
			require.Equal(t, 400, status, q)
			require.Equal(t, "invalid", errCode(m), q)
		}
		status, m = e.do("DELETE", "/v1/entries", agent, "")
		require.Equal(t, 405, status)
		require.Equal(t, "method_not_allowed", errCode(m))
		status, m = e.do("GET", "/v1/nothing", agent, "")
		require.Equal(t, 404, status)
		require.Equal(t, "not_found", errCode(m))
	})
}
