package mcpgateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/client"
	"github.com/arbiter-ledger/arbiter/mcpgateway"
	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/accounts"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
	"github.com/arbiter-ledger/arbiter/services/policies"
	"github.com/arbiter-ledger/arbiter/services/webhooks"
	"github.com/arbiter-ledger/arbiter/web"
)

// The tests run every part for real: an Arbiter server on a fresh
// database, the fake payments MCP server of examples/mcp-payments as a
// child process (over stdio, or over streamable HTTP), the gateway, and the
// Go SDK's MCP client as the host.

var paymentsBin string

func TestMain(m *testing.M) {
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		_ = flag.Set("test.parallel", "16")
	}
	dir, err := os.MkdirTemp("", "mcp-payments")
	if err != nil {
		panic(err)
	}
	paymentsBin = filepath.Join(dir, "mcp-payments")
	if out, err := exec.Command("go", "build", "-o", paymentsBin, "../examples/mcp-payments").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build mcp-payments: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// mode is how the host reaches the gateway and the gateway its upstream.
type mode struct {
	name string
	http bool // streamable HTTP on both sides; else stdio on both
}

var modes = []mode{{"stdio", false}, {"http", true}}

// arbiter is a real Arbiter server on st.
type arbiter struct {
	t      testing.TB
	st     *services.Store
	ledger *services.Ledger
	url    string
}

func startArbiter(t testing.TB, st *services.Store) *arbiter {
	t.Helper()
	approvals, limits := policies.New(st), policies.NewLimits(st)
	ledger, freezes, breakers := policies.NewBraked(st, services.LedgerConfig{Approver: approvals, Limiter: limits}, nil)
	srv := httptest.NewServer(web.New(web.Deps{Store: st, Ledger: ledger, Keys: accounts.NewKeys(st), Accounts: accounts.New(st),
		Webhooks: webhooks.New(st, webhooks.Config{Policy: webhooks.AddressPolicy{AllowPrivate: true}}), Policies: approvals,
		Limits: limits, Freezes: freezes, Breakers: breakers, Metrics: web.NewMetrics(nil, nil), Log: slog.New(slog.DiscardHandler)}))
	t.Cleanup(srv.Close)
	return &arbiter{t: t, st: st, ledger: ledger, url: srv.URL}
}

// key creates an API key and returns its secret. Operator and admin keys
// belong to a person of the key's name (NAME@example.com), so their
// approvals count.
func (a *arbiter) key(ns, name string, role services.Role) string {
	a.t.Helper()
	ctx, owner := context.Background(), ""
	if role == services.RoleOperator || role == services.RoleAdmin {
		owner = name + "@example.com"
		if _, err := accounts.New(a.st).UserByEmail(ctx, owner); err != nil {
			_, err := accounts.New(a.st).CreateUser(ctx, owner, services.RoleOperator, "correct horse battery staple")
			require.NoError(a.t, err)
		}
	}
	_, secret, err := accounts.NewKeys(a.st).CreateKey(ctx, accounts.CreateKeyRequest{Namespace: ns, Name: name, Role: role, Owner: owner})
	require.NoError(a.t, err)
	return secret
}

func (a *arbiter) client(ns, name string, role services.Role) *client.Client {
	a.t.Helper()
	return a.clientFor(a.key(ns, name, role))
}

func (a *arbiter) clientFor(secret string) *client.Client {
	return client.New(a.url, secret, client.WithBackoff(20*time.Millisecond, 200*time.Millisecond), client.WithTimeout(10*time.Second))
}

// sweep times out the actions whose lease passed, as the server's sweeper
// does every second.
func (a *arbiter) sweep() {
	a.t.Helper()
	_, err := a.ledger.Sweep(context.Background())
	require.NoError(a.t, err)
}

// payments is the fake payments server's state file.
type payments struct {
	t    testing.TB
	path string
	args []string

	// Over HTTP: the server process, its address, and whether the test
	// stopped it.
	mu     sync.Mutex
	addr   string
	cmd    *exec.Cmd
	exited chan struct{}
	down   bool
}

type paymentsState struct {
	Refunds []struct {
		RefundID  string `json:"refund_id"`
		OrderID   string `json:"order_id"`
		Amount    int    `json:"amount"`
		Cancelled bool   `json:"cancelled"`
	} `json:"refunds"`
	Calls map[string]int `json:"calls"`
}

func (p *payments) state() paymentsState {
	p.t.Helper()
	var s paymentsState
	raw, err := os.ReadFile(p.path)
	if os.IsNotExist(err) {
		return s
	}
	require.NoError(p.t, err)
	require.NoError(p.t, json.Unmarshal(raw, &s))
	return s
}

// startUpstream starts the fake payments server: as a command for the
// gateway to run over stdio, or as a process serving streamable HTTP. An
// HTTP server that exits on its own (-crash-after-refund) is started again
// on the same address, as a supervisor would, so that the gateway's next
// call, a lookup, a retry or a compensation reaches it.
func startUpstream(t testing.TB, m mode, flags ...string) (mcpgateway.Upstream, *payments) {
	t.Helper()
	p := &payments{t: t, path: filepath.Join(t.TempDir(), "payments.json")}
	p.args = append([]string{"-state", p.path}, flags...)
	if !m.http {
		return mcpgateway.Upstream{Command: append([]string{paymentsBin}, p.args...)}, p
	}
	p.addr = "127.0.0.1:0"
	p.start()
	t.Cleanup(p.stop)
	return mcpgateway.Upstream{URL: "http://" + p.addr + "/mcp"}, p
}

