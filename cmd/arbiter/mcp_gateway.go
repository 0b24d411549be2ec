package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

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
	Listen      string   `name:"listen" env:"ARBITER_MCP_LISTEN" help:"Serve hosts over streamable HTTP at http://ADDR/mcp instead of over stdio (e.g. 127.0.0.1:8090)."`
	Name        string   `name:"name" env:"ARBITER_MCP_NAME" help:"The tool prefix recorded in the ledger (\"payments\" makes refund \"payments.refund\"), when the configuration has no \"name\". One of the two is required."`
	Agent       string   `name:"agent" env:"ARBITER_MCP_AGENT" help:"The agent name recorded in the ledger (default: the API key's name)."`
	Upstream    []string `arg:"" optional:"" passthrough:"" help:"The upstream MCP server's command line, after --, run over stdio."`
}

func (m *mcpGatewayCmd) Run(ctx context.Context, log *slog.Logger) error {
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
	mux.Handle("/mcp", g.HTTPHandler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	log.InfoContext(ctx, "mcp gateway: serving streamable HTTP", "url", "http://"+ln.Addr().String()+"/mcp")
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
