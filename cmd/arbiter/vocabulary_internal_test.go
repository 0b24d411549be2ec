package main

import (
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/client"
	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/record"
)

// TestNextAfterEveryStatusTheAgentActsIn: after a decision, decide tells
// the person what the agent does next for every status in which the agent's
// next intent acts (services.AgentActsAfterDecision, held to the rules
// table), and says nothing for the others.
func TestNextAfterEveryStatusTheAgentActsIn(t *testing.T) {
	t.Parallel()
	for _, s := range record.Statuses {
		next := nextAfter(&client.Action{Status: s, Attempt: 1})
		if slices.Contains(services.AgentActsAfterDecision, s) {
			require.NotEmpty(t, next, "decide says nothing of what the agent does after a decision leaves an action %s", s)
		} else {
			require.Empty(t, next, "decide tells of a next step after %s, where the agent's intent does not act", s)
		}
	}
}

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

// TestReadmeNamesEveryAlert: the README's paragraph on webhook events names
// every alert an endpoint can subscribe to.
func TestReadmeNamesEveryAlert(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	text := string(raw)
	start := strings.Index(text, "on rotation. Events: ")
	require.GreaterOrEqual(t, start, 0, "README.md lists the webhook events after \"on rotation. Events: \"")
	end := strings.Index(text[start:], "\n\n")
	require.Greater(t, end, 0)
	list := text[start : start+end]
	for _, e := range record.EventTypes {
		require.Contains(t, list, "`"+string(e)+"`", "the README's list of webhook events names %q", e)
	}
}
