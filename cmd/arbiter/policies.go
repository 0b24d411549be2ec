package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/arbiter-ledger/arbiter/client"
)

// policiesCmd manages approval policies over the API, like the dashboard's
// admin pages: list (any key sees its namespace's), create (admin key), and
// test a rule on recent first intents without saving it.
type policiesCmd struct {
	List   policiesListCmd   `cmd:"" help:"List approval policies."`
	Create policiesCreateCmd `cmd:"" help:"Create an approval policy (admin key)."`
	Test   policiesTestCmd   `cmd:"" help:"Show how many of a namespace's latest first intents a rule would have caught; nothing is saved."`
}

type policiesListCmd struct {
	apiFlags  `embed:""`
	Namespace string `help:"Only this namespace (admin keys; other keys see their own)."`
}

func (l *policiesListCmd) Run(ctx context.Context, log *slog.Logger) error {
	c, err := l.client()
	if err != nil {
		return err
	}
	ps, err := c.Policies(ctx, l.Namespace)
	if err != nil {
		return l.explain(err)
	}
	if l.JSON {
		return printJSON(os.Stdout, ps)
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAMESPACE\tNAME\tTOOLS\tCONDITION\tAPPROVALS\tEXPIRES\tESCALATES\tENABLED\tVERSION")
	for _, p := range ps {
		esc := "-"
		if p.EscalateAfter != nil {
			esc = strconv.Itoa(*p.EscalateAfter) + "s"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%ds\t%s\t%t\t%d\n", p.ID, cell(p.Namespace), cell(p.Name),
			cell(strings.Join(p.Tools, ",")), cell(orDash(p.Condition)), p.ApprovalsRequired, p.ExpiresAfter, esc,
			p.Enabled, p.Version)
	}
	return tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

type policiesCreateCmd struct {
	apiFlags          `embed:""`
	Name              string   `required:"" help:"What the policy is for, as approvers will read it."`
	Namespace         string   `required:"" help:"The namespace whose intents it holds."`
	Tools             []string `required:"" help:"Tool patterns; * matches any run of characters (repeat, or separate with commas)."`
	Condition         string   `help:"A CEL condition over tool, effect, agent, namespace, reference, run_id and params; empty holds every intent of the tools."`
	ApprovalsRequired int      `name:"approvals" default:"1" help:"Distinct people who must approve (1-5)."`
	ExpiresAfter      int      `name:"expires-after" default:"86400" help:"Seconds until an unanswered approval is denied (60-604800)."`
	EscalateAfter     int      `name:"escalate-after" help:"Seconds until the approval is escalated (at least 10, less than --expires-after); 0: never."`
	Disabled          bool     `help:"Create it disabled."`
}

func (p *policiesCreateCmd) Run(ctx context.Context, log *slog.Logger) error {
	c, err := p.client()
	if err != nil {
		return err
	}
	tools := splitList(p.Tools)
	in := client.PolicyInput{Name: &p.Name, Namespace: &p.Namespace, Tools: &tools, Condition: &p.Condition,
		ApprovalsRequired: &p.ApprovalsRequired, ExpiresAfter: &p.ExpiresAfter, Enabled: client.Ptr(!p.Disabled)}
	if p.EscalateAfter != 0 {
		in.EscalateAfter = &p.EscalateAfter
	}
	pol, err := c.CreatePolicy(ctx, in)
	if err != nil {
		return p.explain(err)
	}
	if p.JSON {
		return printJSON(os.Stdout, pol)
	}
	fmt.Printf("created policy %q (version %d) in %s\n%s\n", pol.Name, pol.Version, pol.Namespace, pol.ID)
	return nil
}

type policiesTestCmd struct {
	apiFlags  `embed:""`
	Namespace string   `required:"" help:"The namespace whose latest first intents to try the rule on."`
	Tools     []string `required:"" help:"Tool patterns (repeat, or separate with commas)."`
	Condition string   `help:"The CEL condition to try."`
	Limit     int      `help:"How many of the latest first intents (default 1000, at most 10000)."`
}

func (p *policiesTestCmd) Run(ctx context.Context, log *slog.Logger) error {
	c, err := p.client()
	if err != nil {
		return err
	}
	res, err := c.TestPolicy(ctx, client.PolicyTest{Namespace: p.Namespace, Tools: splitList(p.Tools),
		Condition: p.Condition, Limit: p.Limit})
	if err != nil {
		return p.explain(err)
	}
	if p.JSON {
		return printJSON(os.Stdout, res)
	}
	fmt.Printf("would have caught %d of the last %d first intents", res.Matched, res.Examined)
	if res.Errors > 0 {
		fmt.Printf(" (%d because the condition failed on them)", res.Errors)
	}
	fmt.Println()
	for _, a := range res.Sample {
		fmt.Printf("  %s  %s  %s  %s\n", a.ID, cell(a.Key), cell(a.Tool), compactJSON(a.Params, 120))
	}
	return nil
}

// splitList reads a repeatable flag whose values may also be
// comma-separated.
func splitList(values []string) []string {
	var out []string
	for _, v := range values {
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
	}
	return out
}
