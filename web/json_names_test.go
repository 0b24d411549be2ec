package web_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
)

// A JSON document stored as sent (a result, a lookup's evidence) may not
// repeat a member name at any depth: PostgreSQL's jsonb keeps the last of
// the repeats and SQLite the text as sent, so the two databases answered
// different results for one request. Params were already refused (their
// canonical form has no repeats); escaped names and the empty name are
// names like any other.
func TestRepeatedNamesInStoredJSONAreRefused(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newEnv(t, st)
		agent := e.key("ns", "bot", services.RoleAgent)
		for i, c := range []struct {
			field, doc string
			ok         bool
		}{
			{"result", `{"a":1,"a":2}`, false},
			{"result", `{"x":[{"id":1,"id":1}]}`, false},
			{"result", `{"a":1,"\u0061":2}`, false},
			{"result", `{"":1,"":2}`, false},
			{"params", `{"a":1,"a":2}`, false},
			{"result", `{"a":1,"b":{"a":2},"c":[{"a":3},{"a":4}]}`, true},
			{"result", `{"":1,"a":"\"a\":1,\"a\""}`, true},
		} {
			key := "k" + string(rune('a'+i))
			params := `{}`
			if c.field == "params" {
				params = c.doc
			}
			status, m := e.do("POST", "/v1/entries", agent, `{"key":"`+key+`","type":"intent","tool":"t","params":`+params+`}`)
			if c.field == "params" {
				require.Equal(t, http.StatusBadRequest, status, "%s %s: %v", c.field, c.doc, m)
				require.Equal(t, "invalid", errCode(m))
				continue
			}
			require.Equal(t, http.StatusCreated, status, "%v", m)
			status, m = e.do("POST", "/v1/entries", agent, `{"key":"`+key+`","type":"succeeded","attempt":1,"result":`+c.doc+`}`)
			if c.ok {
				require.Equal(t, http.StatusOK, status, "%s: %v", c.doc, m)
				continue
			}
			require.Equal(t, http.StatusBadRequest, status, "%s: %v", c.doc, m)
			require.Equal(t, "invalid", errCode(m), c.doc)
			require.Contains(t, m["error"].(map[string]any)["message"], `"result"`)
		}
	})
}
