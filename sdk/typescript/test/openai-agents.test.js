// The OpenAI Agents adapter inside the real framework (the versions
// package.json pins): run() drives the tools as it does for a model, with
// a scripted Model in place of one (the framework's Model interface, no
// API key). Arbiter is real; an operator decides approvals with a key of
// their own.

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { Worker, key } from "@arbiter-ledger/arbiter";
import { applyArbiterApprovals, arbiterTool } from "@arbiter-ledger/arbiter/openai-agents";
import { client, fresh, memoryLogger, noServer } from "./helpers.js";

const agents = await import("@openai/agents").catch(() => null);
const { z } = await import("zod").catch(() => ({}));
const missing = agents && z ? "" : "@openai/agents and zod are not installed (run-tests installs the pinned versions)";
if (missing && process.env.ARBITER_SDK_REQUIRE_SERVER) throw new Error(missing);
agents?.setTracingDisabled(true);

const agent = client("agent");
const operator = client("operator");
const admin = client("admin");

/** A model that calls the refund tool with input until the tool has answered, then repeats the answer. */
function modelCalling(input) {
  const respond = async (request) => {
    const items = Array.isArray(request.input) ? request.input : [];
    const answered = items.filter((i) => i.type === "function_call_result");
    const output = answered.length
      ? [{ type: "message", role: "assistant", status: "completed", content: [{ type: "output_text", text: JSON.stringify(answered.at(-1).output) }] }]
      : [{ type: "function_call", callId: `call-${Math.random().toString(36).slice(2, 8)}`, name: "refund", arguments: JSON.stringify(input), status: "completed" }];
    return { usage: new agents.Usage(), output };
  };
  return {
    getResponse: respond,
    async *getStreamedResponse(request) {
      const response = await respond(request);
      yield { type: "response_done", response: { id: "r", usage: {}, output: response.output } };
    },
  };
}

/** An agent with a refund tool guarded by Arbiter, and the refunds its provider made. */
function refundAgent(ledgerTool, input, options = {}, toolOptions = {}) {
  const refunds = [];
  const refund = agents.tool({
    name: "refund",
    description: "Refund an order",
    parameters: z.object({ order: z.string(), amount_cents: z.number() }),
    ...toolOptions,
    ...arbiterTool(agent, {
      tool: ledgerTool,
      key: (input) => key("refund", input.order),
      effect: "keyed",
      externalRef: (out) => out.refund_id,
      execute: async (input, attempt) => {
        refunds.push({ ...input, key: attempt.key, attempt: attempt.number });
        return { refund_id: `re_${refunds.length}` };
      },
      ...options,
    }),
  });
  const bot = new agents.Agent({ name: "refunds", instructions: "Refund what the user asks.", model: modelCalling(input), tools: [refund] });
  return { bot, refunds };
}

/** Whether a tool output is the model's pending_approval message (sdk/vectors.json "model_messages"). */
const pendingText = (out) => /^Not done yet: this call is waiting for a person's approval\. Do not call the tool again/.test(String(out));

/** What the tool answered the model in a run. */
function toolOutputs(result) {
  return result.newItems.filter((i) => i.type === "tool_call_output_item").map((i) => i.output);
}

