package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/arbiter-ledger/arbiter/client"
)

type decideCmd struct {
	apiFlags                 `embed:""`
	ID                       string `arg:"" help:"The action's id (as actions list shows it)."`
	Decision                 string `arg:"" enum:"confirm,retry,compensate,mark_compensated,abandon,approve,reject" help:"confirm, retry, compensate, mark_compensated, abandon, approve or reject."`
	Reason                   string `help:"Why: recorded in the ledger with your key's name. Required, except to approve."`
	ExpectedVersion          *int   `name:"expected-version" help:"Refuse the decision if the action changed since this version (actions show prints it)."`
	AcknowledgeDuplicateRisk bool   `name:"acknowledge-duplicate-risk" help:"Needed to retry an unkeyed action: the downstream does not deduplicate, so the effect may happen twice."`
	ExternalRef              string `name:"external-ref" help:"For confirm: the effect's id in the downstream system, as evidence."`
	Result                   string `help:"For confirm: the effect's result as JSON, as evidence."`
}

func (d *decideCmd) Run(ctx context.Context, log *slog.Logger) error {
	if strings.TrimSpace(d.Reason) == "" && d.Decision != client.DecisionApprove {
		return errors.New("--reason must say why: it is recorded in the ledger with the decision")
	}
	in := client.Decision{Decision: d.Decision, Reason: d.Reason, ExpectedVersion: d.ExpectedVersion,
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
	res, err := c.Decide(ctx, d.ID, in)
	if err != nil {
		return d.explain(err)
	}
	if d.JSON {
		return printJSON(os.Stdout, res)
	}
	a := res.Action
	fmt.Printf("%s: action %s (key %s) is now %s, version %d\n", d.Decision, a.ID, cell(a.Key), a.Status, a.Version)
	if next := nextAfter(a); next != "" {
		fmt.Println(next)
	}
	return nil
}

// nextAfter says what happens now that the decision is recorded.
func nextAfter(a *client.Action) string {
	switch a.Status {
	case client.StatusRetryRequested:
		return fmt.Sprintf("the agent's next intent for the key (or its worker) runs attempt %d with the same key", a.Attempt+1)
	case client.StatusCompensationRequested:
		return "the agent's next intent for the key (or its worker) undoes the effect and reports compensated"
	}
	return ""
}
