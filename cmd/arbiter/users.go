package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/arbiter-ledger/arbiter/services/accounts"

	"github.com/arbiter-ledger/arbiter/services"
)

type usersCmd struct {
	Create      usersCreateCmd      `cmd:"" help:"Create a dashboard user; the password is read from standard input."`
	SetPassword usersSetPasswordCmd `cmd:"" name:"set-password" help:"Set a user's password (read from standard input) and sign them out everywhere."`
	List        usersListCmd        `cmd:"" help:"List dashboard users (never their passwords)."`
	Grant       usersGrantCmd       `cmd:"" help:"Make a viewer or operator one in a namespace, or in every namespace (*)."`
	Revoke      usersRevokeCmd      `cmd:"" help:"End a user's membership in a namespace (* for the one in every namespace)."`
}

type usersCreateCmd struct {
	Email         string   `required:"" help:"The user's email address; they sign in with it."`
	Role          string   `required:"" enum:"viewer,operator,admin" help:"viewer (reads), operator (reads and decides) or admin (everywhere, and also manages keys and users)."`
	Namespace     []string `help:"Where a viewer or operator is one; repeat for several. Left out: every namespace."`
	PasswordStdin bool     `name:"password-stdin" help:"Read the password from standard input: one line, e.g. from a secret store or a pipe."`
}

func (u *usersCreateCmd) Run(ctx context.Context, c *cli, log *slog.Logger) error {
	password, err := passwordFromStdin(u.PasswordStdin, os.Stdin)
	if err != nil {
		return err
	}
	st, err := openCurrent(ctx, c)
	if err != nil {
		return err
	}
	defer st.Close()
	m, err := accounts.New(st).CreateMember(ctx, u.Email, services.Role(u.Role), u.Namespace, password)
	if err != nil {
		return err
	}
	where := ""
	if len(u.Namespace) > 0 {
		where = " in " + strings.Join(u.Namespace, ", ")
	}
	fmt.Printf("created %s %s%s (id %s); they can sign in now\n", m.Role, m.Email, where, m.ID)
	return nil
}

type usersSetPasswordCmd struct {
	Email         string `required:"" help:"The user's email address."`
	PasswordStdin bool   `name:"password-stdin" help:"Read the new password from standard input: one line."`
}

func (u *usersSetPasswordCmd) Run(ctx context.Context, c *cli, log *slog.Logger) error {
	password, err := passwordFromStdin(u.PasswordStdin, os.Stdin)
	if err != nil {
		return err
	}
	st, err := openCurrent(ctx, c)
	if err != nil {
		return err
	}
	defer st.Close()
	accts := accounts.New(st)
	m, err := accts.UserByEmail(ctx, u.Email)
	if err != nil {
		return err
	}
	if err := accts.SetPassword(ctx, m.ID, password); err != nil {
		return err
	}
	fmt.Printf("set the password of %s and ended their sessions\n", m.Email)
	return nil
}

// passwordFromStdin reads one line. Passwords never come from flags or
// arguments, which other users of the machine can read in the process list,
// and there is no prompt: a terminal on standard input is refused so that
// nobody types a password that echoes on screen.
func passwordFromStdin(enabled bool, stdin *os.File) (string, error) {
	const how = "pipe it in, e.g. `printf '%s\\n' \"$PASSWORD\" | arbiter users …`"
	if !enabled {
		return "", errors.New("the password is read from standard input only: pass --password-stdin and " + how)
	}
	if fi, err := stdin.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
		return "", errors.New("--password-stdin does not prompt and standard input is a terminal: " + how)
	}
	line, err := bufio.NewReader(stdin).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("read the password from standard input: %w", err)
	}
	line = strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
	if line == "" {
		return "", errors.New("no password on standard input: " + how)
	}
	return line, nil
}

type usersListCmd struct {
	JSON bool `help:"Print JSON instead of a table."`
}

func (u *usersListCmd) Run(ctx context.Context, c *cli, log *slog.Logger) error {
	st, err := openCurrent(ctx, c)
	if err != nil {
		return err
	}
	defer st.Close()
	users, err := accounts.New(st).Users(ctx)
	if err != nil {
		return err
	}
	ms, err := accounts.New(st).AllMemberships(ctx)
	if err != nil {
		return err
	}
	where := func(id string) map[string]string {
		out := map[string]string{}
		for _, m := range ms[id] {
			out[m.Namespace] = m.Role
		}
		return out
	}
	if u.JSON {
		type row struct {
			ID         string     `json:"id"`
			Email      string     `json:"email"`
			Role       string     `json:"role"`
			CreatedAt  time.Time  `json:"created_at"`
			DisabledAt *time.Time `json:"disabled_at"`
			// Memberships maps namespaces ("*": every one) to the role there;
			// empty for admins.
			Memberships map[string]string `json:"memberships"`
		}
		rows := make([]row, 0, len(users))
		for _, m := range users {
			rows = append(rows, row{m.ID, m.Email, m.Role, m.CreatedAt.UTC(), m.DisabledAt, where(m.ID)})
		}
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rows)
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tEMAIL\tROLE\tCREATED\tSTATE")
	for _, m := range users {
		state := "active"
		if m.DisabledAt != nil {
			state = "disabled " + m.DisabledAt.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", m.ID, m.Email, m.Role, m.CreatedAt.UTC().Format(time.RFC3339), state)
	}
	return w.Flush()
}

type usersGrantCmd struct {
	Email     string `required:"" help:"The user's email address."`
	Role      string `required:"" enum:"viewer,operator" help:"viewer (reads) or operator (reads and decides) there."`
	Namespace string `required:"" help:"The namespace, or * for every namespace."`
}

func (u *usersGrantCmd) Run(ctx context.Context, c *cli, log *slog.Logger) error {
	st, err := openCurrent(ctx, c)
	if err != nil {
		return err
	}
	defer st.Close()
	accts := accounts.New(st)
	m, err := accts.UserByEmail(ctx, u.Email)
	if err != nil {
		return err
	}
	if m.Role == string(services.RoleAdmin) {
		return errors.New(m.Email + " is an admin, who sees and decides everywhere")
	}
	if err := accts.Grant(ctx, m.ID, u.Namespace, services.Role(u.Role)); err != nil {
		return err
	}
	fmt.Printf("%s is %s in %s\n", m.Email, u.Role, u.Namespace)
	return nil
}

type usersRevokeCmd struct {
	Email     string `required:"" help:"The user's email address."`
	Namespace string `required:"" help:"The namespace, or * for the membership in every namespace."`
}

func (u *usersRevokeCmd) Run(ctx context.Context, c *cli, log *slog.Logger) error {
	st, err := openCurrent(ctx, c)
	if err != nil {
		return err
	}
	defer st.Close()
	accts := accounts.New(st)
	m, err := accts.UserByEmail(ctx, u.Email)
	if err != nil {
		return err
	}
	if err := accts.Revoke(ctx, m.ID, u.Namespace); err != nil {
		return err
	}
	fmt.Printf("%s is no longer a member in %s\n", m.Email, u.Namespace)
	return nil
}
