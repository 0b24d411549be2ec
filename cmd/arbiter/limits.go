package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/arbiter-ledger/arbiter/client"
)

// limitsCmd manages limits across actions over the API (SPEC "Limits
// across actions"): list and read them and their usage (readers,
// operators, admins of the namespace), create, change and delete them
// (admin key).
type limitsCmd struct {
	List     limitsListCmd     `cmd:"" help:"List limits."`
	Create   limitsCreateCmd   `cmd:"" help:"Create a limit (admin key)."`
	Update   limitsUpdateCmd   `cmd:"" help:"Change a limit's fields given (admin key); it gets a new version."`
	Delete   limitsDeleteCmd   `cmd:"" help:"Delete a limit (admin key); its versions stay readable."`
	Usage    limitsUsageCmd    `cmd:"" help:"Show a limit's counted use now: the groups with the most use, against its max."`
	Versions limitsVersionsCmd `cmd:"" help:"Show every version of a limit, oldest first."`
}

type limitsListCmd struct {
	apiFlags  `embed:""`
	Namespace string `help:"Only this namespace (admin keys; other keys see their own)."`
}

func (l *limitsListCmd) Run(ctx context.Context, log *slog.Logger) error {
	c, err := l.client()
	if err != nil {
		return err
	}
	ls, err := c.Limits(ctx, l.Namespace)
	if err != nil {
		return l.explain(err)
	}
	if l.JSON {
		return printJSON(os.Stdout, ls)
	}
	return printLimits(ls)
}

// printLimits writes limits as a table, a row each.
func printLimits(ls []client.Limit) error {
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAMESPACE\tNAME\tTOOLS\tAMOUNT\tGROUP BY\tMAX\tWINDOW\tOVER\tMODE\tENABLED\tVERSION")
	for _, l := range ls {
		amount := l.Amount
		if amount == "" {
			amount = "1"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%g\t%ds\t%s\t%s\t%t\t%d\n", l.ID, cell(l.Namespace), cell(l.Name),
			cell(strings.Join(l.Tools, ",")), cell(amount), cell(orDash(l.GroupBy)), l.Max, l.Window, overText(l), l.Mode,
			l.Enabled, l.Version)
	}
	return tw.Flush()
}

// overText is what a limit does over its max: deny, or hold for N people.
func overText(l client.Limit) string {
	if l.Over == client.LimitHold {
		return "hold×" + strconv.Itoa(l.ApprovalsRequired)
	}
	return l.Over
}

// limitFlags are a limit's fields as flags; a flag not given is not sent.
type limitFlags struct {
	Name      *string  `help:"What the limit is for, as approvers will read it."`
	Tools     []string `help:"Tool patterns; * matches any run of characters (repeat, or separate with commas)."`
	Condition *string  `help:"A CEL condition over the variables of a policy's condition: which first intents the limit applies to; empty: all."`
	Amount    *string  `help:"A CEL int or double: the intent's size (params.amount); empty counts actions."`
	GroupBy   *string  `name:"group-by" help:"A CEL string: the business group the budget is kept for (params.customer); empty: one group."`
	Window    *int     `help:"Seconds of the sliding window (1-2592000)."`
	Max       *float64 `help:"The most a group may use within the window (0 holds or denies everything it covers)."`
	Over      string   `enum:"hold,deny," default:"" placeholder:"hold|deny" help:"Over the max: hold for approval (the default when created) or deny."`
	Approvals *int     `help:"Distinct people who must approve an intent it holds (1-5)."`
	Mode      string   `enum:"enforce,shadow," default:"" placeholder:"enforce|shadow" help:"enforce (the default when created), or shadow: record what it would do and enforce nothing."`
	Enabled   *bool    `negatable:"" help:"Enabled (--no-enabled to turn it off)."`
}