describe("OpenAI Agents adapter", { skip: noServer || missing || false, concurrency: true }, () => {
  test("no approval needed: the tool runs once under its key, and the same call again is answered from the ledger", async () => {
    const { tool: ledgerTool } = fresh();
    const order = fresh().key.split(":")[1];
    const { bot, refunds } = refundAgent(ledgerTool, { order, amount_cents: 4200 });
    const first = await agents.run(bot, `refund ${order}`);
    assert.deepEqual(first.interruptions, []);
    assert.deepEqual(toolOutputs(first), [{ refund_id: "re_1" }]);
    assert.deepEqual(refunds, [{ order, amount_cents: 4200, key: `refund:${order}`, attempt: 1 }]);
    const a = await agent.actionByKey(`refund:${order}`);
    assert.equal(a.status, "succeeded");
    assert.equal(a.attempt, 1, "one intent, the attempt execute ran");
    assert.equal(a.external_ref, "re_1");

    const again = await agents.run(bot, `refund ${order} again`);
    assert.deepEqual(toolOutputs(again), [{ refund_id: "re_1" }]);
    assert.equal(refunds.length, 1, "the replay ran nothing");
  });

  test("approved in Arbiter: the run is interrupted for approval, and Arbiter's approval runs the tool once", async () => {
    const { tool: ledgerTool } = fresh();
    const order = fresh().key.split(":")[1];
    const { bot, refunds } = refundAgent(ledgerTool, { order, amount_cents: 250_000 }, { requireApproval: (input) => input.amount_cents > 10_000 });
    // The tool records its intent when it runs: held, and the model hears it waits.
    const asked = await agents.run(bot, `refund ${order}`);
    assert.deepEqual(asked.interruptions, []);
    assert.deepEqual(toolOutputs(asked).map(pendingText), [true], "the model hears the call waits for approval");
    assert.equal(refunds.length, 0);
    const held = await agent.actionByKey(`refund:${order}`);
    assert.equal(held.status, "awaiting_approval");
    // The same call again interrupts the run for approval.
    let result = await agents.run(bot, `refund ${order}`);
    assert.equal(result.interruptions.length, 1, "the run waits for approval");
    assert.equal(result.interruptions[0].name, "refund");

    let applied = await applyArbiterApprovals(result);
    assert.deepEqual([applied.approved.length, applied.rejected.length, applied.undecided.length], [0, 0, 1]);

    const waiting = applyArbiterApprovals(result, { waitMs: 15_000, pollMs: 100 });
    await operator.decide(held.id, { decision: "approve", reason: "checked with the customer" });
    applied = await waiting;
    assert.deepEqual([applied.approved.length, applied.rejected.length, applied.undecided.length], [1, 0, 0]);

    result = await agents.run(bot, result.state);
    assert.deepEqual(result.interruptions, []);
    assert.deepEqual(toolOutputs(result), [{ refund_id: "re_1" }]);
    assert.deepEqual(refunds, [{ order, amount_cents: 250_000, key: `refund:${order}`, attempt: 1 }]);
    assert.equal((await agent.actionByKey(`refund:${order}`)).status, "succeeded");
  });

  test("rejected in Arbiter (a policy held it): the model hears who refused it and why, and nothing runs", async () => {
    const { tool: ledgerTool } = fresh();
    const order = fresh().key.split(":")[1];
    await admin.createPolicy({ name: `refunds over 1000 (${ledgerTool})`, namespace: process.env.ARBITER_NAMESPACE, tools: [ledgerTool], condition: "params.amount_cents > 100000" });
    const { bot, refunds } = refundAgent(ledgerTool, { order, amount_cents: 250_000 });
    const asked = await agents.run(bot, `refund ${order}`);
    assert.deepEqual(toolOutputs(asked).map(pendingText), [true], "the policy's hold: the model hears the call waits for approval");
    const held = await agent.actionByKey(`refund:${order}`);
    assert.equal(held.approval.policies.length, 1);
    let result = await agents.run(bot, `refund ${order}`);
    assert.equal(result.interruptions.length, 1, "the held call again interrupts the run");

    await operator.decide(held.id, { decision: "reject", reason: "the order was never paid" });
    const applied = await applyArbiterApprovals(result);
    assert.equal(applied.rejected.length, 1);
    result = await agents.run(bot, result.state);
    assert.deepEqual(result.interruptions, []);
    assert.deepEqual(toolOutputs(result), ["Refused: a person rejected this call, or its approval expired. It will not run. Do not call the tool again; tell the user it was refused. Arbiter: rejected by sdk-operator@example.com: the order was never paid"]);
    assert.equal(refunds.length, 0);
    assert.equal((await agent.actionByKey(`refund:${order}`)).status, "denied");
  });

  test("approved in the app but not in Arbiter: the tool does not run, and the model hears it awaits approval", async () => {
    const { tool: ledgerTool } = fresh();
    const order = fresh().key.split(":")[1];
    const { bot, refunds } = refundAgent(ledgerTool, { order, amount_cents: 100 }, { requireApproval: true });
    await agents.run(bot, `refund ${order}`);
    let result = await agents.run(bot, `refund ${order}`);
    result.state.approve(result.interruptions[0]);
    result = await agents.run(bot, result.state);
    assert.deepEqual(toolOutputs(result).map(pendingText), [true]);
    assert.equal(refunds.length, 0, "only Arbiter's approval runs it");
    assert.equal((await agent.actionByKey(`refund:${order}`)).status, "awaiting_approval");
  });

  test("a call a tool input guardrail rejects leaves nothing in Arbiter, and a worker with a lookup never runs it", async () => {
    const { tool: ledgerTool } = fresh();
    const order = fresh().key.split(":")[1];
    const guardrail = agents.defineToolInputGuardrail({
      name: "no refunds over 1.00",
      run: async ({ toolCall }) =>
        JSON.parse(toolCall.arguments).amount_cents > 100
          ? agents.ToolGuardrailFunctionOutputFactory.rejectContent("refunds over 1.00 need a person")
          : agents.ToolGuardrailFunctionOutputFactory.allow(),
    });
    // A short lease: an attempt begun for the rejected call would time out
    // at once, and the worker's lookup (which finds nothing) would retry it.
    const { bot, refunds } = refundAgent(ledgerTool, { order, amount_cents: 500 }, { timeoutMs: 1000 }, { inputGuardrails: [guardrail] });
    const result = await agents.run(bot, `refund ${order}`);
    assert.deepEqual(result.interruptions, []);
    assert.deepEqual(toolOutputs(result), ["refunds over 1.00 need a person"]);

    const worked = [];
    const stop = new AbortController();
    const w = new Worker(agent, { logger: memoryLogger(), pollMs: 50 })
      .handle(ledgerTool, async (attempt) => {
        worked.push(attempt.key);
        return { result: { refund_id: "re_worker" } };
      })
      .handleLookup(ledgerTool, async (q) => ({ answer: "not_happened", evidence: { searched: q.key } }));
    const running = w.run({ signal: stop.signal });
    await new Promise((r) => setTimeout(r, 3000)); // past the lease, several sweeps and polls
    stop.abort();
    await running.catch(() => undefined);
    assert.deepEqual(worked, [], "the worker ran nothing");
    assert.equal(refunds.length, 0, "the tool ran nothing");
    await assert.rejects(agent.actionByKey(`refund:${order}`), (err) => err.status === 404 && err.code === "not_found", "no action was recorded");
  });
});
