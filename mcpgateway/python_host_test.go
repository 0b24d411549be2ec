package mcpgateway_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/client"
	"github.com/arbiter-ledger/arbiter/mcpgateway"
	"github.com/arbiter-ledger/arbiter/services"
)

// A second implementation of MCP, the Python SDK, as the host: over stdio
// it runs `arbiter mcp-gateway` as a host launches it, over HTTP it talks
// to the gateway's streamable HTTP handler. The SDK is installed, pinned,
// into a virtual environment under the temporary directory, kept between
// runs. Without Python 3.10 or newer, or without PyPI, the test skips on a
// developer's machine and fails in CI.

// pythonMCP is the Python SDK the test installs.
const pythonMCP = "mcp==2.3.0"

var (
	pythonOnce sync.Once
	pythonBin  string
	pythonErr  error

	arbiterOnce sync.Once
	arbiterBin  string
	arbiterErr  error
)

// pythonHost returns the interpreter of a virtual environment with
// pythonMCP installed.
func pythonHost(t *testing.T) string {
	t.Helper()
	pythonOnce.Do(func() { pythonBin, pythonErr = installPythonMCP() })
	if pythonErr != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the Python MCP SDK is needed in CI: %v", pythonErr)
		}
		t.Skipf("skipping the Python MCP host: %v", pythonErr)
	}
	return pythonBin
}

