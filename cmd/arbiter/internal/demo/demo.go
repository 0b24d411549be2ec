package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/arbiter-ledger/arbiter/services/accounts"

	"github.com/arbiter-ledger/arbiter/services"
)

type demoCmd struct {
	Addr    string `env:"ARBITER_ADDR" default:"127.0.0.1:8080" help:"Address to listen on (127.0.0.1:0 picks a free port; the URL printed is the real one)."`
	Dir     string `help:"Keep the demo's SQLite database in this directory (default: a temporary directory, removed on exit)."`
	Verbose bool   `help:"Also log every request the server answers."`

	WebhookAllowPrivate bool `name:"webhook-allow-private" env:"ARBITER_WEBHOOK_ALLOW_PRIVATE" help:"Let webhooks reach loopback, private and link-local addresses, to try them with a receiver on this machine."`
}

// demoEmail is the dashboard user the demo signs people in as.
const demoEmail = "demo@localhost"

// demoOncallEmail owns the demo's on-call keys.
const demoOncallEmail = "oncall@localhost"

// Run starts the server exactly as serve does, on an SQLite database of its
// own, and a simulated fleet of agents working against it through the Go
// SDK, until Ctrl-C. It never touches ARBITER_DATABASE_URL: a demo must not
// write into a real ledger.
func (d *demoCmd) Run(ctx context.Context, c *cli, log *slog.Logger) error {
	dir, removeDir, err := d.dataDir()
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
	password, err := demoUser(ctx, st)
	if err != nil {
		return err
	}
	keys, adminKey, err := demoAPIKeys(ctx, st)
	if err != nil {
		return err
	}
	if err := demoPolicies(ctx, st); err != nil {
		return fmt.Errorf("demo: create the approval policy: %w", err)
	}

	serverLog := log
	if !d.Verbose {
		// The fleet's held intents and refused reuses are 4xx answers the
		// server logs as warnings: expected here, and noise.
		serverLog = newLogger(c.LogFormat, "error")
	}
	cfg := serveCmd{Addr: d.Addr, SweepInterval: 250 * time.Millisecond, DrainTimeout: 10 * time.Second,
		WebhookDisableAfter: 120 * time.Hour, SessionIdle: 8 * time.Hour, SessionAbsolute: 7 * 24 * time.Hour,
		WebhookAllowPrivate: d.WebhookAllowPrivate}
	srv, err := cfg.start(ctx, st, serverLog)
	if err != nil {
		return fmt.Errorf("%w (another server there? pass --addr 127.0.0.1:0 for any free port)", err)
	}
	where := db + " (removed on exit; --dir keeps one)"
	if d.Dir != "" {
		where = db
	}
	printDemoBanner(os.Stdout, srv.URL, password, where, adminKey)

	fleet := newDemoFleet(srv.URL, keys, os.Stdout, log)
	fleetCtx, stopFleet := context.WithCancel(ctx)
	defer stopFleet()
	fleetDone := make(chan struct{})
	go func() {
		defer close(fleetDone)
		fleet.run(fleetCtx)
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

// dataDir returns the directory for the database and how to clean it up.
func (d *demoCmd) dataDir() (string, func(), error) {
	if d.Dir != "" {
		if err := os.MkdirAll(d.Dir, 0o700); err != nil {
			return "", nil, err
		}
		abs, err := filepath.Abs(d.Dir)
		return abs, func() {}, err
	}
	dir, err := os.MkdirTemp("", "arbiter-demo-")
	if err != nil {
		return "", nil, err
	}
	return dir, func() { os.RemoveAll(dir) }, nil
}

// demoUser makes sure the demo admin exists with a new password, which it
// returns: a demo run on a kept --dir signs in with the password it prints.
func demoUser(ctx context.Context, st *services.Store) (string, error) {
	accts := accounts.New(st)
	password := accounts.RandomToken(20)
	_, err := accts.CreateUser(ctx, demoEmail, services.RoleAdmin, password)
	if !errors.Is(err, services.ErrConflict) {
		return password, err
	}
	u, err := accts.UserByEmail(ctx, demoEmail)
	if err != nil {
		return "", err
	}
	return password, accts.SetPassword(ctx, u.ID, password)
}

// demoAPIKeys creates the fleet's keys and an admin key for the operator
// CLI. Keys are cheap and shown once, so every run makes new ones.
func demoAPIKeys(ctx context.Context, st *services.Store) (demoKeys, string, error) {
	keys := accounts.NewKeys(st)
	// Approvals count people: the on-call keys belong to an on-call person
	// of their own, so you, approving in the dashboard, are someone else.
	_, err := accounts.New(st).CreateUser(ctx, demoOncallEmail, services.RoleOperator, accounts.RandomToken(20))
	if err != nil && !errors.Is(err, services.ErrConflict) {
		return demoKeys{}, "", fmt.Errorf("demo: create user %s: %w", demoOncallEmail, err)
	}
	var k demoKeys
	var admin string
	for _, want := range []struct {
		ns, name string
		role     services.Role
		into     *string
		owner    string
	}{
		{"payments", "refund-bot", services.RoleAgent, &k.refundBot, ""},
		{"payments", "billing-bot", services.RoleAgent, &k.billingBot, ""},
		{"support", "mail-bot", services.RoleAgent, &k.mailBot, ""},
		{"crm", "crm-bot", services.RoleAgent, &k.crmBot, ""},
		{"payments", "payments-oncall", services.RoleOperator, &k.paymentsOncall, demoOncallEmail},
		{"support", "support-oncall", services.RoleOperator, &k.supportOncall, demoOncallEmail},
		{"", "demo-cli", services.RoleAdmin, &admin, demoEmail},
	} {
		_, secret, err := keys.CreateKey(ctx, accounts.CreateKeyRequest{Namespace: want.ns, Name: want.name, Role: want.role,
			Owner: want.owner})
		if err != nil {
			return demoKeys{}, "", fmt.Errorf("demo: create key %s: %w", want.name, err)
		}
		*want.into = secret
	}
	return k, admin, nil
}

func printDemoBanner(w io.Writer, url, password, where, adminKey string) {
	fmt.Fprintf(w, `
Arbiter demo: the server and a simulated fleet of agents working against it.

  dashboard   %s
  sign in     email %s  password %s
  database    %s

  The operator CLI, from another terminal:
    export ARBITER_URL=%s ARBITER_API_KEY=%s
    go run ./cmd/arbiter actions list --status timed_out

Within a few seconds the triage page shows workers that crashed between the
effect and the report (timed_out), a key reused with other params, a late
result and a stale outcome. The workers look before they resend: a refund
the PSP has is confirmed, one it never got is retried with its key, and what
no lookup can tell (an email: the mailer cannot be searched) waits for you
with the lookup's answer. Decide on them: the fleet's workers carry out
retries and compensations. Ctrl-C stops the demo.

`, url, demoEmail, password, where, url, adminKey)
}
