package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/arbiter-ledger/arbiter/services/record"

	"github.com/arbiter-ledger/arbiter/client"
	"github.com/arbiter-ledger/arbiter/services"
)

// The operator commands talk to a running server over the API, with an API
// key, like any other client: they work against a remote deployment and
// are subject to the key's role and namespace.

// apiFlags say which server to ask, with which key, and how to print.
type apiFlags struct {
	URL    string `name:"url" env:"ARBITER_URL" default:"http://127.0.0.1:8080" help:"The Arbiter server (ARBITER_URL)."`
	APIKey string `name:"api-key" env:"ARBITER_API_KEY" help:"An operator, reader or admin API key (ARBITER_API_KEY; prefer the variable: flags show in the process list)."`
	JSON   bool   `help:"Print JSON instead of a table, for scripts."`
}

func (f *apiFlags) client() (*client.Client, error) {
	if f.APIKey == "" {
		return nil, errors.New("no API key: set ARBITER_API_KEY or pass --api-key " +
			"(create one with `arbiter keys create --namespace NS --name NAME --role operator`)")
	}
	return client.New(f.URL, f.APIKey, client.WithUserAgent("arbiter-cli")), nil
}

// explain turns an API failure into the error the command exits with: the
// stable code first, then the server's message, and what to do when that is
// not obvious.
func (f *apiFlags) explain(err error) error {
	var apiErr *client.Error
	var netErr *client.NetworkError
	switch {
	case errors.As(err, &apiErr):
		msg := apiErr.Code + ": " + apiErr.Message
		switch apiErr.Code {
		case "duplicate_risk_unacknowledged":
			msg += " (if a second effect is acceptable, pass --acknowledge-duplicate-risk)"
		case "version_conflict":
			msg += " (see what changed with `arbiter actions show ID`)"
		case "unauthorized":
			msg += " (check ARBITER_API_KEY)"
		}
		return errors.New(msg)
	case errors.As(err, &netErr):
		return fmt.Errorf("cannot reach Arbiter at %s (set ARBITER_URL or --url): %v", f.URL, netErr.Err)
	}
	return err
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

type actionsCmd struct {
	List actionsListCmd `cmd:"" help:"List actions, newest first, filtered as the API filters them."`
	Show actionsShowCmd `cmd:"" help:"Show one action and its timeline, by id or by key."`
}

type actionsListCmd struct {
	apiFlags  `embed:""`
	Status    []string `help:"Only actions in these statuses (repeat the flag, or separate with commas)."`
	Tool      string   `help:"Only actions of this tool."`
	Agent     string   `help:"Only actions of this agent."`
	Since     string   `help:"Created at or after this time: RFC 3339, or a duration ago such as 2h."`
	Until     string   `help:"Created before this time: RFC 3339, or a duration ago."`
	Q         string   `name:"q" help:"A key or a reference, exactly."`
	Namespace string   `help:"Only this namespace (admin keys; other keys see their own)."`
	Limit     int      `help:"How many actions, 1 to 500 (the server's default is 50)."`
	Cursor    string   `help:"Continue after the previous page (its next cursor)."`
}

func (l *actionsListCmd) Run(ctx context.Context, log *slog.Logger) error {
	c, err := l.client()
	if err != nil {
		return err
	}
	opts := client.ListOptions{Tool: l.Tool, Agent: l.Agent, Q: l.Q, Namespace: l.Namespace, Limit: l.Limit, Cursor: l.Cursor}
	for _, s := range l.Status {
		opts.Status = append(opts.Status, client.Status(strings.TrimSpace(s)))
	}
	now := time.Now()
	if opts.Since, err = parseWhen("--since", l.Since, now); err != nil {
		return err
	}
	if opts.Until, err = parseWhen("--until", l.Until, now); err != nil {
		return err
	}
	page, err := c.ListActions(ctx, opts)
	if err != nil {
		return l.explain(err)
	}
	if l.JSON {
		return printJSON(os.Stdout, page)
	}
	if err := printActions(os.Stdout, page.Actions, now); err != nil {
		return err
	}
	if len(page.Actions) == 0 {
		fmt.Fprintln(os.Stderr, "no actions match")
	}
	if page.NextCursor != "" {
		fmt.Fprintf(os.Stderr, "more: add --cursor %s\n", page.NextCursor)
	}
	return nil
}

// parseWhen reads a time flag: an RFC 3339 time, or a duration before now.
func parseWhen(flag, v string, now time.Time) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(v); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, fmt.Errorf("%s %q: give an RFC 3339 time (2026-01-02T15:04:05Z) or a duration ago (90m, 2h)", flag, v)
}

func printActions(w io.Writer, actions []client.Action, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATUS\tNAMESPACE\tKEY\tTOOL\tEFFECT\tATTEMPT\tUPDATED\tAGE\tREFERENCE")
	for _, a := range actions {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", a.ID, a.Status, cell(a.Namespace), cell(a.Key),
			cell(a.Tool), a.Effect, a.Attempt, a.UpdatedAt.UTC().Format(time.RFC3339), age(now, a.UpdatedAt), cell(deref(a.Reference)))
	}
	return tw.Flush()
}

