package mcpgateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/arbiter-ledger/arbiter/client"
)

// What the model sees. Every answer of the ledger that does not run the
// tool is a tool error (or, for a replay, the saved result) that says what
// happened, whether a person has the action and where, and whether calling
// again helps. The gateway never retries on its own.

func toolError(format string, args ...any) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf(format, args...)}}}
}

// answer turns what Guard came to into the host's result.
func (c *call) answer(ctx context.Context, spec client.GuardSpec, out *client.Outcome, err error) (*mcp.CallToolResult, error) {
	c.mu.Lock()
	res, protoErr := c.result, c.protoErr
	c.mu.Unlock()
	name := c.p.tool.Name
	switch {
	case res != nil:
		// The upstream answered: the model sees its answer unchanged. A
		// failure to record it is the operators' concern (the lease passes
		// and the action waits for them), not the model's.
		if err != nil && !res.IsError {
			c.g.log.WarnContext(ctx, "mcp gateway: the call succeeded and recording its outcome failed", "tool", name, "key", spec.Key, "err", err)
		}
		return res, nil
	case protoErr != nil:
		return nil, protoErr
	case err == nil && out.Compensated:
		return toolError("%s was not called: an operator asked Arbiter to undo this action (key %q), and the gateway has just undone it. See %s.",
			name, spec.Key, c.g.arbiter.ActionURL(out.Action.ID)), nil
	case err == nil:
		return c.replay(out), nil
	}

	var (
		unknown  *client.OutcomeUnknownError
		held     *client.HeldError
		pending  *client.PendingApprovalError
		denied   *client.DeniedError
		limit    *client.LimitExceededError
		frozen   *client.FrozenError
		inProg   *client.InProgressError
		finished *client.FinishedError
		apiErr   *client.Error
	)
	switch {
	case errors.As(err, &unknown):
		return toolError("%s was called and no answer came back (%v). Whether it took effect is unknown, so Arbiter holds the action "+
			"(key %q) for a person, who will confirm, retry or undo it: %s. Do not call it again to find out: an identical call "+
			"will not run again until that person decides.", name, unknown.Err, spec.Key, c.g.arbiter.ActionURL(unknown.ActionID)), nil
	case errors.As(err, &held):
		what := fmt.Sprintf("an earlier identical call (attempt %d) ended without an answer, so whether it took effect is unknown", held.Attempt)
		if held.Compensation {
			what = "undoing an earlier identical call ended without an answer, so whether it was undone is unknown"
		}
		return toolError("%s was not called: %s. A person has the action and decides what happened before anything runs again: %s. "+
			"Calling again will not run it; tell the user that a person is looking at it.", name, what, held.URL), nil
	case errors.As(err, &pending) && len(pending.FrozenBy) > 0:
		return toolError("%s was not called: a person froze such actions in Arbiter (%s), and it waits until the freeze is lifted: %s. "+
			"Do not work around it; tell the user it is paused. Calling again with the same arguments runs it once the freeze is lifted.",
			name, freezeReasons(pending.FrozenBy), pending.URL), nil
	case errors.As(err, &pending):
		return toolError("%s was not called: it waits for a person's approval in Arbiter, and nobody decided within %s: %s. "+
			"The approval is for these exact arguments: call again with the same arguments to keep waiting; it runs once approved.",
			name, c.p.approvalWait, pending.URL), nil
	case errors.As(err, &limit):
		return toolError("%s was not run: a limit set in Arbiter on such actions refused it: %s (%s). It will not run with these arguments; "+
			"do not call it again with other arguments to get around the limit. Tell the user a limit refused it; a person can change the limit.",
			name, limit.Why, limit.URL), nil
	case errors.As(err, &frozen):
		return toolError("%s was not run: a freeze in Arbiter holds such actions back (%s). Nothing ran and nothing changed. "+
			"Do not work around it; tell the user it is paused until a person lifts the freeze (%s).", name, frozen.Why, frozen.URL), nil
	case errors.As(err, &denied):
		if denied.Expired {
			return toolError("%s was not run: the approval it needed expired before anyone approved it (%s). It will not run with these arguments.",
				name, denied.URL), nil
		}
		return toolError("%s was not run: denied by %s: %s (%s). It will not run with these arguments.", name, denied.By, denied.Reason, denied.URL), nil
	case errors.As(err, &inProg):
		until := "unknown"
		if inProg.LeaseUntil != nil {
			until = inProg.LeaseUntil.UTC().Format(time.RFC3339)
		}
		return toolError("%s was not called again: an identical call is running now (attempt %d, until %s at the latest). "+
			"Call again after it ends to get its result; see %s.", name, inProg.Attempt, until, c.g.arbiter.ActionURL(inProg.ActionID)), nil
	case errors.As(err, &finished):
		return toolError("%s was not called again: %s. See %s.", name, endedText(finished.Action), c.g.arbiter.ActionURL(finished.Action.ID)), nil
	case errors.Is(err, errNotSent):
		return toolError("%s was not called: the upstream server could not be reached, so nothing happened. "+
			"Calling again with the same arguments runs it once the server is back (%v).", name, err), nil
	case errors.Is(err, client.ErrUnreachable):
		return toolError("%s was not called: Arbiter, which records every call of this tool before it runs, cannot be reached. "+
			"Nothing happened; try again later.", name), nil
	case errors.Is(err, client.ErrCompensationRequested):
		return toolError("%s was not called: an operator asked to undo this action, and no compensating tool is configured for it, "+
			"so a person undoes it: %s.", name, c.keyURL(ctx, spec.Key)), nil
	case client.IsCode(err, "key_reused"):
		return toolError("%s was not called: its key %q was used before by a call with other arguments, and one key is one action. "+
			"A person sees both calls at %s. Check the arguments against the earlier call; do not change them just to get a new key.",
			name, spec.Key, c.keyURL(ctx, spec.Key)), nil
	case errors.As(err, &apiErr):
		return toolError("%s was not called: Arbiter refused to record it (%s: %s).", name, apiErr.Code, apiErr.Message), nil
	}
	c.g.log.WarnContext(ctx, "mcp gateway: the call could not be recorded", "tool", name, "key", spec.Key, "err", err)
	return toolError("%s was not called: %v.", name, err), nil
}

