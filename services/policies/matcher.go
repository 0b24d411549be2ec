package policies

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/cel-go/interpreter"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/record"
)

// The ledger asks Require about the first intent of every new key, so the
// enabled policies of a namespace are kept in memory: read again when a
// policy of the namespace changes through this process, and otherwise at
// most policyCacheFreshness after they were read (a change made through
// another replica applies within that time). Conditions are compiled once
// per policy version.

type compiled struct {
	prg *program
	err error
}

// queryActivation gives the CEL variables of a first intent.
func queryActivation(q services.ApprovalQuery) interpreter.Activation {
	facts := Facts{Tool: q.Tool, Effect: q.Effect, Agent: q.Agent, Namespace: q.Namespace,
		Reference: q.Reference, RunID: q.RunID}
	_ = json.Unmarshal(q.Params, &facts.Params)
	return facts.activation()
}

// Require says what a first intent needs before it may run: nil when no
// enabled policy of its namespace catches it. Tools are matched first;
// conditions run only for the policies whose tools match. A condition that
// fails at run time, or reaches its cost or time bound (cel.go), counts as
// a match (fail closed) and its error is kept.
// Of several matches, the largest number of approvals and the earliest
// expiry and escalation win. A policy in shadow mode that matches is only
// listed (Shadow): the request then needs no approval unless another
// policy asks for it (Required 0).
func (s *Service) Require(ctx context.Context, q services.ApprovalQuery) (*record.ApprovalRequest, error) {
	ps, err := s.enabled(ctx, q.Namespace)
	if err != nil || len(ps) == 0 {
		return nil, err
	}
	var req *record.ApprovalRequest
	var act interpreter.Activation
	for _, p := range ps {
		if !toolMatches(p.Tools, q.Tool) {
			continue
		}
		if act == nil {
			act = queryActivation(q)
		}
		c := s.programs(p)
		prg, err := c.prg, c.err
		var evalErr error
		matched := true
		if err != nil {
			evalErr = err
		} else if matched, evalErr = evalIn(ctx, prg, act); evalErr != nil {
			if ctx.Err() != nil {
				// The request ended (its client left): nothing is recorded.
				return nil, fmt.Errorf("policies: evaluate %q: %w", p.Name, context.Cause(ctx))
			}
			matched = true
		}
		if !matched {
			continue
		}
		if req == nil {
			req = &record.ApprovalRequest{Policies: []record.PolicyRef{}}
		}
		ref := record.PolicyRef{ID: p.ID, Name: p.Name, Version: p.Version}
		if evalErr != nil {
			ref.Error = evalErr.Error()
		}
		if p.Mode == record.LimitShadow {
			req.Shadow = append(req.Shadow, ref) // recorded, not enforced
			continue
		}
		req.Policies = append(req.Policies, ref)
		req.Required = max(req.Required, p.ApprovalsRequired)
		expires := q.Now.Add(time.Duration(p.ExpiresAfter) * time.Second)
		if req.ExpiresAt.IsZero() || expires.Before(req.ExpiresAt) {
			req.ExpiresAt = expires
		}
		if p.EscalateAfter != nil {
			at := q.Now.Add(time.Duration(*p.EscalateAfter) * time.Second)
			if req.EscalateAt == nil || at.Before(*req.EscalateAt) {
				req.EscalateAt = &at
			}
		}
		if evalErr != nil {
			msg := fmt.Sprintf("policy %q (version %d): %v", p.Name, p.Version, evalErr)
			if req.Error != "" {
				msg = req.Error + "; " + msg
			}
			req.Error = msg
		}
	}
	return req, nil
}
