// Command arbiter runs Arbiter, the action ledger and approval desk for AI
// agents: `arbiter serve` starts the server, `arbiter migrate` applies the
// schema, `arbiter keys …` manages API keys.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/alecthomas/kong"

	"github.com/arbiter-ledger/arbiter/services"
)

// cli is the command line. Every setting has a flag and an ARBITER_*
// environment variable of the same meaning.
type cli struct {
	DatabaseURL string `name:"database-url" env:"ARBITER_DATABASE_URL" help:"postgres://… or sqlite:PATH (default sqlite:arbiter-data/arbiter.db)."`
	LogFormat   string `name:"log-format" env:"ARBITER_LOG_FORMAT" enum:"text,json" default:"text" help:"Log format: text or json."`
	LogLevel    string `name:"log-level" env:"ARBITER_LOG_LEVEL" enum:"debug,info,warn,error" default:"info" help:"Lowest level logged."`

	Serve    serveCmd    `cmd:"" help:"Run the HTTP server, the sweeper and retention."`
	Migrate  migrateCmd  `cmd:"" help:"Apply pending database migrations."`
	Keys     keysCmd     `cmd:"" help:"Manage API keys."`
	Seed     seedCmd     `cmd:"" help:"Add synthetic actions for benchmarks (namespace seed)."`
	Users    usersCmd    `cmd:"" help:"Manage dashboard users."`
	Demo     demoCmd     `cmd:"" help:"Run the server with a simulated fleet of agents on a throwaway database, to see the dashboard at work."`
	Actions  actionsCmd  `cmd:"" help:"List and show actions over the API (ARBITER_URL, ARBITER_API_KEY)."`
	Decide   decideCmd   `cmd:"" help:"Take an operator decision on an action over the API (ARBITER_URL, ARBITER_API_KEY)."`
	Policies policiesCmd `cmd:"" help:"List, create and test approval policies over the API (ARBITER_URL, ARBITER_API_KEY)."`
	Bench    benchCmd    `cmd:"" help:"Measure a server: play agents against it (entries per second, latency), or time the sweeper, dashboard pages or webhook deliveries."`

	MCPGateway mcpGatewayCmd `cmd:"" name:"mcp-gateway" help:"Put the ledger between an agent's MCP host and an MCP server: guarded tool calls are recorded, replayed, held and approved (ARBITER_URL, ARBITER_API_KEY)."`
}

func main() {
	var c cli
	kctx := kong.Parse(&c, kong.Name("arbiter"),
		kong.Description("Arbiter: the action ledger and approval desk for AI agents."),
		kong.UsageOnError(), kong.Help(helpPrinter))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := newLogger(c.LogFormat, c.LogLevel)
	kctx.BindTo(ctx, (*context.Context)(nil))
	if err := kctx.Run(&c, log); err != nil {
		fmt.Fprintf(os.Stderr, "arbiter: %v\n", err)
		os.Exit(1)
	}
}

// helpPrinter is kong's help without the flags a command ignores: the demo
// always runs on an SQLite database of its own (a demo must not write into a
// real ledger), so its help does not offer --database-url.
func helpPrinter(options kong.HelpOptions, ctx *kong.Context) error {
	if sel := ctx.Selected(); sel != nil && sel.Name == "demo" {
		for _, f := range ctx.Model.Flags {
			if f.Name == "database-url" {
				f.Hidden = true
			}
		}
	}
	return kong.DefaultHelpPrinter(options, ctx)
}

func newLogger(format, level string) *slog.Logger {
	var lv slog.Level
	_ = lv.UnmarshalText([]byte(level))
	opts := &slog.HandlerOptions{Level: lv}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(os.Stderr, opts))
	}
	return slog.New(slog.NewTextHandler(os.Stderr, opts))
}

// open connects to the configured database.
func (c *cli) open(ctx context.Context) (*services.Store, error) {
	return services.Open(ctx, c.DatabaseURL)
}
