package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"text/tabwriter"
	"time"

	"github.com/arbiter-ledger/arbiter/services/accounts"

	"github.com/arbiter-ledger/arbiter/services"
)

type keysCmd struct {
	Create keysCreateCmd `cmd:"" help:"Create an API key; the key is printed once, alone on the last line."`
	List   keysListCmd   `cmd:"" help:"List API keys (never their secrets)."`
	Revoke keysRevokeCmd `cmd:"" help:"Revoke an API key by id or by its ak_ prefix."`
}

type keysCreateCmd struct {
	Namespace string `help:"Namespace of the key (created if missing); not for admin keys."`
	Name      string `required:"" help:"Who uses the key, e.g. refund-bot. Agents' entries are attributed to it."`
	Role      string `required:"" enum:"agent,reader,operator,admin" help:"agent, reader, operator or admin."`
	Owner     string `help:"Email of the user the key belongs to: its approvals count as that person's. A key without an owner may take every decision but approve."`
}

func (k *keysCreateCmd) Run(ctx context.Context, c *cli, log *slog.Logger) error {
	st, err := openCurrent(ctx, c)
	if err != nil {
		return err
	}
	defer st.Close()
	m, secret, err := accounts.NewKeys(st).CreateKey(ctx, accounts.CreateKeyRequest{
		Namespace: k.Namespace, Name: k.Name, Role: services.Role(k.Role), Owner: k.Owner})
	if err != nil {
		return err
	}
	where := "global"
	if m.Namespace != nil {
		where = "namespace " + *m.Namespace
	}
	owner := "no owner"
	if m.Owner != nil {
		owner = "owned by " + m.Owner.Email
	}
	fmt.Printf("created %s key %q (%s, %s), id %s\n", m.Role, m.Name, where, owner, m.ID)
	fmt.Println("store it now: it is shown only once")
	fmt.Println(secret)
	return nil
}

type keysListCmd struct {
	JSON bool `help:"Print JSON instead of a table."`
}

func (k *keysListCmd) Run(ctx context.Context, c *cli, log *slog.Logger) error {
	st, err := openCurrent(ctx, c)
	if err != nil {
		return err
	}
	defer st.Close()
	keys, err := accounts.NewKeys(st).ListKeys(ctx)
	if err != nil {
		return err
	}
	if k.JSON {
		type row struct {
			ID        string     `json:"id"`
			Prefix    string     `json:"prefix"`
			Role      string     `json:"role"`
			Namespace *string    `json:"namespace"`
			Name      string     `json:"name"`
			Owner     *string    `json:"owner"`
			CreatedAt time.Time  `json:"created_at"`
			RevokedAt *time.Time `json:"revoked_at"`
		}
		rows := make([]row, 0, len(keys))
		for _, m := range keys {
			var owner *string
			if m.Owner != nil {
				owner = &m.Owner.Email
			}
			rows = append(rows, row{m.ID, m.Prefix + "…", m.Role, m.Namespace, m.Name, owner, m.CreatedAt.UTC(), m.RevokedAt})
		}
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rows)
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tPREFIX\tROLE\tNAMESPACE\tNAME\tOWNER\tCREATED\tSTATE")
	for _, m := range keys {
		ns, state, owner := "-", "active", "-"
		if m.Owner != nil {
			owner = m.Owner.Email
		}
		if m.Namespace != nil {
			ns = *m.Namespace
		}
		if m.RevokedAt != nil {
			state = "revoked " + m.RevokedAt.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(w, "%s\t%s…\t%s\t%s\t%s\t%s\t%s\t%s\n", m.ID, m.Prefix, m.Role, ns, m.Name, owner,
			m.CreatedAt.UTC().Format(time.RFC3339), state)
	}
	return w.Flush()
}

type keysRevokeCmd struct {
	Key string `arg:"" help:"The key's id, or its ak_ prefix as keys list shows it."`
}

func (k *keysRevokeCmd) Run(ctx context.Context, c *cli, log *slog.Logger) error {
	st, err := openCurrent(ctx, c)
	if err != nil {
		return err
	}
	defer st.Close()
	m, err := accounts.NewKeys(st).RevokeKey(ctx, k.Key)
	if err != nil {
		return err
	}
	fmt.Printf("revoked key %s (%s…, %q); servers stop accepting it within a second\n", m.ID, m.Prefix, m.Name)
	return nil
}

// openCurrent opens the database for a command that needs the current
// schema. The embedded SQLite default is migrated on the spot, as serve
// would; PostgreSQL must have been migrated.
func openCurrent(ctx context.Context, c *cli) (*services.Store, error) {
	st, err := c.open(ctx)
	if err != nil {
		return nil, err
	}
	if err := ensureSchema(ctx, st, st.Embedded()); err != nil {
		st.Close()
		return nil, err
	}
	return st, nil
}

// ensureSchema migrates when allowed and otherwise refuses an outdated
// schema with a message that says what to do.
func ensureSchema(ctx context.Context, st *services.Store, migrate bool) error {
	status, err := st.Schema(ctx)
	if err != nil {
		return err
	}
	if status.UpToDate() {
		return nil
	}
	if !migrate {
		return fmt.Errorf("the schema of %s is at version %d but this arbiter needs version %d: "+
			"run `arbiter migrate`, or start serve with --migrate (ARBITER_AUTO_MIGRATE=true)",
			st.Where, status.Current, status.Latest)
	}
	_, err = st.Migrate(ctx)
	return err
}
