package web_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services/record"
	"github.com/arbiter-ledger/arbiter/web"
)

// TestOpenAPIEnumsAreTheVocabulary: every enum of the OpenAPI document that
// names the ledger's vocabulary lists exactly the typed constants of package
// record, in their order, so the contract cannot drift from the code.
func TestOpenAPIEnumsAreTheVocabulary(t *testing.T) {
	t.Parallel()
	var doc map[string]any
	require.NoError(t, json.Unmarshal(web.OpenAPI, &doc))
	enum := func(path ...string) []string {
		var node any = doc
		for _, p := range path {
			m, ok := node.(map[string]any)
			require.True(t, ok, "%v: no object at %q", path, p)
			node = m[p]
		}
		values, ok := node.(map[string]any)["enum"].([]any)
		require.True(t, ok, "%v has an enum", path)
		out := make([]string, len(values))
		for i, v := range values {
			out[i] = v.(string)
		}
		return out
	}
	schema := func(name string, props ...string) []string {
		path := []string{"components", "schemas", name}
		for _, p := range props {
			path = append(path, "properties", p)
		}
		return enum(path...)
	}
	require.Equal(t, strs(record.Statuses), schema("Status"))
	require.Equal(t, strs(record.Effects), schema("Effect"))
	require.Equal(t, strs(record.ActorKinds), schema("Actor", "kind"))
	require.Equal(t, strs(record.EntryTypes), schema("Entry", "type"))
	require.Equal(t, strs(record.AgentEntryTypes), schema("EntryInput", "type"))
	require.Equal(t, strs(record.Outcomes), schema("EntryResult", "outcome"))
	require.Equal(t, strs(record.Decisions), schema("DecisionInput", "decision"))
	require.Equal(t, strs(record.Decisions), schema("WebhookDecision", "decision"))
	require.Equal(t, strs(record.EventTypes), schema("WebhookEventType"))
	require.Equal(t, strs(record.Answers), schema("LookupAnswer", "answer"))
	require.Equal(t, strs(record.Answers), schema("EntryInput", "answer"))
}

func strs[T ~string](xs []T) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = string(x)
	}
	return out
}
