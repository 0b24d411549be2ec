package main

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/arbiter-ledger/arbiter/client"
	"github.com/arbiter-ledger/arbiter/services/record"
)

// freezeCmd pulls and releases the brake on a namespace's tools over the
// API (SPEC "Limits across actions", Freezes): operators of the namespace
// and admins start and lift freezes, readers list them.
type freezeCmd struct {
	Start freezeStartCmd `cmd:"" help:"Freeze tools of a namespace (operator of the namespace, or admin key): new keys wait for approval, other intents are answered frozen."`
	Lift  freezeLiftCmd  `cmd:"" help:"Lift an active freeze, saying why (operator of the namespace, or admin key); what only it held is approved."`
	List  freezeListCmd  `cmd:"" help:"List freezes, newest first."`
	Show  freezeShowCmd  `cmd:"" help:"Show one freeze: who started it and why, and who lifted it and why."`
}

type freezeStartCmd struct {
	apiFlags  `embed:""`
	Namespace string   `required:"" help:"The namespace whose tools it freezes."`
	Tools     []string `help:"Tool patterns; * matches any run of characters (repeat, or separate with commas); default: every tool."`
	Reason    string   `required:"" help:"Why, as the people who see held actions and lift it will read it."`
}

func (f *freezeStartCmd) Run(ctx context.Context, log *slog.Logger) error {
	c, err := f.client()
	if err != nil {
		return err
	}
	fr, err := c.StartFreeze(ctx, client.FreezeInput{Namespace: f.Namespace, Tools: splitList(f.Tools), Reason: f.Reason})
	if err != nil {
		return f.explain(err)
	}
	if f.JSON {
		return printJSON(os.Stdout, fr)
	}
	fmt.Printf("started freeze of %s in %s: %s\n%s\n", cell(strings.Join(fr.Tools, ",")), fr.Namespace, cell(fr.Reason), fr.ID)
	return nil
}

type freezeLiftCmd struct {
	apiFlags `embed:""`
	ID       string `arg:"" help:"The freeze's id."`
	Reason   string `required:"" help:"Why it may be lifted now."`
}

func (f *freezeLiftCmd) Run(ctx context.Context, log *slog.Logger) error {
	c, err := f.client()
	if err != nil {
		return err
	}
	fr, err := c.LiftFreeze(ctx, f.ID, f.Reason)
	if err != nil {
		return f.explain(err)
	}
	if f.JSON {
		return printJSON(os.Stdout, fr)
	}
	fmt.Printf("lifted freeze %s of %s in %s after %s: %s\n", fr.ID, cell(strings.Join(fr.Tools, ",")), fr.Namespace,
		frozenFor(fr), cell(deref(fr.LiftReason)))
	return nil
}

// frozenFor is how long a freeze held, to the second; an active one counts
// until now.
func frozenFor(f *client.Freeze) time.Duration {
	end := time.Now()
	if f.LiftedAt != nil {
		end = *f.LiftedAt
	}
	return max(end.Sub(f.StartedAt).Round(time.Second), 0)
}

type freezeListCmd struct {
	apiFlags  `embed:""`
	Namespace string `help:"Only this namespace (admin keys; other keys see their own)."`
	Active    bool   `help:"Only the freezes that still hold."`
}