func installPythonMCP() (string, error) {
	base := os.Getenv("ARBITER_PYTHON")
	if base == "" {
		base = "python3"
	}
	if _, err := exec.LookPath(base); err != nil {
		return "", fmt.Errorf("no %s (install Python 3.10 or newer, or set ARBITER_PYTHON): %w", base, err)
	}
	if out, err := exec.Command(base, "-c", "import sys; sys.exit(sys.version_info < (3, 10))").CombinedOutput(); err != nil {
		return "", fmt.Errorf("%s is older than 3.10: %v %s", base, err, out)
	}
	venv := filepath.Join(os.TempDir(), "arbiter-python-"+strings.ReplaceAll(pythonMCP, "==", "-"))
	py := filepath.Join(venv, "bin", "python")
	if exec.Command(py, "-c", "import mcp").Run() == nil {
		return py, nil
	}
	// Built beside and renamed into place, so that a run that stops half
	// way, or one beside it, never leaves a broken environment there.
	tmp, err := os.MkdirTemp(os.TempDir(), "arbiter-python-venv-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	if out, err := exec.Command(base, "-m", "venv", tmp).CombinedOutput(); err != nil {
		return "", fmt.Errorf("%s -m venv: %v\n%s", base, err, out)
	}
	install := exec.Command(filepath.Join(tmp, "bin", "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check", pythonMCP)
	if out, err := install.CombinedOutput(); err != nil {
		return "", fmt.Errorf("pip install %s: %v\n%s", pythonMCP, err, out)
	}
	// A virtual environment's scripts name its path: make it again in place.
	_ = os.RemoveAll(venv)
	if err := os.Rename(tmp, venv); err != nil {
		return "", err
	}
	if out, err := exec.Command(base, "-m", "venv", venv).CombinedOutput(); err != nil {
		return "", fmt.Errorf("%s -m venv: %v\n%s", base, err, out)
	}
	if out, err := exec.Command(py, "-c", "import mcp").CombinedOutput(); err != nil {
		return "", fmt.Errorf("import mcp: %v\n%s", err, out)
	}
	return py, nil
}

// arbiterCommand builds the arbiter binary once.
func arbiterCommand(t testing.TB) string {
	t.Helper()
	arbiterOnce.Do(func() {
		arbiterBin = filepath.Join(filepath.Dir(paymentsBin), "arbiter")
		if out, err := exec.Command("go", "build", "-o", arbiterBin, "../cmd/arbiter").CombinedOutput(); err != nil {
			arbiterErr = fmt.Errorf("build arbiter: %v\n%s", err, out)
		}
	})
	require.NoError(t, arbiterErr)
	return arbiterBin
}

// pythonSaw is what testdata/python_host.py prints.
type pythonSaw struct {
	Server string            `json:"server"`
	Tools  map[string]string `json:"tools"`
	First  pythonResult      `json:"first"`
	Again  pythonResult      `json:"again"`
	Found  pythonResult      `json:"found"`
}

type pythonResult struct {
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	StructuredContent map[string]any `json:"structuredContent"`
	IsError           bool           `json:"isError"`
	Meta              map[string]any `json:"_meta"`
}

func TestPythonMCPHostTalksToTheGateway(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, m mode, arb *arbiter) {
		py := pythonHost(t)
		up, pay := startUpstream(t, m)
		secret := arb.key("payments", "gateway", services.RoleAgent)
		agent := arb.clientFor(secret)
		config := filepath.Join(t.TempDir(), "gateway.json")
		require.NoError(t, os.WriteFile(config, []byte(refundConfig), 0o600))

		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		args := []string{"testdata/python_host.py"}
		if m.http {
			cfg, err := mcpgateway.LoadConfig(config)
			require.NoError(t, err)
			g, err := mcpgateway.New(ctx, mcpgateway.Options{Arbiter: agent, Upstream: up, Config: cfg, Logger: slog.New(slog.DiscardHandler)})
			require.NoError(t, err)
			t.Cleanup(func() { _ = g.Close() })
			srv := httptest.NewServer(g.HTTPHandler())
			t.Cleanup(srv.Close)
			args = append(args, "http", srv.URL)
		} else {
			args = append(args, "stdio", arbiterCommand(t), "mcp-gateway", "--config", config, "--")
			args = append(args, up.Command...)
		}
		cmd := exec.CommandContext(ctx, py, args...)
		cmd.Env = append(os.Environ(), "ARBITER_URL="+arb.url, "ARBITER_API_KEY="+secret)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		require.NoError(t, cmd.Run(), "python host:\n%s", stderr.String())
		var saw pythonSaw
		require.NoError(t, json.Unmarshal(stdout.Bytes(), &saw), "python host printed:\n%s\n%s", stdout.String(), stderr.String())

		assert.Equal(t, "payments", saw.Server)
		assert.Contains(t, saw.Tools["refund"], "Calls of this tool are recorded in Arbiter's action ledger")
		assert.Equal(t, "Find the refunds of an order.", saw.Tools["find_refund"], "a read-only tool is listed unchanged")

		require.False(t, saw.First.IsError, "%+v", saw.First)
		assert.Equal(t, map[string]any{"refund_id": "re_1", "order_id": "order-py-1", "amount": float64(1250), "cancelled": false},
			saw.First.StructuredContent)
		assert.Nil(t, saw.First.Meta["arbiter"])

		require.False(t, saw.Again.IsError, "%+v", saw.Again)
		assert.Equal(t, saw.First.StructuredContent, saw.Again.StructuredContent, "the replay is the saved result")
		replay, _ := saw.Again.Meta["arbiter"].(map[string]any)
		require.NotNil(t, replay, "the repeat is marked a replay in _meta: %+v", saw.Again)
		assert.Equal(t, true, replay["replay"])
		assert.Equal(t, "refund:order-py-1", replay["key"])
		require.NotEmpty(t, saw.Again.Content)
		assert.Contains(t, saw.Again.Content[len(saw.Again.Content)-1].Text, "[Arbiter] This identical call was made before (attempt 1, succeeded)")

		require.False(t, saw.Found.IsError, "%+v", saw.Found)
		assert.Equal(t, "re_1", saw.Found.StructuredContent["refund_id"])
		assert.Nil(t, saw.Found.Meta["arbiter"])

		st := pay.state()
		assert.Equal(t, 1, st.Calls["refund"], "the upstream refunded once")
		assert.Equal(t, 1, st.Calls["find_refund"], "the read-only call reached the upstream")
		a, err := agent.ActionByKey(ctx, "refund:order-py-1")
		require.NoError(t, err)
		assert.Equal(t, client.StatusSucceeded, a.Status)
		page, err := agent.ListActions(ctx, client.ListOptions{})
		require.NoError(t, err)
		assert.Len(t, page.Actions, 1, "the read-only call left no entry")
	})
}

