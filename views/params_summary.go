package views

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
)

// summaryKeys are the params a person recognises an action by, in the
// order a summary names them: what it moves, to whom, for which order.
var summaryKeys = []string{"amount", "currency", "to", "recipient", "email", "customer", "order", "order_id", "template"}

// summaryMax bounds a summary: the queue stays one line a row.
const summaryMax = 3

// ParamsSummary says in a few words what an action's params are about
// ("amount 1999 EUR · order 8812"): the known keys first, then other
// scalar keys in their order, at most summaryMax of them, each value cut
// at 40 characters. Objects, arrays and nulls are left out; "" when there
// is nothing to say.
func ParamsSummary(params json.RawMessage) string {
	type field struct{ key, value string }
	var fields []field
	dec := json.NewDecoder(bytes.NewReader(params))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return ""
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return ""
		}
		key, _ := tok.(string)
		var v any
		if err := dec.Decode(&v); err != nil {
			return ""
		}
		var s string
		switch v := v.(type) {
		case string:
			s = v
		case json.Number:
			s = v.String()
		case bool:
			s = strconv.FormatBool(v)
		default:
			continue
		}
		if r := []rune(s); len(r) > 40 {
			s = string(r[:39]) + "…"
		}
		fields = append(fields, field{key, s})
	}
	rank := func(k string) int {
		if i := slices.Index(summaryKeys, k); i >= 0 {
			return i
		}
		return len(summaryKeys)
	}
	slices.SortStableFunc(fields, func(a, b field) int { return rank(a.key) - rank(b.key) })
	var parts []string
	for i := 0; i < len(fields) && len(parts) < summaryMax; i++ {
		f := fields[i]
		if f.key == "amount" && i+1 < len(fields) && fields[i+1].key == "currency" {
			parts = append(parts, "amount "+f.value+" "+fields[i+1].value)
			i++
			continue
		}
		parts = append(parts, f.key+" "+f.value)
	}
	return strings.Join(parts, " · ")
}