func (l *freezeListCmd) Run(ctx context.Context, log *slog.Logger) error {
	c, err := l.client()
	if err != nil {
		return err
	}
	fs, err := c.Freezes(ctx, client.FreezeFilter{Namespace: l.Namespace, Active: l.Active})
	if err != nil {
		return l.explain(err)
	}
	if l.JSON {
		return printJSON(os.Stdout, fs)
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAMESPACE\tTOOLS\tREASON\tBY\tSTARTED\tLIFTED")
	for _, f := range fs {
		lifted := "-"
		if f.LiftedAt != nil {
			lifted = f.LiftedAt.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", f.ID, cell(f.Namespace), cell(strings.Join(f.Tools, ",")), cell(f.Reason),
			cell(f.By.Name), f.StartedAt.UTC().Format(time.RFC3339), lifted)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(fs) == 0 {
		fmt.Fprintln(os.Stderr, "no freezes match")
	}
	return nil
}

type freezeShowCmd struct {
	apiFlags `embed:""`
	ID       string `arg:"" help:"The freeze's id."`
}

func (s *freezeShowCmd) Run(ctx context.Context, log *slog.Logger) error {
	c, err := s.client()
	if err != nil {
		return err
	}
	f, err := c.Freeze(ctx, s.ID)
	if err != nil {
		return s.explain(err)
	}
	if s.JSON {
		return printJSON(os.Stdout, f)
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	field := func(name, value string) { fmt.Fprintf(tw, "%s\t%s\n", name, value) }
	field("ID", f.ID)
	field("NAMESPACE", f.Namespace)
	field("TOOLS", cell(strings.Join(f.Tools, ",")))
	field("REASON", cell(f.Reason))
	field("BY", actorText(f.By))
	field("BREAKER", cell(deref(f.BreakerID)))
	field("STARTED", f.StartedAt.UTC().Format(time.RFC3339))
	if f.LiftedAt == nil {
		field("STATE", "active for "+frozenFor(f).String()+"; lift it with `arbiter freeze lift "+f.ID+" --reason …`")
	} else {
		field("STATE", "lifted after "+frozenFor(f).String())
		field("LIFTED", f.LiftedAt.UTC().Format(time.RFC3339))
		if f.LiftedBy != nil {
			field("LIFTED BY", actorText(*f.LiftedBy))
		}
		field("LIFT REASON", cell(deref(f.LiftReason)))
	}
	return tw.Flush()
}

// actorText is who acted, and through what when that is known: the person
// and the key or dashboard, or the breaker.
func actorText(a record.Actor) string {
	s := cell(a.Name)
	if a.Via != "" {
		s += " (" + cell(a.Via) + ")"
	}
	return s
}

// breakersCmd manages breakers over the API (SPEC "Limits across
// actions", Breakers): list and read them with what they count now
// (readers, operators, admins of the namespace), create, change and delete
// them (admin key).
type breakersCmd struct {
	List     breakersListCmd     `cmd:"" help:"List breakers and what each counts now."`
	Create   breakersCreateCmd   `cmd:"" help:"Create a breaker (admin key)."`
	Update   breakersUpdateCmd   `cmd:"" help:"Change a breaker's fields given (admin key); it gets a new version."`
	Delete   breakersDeleteCmd   `cmd:"" help:"Delete a breaker (admin key); a freeze it started stays until someone lifts it."`
	Versions breakersVersionsCmd `cmd:"" help:"Show every version of a breaker, oldest first."`
}

type breakersListCmd struct {
	apiFlags  `embed:""`
	Namespace string `help:"Only this namespace (admin keys; other keys see their own)."`
}

func (l *breakersListCmd) Run(ctx context.Context, log *slog.Logger) error {
	c, err := l.client()
	if err != nil {
		return err
	}
	bs, err := c.Breakers(ctx, l.Namespace)
	if err != nil {
		return l.explain(err)
	}
	if l.JSON {
		return printJSON(os.Stdout, bs)
	}
	return printBreakers(bs)
}

// printBreakers writes breakers as a table, a row each. ACTIONS, TIMED OUT
// and FAILED are what it counts now; a version has no count (-).
func printBreakers(bs []client.Breaker) error {
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAMESPACE\tNAME\tTOOLS\tWINDOW\tMIN\tACTIONS\tTIMED OUT\tFAILED\tMAX UNKNOWN\tMAX FAILED\tSTATE\tENABLED\tVERSION")
	for _, b := range bs {
		actions, timedOut, failed, state := "-", "-", "-", "-"
		if s := b.State; s != nil {
			actions, timedOut, failed = strconv.Itoa(s.Actions), strconv.Itoa(s.TimedOut), strconv.Itoa(s.Failed)
			state = "closed"
			if s.Freeze != nil {
				state = "tripped"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%ds\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%t\t%d\n", b.ID, cell(b.Namespace), cell(b.Name),
			cell(strings.Join(b.Tools, ",")), b.Window, b.MinActions, actions, timedOut, failed, ratioText(b.MaxUnknownRatio),
			ratioText(b.MaxFailureRatio), state, b.Enabled, b.Version)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, b := range bs {
		if b.State != nil && b.State.Freeze != nil {
			fmt.Fprintf(os.Stderr, "%q tripped: freeze %s (%s); lift it with `arbiter freeze lift %s --reason …`\n",
				b.Name, b.State.Freeze.ID, b.State.Freeze.Reason, b.State.Freeze.ID)
		}
	}
	return nil
}

// ratioText is a share as a percentage (0.3: 30%), or - when not set.
func ratioText(r *float64) string {
	if r == nil {
		return "-"
	}
	return strconv.FormatFloat(math.Round(*r*10000)/100, 'f', -1, 64) + "%"
}

// breakerFlags are a breaker's fields as flags; a flag not given is not
// sent.
type breakerFlags struct {
	Name            *string  `help:"What the breaker watches, as the on-call person will read it."`
	Tools           []string `help:"Tool patterns; * matches any run of characters (repeat, or separate with commas)."`
	Window          *int     `help:"Seconds of recent actions it counts (1-86400; 300 when created without it)."`
	MinActions      *int     `name:"min-actions" help:"Actions with an outcome it needs within the window before it may trip (10 when created without it)."`
	MaxUnknownRatio *float64 `name:"max-unknown-ratio" help:"The share timed out (outcome unknown) above which it trips, 0 to 1 (0.3: 30%); give this, --max-failure-ratio or both."`
	MaxFailureRatio *float64 `name:"max-failure-ratio" help:"The share failed above which it trips, 0 to 1."`
	Enabled         *bool    `negatable:"" help:"Enabled (--no-enabled to turn it off)."`
}

func (f *breakerFlags) input() client.BreakerInput {
	in := client.BreakerInput{Name: f.Name, Window: f.Window, MinActions: f.MinActions, MaxUnknownRatio: f.MaxUnknownRatio,
		MaxFailureRatio: f.MaxFailureRatio, Enabled: f.Enabled}
	if f.Tools != nil {
		tools := splitList(f.Tools)
		in.Tools = &tools
	}
	return in
}

type breakersCreateCmd struct {
	apiFlags     `embed:""`
	Namespace    string `required:"" help:"The namespace whose tools it watches and freezes."`
	breakerFlags `embed:""`
}

func (b *breakersCreateCmd) Run(ctx context.Context, log *slog.Logger) error {
	c, err := b.client()
	if err != nil {
		return err
	}
	in := b.input()
	in.Namespace = &b.Namespace
	br, err := c.CreateBreaker(ctx, in)
	if err != nil {
		return b.explain(err)
	}
	if b.JSON {
		return printJSON(os.Stdout, br)
	}
	fmt.Printf("created breaker %q (version %d) in %s\n%s\n", br.Name, br.Version, br.Namespace, br.ID)
	return nil
}

type breakersUpdateCmd struct {
	apiFlags     `embed:""`
	ID           string `arg:"" help:"The breaker's id."`
	breakerFlags `embed:""`
}

func (b *breakersUpdateCmd) Run(ctx context.Context, log *slog.Logger) error {
	c, err := b.client()
	if err != nil {
		return err
	}
	br, err := c.UpdateBreaker(ctx, b.ID, b.input())
	if err != nil {
		return b.explain(err)
	}
	if b.JSON {
		return printJSON(os.Stdout, br)
	}
	fmt.Printf("breaker %q is now version %d\n", br.Name, br.Version)
	return nil
}

type breakersDeleteCmd struct {
	apiFlags `embed:""`
	ID       string `arg:"" help:"The breaker's id."`
}

func (b *breakersDeleteCmd) Run(ctx context.Context, log *slog.Logger) error {
	c, err := b.client()
	if err != nil {
		return err
	}
	if err := c.DeleteBreaker(ctx, b.ID); err != nil {
		return b.explain(err)
	}
	fmt.Printf("deleted breaker %s\n", b.ID)
	return nil
}

type breakersVersionsCmd struct {
	apiFlags `embed:""`
	ID       string `arg:"" help:"The breaker's id."`
}

func (b *breakersVersionsCmd) Run(ctx context.Context, log *slog.Logger) error {
	c, err := b.client()
	if err != nil {
		return err
	}
	vs, err := c.BreakerVersions(ctx, b.ID)
	if err != nil {
		return b.explain(err)
	}
	if b.JSON {
		return printJSON(os.Stdout, vs)
	}
	return printBreakers(vs)
}
