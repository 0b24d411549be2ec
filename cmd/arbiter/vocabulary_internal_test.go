package main

import (
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