// freezeReasons lists the reasons of the freezes that hold an action.
func freezeReasons(fs []client.FreezeRef) string {
	rs := make([]string, len(fs))
	for i, f := range fs {
		rs[i] = f.Reason
	}
	return strings.Join(rs, "; ")
}

// endedText says how a finished action without its effect in place ended.
func endedText(a *client.Action) string {
	switch a.Status {
	case client.StatusAbandoned:
		return "an operator abandoned this action (it did not happen and must not be retried)"
	case client.StatusCompensated:
		return "this action was undone at an operator's request"
	case client.StatusFailed:
		return "this identical call failed before, and that failure is final"
	}
	return "this action already ended " + string(a.Status)
}

// keyURL is the dashboard page of the action with key, or the dashboard's
// action list when it cannot be read.
func (c *call) keyURL(ctx context.Context, key string) string {
	if a, err := c.g.arbiter.ActionByKey(ctx, key); err == nil {
		return c.g.arbiter.ActionURL(a.ID)
	}
	return strings.TrimSuffix(c.g.arbiter.ActionURL(""), "/")
}

// replay is the saved result of an earlier identical call, marked as a
// replay in its content (for the model) and in _meta (for programs).
func (c *call) replay(out *client.Outcome) *mcp.CallToolResult {
	a := out.Action
	res := &mcp.CallToolResult{}
	if len(out.Result) == 0 || json.Unmarshal(out.Result, res) != nil || (len(res.Content) == 0 && res.StructuredContent == nil) {
		// Not a saved tool result: the evidence a person or a lookup
		// confirmed the action with, or nothing.
		res = &mcp.CallToolResult{}
		if len(out.Result) > 0 && string(out.Result) != "null" {
			res.Content = []mcp.Content{&mcp.TextContent{Text: string(out.Result)}}
		}
	}
	if c.p.tool.OutputSchema != nil && !fitsSchema(c.p.tool.OutputSchema, res.StructuredContent) {
		// A host checks the structured content of a tool that declares an
		// output schema, and for a confirmed action Arbiter may hold only
		// evidence (a lookup's answer, a person's note) or nothing. What
		// fits is passed as the structured content; otherwise the honest
		// answer a host accepts is a tool error (hosts do not check those)
		// that says the effect happened and why there is no result.
		if v := structured(res); v != nil && fitsSchema(c.p.tool.OutputSchema, v) {
			res.StructuredContent = v
		} else {
			recorded := ""
			if len(out.Result) > 0 && string(out.Result) != "null" {
				recorded = " What was recorded: " + string(out.Result) + "."
			}
			e := toolError("%s was not called again: this identical call was made before (attempt %d, %s) and %s, "+
				"but Arbiter has no result of it in the form this tool returns, so there is none to show.%s "+
				"Do not call it again: it has already taken effect. See %s.",
				c.p.tool.Name, out.Attempt, a.Status, happenedText(a.Status), recorded, c.g.arbiter.ActionURL(a.ID))
			e.Meta = mcp.Meta{"arbiter": replayMeta(c, out)}
			return e
		}
	}
	res.IsError = false
	how := "this is its saved result"
	if a.Status == client.StatusConfirmed {
		how = "it was confirmed to have happened (by a person or a lookup at the upstream); this is what was recorded"
	}
	res.Content = append(res.Content, &mcp.TextContent{Text: fmt.Sprintf(
		"[Arbiter] This identical call was made before (attempt %d, %s): %s. %s was not called again.",
		out.Attempt, a.Status, how, c.p.tool.Name)})
	if res.Meta == nil {
		res.Meta = mcp.Meta{}
	}
	res.Meta["arbiter"] = replayMeta(c, out)
	return res
}

// replayMeta marks a replay for programs.
func replayMeta(c *call, out *client.Outcome) map[string]any {
	a := out.Action
	return map[string]any{"replay": true, "action_id": a.ID, "key": a.Key, "attempt": out.Attempt,
		"status": a.Status, "url": c.g.arbiter.ActionURL(a.ID)}
}

// happenedText says who established that a replayed action took effect.
func happenedText(s client.Status) string {
	if s == client.StatusConfirmed {
		return "it was confirmed to have happened (by a person or a lookup at the upstream)"
	}
	return "it took effect"
}

// fitsSchema says whether v is valid under the JSON schema schema (as the
// upstream listed it). A schema the gateway cannot read fits nothing.
func fitsSchema(schema, v any) bool {
	if v == nil {
		return false
	}
	raw, err := json.Marshal(schema)
	if err != nil {
		return false
	}
	var js jsonschema.Schema
	if json.Unmarshal(raw, &js) != nil {
		return false
	}
	resolved, err := js.Resolve(nil)
	if err != nil {
		return false
	}
	// Validate reads JSON values: numbers as float64, objects as maps.
	if raw, err = json.Marshal(v); err != nil {
		return false
	}
	var val any
	if json.Unmarshal(raw, &val) != nil {
		return false
	}
	return resolved.Validate(val) == nil
}

// contentText is a result's text content, for the ledger's error field.
func contentText(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, t.Text)
		}
	}
	if len(parts) == 0 {
		return "(no text)"
	}
	return strings.Join(parts, "\n")
}
