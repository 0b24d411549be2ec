package mcpgateway_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/client"
	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
)

const refundConfig = `{
  "name": "payments",
  "tools": [
    {"match": "refund", "key": "refund:{order_id}", "reference": "order {order_id}", "lease": "2s",
     "external_ref": "{result.refund_id}",
     "compensate": {"tool": "cancel_refund", "arguments": {"refund_id": "{result.refund_id}"}},
     "lookup": {"tool": "find_refund", "arguments": {"order_id": "{order_id}"}, "found": "refund_id"}},
    {"match": "find_refund", "guarded": false}
  ]
}`

func TestGuardedCallRunsOnceAndAnIdenticalRepeatIsAReplay(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, m mode, arb *arbiter) {
		up, pay := startUpstream(t, m)
		agent := arb.client("payments", "gateway", services.RoleAgent)
		g := startGateway(t, m, agent, up, refundConfig)
		ctx := context.Background()

		tools, err := g.host.ListTools(ctx, nil)
		require.NoError(t, err)
		desc := map[string]string{}
		for _, tool := range tools.Tools {
			desc[tool.Name] = tool.Description
		}
		assert.Equal(t, "Refund an order.\n\n(Calls of this tool are recorded in Arbiter's action ledger: an identical repeat returns "+
			"the first call's saved result instead of running again, and a call may wait for a person's approval.)", desc["refund"])
		assert.Equal(t, "Find the refunds of an order.", desc["find_refund"], "a read-only tool is listed unchanged")

		args := map[string]any{"order_id": "order-8812", "amount": 1999}
		first := g.call(t, "refund", args)
		require.False(t, first.IsError, text(first))
		assert.Equal(t, map[string]any{"refund_id": "re_1", "order_id": "order-8812", "amount": float64(1999), "cancelled": false},
			first.StructuredContent)
		assert.Nil(t, first.Meta["arbiter"])

		again := g.call(t, "refund", args)
		require.False(t, again.IsError, text(again))
		assert.Equal(t, first.StructuredContent, again.StructuredContent)
		assert.Contains(t, text(again), "[Arbiter] This identical call was made before (attempt 1, succeeded): this is its saved result. refund was not called again.")
		meta, _ := again.Meta["arbiter"].(map[string]any)
		require.NotNil(t, meta, "the replay is marked in _meta")
		assert.Equal(t, true, meta["replay"])
		assert.Equal(t, "refund:order-8812", meta["key"])

		assert.Equal(t, 1, pay.state().Calls["refund"], "the upstream saw one call")
		a, err := agent.ActionByKey(ctx, "refund:order-8812")
		require.NoError(t, err)
		assert.Equal(t, client.StatusSucceeded, a.Status)
		assert.Equal(t, "payments.refund", a.Tool)
		assert.Equal(t, "unkeyed", a.Effect)
		assert.Equal(t, "order order-8812", *a.Reference)
		assert.Equal(t, "re_1", *a.ExternalRef)
		assert.JSONEq(t, `{"order_id":"order-8812","amount":1999}`, string(a.Params))
	})
}

func TestReadOnlyToolPassesThroughWithoutAnEntry(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, m mode, arb *arbiter) {
		up, pay := startUpstream(t, m)
		agent := arb.client("payments", "gateway", services.RoleAgent)
		g := startGateway(t, m, agent, up, `{"name": "payments", "tools": [{"match": "find_refund", "guarded": false}]}`)

		res := g.call(t, "find_refund", map[string]any{"order_id": "order-1"})
		require.False(t, res.IsError, text(res))
		assert.Equal(t, map[string]any{"refunds": []any{}}, res.StructuredContent)
		res = g.call(t, "find_refund", map[string]any{"order_id": "order-1"})
		require.False(t, res.IsError, text(res))
		assert.Equal(t, 2, pay.state().Calls["find_refund"], "every call of a read-only tool reaches the upstream")
		page, err := agent.ListActions(context.Background(), client.ListOptions{})
		require.NoError(t, err)
		assert.Empty(t, page.Actions, "nothing was recorded")
	})
}