func (f *limitFlags) input() client.LimitInput {
	in := client.LimitInput{Name: f.Name, Condition: f.Condition, Amount: f.Amount, GroupBy: f.GroupBy, Window: f.Window,
		Max: f.Max, ApprovalsRequired: f.Approvals, Enabled: f.Enabled}
	if f.Tools != nil {
		tools := splitList(f.Tools)
		in.Tools = &tools
	}
	if f.Over != "" {
		in.Over = &f.Over
	}
	if f.Mode != "" {
		in.Mode = &f.Mode
	}
	return in
}

type limitsCreateCmd struct {
	apiFlags   `embed:""`
	Namespace  string `required:"" help:"The namespace whose first intents it charges."`
	limitFlags `embed:""`
}

func (l *limitsCreateCmd) Run(ctx context.Context, log *slog.Logger) error {
	c, err := l.client()
	if err != nil {
		return err
	}
	in := l.input()
	in.Namespace = &l.Namespace
	lim, err := c.CreateLimit(ctx, in)
	if err != nil {
		return l.explain(err)
	}
	if l.JSON {
		return printJSON(os.Stdout, lim)
	}
	fmt.Printf("created limit %q (version %d) in %s\n%s\n", lim.Name, lim.Version, lim.Namespace, lim.ID)
	return nil
}

type limitsUpdateCmd struct {
	apiFlags   `embed:""`
	ID         string `arg:"" help:"The limit's id."`
	limitFlags `embed:""`
}

func (l *limitsUpdateCmd) Run(ctx context.Context, log *slog.Logger) error {
	c, err := l.client()
	if err != nil {
		return err
	}
	lim, err := c.UpdateLimit(ctx, l.ID, l.input())
	if err != nil {
		return l.explain(err)
	}
	if l.JSON {
		return printJSON(os.Stdout, lim)
	}
	fmt.Printf("limit %q is now version %d\n", lim.Name, lim.Version)
	return nil
}

type limitsDeleteCmd struct {
	apiFlags `embed:""`
	ID       string `arg:"" help:"The limit's id."`
}

func (l *limitsDeleteCmd) Run(ctx context.Context, log *slog.Logger) error {
	c, err := l.client()
	if err != nil {
		return err
	}
	if err := c.DeleteLimit(ctx, l.ID); err != nil {
		return l.explain(err)
	}
	fmt.Printf("deleted limit %s\n", l.ID)
	return nil
}

type limitsUsageCmd struct {
	apiFlags `embed:""`
	ID       string `arg:"" help:"The limit's id."`
	Group    string `help:"Only this group."`
}

func (l *limitsUsageCmd) Run(ctx context.Context, log *slog.Logger) error {
	c, err := l.client()
	if err != nil {
		return err
	}
	u, err := c.LimitUsage(ctx, l.ID, l.Group)
	if err != nil {
		return l.explain(err)
	}
	if l.JSON {
		return printJSON(os.Stdout, u)
	}
	fmt.Printf("max %g per group within %ds; %d groups counting\n", u.Max, u.Window, len(u.Groups))
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tUSED\tOF MAX\tACTIONS\tOLDEST LEAVES IN")
	for _, g := range u.Groups {
		share := "-"
		if u.Max > 0 {
			share = strconv.FormatFloat(100*g.Used/u.Max, 'f', 0, 64) + "%"
		}
		leaves := time.Until(g.OldestAt.Add(time.Duration(u.Window) * time.Second)).Round(time.Second)
		fmt.Fprintf(tw, "%s\t%g\t%s\t%d\t%s\n", cell(orDash(g.Group)), g.Used, share, g.Actions, max(leaves, 0))
	}
	return tw.Flush()
}

type limitsVersionsCmd struct {
	apiFlags `embed:""`
	ID       string `arg:"" help:"The limit's id."`
}

func (l *limitsVersionsCmd) Run(ctx context.Context, log *slog.Logger) error {
	c, err := l.client()
	if err != nil {
		return err
	}
	vs, err := c.LimitVersions(ctx, l.ID)
	if err != nil {
		return l.explain(err)
	}
	if l.JSON {
		return printJSON(os.Stdout, vs)
	}
	return printLimits(vs)
}
