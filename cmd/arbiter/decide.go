package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"

	"github.com/arbiter-ledger/arbiter/client"
	"github.com/arbiter-ledger/arbiter/services/record"
)

type decideCmd struct {
	apiFlags                 `embed:""`
	Args                     []string `arg:"" name:"ID DECISION" help:"The action's id (as actions list shows it) and the decision: confirm, retry, compensate, mark_compensated, abandon, approve, reject or acknowledge (clears a review alert). With --filter, the decision alone."`
	Reason                   string   `help:"Why: recorded in the ledger with your key's name. Required, except to approve (and for --dry-run)."`
	ExpectedVersion          *int     `name:"expected-version" help:"Refuse the decision if the action changed since this version (actions show prints it)."`
	AcknowledgeDuplicateRisk bool     `name:"acknowledge-duplicate-risk" aliases:"ack-duplicate-risk" help:"Needed to retry an unkeyed action: the downstream does not deduplicate, so the effect may happen twice."`
	ExternalRef              string   `name:"external-ref" help:"For confirm: the effect's id in the downstream system, as evidence."`
	Result                   string   `help:"For confirm: the effect's result as JSON, as evidence."`

	Filter   []string `sep:"none" help:"Decide every action this selects instead of one: comma-separated criteria, all of which must hold: status=S (repeatable), tool=T, agent=A, namespace=NS, since=T, until=T (RFC 3339, or a duration ago such as 2h), id=ID (repeatable). Each action is decided as if alone."`
	DryRun   bool     `name:"dry-run" help:"With --filter: count what the decision would apply to, and write nothing."`
	MaxCount int      `name:"max-count" help:"With --filter: the most actions you expect to decide (1 to 1000); if the decision is allowed on more, nothing is written."`

	id, decision string
}

// decisionNames are the ledger's decisions, in the order a person reads
// them: a new one in record.Decisions is accepted here without an edit.
var decisionNames = func() []string {
	names := make([]string, len(record.Decisions))
	for i, d := range record.Decisions {
		names[i] = string(d)
	}
	return names
}()

// Validate reads the positional arguments: ID DECISION, or DECISION alone
// with --filter.
func (d *decideCmd) Validate() error {
	switch {
	case len(d.Filter) > 0 && len(d.Args) == 1:
		d.decision = d.Args[0]
	case len(d.Filter) > 0:
		return errors.New("with --filter, name the decision alone: `arbiter decide --filter status=timed_out abandon --reason …`")
	case len(d.Args) == 2:
		d.id, d.decision = d.Args[0], d.Args[1]
	default:
		return errors.New("name the action and the decision: `arbiter decide ID DECISION --reason …` " +
			"(or a filter: `arbiter decide --filter status=timed_out DECISION --reason …`)")
	}
	if !slices.Contains(decisionNames, d.decision) {
		return fmt.Errorf("unknown decision %q: use one of %s", d.decision, strings.Join(decisionNames, ", "))
	}
	if len(d.Filter) == 0 && (d.DryRun || d.MaxCount != 0) {
		return errors.New("--dry-run and --max-count go with --filter")
	}
	return nil
}

func (d *decideCmd) Run(ctx context.Context, log *slog.Logger) error {
	if len(d.Filter) > 0 {
		return d.runMany(ctx)
	}
	if strings.TrimSpace(d.Reason) == "" && d.decision != client.DecisionApprove {
		return errors.New("--reason must say why: it is recorded in the ledger with the decision")
	}
	in := client.Decision{Decision: d.decision, Reason: d.Reason, ExpectedVersion: d.ExpectedVersion,
		AcknowledgeDuplicateRisk: d.AcknowledgeDuplicateRisk}
	if d.ExternalRef != "" {
		in.ExternalRef = &d.ExternalRef
	}
	if d.Result != "" {
		if !json.Valid([]byte(d.Result)) {
			return fmt.Errorf("--result is not valid JSON: %q", d.Result)
		}
		in.Result = json.RawMessage(d.Result)
	}
	c, err := d.client()
	if err != nil {
		return err
	}
	res, err := c.Decide(ctx, d.id, in)
	if err != nil {
		return d.explain(err)
	}
	if d.JSON {
		return printJSON(os.Stdout, res)
	}
	a := res.Action
	fmt.Printf("%s: action %s (key %s) is now %s, version %d\n", d.decision, a.ID, cell(a.Key), a.Status, a.Version)
	if next := nextAfter(a); next != "" {
		fmt.Println(next)
	}
	return nil
}

// nextAfter says what happens now that the decision is recorded: for each
// status of services.AgentActsAfterDecision, what the agent does next
// (TestNextAfterEveryStatusTheAgentActsIn).
func nextAfter(a *client.Action) string {
	switch a.Status {
	case client.StatusRetryRequested:
		return fmt.Sprintf("the agent's next intent for the key (or its worker) runs attempt %d with the same key", a.Attempt+1)
	case client.StatusCompensationRequested:
		return "the agent's next intent for the key (or its worker) undoes the effect and reports compensated"
	case client.StatusApproved:
		return "the agent waiting on the key proceeds now, or its next intent for the key runs attempt 1"
	}
	return ""
}