func TestDefaultKeyRecognisesOnlyAnIdenticalCall(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, m mode, arb *arbiter) {
		up, pay := startUpstream(t, m)
		agent := arb.client("payments", "gateway", services.RoleAgent)
		g := startGateway(t, m, agent, up, `{"name": "payments"}`)

		first := g.call(t, "refund", map[string]any{"order_id": "o-1", "amount": 5})
		require.False(t, first.IsError, text(first))
		// The same arguments in another order are the same call.
		again := g.call(t, "refund", map[string]any{"amount": 5, "order_id": "o-1"})
		require.False(t, again.IsError, text(again))
		assert.Contains(t, text(again), "[Arbiter] This identical call was made before")
		other := g.call(t, "refund", map[string]any{"order_id": "o-1", "amount": 6})
		require.False(t, other.IsError, text(other))
		assert.NotContains(t, text(other), "[Arbiter]")
		assert.Equal(t, 2, pay.state().Calls["refund"])

		page, err := agent.ListActions(context.Background(), client.ListOptions{})
		require.NoError(t, err)
		require.Len(t, page.Actions, 2)
		for _, a := range page.Actions {
			assert.Equal(t, "payments.refund", a.Tool)
			assert.Equal(t, "unkeyed", a.Effect)
			assert.True(t, strings.HasPrefix(a.Key, "payments.refund:"), a.Key)
			assert.Len(t, a.Key, len("payments.refund:")+64)
		}
	})
}

func TestCallLackingATemplatedArgumentIsRefused(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, m mode, arb *arbiter) {
		up, pay := startUpstream(t, m)
		agent := arb.client("payments", "gateway", services.RoleAgent)
		g := startGateway(t, m, agent, up, refundConfig)

		res := g.call(t, "refund", map[string]any{"amount": 1999})
		require.True(t, res.IsError)
		assert.Equal(t, `refund was not called: the argument "order_id" is required (it is part of the call's key or mappings) and is missing.`, text(res))
		assert.Equal(t, 0, pay.state().Calls["refund"])
		page, err := agent.ListActions(context.Background(), client.ListOptions{})
		require.NoError(t, err)
		assert.Empty(t, page.Actions)
	})
}

func TestKeyReusedWithOtherArgumentsIsRefused(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, m mode, arb *arbiter) {
		up, pay := startUpstream(t, m)
		agent := arb.client("payments", "gateway", services.RoleAgent)
		g := startGateway(t, m, agent, up, refundConfig)

		require.False(t, g.call(t, "refund", map[string]any{"order_id": "o-7", "amount": 100}).IsError)
		res := g.call(t, "refund", map[string]any{"order_id": "o-7", "amount": 500})
		require.True(t, res.IsError)
		a, err := agent.ActionByKey(context.Background(), "refund:o-7")
		require.NoError(t, err)
		assert.Contains(t, text(res), `refund was not called: its key "refund:o-7" was used before by a call with other arguments`)
		assert.Contains(t, text(res), "/actions/"+a.ID)
		assert.Equal(t, 1, pay.state().Calls["refund"])
	})
}

// approvalGateway starts a gateway whose refunds need a person's approval,
// and a refund call waiting for it.
func approvalCall(t *testing.T, m mode, arb *arbiter) (*gateway, *payments, *client.Client, chan *mcp.CallToolResult) {
	up, pay := startUpstream(t, m)
	agent := arb.client("payments", "gateway", services.RoleAgent)
	g := startGateway(t, m, agent, up, `{"name": "payments", "approval_wait": "20s",
	  "tools": [{"match": "refund", "key": "refund:{order_id}", "require_approval": true}]}`)
	operator := arb.client("payments", "on-call", services.RoleOperator)
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		params := &mcp.CallToolParams{Name: "refund", Arguments: map[string]any{"order_id": "o-big", "amount": 250000}}
		params.SetProgressToken("wait-1")
		res, err := g.host.CallTool(ctx, params)
		if err != nil {
			res = &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "host: " + err.Error()}}}
		}
		done <- res
	}()
	eventually(t, "the refund awaits approval and the host heard so", func() bool {
		a, err := agent.ActionByKey(context.Background(), "refund:o-big")
		return err == nil && a.Status == client.StatusAwaitingApproval && len(g.progressMessages()) > 0
	})
	return g, pay, operator, done
}

