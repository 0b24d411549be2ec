package mcpgateway_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/client"
	"github.com/arbiter-ledger/arbiter/mcpgateway"
)

func TestConfigurationMistakesThatNeedNoUpstream(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, doc, err string }{
		{"pattern syntax", `{"tools": [{"match": "refund?"}]}`,
			`tools[0] ("refund?"): match "refund?": only letters, digits, _ - . / and * (any run of characters) may appear in a pattern`},
		{"regexp", `{"tools": [{"match": "[a-z]+"}]}`, `match "[a-z]+": only letters`},
		{"empty match", `{"tools": [{"effect": "keyed"}]}`, `match is required`},
		{"unknown field", `{"tools": [{"match": "refund", "keys": "refund:{order_id}"}]}`, `unknown field "keys"`},
		{"effect", `{"tools": [{"match": "refund", "effect": "safe"}]}`, `effect "safe" is none of [read_only idempotent keyed unkeyed]`},
		{"lease", `{"tools": [{"match": "refund", "lease": "10"}]}`, `missing unit in duration "10"`},
		{"template", `{"tools": [{"match": "refund", "key": "refund:{order_id"}]}`, `template "refund:{order_id": the { at byte 7 is not closed`},
		{"result in key", `{"tools": [{"match": "refund", "key": "refund:{result.id}"}]}`, `{result.…} is known only after the call`},
		{"lookup without found", `{"tools": [{"match": "refund", "lookup": {"tool": "find_refund"}}]}`, `lookup: found is required`},
		{"trust and guarded", `{"tools": [{"match": "refund", "guarded": true, "trust_read_only_hint": true}]}`, `guarded and trust_read_only_hint both decide`},
		{"trust with key", `{"tools": [{"match": "refund", "trust_read_only_hint": true, "key": "x"}]}`, `trust_read_only_hint lets the upstream leave the tool unrecorded`},
		{"unguarded with key", `{"tools": [{"match": "refund", "guarded": false, "key": "x"}]}`, `an unguarded tool is not recorded`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := mcpgateway.ParseConfig([]byte(tc.doc))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.err)
		})
	}
}

// nowhere is an Arbiter that cannot be reached: the gateway only logs that
// at start, so these tests need no server.
var nowhere = client.New("http://127.0.0.1:1", "ak_test")

func TestConfigurationThatDoesNotFitTheUpstreamIsAnErrorAtStart(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, doc, err string }{
		{"missing argument", `{"tools": [{"match": "refund", "key": "refund:{order}"}]}`,
			`tool "refund": key "refund:{order}" names the argument "order", which the tool's input schema does not have (it has amount, order_id)`},
		{"missing tool", `{"tools": [{"match": "refnd", "effect": "keyed"}]}`,
			`tools[0]: the upstream has no tool "refnd" (it has cancel_refund, find_refund, refund)`},
		{"missing compensating tool", `{"tools": [{"match": "refund", "compensate": {"tool": "undo"}}]}`,
			`compensate: the upstream has no tool "undo"`},
		{"compensation argument", `{"tools": [{"match": "refund", "compensate": {"tool": "cancel_refund", "arguments": {"id": "{result.refund_id}"}}}]}`,
			`compensate: cancel_refund has no argument "id" (it has refund_id)`},
		{"lookup argument", `{"tools": [{"match": "refund", "lookup": {"tool": "find_refund", "arguments": {"order_id": "{order}"}, "found": "refund_id"}}]}`,
			`lookup.arguments.order_id "{order}" names the argument "order"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := mcpgateway.ParseConfig([]byte(tc.doc))
			require.NoError(t, err)
			up := mcpgateway.Upstream{Command: []string{paymentsBin, "-state", filepath.Join(t.TempDir(), "p.json")}}
			_, err = mcpgateway.New(context.Background(), mcpgateway.Options{Arbiter: nowhere, Upstream: up, Config: cfg, Name: "payments",
				Logger: slog.New(slog.DiscardHandler)})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.err)
		})
	}
}

func TestUnreachableUpstreamIsAnErrorAtStart(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		up   mcpgateway.Upstream
	}{
		{"command", mcpgateway.Upstream{Command: []string{filepath.Join(t.TempDir(), "no-such-server")}}},
		{"url", mcpgateway.Upstream{URL: "http://127.0.0.1:1/mcp"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := mcpgateway.New(context.Background(), mcpgateway.Options{Arbiter: nowhere, Upstream: tc.up, Name: "payments",
				Logger: slog.New(slog.DiscardHandler)})
			require.Error(t, err)
			assert.Contains(t, err.Error(), "mcpgateway: connect to the upstream")
		})
	}
}

func TestTheExampleConfigurationFitsTheExampleServer(t *testing.T) {
	t.Parallel()
	cfg, err := mcpgateway.LoadConfig("../examples/mcp-payments/gateway.json")
	require.NoError(t, err)
	up := mcpgateway.Upstream{Command: []string{paymentsBin, "-state", filepath.Join(t.TempDir(), "p.json")}}
	g, err := mcpgateway.New(context.Background(), mcpgateway.Options{Arbiter: nowhere, Upstream: up, Config: cfg,
		Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	require.NoError(t, g.Close())
}

func TestConfigurationWithoutANameIsRefusedAtStart(t *testing.T) {
	t.Parallel()
	up := mcpgateway.Upstream{Command: []string{paymentsBin, "-state", filepath.Join(t.TempDir(), "p.json")}}
	for _, tc := range []struct{ name, doc, flag, err string }{
		{"none", `{}`, "", `mcpgateway: no name: give the tool prefix recorded in the ledger`},
		{"differ", `{"name": "payments"}`, "billing", `--name "billing" and the configuration's name "payments" differ`},
		{"invalid", `{"name": "pay ments"}`, "", `name "pay ments": a tool prefix is letters`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := mcpgateway.ParseConfig([]byte(tc.doc))
			require.NoError(t, err)
			_, err = mcpgateway.New(context.Background(), mcpgateway.Options{Arbiter: nowhere, Upstream: up, Config: cfg, Name: tc.flag,
				Logger: slog.New(slog.DiscardHandler)})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.err)
		})
	}
	// The command line's name does when the file has none.
	cfg, err := mcpgateway.ParseConfig([]byte(`{}`))
	require.NoError(t, err)
	g, err := mcpgateway.New(context.Background(), mcpgateway.Options{Arbiter: nowhere, Upstream: up, Config: cfg, Name: "payments",
		Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	require.NoError(t, g.Close())
}