// start runs the HTTP server on p.addr (the first time on any free port,
// then on the port it got) and supervises it.
func (p *payments) start() {
	p.t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	require.NoError(p.t, p.startLocked())
}

func (p *payments) startLocked() error {
	cmd := exec.Command(paymentsBin, append(p.args, "-http", p.addr)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return fmt.Errorf("mcp-payments on %s: %w", p.addr, err)
	}
	p.addr = strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(line), "http://"), "/mcp")
	p.cmd, p.down = cmd, false
	exited := make(chan struct{})
	p.exited = exited
	go func() {
		_ = cmd.Wait()
		close(exited)
		// Under the lock, so that stop either sees the new process or
		// keeps it from starting.
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.cmd == cmd && !p.down {
			if err := p.startLocked(); err != nil {
				p.t.Errorf("restart the upstream: %v", err)
			}
		}
	}()
	return nil
}

// waitBack waits until the supervised HTTP server answers again after it
// exited on its own, as an operator's retry in production meets a provider
// that is back. Over stdio the gateway starts the command for its next
// call, so there is nothing to wait for.
func (p *payments) waitBack(t *testing.T) {
	t.Helper()
	p.mu.Lock()
	http := p.addr != ""
	p.mu.Unlock()
	if !http {
		return
	}
	eventually(t, "the upstream is back", func() bool {
		p.mu.Lock()
		exited := p.exited
		addr := p.addr
		p.mu.Unlock()
		select {
		case <-exited:
			return false // exited; the supervisor has not started it yet
		default:
		}
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return false
		}
		_ = conn.Close()
		return true
	})
}

// stop stops the HTTP server and keeps it stopped: the port then refuses
// connections until start.
func (p *payments) stop() {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.down = true
	p.mu.Unlock()
	if cmd != nil {
		_ = cmd.Process.Kill()
		<-exited
	}
}

// gateway is a running gateway with a host session connected to it.
type gateway struct {
	*mcpgateway.Gateway
	host *mcp.ClientSession

	mu       sync.Mutex
	progress []*mcp.ProgressNotificationParams
}

// startGateway starts a gateway for the upstream with the configuration
// document cfg and connects the Go SDK's MCP client to it as the host.
func startGateway(t testing.TB, m mode, arb *client.Client, up mcpgateway.Upstream, cfg string) *gateway {
	t.Helper()
	return startGatewayNamed(t, m, arb, up, cfg, "")
}

// startGatewayNamed is startGateway with the command line's --name.
func startGatewayNamed(t testing.TB, m mode, arb *client.Client, up mcpgateway.Upstream, cfg, name string) *gateway {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	c, err := mcpgateway.ParseConfig([]byte(cfg))
	require.NoError(t, err)
	g, err := mcpgateway.New(ctx, mcpgateway.Options{Arbiter: arb, Upstream: up, Config: c, Name: name, WorkerPoll: 50 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	gw := &gateway{Gateway: g}
	var served sync.WaitGroup
	// Cleanups run last first: the host leaves, then the HTTP server
	// closes, then the gateway stops.
	t.Cleanup(func() {
		cancel()
		served.Wait()
		_ = g.Close()
	})

	host := mcp.NewClient(&mcp.Implementation{Name: "test-host", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			gw.mu.Lock()
			defer gw.mu.Unlock()
			gw.progress = append(gw.progress, req.Params)
		}})
	var transport mcp.Transport
	if m.http {
		srv := httptest.NewServer(g.HTTPHandler())
		t.Cleanup(srv.Close)
		transport = &mcp.StreamableClientTransport{Endpoint: srv.URL}
	} else {
		// The host's stdio: two pipes, newline-delimited JSON-RPC both ways.
		hostR, gwW := io.Pipe()
		gwR, hostW := io.Pipe()
		served.Add(1)
		go func() {
			defer served.Done()
			_ = g.Serve(ctx, &mcp.IOTransport{Reader: gwR, Writer: gwW})
		}()
		transport = &mcp.IOTransport{Reader: hostR, Writer: hostW}
	}
	gw.host, err = host.Connect(ctx, transport, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = gw.host.Close() })
	return gw
}

// runWorker runs the gateway's worker until the test ends.
func (g *gateway) runWorker(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = g.RunWorker(ctx)
	}()
	t.Cleanup(func() { cancel(); <-done })
}

func (g *gateway) call(t *testing.T, tool string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	params := &mcp.CallToolParams{Name: tool, Arguments: args}
	params.SetProgressToken("host-" + tool)
	res, err := g.host.CallTool(ctx, params)
	require.NoError(t, err)
	return res
}

func (g *gateway) progressMessages() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []string
	for _, p := range g.progress {
		out = append(out, p.Message)
	}
	return out
}

// text is a result's text content.
func text(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, t.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// eventually waits for cond, failing the test after 15 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// each runs fn for every database and every transport mode, in parallel.
func each(t *testing.T, fn func(t *testing.T, m mode, arb *arbiter)) {
	t.Helper()
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			dbtest.Each(t, func(t *testing.T, st *services.Store) { fn(t, m, startArbiter(t, st)) })
		})
	}
}