func TestCallNeedingApprovalWaitsAndProceedsAfterApprove(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, m mode, arb *arbiter) {
		g, pay, operator, done := approvalCall(t, m, arb)
		assert.Equal(t, 0, pay.state().Calls["refund"], "nothing runs before the approval")
		msgs := g.progressMessages()
		assert.True(t, strings.HasPrefix(msgs[0], "Waiting for a person to approve refund in Arbiter"), msgs[0])

		ctx := context.Background()
		a, err := operator.ActionByKey(ctx, "refund:o-big")
		require.NoError(t, err)
		_, err = operator.Decide(ctx, a.ID, client.Decision{Decision: client.DecisionApprove, Reason: "checked with finance"})
		require.NoError(t, err)

		res := <-done
		require.False(t, res.IsError, text(res))
		assert.Equal(t, "re_1", res.StructuredContent.(map[string]any)["refund_id"])
		assert.Equal(t, 1, pay.state().Calls["refund"])
	})
}

func TestCallNeedingApprovalIsRefusedAfterReject(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, m mode, arb *arbiter) {
		_, pay, operator, done := approvalCall(t, m, arb)
		ctx := context.Background()
		a, err := operator.ActionByKey(ctx, "refund:o-big")
		require.NoError(t, err)
		_, err = operator.Decide(ctx, a.ID, client.Decision{Decision: client.DecisionReject, Reason: "over the customer's payment"})
		require.NoError(t, err)

		res := <-done
		require.True(t, res.IsError)
		assert.Equal(t, "refund was not run: denied by on-call@example.com: over the customer's payment ("+operator.ActionURL(a.ID)+
			"). It will not run with these arguments.", text(res))
		assert.Equal(t, 0, pay.state().Calls["refund"])
	})
}

func TestCallOverALimitIsRefusedWithTheLimit(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, m mode, arb *arbiter) {
		up, pay := startUpstream(t, m)
		agent := arb.client("payments", "gateway", services.RoleAgent)
		g := startGateway(t, m, agent, up, `{"name": "payments", "tools": [{"match": "refund", "key": "refund:{order_id}"}]}`)
		admin := arb.client("", "admin", services.RoleAdmin)
		_, err := admin.CreateLimit(context.Background(), client.LimitInput{Name: new("refunds per order"), Namespace: new("payments"),
			Tools: &[]string{"payments.refund"}, Amount: new("params.amount"), GroupBy: new("params.order_id"),
			Window: new(3600), Max: new(1000.0), Over: new(client.LimitDeny)})
		require.NoError(t, err)

		require.False(t, g.call(t, "refund", map[string]any{"order_id": "o-9", "amount": 600}).IsError)
		res := g.call(t, "refund", map[string]any{"order_id": "o-10", "amount": 1200})
		require.True(t, res.IsError)
		a, err := agent.ActionByKey(context.Background(), "refund:o-10")
		require.NoError(t, err)
		assert.Equal(t, client.StatusDenied, a.Status)
		assert.Equal(t, `refund was not run: a limit set in Arbiter on such actions refused it: limit "refunds per order" (version 1) `+
			`allows 1000 in group "o-10"; 0 is used and this intent adds 1200 (`+agent.ActionURL(a.ID)+`). It will not run with these arguments; `+
			`do not call it again with other arguments to get around the limit. Tell the user a limit refused it; a person can change the limit.`, text(res))
		assert.Equal(t, 1, pay.state().Calls["refund"], "the refund over the limit never reached the upstream")
	})
}

// TestCallOfAFrozenToolWaitsForTheLift: a person freezes refunds; a new
// call is held (the model hears it is paused, with the reason), never
// reaches the upstream, and runs when called again after the lift.
func TestCallOfAFrozenToolWaitsForTheLift(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, m mode, arb *arbiter) {
		up, pay := startUpstream(t, m)
		agent := arb.client("payments", "gateway", services.RoleAgent)
		g := startGateway(t, m, agent, up, `{"name": "payments", "approval_wait": "1s", "tools": [{"match": "refund", "key": "refund:{order_id}"}]}`)
		admin := arb.client("", "admin", services.RoleAdmin)
		ctx := context.Background()
		f, err := admin.StartFreeze(ctx, client.FreezeInput{Namespace: "payments", Reason: "refunds look wrong"})
		require.NoError(t, err)

		res := g.call(t, "refund", map[string]any{"order_id": "o-frozen", "amount": 100})
		require.True(t, res.IsError)
		a, err := agent.ActionByKey(ctx, "refund:o-frozen")
		require.NoError(t, err)
		assert.Equal(t, `refund was not called: a person froze such actions in Arbiter (refunds look wrong), and it waits until the freeze `+
			`is lifted: `+agent.ActionURL(a.ID)+`. Do not work around it; tell the user it is paused. Calling again with the same `+
			`arguments runs it once the freeze is lifted.`, text(res))
		assert.Zero(t, pay.state().Calls["refund"], "nothing reached the upstream while frozen")

		_, err = admin.LiftFreeze(ctx, f.ID, "checked")
		require.NoError(t, err)
		require.False(t, g.call(t, "refund", map[string]any{"order_id": "o-frozen", "amount": 100}).IsError)
		assert.Equal(t, 1, pay.state().Calls["refund"])
	})
}

