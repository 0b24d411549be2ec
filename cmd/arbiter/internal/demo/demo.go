// Package demo is the simulated fleet of `arbiter demo`: the agents, the
// downstream systems they call (a PSP, a mailer, a CRM), the incidents they
// stage, and the user, keys and policy they need. The command in main.go
// starts the server exactly as serve does and runs the fleet against it.
package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/arbiter-ledger/arbiter/services/accounts"

	"github.com/arbiter-ledger/arbiter/services"
)

// demoEmail is the dashboard user the demo signs people in as.
const demoEmail = "demo@localhost"

// demoOncallEmail owns the demo's on-call keys.
const demoOncallEmail = "oncall@localhost"

// Setup is what the demo made in its database: the fleet's keys, the
// dashboard user's new password and an admin key for the operator CLI.
type Setup struct {
	Password string
	AdminKey string
	keys     demoKeys
}

// Prepare makes the demo's user, keys and approval policy in st.
func Prepare(ctx context.Context, st *services.Store) (*Setup, error) {
	password, err := demoUser(ctx, st)
	if err != nil {
		return nil, err
	}
	keys, adminKey, err := demoAPIKeys(ctx, st)
	if err != nil {
		return nil, err
	}
	if err := demoPolicies(ctx, st); err != nil {
		return nil, fmt.Errorf("demo: create the approval policy: %w", err)
	}
	if err := demoBrakes(ctx, st); err != nil {
		return nil, fmt.Errorf("demo: create the budget and the breaker: %w", err)
	}
	return &Setup{Password: password, AdminKey: adminKey, keys: keys}, nil
}

// RunFleet plays the simulated fleet against the server at url, telling
// what it does on out, until ctx ends.
func RunFleet(ctx context.Context, url string, s *Setup, out io.Writer, log *slog.Logger) {
	newDemoFleet(url, s.keys, out, log).run(ctx)
}

// DataDir returns the directory for the database and how to clean it up:
// dir when given, kept; otherwise a temporary directory, removed.
func DataDir(dir string) (string, func(), error) {
	if dir != "" {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return "", nil, err
		}
		abs, err := filepath.Abs(dir)
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

// PrintBanner tells where the demo is and how to sign in.
func PrintBanner(w io.Writer, url, password, where, adminKey string) {
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
with the lookup's answer. A refund loop runs into a customer's daily budget
(the Limits page), and a mailer that stops answering trips a breaker that
freezes email.send until the on-call person lifts it (the Freezes page).
Decide on them: the fleet's workers carry out retries and compensations.
Ctrl-C stops the demo.

`, url, demoEmail, password, where, url, adminKey)
}