// cell makes a value safe for one table cell: text that carries tabs,
// newlines or terminal escapes (references are the agents' free text) is
// printed quoted.
func cell(s string) string {
	if s == "" {
		return "-"
	}
	if strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 {
		return strconv.Quote(s)
	}
	return s
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// age is a short "how long ago".
func age(now, t time.Time) string {
	d := now.Sub(t)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", max(0, int(d.Seconds())))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

type actionsShowCmd struct {
	apiFlags  `embed:""`
	ID        string `arg:"" optional:"" help:"The action's id."`
	Key       string `help:"Find the action by its key instead of its id."`
	Namespace string `help:"The namespace of --key (admin keys must name one)."`
}

func (s *actionsShowCmd) Run(ctx context.Context, log *slog.Logger) error {
	if (s.ID == "") == (s.Key == "") {
		return errors.New("name the action: `arbiter actions show ID` or `arbiter actions show --key KEY [--namespace NS]`")
	}
	if s.ID != "" && s.Namespace != "" {
		return errors.New("--namespace goes with --key; an id names one action already")
	}
	c, err := s.client()
	if err != nil {
		return err
	}
	var a *client.Action
	switch {
	case s.ID != "":
		a, err = c.Action(ctx, s.ID)
	case s.Namespace != "":
		a, err = c.ActionByKeyIn(ctx, s.Namespace, s.Key)
	default:
		a, err = c.ActionByKey(ctx, s.Key)
	}
	if err != nil {
		return s.explain(err)
	}
	entries, err := c.Entries(ctx, a.ID)
	if err != nil {
		return s.explain(err)
	}
	if s.JSON {
		return printJSON(os.Stdout, struct {
			Action  *client.Action       `json:"action"`
			Entries []client.LedgerEntry `json:"entries"`
		}{a, entries})
	}
	return printAction(os.Stdout, c, a, entries, time.Now())
}

func printAction(w io.Writer, c *client.Client, a *client.Action, entries []client.LedgerEntry, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	field := func(name, value string) { fmt.Fprintf(tw, "%s\t%s\n", name, value) }
	field("ID", a.ID)
	field("KEY", cell(a.Key))
	field("NAMESPACE", a.Namespace)
	field("TOOL", cell(a.Tool))
	field("EFFECT", a.Effect)
	field("STATUS", string(a.Status))
	field("ATTEMPT", strconv.Itoa(a.Attempt))
	field("VERSION", strconv.Itoa(a.Version))
	if a.LeaseUntil != nil {
		field("LEASE UNTIL", a.LeaseUntil.UTC().Format(time.RFC3339))
	}
	field("REFERENCE", cell(deref(a.Reference)))
	field("AGENT", cell(deref(a.Agent)))
	field("EXTERNAL REF", cell(deref(a.ExternalRef)))
	field("CREATED", a.CreatedAt.UTC().Format(time.RFC3339)+" ("+age(now, a.CreatedAt)+" ago)")
	field("UPDATED", a.UpdatedAt.UTC().Format(time.RFC3339)+" ("+age(now, a.UpdatedAt)+" ago)")
	field("PARAMS", compactJSON(a.Params, 0))
	field("RESULT", compactJSON(a.Result, 0))
	if next := services.AllowedDecisions(&record.Action{Status: record.Status(a.Status), Effect: record.Effect(a.Effect),
		Attempt: a.Attempt, Reconciliation: a.Reconciliation}); len(next) > 0 {
		names := make([]string, len(next))
		for i, d := range next {
			names[i] = string(d)
		}
		field("DECISIONS", fmt.Sprintf("arbiter decide %s %s --reason … --expected-version %d",
			a.ID, strings.Join(names, "|"), a.Version))
	}
	field("DASHBOARD", c.ActionURL(a.ID))
	if err := tw.Flush(); err != nil {
		return err
	}

	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SEQ\tRECORDED\tACTOR\tTYPE\tATTEMPT\tDETAILS")
	for _, e := range entries {
		attempt := "-"
		if e.Attempt != nil {
			attempt = strconv.Itoa(*e.Attempt)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", e.Seq, e.RecordedAt.UTC().Format(time.RFC3339),
			cell(e.Actor.Kind+" "+e.Actor.Name), e.Type, attempt, compactJSON(e.Payload, 160))
	}
	return tw.Flush()
}

// compactJSON prints a JSON value on one line, cut to limit bytes (0: no
// limit). JSON escapes control characters, so the line is safe to print.
func compactJSON(raw json.RawMessage, limit int) string {
	if len(raw) == 0 || string(raw) == "null" {
		return "-"
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return cell(string(raw))
	}
	s := b.String()
	if limit > 0 && len(s) > limit {
		s = strings.ToValidUTF8(s[:limit], "") + "…"
	}
	return s
}