func TestUpstreamThatDiesAfterTheEffectLeavesATimedOutActionForAPerson(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, m mode, arb *arbiter) {
		up, pay := startUpstream(t, m, "-crash-after-refund")
		agent := arb.client("payments", "gateway", services.RoleAgent)
		g := startGateway(t, m, agent, up, `{"name": "payments", "tools": [{"match": "refund", "key": "refund:{order_id}", "lease": "1s"}]}`)
		ctx := context.Background()

		res := g.call(t, "refund", map[string]any{"order_id": "o-lost", "amount": 700})
		require.True(t, res.IsError)
		a, err := agent.ActionByKey(ctx, "refund:o-lost")
		require.NoError(t, err)
		assert.Contains(t, text(res), "refund was called and no answer came back")
		assert.Contains(t, text(res), "Arbiter holds the action (key \"refund:o-lost\") for a person")
		assert.Contains(t, text(res), agent.ActionURL(a.ID))
		assert.Len(t, pay.state().Refunds, 1, "the effect happened")

		eventually(t, "the lease passes", func() bool {
			arb.sweep()
			a, err = agent.ActionByKey(ctx, "refund:o-lost")
			return err == nil && a.Status == client.StatusTimedOut
		})
		again := g.call(t, "refund", map[string]any{"order_id": "o-lost", "amount": 700})
		require.True(t, again.IsError)
		assert.Equal(t, "refund was not called: an earlier identical call (attempt 1) ended without an answer, so whether it took effect "+
			"is unknown. A person has the action and decides what happened before anything runs again: "+agent.ActionURL(a.ID)+
			". Calling again will not run it; tell the user that a person is looking at it.", text(again))
		assert.Equal(t, 1, pay.state().Calls["refund"], "nothing was resent")
	})
}

func TestLookupConfirmsATimedOutCallThatHappened(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, m mode, arb *arbiter) {
		up, pay := startUpstream(t, m, "-crash-after-refund")
		agent := arb.client("payments", "gateway", services.RoleAgent)
		g := startGateway(t, m, agent, up, strings.Replace(refundConfig, `"lease": "2s"`, `"lease": "1s"`, 1))
		ctx := context.Background()

		require.True(t, g.call(t, "refund", map[string]any{"order_id": "o-9", "amount": 300}).IsError)
		pay.waitBack(t)
		g.runWorker(t)
		var a *client.Action
		eventually(t, "the worker's lookup confirms it", func() bool {
			arb.sweep()
			var err error
			a, err = agent.ActionByKey(ctx, "refund:o-9")
			return err == nil && a.Status == client.StatusConfirmed
		})
		assert.Equal(t, "re_1", *a.ExternalRef)
		assert.Equal(t, 1, pay.state().Calls["refund"])
		assert.GreaterOrEqual(t, pay.state().Calls["find_refund"], 1)

		// The model's repeat is answered from the ledger. The lookup's
		// answer is not a refund's result, and refund declares an output
		// schema: a tool error (which hosts do not check against the schema)
		// says it happened.
		again := g.call(t, "refund", map[string]any{"order_id": "o-9", "amount": 300})
		require.True(t, again.IsError, text(again))
		assert.Nil(t, again.StructuredContent)
		assert.Contains(t, text(again), "it was confirmed to have happened")
		assert.Contains(t, text(again), "Do not call it again: it has already taken effect")
		assert.Equal(t, true, again.Meta["arbiter"].(map[string]any)["replay"])
		assert.Equal(t, 1, pay.state().Calls["refund"])
	})
}

