package main_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMCPGatewayOverStdio runs `arbiter mcp-gateway` as a host does: a
// child process speaking MCP on its standard input and output, in front of
// the example payments server, against a running `arbiter serve`.
func TestMCPGatewayOverStdio(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	env := []string{"ARBITER_DATABASE_URL="}
	p := serve(t, dir, env)
	waitReady(t, p.url, 20*time.Second)
	key := createKey(t, dir, env, "--namespace", "payments", "--name", "payments-gateway", "--role", "agent")
	payments := filepath.Join(dir, "mcp-payments")
	out, err := exec.Command("go", "build", "-o", payments, "../../examples/mcp-payments").CombinedOutput()
	require.NoError(t, err, "%s", out)
	state := filepath.Join(dir, "payments.json")
	config, err := filepath.Abs("../../examples/mcp-payments/gateway.json")
	require.NoError(t, err)

	cmd := exec.Command(binary, "mcp-gateway", "--config", config, "--", payments, "-state", state)
	cmd.Env = append(os.Environ(), "ARBITER_URL="+p.url, "ARBITER_API_KEY="+key)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	host := mcp.NewClient(&mcp.Implementation{Name: "test-host", Version: "1"}, nil)
	cs, err := host.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	require.NoError(t, err)
	defer cs.Close()

	args := map[string]any{"order_id": "order-8812", "amount": 1999}
	first, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "refund", Arguments: args})
	require.NoError(t, err)
	require.False(t, first.IsError)
	again, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "refund", Arguments: args})
	require.NoError(t, err)
	require.False(t, again.IsError)
	assert.Equal(t, first.StructuredContent, again.StructuredContent)
	meta, _ := again.Meta["arbiter"].(map[string]any)
	require.NotNil(t, meta, "the repeat is a replay")
	assert.Equal(t, "refund:order-8812", meta["key"])

	raw, err := os.ReadFile(state)
	require.NoError(t, err)
	var st struct {
		Calls map[string]int `json:"calls"`
	}
	require.NoError(t, json.Unmarshal(raw, &st))
	assert.Equal(t, 1, st.Calls["refund"], "the payments server refunded once")
}
