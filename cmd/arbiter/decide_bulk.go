package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/arbiter-ledger/arbiter/client"
)

// runMany takes the decision on every action --filter selects
// (POST /v1/decisions), or with --dry-run counts them.
func (d *decideCmd) runMany(ctx context.Context) error {
	now := time.Now()
	f, err := parseBulkFilter(d.Filter, now)
	if err != nil {
		return err
	}
	if !d.DryRun {
		if strings.TrimSpace(d.Reason) == "" && d.decision != client.DecisionApprove {
			return errors.New("--reason must say why: it is recorded in the ledger with each action's decision")
		}
		if d.MaxCount < 1 {
			return errors.New("--max-count is required: the most actions you expect this to decide (1 to 1000); " +
				"run it with --dry-run first to count them")
		}
	}
	c, err := d.client()
	if err != nil {
		return err
	}
	in := client.BulkDecision{Filter: f, Decision: d.decision, Reason: d.Reason,
		AcknowledgeDuplicateRisk: d.AcknowledgeDuplicateRisk, DryRun: d.DryRun, MaxCount: d.MaxCount}
	res, err := c.DecideMany(ctx, in)
	if err != nil {
		var apiErr *client.Error
		if errors.As(err, &apiErr) && apiErr.Code == "too_many_matched" {
			return fmt.Errorf("too_many_matched: %s (see what it matches with --dry-run)", apiErr.Message)
		}
		return d.explain(err)
	}
	if d.JSON {
		return printJSON(os.Stdout, res)
	}
	if d.DryRun {
		fmt.Printf("%s would apply to %d of the %d actions matched (dry run: nothing was written)\n",
			d.decision, res.Allowed, res.Matched)
		if len(res.Sample) > 0 {
			if len(res.Sample) < res.Allowed {
				fmt.Printf("the first %d of them:\n", len(res.Sample))
			}
			if err := printActions(os.Stdout, res.Sample, now); err != nil {
				return err
			}
		}
		if res.Allowed > 0 {
			fmt.Printf("to apply it: the same command without --dry-run, with --reason … --max-count %d\n", res.Allowed)
		}
		return nil
	}
	fmt.Printf("%s: applied to %d actions, skipped %d\n", d.decision, res.Applied, len(res.Skipped))
	for _, s := range res.Skipped {
		fmt.Printf("  skipped %s: %s\n", s.ID, s.Code)
	}
	return nil
}

// parseBulkFilter reads --filter values: comma-separated name=value
// criteria, the flag repeatable.
func parseBulkFilter(specs []string, now time.Time) (client.BulkFilter, error) {
	var f client.BulkFilter
	for _, spec := range specs {
		for part := range strings.SplitSeq(spec, ",") {
			part = strings.TrimSpace(part)
			if part == "" {
				continue
			}
			name, value, ok := strings.Cut(part, "=")
			name, value = strings.TrimSpace(name), strings.TrimSpace(value)
			if !ok || value == "" {
				return f, fmt.Errorf("--filter %q: give name=value, such as status=timed_out", part)
			}
			var err error
			switch name {
			case "status":
				f.Status = append(f.Status, value)
			case "id", "ids":
				f.IDs = append(f.IDs, value)
			case "tool":
				f.Tool = value
			case "agent":
				f.Agent = value
			case "namespace":
				f.Namespace = value
			case "since", "until":
				var t time.Time
				if t, err = parseWhen("--filter "+name, value, now); err != nil {
					return f, err
				}
				if name == "since" {
					f.Since = &t
				} else {
					f.Until = &t
				}
			default:
				return f, fmt.Errorf("--filter: unknown criterion %q: use status, tool, agent, namespace, since, until or id", name)
			}
		}
	}
	if len(f.IDs) == 0 && len(f.Status) == 0 && f.Tool == "" && f.Agent == "" && f.Namespace == "" && f.Since == nil && f.Until == nil {
		return f, errors.New("--filter names no criterion: a bulk decision never applies to everything")
	}
	return f, nil
}