func TestOperatorRetryAndCompensationReachTheUpstream(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, m mode, arb *arbiter) {
		up, pay := startUpstream(t, m, "-crash-after-refund")
		agent := arb.client("payments", "gateway", services.RoleAgent)
		// No lookup: the timed-out refund waits for a person.
		g := startGateway(t, m, agent, up, `{"name": "payments", "tools": [{"match": "refund", "key": "refund:{order_id}", "lease": "1s",
		  "compensate": {"tool": "cancel_refund", "arguments": {"refund_id": "{result.refund_id}"}}}]}`)
		operator := arb.client("payments", "on-call", services.RoleOperator)
		ctx := context.Background()

		require.True(t, g.call(t, "refund", map[string]any{"order_id": "o-3", "amount": 300}).IsError)
		var a *client.Action
		eventually(t, "timed out", func() bool {
			arb.sweep()
			var err error
			a, err = agent.ActionByKey(ctx, "refund:o-3")
			return err == nil && a.Status == client.StatusTimedOut
		})
		g.runWorker(t)
		pay.waitBack(t)
		t.Cleanup(func() {
			if t.Failed() && a != nil {
				t.Logf("the action ended the test %s at attempt %d", a.Status, a.Attempt)
			}
		})
		_, err := operator.Decide(ctx, a.ID, client.Decision{Decision: client.DecisionRetry, Reason: "provider shows nothing",
			AcknowledgeDuplicateRisk: true})
		require.NoError(t, err)
		eventually(t, "the worker retries with the original arguments", func() bool {
			a, err = agent.ActionByKey(ctx, "refund:o-3")
			return err == nil && a.Status == client.StatusSucceeded
		})
		assert.Equal(t, 2, a.Attempt)
		st := pay.state()
		require.Len(t, st.Refunds, 2)
		assert.Equal(t, "o-3", st.Refunds[1].OrderID)
		assert.Equal(t, 300, st.Refunds[1].Amount)

		_, err = operator.Decide(ctx, a.ID, client.Decision{Decision: client.DecisionCompensate, Reason: "refunded twice"})
		require.NoError(t, err)
		eventually(t, "the worker compensates", func() bool {
			a, err = agent.ActionByKey(ctx, "refund:o-3")
			return err == nil && a.Status == client.StatusCompensated
		})
		st = pay.state()
		assert.Equal(t, 1, st.Calls["cancel_refund"])
		assert.True(t, st.Refunds[1].Cancelled, "the refund of attempt 2 is cancelled")
		assert.False(t, st.Refunds[0].Cancelled)
	})
}

func TestUpstreamRefusingTheConnectionIsARetriableFailure(t *testing.T) {
	t.Parallel()
	m := mode{"http", true}
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		arb := startArbiter(t, st)
		up, pay := startUpstream(t, m)
		agent := arb.client("payments", "gateway", services.RoleAgent)
		g := startGateway(t, m, agent, up, `{"name": "payments", "approval_wait": "1s", "tools": [{"match": "refund", "key": "refund:{order_id}"}]}`)
		ctx := context.Background()
		args := map[string]any{"order_id": "o-down", "amount": 120}

		// The upstream is gone and its port refuses connections: the call
		// cannot have left the gateway.
		pay.stop()
		res := g.call(t, "refund", args)
		require.True(t, res.IsError)
		assert.True(t, strings.HasPrefix(text(res), "refund was not called: the upstream server could not be reached, so nothing happened. "+
			"Calling again with the same arguments runs it once the server is back ("), text(res))
		a, err := agent.ActionByKey(ctx, "refund:o-down")
		require.NoError(t, err)
		assert.Equal(t, client.StatusFailed, a.Status, "a failure, not an unknown outcome for a person")

		pay.start()
		again := g.call(t, "refund", args)
		require.False(t, again.IsError, text(again))
		assert.NotContains(t, text(again), "[Arbiter]", "it ran: a failed call is no replay")
		a, err = agent.ActionByKey(ctx, "refund:o-down")
		require.NoError(t, err)
		assert.Equal(t, client.StatusSucceeded, a.Status)
		assert.Equal(t, 2, a.Attempt)
		assert.Equal(t, 1, pay.state().Calls["refund"], "the server saw the second call only")
	})
}

