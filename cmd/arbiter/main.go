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
	"path/filepath"
	"syscall"
	"time"

	"github.com/alecthomas/kong"

	"github.com/arbiter-ledger/arbiter/cmd/arbiter/internal/bench"
	"github.com/arbiter-ledger/arbiter/cmd/arbiter/internal/demo"
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
	Limits   limitsCmd   `cmd:"" help:"List, create, change and delete limits across actions, and see their usage, over the API (ARBITER_URL, ARBITER_API_KEY)."`
	Freeze   freezeCmd   `cmd:"" help:"Start, lift and list freezes of a namespace's tools (the brake an on-call person pulls) over the API (ARBITER_URL, ARBITER_API_KEY)."`
	Breakers breakersCmd `cmd:"" help:"List, create, change and delete breakers, which freeze tools whose recent actions time out or fail too often, over the API (ARBITER_URL, ARBITER_API_KEY)."`
	Audit    auditCmd    `cmd:"" help:"The evidence log: its verifier key, bundles of a namespace's entries with their proofs, and their verification offline or against the live database."`
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

// benchCmd is `arbiter bench`, which internal/bench runs with the database
// this command line names.
type benchCmd struct {
	bench.Cmd `embed:""`
}

func (b *benchCmd) Run(ctx context.Context, c *cli) error {
	return b.Cmd.Run(ctx, bench.Env{DatabaseURL: c.DatabaseURL,
		Open: func(ctx context.Context) (*services.Store, error) { return openCurrent(ctx, c) }})
}

type demoCmd struct {
	Addr    string `env:"ARBITER_ADDR" default:"127.0.0.1:8080" help:"Address to listen on (127.0.0.1:0 picks a free port; the URL printed is the real one)."`
	Dir     string `help:"Keep the demo's SQLite database in this directory (default: a temporary directory, removed on exit)."`
	Verbose bool   `help:"Also log every request the server answers."`

	WebhookAllowPrivate bool `name:"webhook-allow-private" env:"ARBITER_WEBHOOK_ALLOW_PRIVATE" help:"Let webhooks reach loopback, private and link-local addresses, to try them with a receiver on this machine."`
}

// Run starts the server exactly as serve does, on an SQLite database of its
// own, and internal/demo's simulated fleet of agents working against it
// through the Go SDK, until Ctrl-C. It never touches ARBITER_DATABASE_URL: a
// demo must not write into a real ledger.
func (d *demoCmd) Run(ctx context.Context, c *cli, log *slog.Logger) error {
	dir, removeDir, err := demo.DataDir(d.Dir)
	if err != nil {
		return err
	}
	defer removeDir()
	db := filepath.Join(dir, "arbiter.db")
	st, err := services.Open(ctx, "sqlite:"+db)
	if err != nil {
		return err
	}
	defer st.Close()
	if err := ensureSchema(ctx, st, true); err != nil {
		return err
	}
	setup, err := demo.Prepare(ctx, st)
	if err != nil {
		return err
	}

	serverLog := log
	if !d.Verbose {
		// The fleet's held intents and refused reuses are 4xx answers the
		// server logs as warnings: expected here, and noise.
		serverLog = newLogger(c.LogFormat, "error")
	}
	cfg := serveCmd{Addr: d.Addr, SweepInterval: 250 * time.Millisecond, DrainTimeout: 10 * time.Second,
		WebhookDisableAfter: 120 * time.Hour, SessionIdle: 8 * time.Hour, SessionAbsolute: 7 * 24 * time.Hour,
		WebhookAllowPrivate: d.WebhookAllowPrivate, LogKeyFile: filepath.Join(dir, "log.key")}
	srv, err := cfg.start(ctx, st, serverLog)
	if err != nil {
		return fmt.Errorf("%w (another server there? pass --addr 127.0.0.1:0 for any free port)", err)
	}
	where := db + " (removed on exit; --dir keeps one)"
	if d.Dir != "" {
		where = db
	}
	demo.PrintBanner(os.Stdout, srv.URL, setup.Password, where, setup.AdminKey)

	fleetCtx, stopFleet := context.WithCancel(ctx)
	defer stopFleet()
	fleetDone := make(chan struct{})
	go func() {
		defer close(fleetDone)
		demo.RunFleet(fleetCtx, srv.URL, setup, os.Stdout, log)
	}()
	select {
	case err := <-srv.serveErr:
		stopFleet()
		<-fleetDone
		srv.stopBG()
		srv.bg.Wait()
		return err
	case <-ctx.Done():
	}
	// The fleet first, while the server still answers, so that effects
	// that happened get recorded; then the server.
	fmt.Fprintln(os.Stdout, "stopping the fleet and the server")
	stopFleet()
	<-fleetDone
	if err := srv.shutdown(); err != nil {
		return err
	}
	fmt.Fprintln(os.Stdout, "demo stopped")
	return nil
}
