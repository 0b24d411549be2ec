package main

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/arbiter-ledger/arbiter/client"
	"github.com/arbiter-ledger/arbiter/mcpgateway"
)

// mcpGatewayCmd runs the MCP gateway: an MCP server to the agent's host,
// an MCP client to one upstream server, with the ledger between them.
type mcpGatewayCmd struct {
	URL         string   `name:"url" env:"ARBITER_URL" default:"http://127.0.0.1:8080" help:"The Arbiter server (ARBITER_URL)."`
	APIKey      string   `name:"api-key" env:"ARBITER_API_KEY" help:"An agent API key; it decides the namespace (ARBITER_API_KEY; prefer the variable: flags show in the process list)."`
	Config      string   `name:"config" env:"ARBITER_MCP_CONFIG" help:"The gateway's configuration file (JSON; see docs/mcp-gateway.md). Without one every tool gets the defaults."`
	UpstreamURL string   `name:"upstream-url" env:"ARBITER_MCP_UPSTREAM_URL" help:"The upstream's streamable HTTP endpoint, instead of a command line."`
	Listen      string   `name:"listen" env:"ARBITER_MCP_LISTEN" help:"Serve hosts over streamable HTTP at http://ADDR/mcp instead of over stdio (e.g. 127.0.0.1:8090). A loopback address unless --allow-remote and a --token are given."`
	AllowRemote bool     `name:"allow-remote" env:"ARBITER_MCP_ALLOW_REMOTE" help:"Let --listen take an address other than loopback; it needs a --token."`
	Token       string   `name:"token" env:"ARBITER_MCP_TOKEN" help:"A bearer token (at least 32 characters) every request to --listen must carry as Authorization: Bearer (ARBITER_MCP_TOKEN; prefer the variable: flags show in the process list)."`
	Name        string   `name:"name" env:"ARBITER_MCP_NAME" help:"The tool prefix recorded in the ledger (\"payments\" makes refund \"payments.refund\"), when the configuration has no \"name\". One of the two is required."`
	Agent       string   `name:"agent" env:"ARBITER_MCP_AGENT" help:"The agent name recorded in the ledger (default: the API key's name)."`
	Upstream    []string `arg:"" optional:"" passthrough:"" help:"The upstream MCP server's command line, after --, run over stdio."`
}

func (m *mcpGatewayCmd) Run(ctx context.Context, log *slog.Logger) error {
	if m.Listen != "" {
		if err := checkListen(m.Listen, m.AllowRemote, m.Token); err != nil {
			return err
		}
	} else if m.AllowRemote || m.Token != "" {
		return errors.New("mcp-gateway: --allow-remote and --token apply to --listen only")
	}
	if m.APIKey == "" {
		return errors.New("no API key: set ARBITER_API_KEY to an agent key " +
			"(create one with `arbiter keys create --namespace NS --name NAME --role agent`)")
	}
	cfg, err := mcpgateway.LoadConfig(m.Config)
	if err != nil {
		return err
	}
	up := mcpgateway.Upstream{Command: m.Upstream, URL: m.UpstreamURL, Stderr: os.Stderr}
	if len(up.Command) > 0 && up.Command[0] == "--" {
		up.Command = up.Command[1:]
	}
	g, err := mcpgateway.New(ctx, mcpgateway.Options{
		Arbiter:  client.New(m.URL, m.APIKey, client.WithUserAgent("arbiter-mcp-gateway")),
		Upstream: up, Config: cfg, Name: m.Name, Agent: m.Agent, Logger: log})
	if err != nil {
		return err
	}
	defer g.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	worked := make(chan struct{})
	go func() {
		defer close(worked)
		_ = g.RunWorker(ctx)
	}()
	defer func() { cancel(); <-worked }()

	if m.Listen == "" {
		err := g.Serve(ctx, &mcp.StdioTransport{})
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	ln, err := net.Listen("tcp", m.Listen)
	if err != nil {
		return fmt.Errorf("mcp-gateway: listen: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", requireToken(g.HTTPHandler(), m.Token))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	log.InfoContext(ctx, "mcp gateway: serving streamable HTTP", "url", "http://"+ln.Addr().String()+"/mcp", "bearer_token", m.Token != "")
	go func() {
		<-ctx.Done()
		sctx, stop := context.WithTimeout(context.Background(), 5*time.Second)
		defer stop()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// minTokenChars is the shortest bearer token --listen accepts.
const minTokenChars = 32

// checkListen refuses a --listen address that other machines can reach
// unless the operator said so (--allow-remote) and gave a bearer token:
// whoever reaches the gateway calls the upstream's tools with the gateway's
// agent key. Host names other than localhost count as remote: what they
// resolve to is not known here.
func checkListen(addr string, allowRemote bool, token string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("mcp-gateway: --listen %q must be HOST:PORT (e.g. 127.0.0.1:8090): %w", addr, err)
	}
	if token != "" && len(token) < minTokenChars {
		return fmt.Errorf("mcp-gateway: the bearer token (--token, ARBITER_MCP_TOKEN) must be at least %d characters", minTokenChars)
	}
	ip, err := netip.ParseAddr(host)
	loopback := strings.EqualFold(host, "localhost") || (err == nil && ip.IsLoopback())
	if loopback {
		return nil
	}
	if !allowRemote || token == "" {
		return fmt.Errorf("mcp-gateway: --listen %q is not a loopback address: anyone who reaches it could call the upstream's tools "+
			"as this gateway; listen on 127.0.0.1, or give both --allow-remote and a bearer token (ARBITER_MCP_TOKEN) "+
			"that every request must carry", addr)
	}
	return nil
}

// requireToken lets through only requests that carry token as
// Authorization: Bearer (the MCP SDK's bearer middleware, compared in
// constant time); with no token, h as it is.
func requireToken(h http.Handler, token string) http.Handler {
	if token == "" {
		return h
	}
	verify := func(_ context.Context, got string, _ *http.Request) (*auth.TokenInfo, error) {
		if subtle.ConstantTimeCompare([]byte(got), []byte(token)) != 1 {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{}, nil
	}
	return auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(h)
}