// refundPolicy (after the namespace's first key) makes Arbiter hold every payments.refund* call for two
// approvals.
func refundPolicy(t *testing.T, arb *arbiter) {
	t.Helper()
	admin := arb.client("", "admin", services.RoleAdmin)
	_, err := admin.CreatePolicy(context.Background(), client.PolicyInput{Name: new("two approvals for refunds"),
		Namespace: new("payments"), Tools: &[]string{"payments.refund*"}, ApprovalsRequired: new(2), Enabled: new(true)})
	require.NoError(t, err)
}

func TestUpstreamReadOnlyHintDoesNotUnguardATool(t *testing.T) {
	t.Parallel()
	for _, lie := range []string{"listing", "later"} {
		t.Run(lie, func(t *testing.T) {
			t.Parallel()
			each(t, func(t *testing.T, m mode, arb *arbiter) {
				up, pay := startUpstream(t, m, "-lie-read-only", lie)
				agent := arb.client("payments", "gateway", services.RoleAgent)
				refundPolicy(t, arb)
				// An explicit rule for refund, and none at all for the
				// others: neither lets the upstream's hint count.
				g := startGateway(t, m, agent, up, `{"name": "payments", "approval_wait": "1s", "tools": [{"match": "refund", "key": "refund:{order_id}"}]}`)
				if lie == "later" {
					g.call(t, "find_refund", map[string]any{"order_id": "o-0"})
					eventually(t, "the host hears refund is now annotated readOnlyHint", func() bool {
						for tool, err := range g.host.Tools(context.Background(), nil) {
							if err == nil && tool.Name == "refund" && tool.Annotations != nil && tool.Annotations.ReadOnlyHint {
								return true
							}
						}
						return false
					})
				}
				res := g.call(t, "refund", map[string]any{"order_id": "o-big", "amount": 500000})
				require.True(t, res.IsError, text(res))
				assert.Contains(t, text(res), "waits for a person's approval")
				assert.Equal(t, 0, pay.state().Calls["refund"], "the policy holds it")
				a, err := agent.ActionByKey(context.Background(), "refund:o-big")
				require.NoError(t, err, "the call was recorded")
				assert.Equal(t, client.StatusAwaitingApproval, a.Status)
				assert.Equal(t, "payments.refund", a.Tool)
				assert.Equal(t, "unkeyed", a.Effect)
			})
		})
	}
}

func TestTrustReadOnlyHintLetsTheUpstreamDecide(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, m mode, arb *arbiter) {
		up, pay := startUpstream(t, m)
		agent := arb.client("payments", "gateway", services.RoleAgent)
		g := startGateway(t, m, agent, up, `{"name": "payments", "tools": [{"match": "*", "trust_read_only_hint": true}]}`)
		require.False(t, g.call(t, "find_refund", map[string]any{"order_id": "o-1"}).IsError)
		require.False(t, g.call(t, "refund", map[string]any{"order_id": "o-1", "amount": 5}).IsError)
		assert.Equal(t, 1, pay.state().Calls["find_refund"])
		page, err := agent.ListActions(context.Background(), client.ListOptions{})
		require.NoError(t, err)
		require.Len(t, page.Actions, 1, "only the refund was recorded")
		assert.Equal(t, "payments.refund", page.Actions[0].Tool)
	})
}

func TestUpstreamThatRenamesItselfKeepsTheConfiguredPrefix(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, m mode, arb *arbiter) {
		up, pay := startUpstream(t, m, "-name", "payments-v2")
		agent := arb.client("payments", "gateway", services.RoleAgent)
		refundPolicy(t, arb)
		// The prefix comes from the command line when the file has no name.
		g := startGatewayNamed(t, m, agent, up, `{"approval_wait": "1s", "tools": [{"match": "refund", "key": "refund:{order_id}"}]}`, "payments")
		res := g.call(t, "refund", map[string]any{"order_id": "o-big", "amount": 500000})
		require.True(t, res.IsError, text(res))
		assert.Equal(t, 0, pay.state().Calls["refund"], "the policy for payments.refund* holds it")
		a, err := agent.ActionByKey(context.Background(), "refund:o-big")
		require.NoError(t, err)
		assert.Equal(t, "payments.refund", a.Tool)
		assert.Equal(t, client.StatusAwaitingApproval, a.Status)
	})
}

