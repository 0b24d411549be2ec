package web_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
)

// TestConcurrentIntentsOneProceed: 100 concurrent intents on one new key give
// exactly one proceed and no 5xx.
func TestConcurrentIntentsOneProceed(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newEnv(t, st)
		agent := e.key("payments", "refund-bot", services.RoleAgent)
		const n = 100
		statuses := make([]int, n)
		outcomes := make([]string, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				status, m := e.do("POST", "/v1/entries", agent, `{"key":"refund:race","type":"intent","tool":"payments.refund","params":{"amount":1}}`)
				statuses[i] = status
				outcomes[i], _ = m["outcome"].(string)
			})
		}
		wg.Wait()
		count := map[string]int{}
		for i := range n {
			require.Less(t, statuses[i], 500, "no 5xx")
			count[outcomes[i]]++
		}
		require.Equal(t, 1, count["proceed"], "%v", count)
		require.Equal(t, n-1, count["in_progress"], "%v", count)
		_, m := e.do("GET", "/v1/actions?key=refund:race", agent, "")
		_, m = e.do("GET", fmt.Sprintf("/v1/actions/%s/entries", m["id"]), agent, "")
		require.Len(t, m["entries"], 1, "one intent recorded")
	})
}

// TestConcurrentDecisionsOneWinner: of many operators deciding one action at
// once, exactly one wins.
func TestConcurrentDecisionsOneWinner(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		e := newEnv(t, st)
		agent := e.key("payments", "refund-bot", services.RoleAgent)
		op := e.key("payments", "ops", services.RoleOperator)
		_, m := e.do("POST", "/v1/entries", agent, `{"key":"refund:d","type":"intent","tool":"payments.refund","effect":"keyed"}`)
		id := m["action"].(map[string]any)["id"].(string)
		_, m = e.do("POST", "/v1/entries", agent, `{"key":"refund:d","type":"failed","attempt":1,"error":"provider timeout"}`)
		require.Equal(t, "recorded", m["outcome"])
		decisions := []string{"confirm", "retry", "abandon"}
		const n = 30
		statuses := make([]int, n)
		codes := make([]string, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				// Operators name the version they saw; those who do not all
				// send retry, which no state reached here allows again.
				body := fmt.Sprintf(`{"decision":%q,"reason":"operator %d","expected_version":2}`, decisions[i%3], i)
				if i%2 == 1 {
					body = fmt.Sprintf(`{"decision":"retry","reason":"operator %d"}`, i)
				}
				var mm map[string]any
				statuses[i], mm = e.do("POST", "/v1/actions/"+id+"/decisions", op, body)
				codes[i] = errCode(mm)
			})
		}
		wg.Wait()
		won := 0
		for i := range n {
			switch statuses[i] {
			case 201:
				won++
			case 409:
				require.Contains(t, []string{"version_conflict", "invalid_transition"}, codes[i])
			default:
				t.Fatalf("decision %d: status %d code %s", i, statuses[i], codes[i])
			}
		}
		require.Equal(t, 1, won)
		_, m = e.do("GET", "/v1/actions/"+id+"/entries", agent, "")
		decided := 0
		for _, en := range m["entries"].([]any) {
			if en.(map[string]any)["type"] == "decision" {
				decided++
			}
		}
		require.Equal(t, 1, decided)
	})
}
