package mcpgateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/arbiter-ledger/arbiter/client"
)

// Operators' decisions reach the upstream through the gateway's worker:
// a retry runs the tool again with the original arguments under the
// original key, a compensation calls the configured compensating tool with
// the mapped arguments, and a timed-out call of a tool with a lookup is
// looked up at the upstream before a person has to decide.

// RunWorker carries out operators' decisions for the guarded tools until
// ctx ends. Several gateways may run one each: the ledger gives each
// attempt to one of them.
func (g *Gateway) RunWorker(ctx context.Context) error {
	w := client.NewWorker(g.arbiter, client.WorkerOptions{Poll: g.opts.WorkerPoll, Agent: g.opts.Agent, Logger: g.log})
	for _, p := range g.plans {
		if !p.guarded {
			continue
		}
		var compensate client.CompensateFunc
		if p.compensate != nil {
			compensate = g.compensator(p)
		}
		w.Handle(p.ledgerTool, g.retry(p), compensate)
		if p.lookup != nil {
			w.HandleLookup(p.ledgerTool, g.lookUp(p))
		}
	}
	return w.Run(ctx)
}

// retry runs an attempt an operator asked for, with the stored arguments.
func (g *Gateway) retry(p *plan) client.GuardFunc {
	return func(ctx context.Context, a client.Attempt) (any, string, error) {
		res, ref, err := g.execute(ctx, p, a.Params, nil, nil)
		if res == nil {
			return nil, ref, err // not a typed nil in the interface
		}
		return res, ref, err
	}
}

// compensator undoes an action with the configured compensating tool. Its
// arguments come from the original call's arguments and its saved result.
func (g *Gateway) compensator(p *plan) client.CompensateFunc {
	return func(ctx context.Context, a client.Attempt) (string, error) {
		action, err := g.arbiter.Action(ctx, a.ActionID)
		if err != nil {
			return "", client.Retriable(fmt.Errorf("read the action to compensate: %w", err))
		}
		_, args, err := decodeArgs(a.Params)
		if err != nil {
			return "", err
		}
		var result any
		if len(action.Result) > 0 {
			var saved struct {
				StructuredContent json.RawMessage `json:"structuredContent"`
			}
			if json.Unmarshal(action.Result, &saved) == nil && len(saved.StructuredContent) > 0 {
				result, _ = decodeJSON(saved.StructuredContent)
			}
		}
		cargs, err := p.compensate.arguments(values{args: args, result: result})
		if err != nil {
			// The mapping cannot be filled for this action: a person undoes it.
			return "", fmt.Errorf("cannot compensate with %s: %w", p.compensate.tool, err)
		}
		res, err := g.up.call(ctx, p.compensate.tool, cargs, nil)
		switch {
		case err == nil && res.IsError:
			return "", fmt.Errorf("%s answered an error: %s", p.compensate.tool, contentText(res))
		case err == nil:
			return "", nil
		case errors.Is(err, errNotSent):
			return "", client.Retriable(err)
		case answeredError(err) != nil:
			return "", fmt.Errorf("%s answered a protocol error: %w", p.compensate.tool, err)
		}
		return "", client.Unknown(fmt.Errorf("%s was sent and no answer came: %w", p.compensate.tool, err))
	}
}

// lookUp asks the configured lookup tool whether a timed-out call took
// effect: the field named by found, present and not empty in its
// structured result, means it did.
func (g *Gateway) lookUp(p *plan) client.LookupFunc {
	return func(ctx context.Context, q client.LookupRequest) (client.LookupAnswer, error) {
		_, args, err := decodeArgs(q.Params)
		if err != nil {
			return client.LookupAnswer{Answer: client.AnswerUnknown, Evidence: err.Error()}, nil
		}
		largs, err := p.lookup.arguments(values{args: args})
		if err != nil {
			return client.LookupAnswer{Answer: client.AnswerUnknown, Evidence: err.Error()}, nil
		}
		res, err := g.up.call(ctx, p.lookup.tool, largs, nil)
		if err != nil {
			return client.LookupAnswer{}, err
		}
		if res.IsError {
			return client.LookupAnswer{}, fmt.Errorf("%s answered an error: %s", p.lookup.tool, contentText(res))
		}
		sc := structured(res)
		evidence := map[string]any{"tool": p.lookup.tool, "arguments": largs, "result": sc}
		if sc == nil {
			evidence["result"] = contentText(res)
			return client.LookupAnswer{Answer: client.AnswerUnknown, Evidence: evidence}, nil
		}
		v, err := values{result: sc}.lookup(append([]string{"result"}, p.found...))
		if err != nil || empty(v) {
			return client.LookupAnswer{Answer: client.AnswerNotHappened, Evidence: evidence}, nil
		}
		ans := client.LookupAnswer{Answer: client.AnswerHappened, Evidence: evidence, Result: sc}
		if s, ok := v.(string); ok {
			ans.ExternalRef = s
		}
		return ans, nil
	}
}

func empty(v any) bool {
	switch v := v.(type) {
	case nil:
		return true
	case string:
		return v == ""
	case bool:
		return !v
	case []any:
		return len(v) == 0
	case map[string]any:
		return len(v) == 0
	}
	return false
}