// TestPythonMCPHostAcceptsTheReplayOfAConfirmedCall: refund declares an
// output schema, and the Python SDK refuses a result of such a tool without
// structured content ("has an output schema but did not return structured
// content"). A refund whose answer was lost and that a person confirmed
// without a result is replayed as a result it accepts.
func TestPythonMCPHostAcceptsTheReplayOfAConfirmedCall(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, m mode, arb *arbiter) {
		py := pythonHost(t)
		up, pay := startUpstream(t, m, "-crash-after-refund")
		secret := arb.key("payments", "gateway", services.RoleAgent)
		agent := arb.clientFor(secret)
		operator := arb.client("payments", "on-call", services.RoleOperator)
		doc := `{"name": "payments", "tools": [{"match": "refund", "key": "refund:{order_id}", "lease": "1s"}]}`
		config := filepath.Join(t.TempDir(), "gateway.json")
		require.NoError(t, os.WriteFile(config, []byte(doc), 0o600))

		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		args := []string{"testdata/python_host.py", "replay"}
		if m.http {
			cfg, err := mcpgateway.ParseConfig([]byte(doc))
			require.NoError(t, err)
			g, err := mcpgateway.New(ctx, mcpgateway.Options{Arbiter: agent, Upstream: up, Config: cfg, Logger: slog.New(slog.DiscardHandler)})
			require.NoError(t, err)
			t.Cleanup(func() { _ = g.Close() })
			srv := httptest.NewServer(g.HTTPHandler())
			t.Cleanup(srv.Close)
			args = append(args, "http", srv.URL)
		} else {
			args = append(args, "stdio", arbiterCommand(t), "mcp-gateway", "--config", config, "--")
			args = append(args, up.Command...)
		}
		cmd := exec.CommandContext(ctx, py, args...)
		cmd.Env = append(os.Environ(), "ARBITER_URL="+arb.url, "ARBITER_API_KEY="+secret)
		stdin, err := cmd.StdinPipe()
		require.NoError(t, err)
		stdoutPipe, err := cmd.StdoutPipe()
		require.NoError(t, err)
		stderr := &lockedBuffer{}
		cmd.Stderr = stderr
		require.NoError(t, cmd.Start())
		out := bufio.NewReader(stdoutPipe)
		line, err := out.ReadString('\n')
		require.NoError(t, err, "python host:\n%s", stderr.String())
		var lost struct {
			Lost pythonResult `json:"lost"`
		}
		require.NoError(t, json.Unmarshal([]byte(line), &lost), line)
		require.True(t, lost.Lost.IsError, "%+v", lost.Lost)

		var a *client.Action
		eventually(t, "the lost refund times out", func() bool {
			arb.sweep()
			a, err = agent.ActionByKey(ctx, "refund:order-py-2")
			return err == nil && a.Status == client.StatusTimedOut
		})
		_, err = operator.Decide(ctx, a.ID, client.Decision{Decision: client.DecisionConfirm, Reason: "seen in the PSP dashboard"})
		require.NoError(t, err)
		_, err = io.WriteString(stdin, "confirmed\n")
		require.NoError(t, err)
		rest, err := io.ReadAll(out)
		require.NoError(t, err)
		require.NoError(t, cmd.Wait(), "python host:\n%s", stderr.String())
		var saw struct {
			Replay pythonResult `json:"replay"`
		}
		require.NoError(t, json.Unmarshal(rest, &saw), "python host printed:\n%s\n%s", rest, stderr.String())
		require.True(t, saw.Replay.IsError, "%+v", saw.Replay)
		require.NotEmpty(t, saw.Replay.Content)
		assert.Contains(t, saw.Replay.Content[0].Text, "this identical call was made before (attempt 1, confirmed)")
		assert.Equal(t, true, saw.Replay.Meta["arbiter"].(map[string]any)["replay"])
		assert.Equal(t, 1, pay.state().Calls["refund"], "nothing was resent")
	})
}

// lockedBuffer is a bytes.Buffer a running command may write while the
// test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
