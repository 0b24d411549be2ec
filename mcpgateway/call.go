package mcpgateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/arbiter-ledger/arbiter/client"
)

// progressEvery is how often a call waiting for approval tells the host
// it is still waiting.
const progressEvery = 5 * time.Second

func (g *Gateway) handler(p *plan) mcp.ToolHandler {
	if !p.guarded {
		return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return g.up.call(ctx, p.tool.Name, req.Params.Arguments, forwardProgress(ctx, req))
		}
	}
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return g.callGuarded(ctx, req, p)
	}
}

// call is one guarded call from the host.
type call struct {
	g    *Gateway
	p    *plan
	req  *mcp.CallToolRequest
	args map[string]any

	mu       sync.Mutex
	started  func()              // called when the upstream call starts: ends the wait's progress
	result   *mcp.CallToolResult // what the upstream answered, if it did
	protoErr error               // the upstream's protocol error, if it answered one
}

// callGuarded records the call's intent, and calls the upstream only when
// the ledger says proceed. What the model sees for every other answer is
// in answers.go.
func (g *Gateway) callGuarded(ctx context.Context, req *mcp.CallToolRequest, p *plan) (*mcp.CallToolResult, error) {
	raw, args, err := decodeArgs(req.Params.Arguments)
	if err != nil {
		return toolError("%s was not called: %v.", p.tool.Name, err), nil
	}
	v := values{args: args}
	spec := client.GuardSpec{Tool: p.ledgerTool, Effect: p.effect, Params: raw, Timeout: p.lease,
		RequireApproval: p.requireApproval, Agent: g.opts.Agent}
	if p.key != nil {
		spec.Key, err = p.key.renderKey(v)
	} else {
		spec.Key, err = defaultKey(p.ledgerTool, raw)
	}
	if err == nil && p.reference != nil {
		spec.Reference, err = p.reference.render(v, nil)
	}
	if err != nil {
		return toolError("%s was not called: %v.", p.tool.Name, err), nil
	}
	if p.compensate != nil {
		spec.Compensate = g.compensator(p)
	}
	c := &call{g: g, p: p, req: req, args: args}
	out, err := g.arbiter.Guard(ctx, spec, c.run)
	if pending := (*client.PendingApprovalError)(nil); errors.As(err, &pending) && p.approvalWait > 0 {
		stop := c.progressWhileWaiting(ctx, pending)
		c.mu.Lock()
		c.started = stop
		c.mu.Unlock()
		out, err = c.waitForApproval(ctx, spec, time.Now().Add(p.approvalWait))
		stop()
	}
	return c.answer(ctx, spec, out, err)
}

// waitForApproval asks again until the decision comes or the configured
// wait ends at deadline. The server waits whole seconds, and Guard waits
// only the whole seconds left of its ApprovalWait, so one Guard ends up to
// a second early: the rest is waited here, and the ledger asked once more
// at the deadline.
func (c *call) waitForApproval(ctx context.Context, spec client.GuardSpec, deadline time.Time) (*client.Outcome, error) {
	if d, ok := ctx.Deadline(); ok && d.Add(-time.Second).Before(deadline) {
		// The last ask must be answered before the host's deadline.
		deadline = d.Add(-time.Second)
	}
	for {
		left := time.Until(deadline)
		if left >= time.Second {
			spec.ApprovalWait = left
		} else {
			spec.ApprovalWait = 0
			if left > 0 {
				t := time.NewTimer(left)
				select {
				case <-ctx.Done():
					t.Stop()
				case <-t.C:
				}
			}
		}
		out, err := c.g.arbiter.Guard(ctx, spec, c.run)
		if pending := (*client.PendingApprovalError)(nil); !errors.As(err, &pending) || spec.ApprovalWait == 0 || ctx.Err() != nil {
			return out, err
		}
	}
}

// run performs the attempt the ledger granted.
func (c *call) run(ctx context.Context, a client.Attempt) (any, string, error) {
	c.mu.Lock()
	if c.started != nil {
		c.started()
	}
	c.mu.Unlock()
	res, ref, err := c.g.execute(ctx, c.p, a.Params, c.args, forwardProgress(ctx, c.req))
	c.mu.Lock()
	defer c.mu.Unlock()
	var answered *protocolError
	switch {
	case res != nil:
		c.result = res
	case errors.As(err, &answered):
		c.protoErr = answered.wire
	}
	if res == nil {
		return nil, ref, err // not a typed nil in the interface
	}
	return res, ref, err
}