func TestApprovalWaitLastsAsConfigured(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, m mode, arb *arbiter) {
		up, pay := startUpstream(t, m)
		agent := arb.client("payments", "gateway", services.RoleAgent)
		g := startGateway(t, m, agent, up, `{"name": "payments", "approval_wait": "3s",
		  "tools": [{"match": "refund", "key": "refund:{order_id}", "require_approval": true}]}`)
		start := time.Now()
		res := g.call(t, "refund", map[string]any{"order_id": "o-wait", "amount": 100})
		took := time.Since(start)
		require.True(t, res.IsError, text(res))
		assert.Contains(t, text(res), "nobody decided within 3s")
		assert.GreaterOrEqual(t, took, 3*time.Second, "the call waited the configured 3 s")
		assert.Less(t, took, 4*time.Second, "and not a whole interval more (under load the rounds to the server add some)")
		assert.Equal(t, 0, pay.state().Calls["refund"])
	})
}

// refundSchemaFits checks v against the output schema the upstream lists
// for refund, as a host does.
func refundSchemaFits(t *testing.T, g *gateway, v any) {
	t.Helper()
	for tool, err := range g.host.Tools(context.Background(), nil) {
		require.NoError(t, err)
		if tool.Name != "refund" {
			continue
		}
		require.NotNil(t, tool.OutputSchema, "refund declares an output schema")
		raw, err := json.Marshal(tool.OutputSchema)
		require.NoError(t, err)
		var js jsonschema.Schema
		require.NoError(t, json.Unmarshal(raw, &js))
		resolved, err := js.Resolve(nil)
		require.NoError(t, err)
		raw, err = json.Marshal(v)
		require.NoError(t, err)
		var val any
		require.NoError(t, json.Unmarshal(raw, &val))
		require.NoError(t, resolved.Validate(val), "the structured content fits refund's output schema")
		return
	}
	t.Fatal("no refund tool listed")
}

func TestReplayOfAnOperatorsConfirmFitsTheOutputSchema(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, m mode, arb *arbiter) {
		agent := arb.client("payments", "gateway", services.RoleAgent)
		operator := arb.client("payments", "on-call", services.RoleOperator)
		ctx := context.Background()
		// confirmed starts a gateway and an upstream that loses the answer
		// to the first refund, and confirms that refund with result.
		confirmed := func(order, result string) *gateway {
			up, _ := startUpstream(t, m, "-crash-after-refund")
			g := startGateway(t, m, agent, up, `{"name": "payments", "tools": [{"match": "refund", "key": "refund:{order_id}", "lease": "1s"}]}`)
			require.True(t, g.call(t, "refund", map[string]any{"order_id": order, "amount": 300}).IsError)
			var a *client.Action
			eventually(t, "timed out", func() bool {
				arb.sweep()
				var err error
				a, err = agent.ActionByKey(ctx, "refund:"+order)
				return err == nil && a.Status == client.StatusTimedOut
			})
			d := client.Decision{Decision: client.DecisionConfirm, Reason: "seen in the PSP dashboard"}
			if result != "" {
				d.Result = json.RawMessage(result)
			}
			_, err := operator.Decide(ctx, a.ID, d)
			require.NoError(t, err)
			return g
		}

		g := confirmed("o-with", `{"refund_id": "re_1", "order_id": "o-with", "amount": 300, "cancelled": false}`)
		with := g.call(t, "refund", map[string]any{"order_id": "o-with", "amount": 300})
		require.False(t, with.IsError, text(with))
		require.NotNil(t, with.StructuredContent, "a result that fits is the structured content")
		refundSchemaFits(t, g, with.StructuredContent)
		assert.Equal(t, "re_1", with.StructuredContent.(map[string]any)["refund_id"])
		assert.Contains(t, text(with), "it was confirmed to have happened")

		g = confirmed("o-without", "")
		without := g.call(t, "refund", map[string]any{"order_id": "o-without", "amount": 300})
		require.True(t, without.IsError, "no result: a tool error a host accepts, not a result without structured content")
		assert.Nil(t, without.StructuredContent)
		assert.Contains(t, text(without), "refund was not called again: this identical call was made before (attempt 1, confirmed)")
		assert.Contains(t, text(without), "Do not call it again: it has already taken effect")
	})
}
