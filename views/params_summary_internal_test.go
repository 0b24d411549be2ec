package views

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParamsSummary(t *testing.T) {
	for in, want := range map[string]string{
		`{"order":"8812","amount":1999,"currency":"EUR"}`:                    "amount 1999 EUR · order 8812",
		`{"template":"refund-confirmation","to":"cust-8812@example.com"}`:    "to cust-8812@example.com · template refund-confirmation",
		`{"b":true,"a":{"x":1},"c":null,"d":[1],"e":1.50,"f":"g","h":"i"}`:   "b true · e 1.50 · f g",
		`{"note":"` + "aaaaaaaaaabbbbbbbbbbccccccccccddddddddddeeeee" + `"}`: "note aaaaaaaaaabbbbbbbbbbccccccccccddddddddd…",
		`{}`:    "",
		`[1,2]`: "",
		``:      "",
		`{"amount":5,"order":"1","currency":"USD","customer":"c_9"}`: "amount 5 USD · customer c_9 · order 1",
	} {
		require.Equal(t, want, ParamsSummary(json.RawMessage(in)), in)
	}
}