// execute calls the upstream tool with the action's arguments, for the
// host's call or for the worker, and says what is known of the effect in
// the terms Guard reads:
//
//   - the upstream answered a result: succeeded, with the result saved;
//   - it answered a tool error or a protocol error: failed, retriable (it
//     says nothing happened; the same call may be tried again);
//   - the call never left (no connection): failed, retriable;
//   - the call was sent and no answer came (the upstream died, the
//     connection broke, the host gave up): unknown. Nothing is reported;
//     the lease passes and a person decides.
func (g *Gateway) execute(ctx context.Context, p *plan, params json.RawMessage, args map[string]any,
	progress func(*mcp.ProgressNotificationParams)) (*mcp.CallToolResult, string, error) {
	if len(params) == 0 {
		params = json.RawMessage(`{}`)
	}
	res, err := g.up.call(ctx, p.tool.Name, params, progress)
	switch {
	case err == nil && res.IsError:
		return res, "", client.Retriable(fmt.Errorf("the tool answered an error: %s", contentText(res)))
	case err == nil:
		return res, g.externalRef(p, args, params, res), nil
	case errors.Is(err, errNotSent):
		return nil, "", client.Retriable(err)
	}
	if wire := answeredError(err); wire != nil {
		return nil, "", client.Retriable(&protocolError{wire: wire})
	}
	return nil, "", client.Unknown(fmt.Errorf("the call was sent to the upstream and no answer came: %w", err))
}

// protocolError is a JSON-RPC error the upstream answered a call with: it
// says the call failed, and the host gets it as it is.
type protocolError struct{ wire *jsonrpc.Error }

func (e *protocolError) Error() string {
	return "the upstream answered a protocol error: " + e.wire.Error()
}

// localCodes are the JSON-RPC codes the SDK gives errors of its own
// making (the connection closed, the transport rejected the request, no
// code): they are not the upstream's answer, so the call's fate is unknown.
var localCodes = []int64{-32001, -32003, -32004, -32005}

// answeredError returns the JSON-RPC error the upstream answered, or nil
// when err is not one.
func answeredError(err error) *jsonrpc.Error {
	var wire *jsonrpc.Error
	if !errors.As(err, &wire) || slices.Contains(localCodes, wire.Code) {
		return nil
	}
	return wire
}

// externalRef renders the rule's external_ref for a result; a result that
// lacks the field records none.
func (g *Gateway) externalRef(p *plan, args map[string]any, params json.RawMessage, res *mcp.CallToolResult) string {
	if p.externalRef == nil {
		return ""
	}
	if args == nil {
		_, args, _ = decodeArgs(params)
	}
	ref, err := p.externalRef.render(values{args: args, result: structured(res)}, nil)
	if err != nil {
		g.log.Warn("mcp gateway: no external ref for the call", "tool", p.tool.Name, "err", err)
	}
	return ref
}

// structured returns a result's structured content with numbers as sent;
// for a result without it, a first text content that is a JSON object.
func structured(res *mcp.CallToolResult) any {
	if res == nil {
		return nil
	}
	if res.StructuredContent != nil {
		raw, err := json.Marshal(res.StructuredContent)
		if err == nil {
			if v, err := decodeJSON(raw); err == nil {
				return v
			}
		}
	}
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			if v, err := decodeJSON([]byte(t.Text)); err == nil {
				if m, ok := v.(map[string]any); ok {
					return m
				}
			}
			break
		}
	}
	return nil
}

// forwardProgress returns where the upstream's progress notifications for
// the host's call go: to the host, under the host's token. Nil when the
// host asked for none.
func forwardProgress(ctx context.Context, req *mcp.CallToolRequest) func(*mcp.ProgressNotificationParams) {
	token := req.Params.GetProgressToken()
	if token == nil || req.Session == nil {
		return nil
	}
	return func(p *mcp.ProgressNotificationParams) {
		fwd := *p
		fwd.ProgressToken = token
		_ = req.Session.NotifyProgress(ctx, &fwd)
	}
}

// progressWhileWaiting tells the host, now and every progressEvery, that
// the call waits for people's approval, until the returned stop is called.
func (c *call) progressWhileWaiting(ctx context.Context, pending *client.PendingApprovalError) (stop func()) {
	token := c.req.Params.GetProgressToken()
	if token == nil || c.req.Session == nil {
		return func() {}
	}
	start := time.Now()
	send := func(n int) {
		_ = c.req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: float64(n),
			Message: fmt.Sprintf("Waiting for a person to approve %s in Arbiter (%s of at most %s): %s",
				c.p.tool.Name, time.Since(start).Round(time.Second), c.p.approvalWait, pending.URL)})
	}
	send(0)
	done := make(chan struct{})
	var once sync.Once
	go func() {
		t := time.NewTicker(progressEvery)
		defer t.Stop()
		for n := 1; ; n++ {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				send(n)
			}
		}
	}()
	return func() { once.Do(func() { close(done) }) }
}
