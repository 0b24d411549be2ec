package main

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services/record"
)

// TestVocabularyDecisions: the CLI accepts exactly the ledger's decisions,
// and decide's help names each of them.
func TestVocabularyDecisions(t *testing.T) {
	t.Parallel()
	require.Len(t, decisionNames, len(record.Decisions))
	f, ok := reflect.TypeOf(decideCmd{}).FieldByName("Args")
	require.True(t, ok)
	help := f.Tag.Get("help")
	for i, d := range record.Decisions {
		require.Equal(t, string(d), decisionNames[i])
		require.True(t, strings.Contains(help, string(d)), "decide's help names %q", d)
	}
}

// TestReadmeNamesEveryDecision: the README's API table names each of the
// ledger's decisions in the row of POST /v1/actions/{id}/decisions.
func TestReadmeNamesEveryDecision(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	var row string
	for line := range strings.Lines(string(raw)) {
		if strings.HasPrefix(line, "| `POST /v1/actions/{id}/decisions` |") {
			row = line
		}
	}
	require.NotEmpty(t, row, "README.md's API table has a row for POST /v1/actions/{id}/decisions")
	for _, d := range record.Decisions {
		require.Contains(t, row, "`"+string(d)+"`", "the README's row names the decision %q", d)
	}
}
