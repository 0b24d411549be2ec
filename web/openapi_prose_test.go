package web_test

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services/record"
	"github.com/arbiter-ledger/arbiter/web"
)

// firstCells returns the backquoted words in the first cell of each row of
// the Markdown tables in text: the values a table has a row for.
func firstCells(text string) map[string]bool {
	out := map[string]bool{}
	word := regexp.MustCompile("`([^`]+)`")
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cell := strings.SplitN(line[1:], "|", 2)[0]
		for _, m := range word.FindAllStringSubmatch(cell, -1) {
			out[m[1]] = true
		}
	}
	return out
}

// TestOpenAPIProseTablesNameTheVocabulary: the tables in the OpenAPI
// document's descriptions, which say what each value means, have a row for
// every value of package record's lists, so a value added to the enums is
// also explained where readers look it up.
func TestOpenAPIProseTablesNameTheVocabulary(t *testing.T) {
	t.Parallel()
	var doc struct {
		Paths      map[string]map[string]json.RawMessage `json:"paths"`
		Components struct {
			Schemas map[string]struct {
				Description string `json:"description"`
			} `json:"schemas"`
		} `json:"components"`
	}
	require.NoError(t, json.Unmarshal(web.OpenAPI, &doc))
	operation := func(path, method string) string {
		var op struct {
			Description string `json:"description"`
		}
		require.NoError(t, json.Unmarshal(doc.Paths[path][method], &op), "%s %s", method, path)
		return op.Description
	}
	schema := func(name string) string {
		d := doc.Components.Schemas[name].Description
		require.NotEmpty(t, d, "schema %s has a description", name)
		return d
	}
	tables := []struct {
		where  string
		text   string
		values []string
	}{
		{"POST /v1/actions/{id}/decisions", operation("/v1/actions/{id}/decisions", "post"), spelled(record.Decisions)},
		{"DecisionInput", schema("DecisionInput"), spelled(record.Decisions)},
		{"Entry", schema("Entry"), spelled(record.EntryTypes)},
		{"EntryResult", schema("EntryResult"), spelled(record.Outcomes)},
		{"WebhookEventType", schema("WebhookEventType"), spelled(record.EventTypes)},
	}
	for _, tb := range tables {
		rows := firstCells(tb.text)
		for _, v := range tb.values {
			if !rows[v] {
				t.Errorf("the table in %s's description has no row for %q", tb.where, v)
			}
		}
	}
}

// spelled returns the values of one of record's lists as strings.
func spelled[T ~string](values []T) []string {
	out := make([]string, len(values))
	for i, v := range values {
		out[i] = string(v)
	}
	return out
}
