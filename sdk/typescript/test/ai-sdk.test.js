// The Vercel AI SDK adapter inside the real SDK (the versions package.json
// pins): generateText drives the tools as it does for a model, with the
// SDK's own MockLanguageModelV3 in place of one. Arbiter is real; an
// operator decides approvals with a key of their own.

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { key } from "@arbiter-ledger/arbiter";
import { arbiterApprovals, arbiterTool } from "@arbiter-ledger/arbiter/ai-sdk";
import { client, fresh, noServer } from "./helpers.js";

const { generateText, tool, ai } = await import("ai").then((m) => ({ ...m, ai: m }), () => ({}));
const { MockLanguageModelV3 } = ai ? await import("ai/test") : {};
const { z } = await import("zod").catch(() => ({}));
const missing = ai && z ? "" : "ai and zod are not installed (run-tests installs the pinned versions)";
if (missing && process.env.ARBITER_SDK_REQUIRE_SERVER) throw new Error(missing);

const agent = client("agent");
const operator = client("operator");
const admin = client("admin");

const usage = { inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: 1, text: 1, reasoning: 0 } };

/** A model that calls the refund tool with input until the prompt ends with a tool's answer, then says what it got. */
function modelCalling(input) {
  return new MockLanguageModelV3({
    doGenerate: async ({ prompt }) => {
      const last = prompt.at(-1);
      if (last.role === "tool") {
        return { content: [{ type: "text", text: JSON.stringify(last.content) }], finishReason: { unified: "stop", raw: "stop" }, usage, warnings: [] };
      }
      return {
        content: [{ type: "tool-call", toolCallId: `call-${Math.random().toString(36).slice(2, 8)}`, toolName: "refund", input: JSON.stringify(input) }],
        finishReason: { unified: "tool-calls", raw: "tool_calls" },
        usage,
        warnings: [],
      };
    },
  });
}

/** A refund tool guarded by Arbiter, and the refunds its provider made. */
function refundTool(ledgerTool, options = {}) {
  const refunds = [];
  const refund = tool({
    description: "Refund an order",
    inputSchema: z.object({ order: z.string(), amount_cents: z.number() }),
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
  return { tools: { refund }, refunds };
}

/** The tools' answers the model got, as the call's response messages carry them. */
function toolOutputs(result) {
  return result.response.messages
    .filter((m) => m.role === "tool")
    .flatMap((m) => m.content)
    .filter((p) => p.type === "tool-result")
    .map((p) => p.output);
}

const json = (value) => ({ type: "json", value });

/** Whether a tool output is the model's pending_approval message (sdk/vectors.json "model_messages"). */
const pendingText = (out) => /^Not done yet: this call is waiting for a person's approval\. Do not call the tool again/.test(typeof out === "string" ? out : String(out?.value ?? ""));

describe("Vercel AI SDK adapter", { skip: noServer || missing || false, concurrency: true }, () => {
  test("no approval needed: the tool runs once under its key, and the same call again is answered from the ledger", async () => {
    const { tool: ledgerTool } = fresh();
    const order = fresh().key.split(":")[1];
    const { tools, refunds } = refundTool(ledgerTool);
    const model = modelCalling({ order, amount_cents: 4200 });
    const first = await generateText({ model, tools, prompt: `refund ${order}` });
    assert.deepEqual(toolOutputs(first), [json({ refund_id: "re_1" })]);
    assert.deepEqual(refunds, [{ order, amount_cents: 4200, key: `refund:${order}`, attempt: 1 }]);
    const a = await agent.actionByKey(`refund:${order}`);
    assert.equal(a.status, "succeeded");
    assert.equal(a.attempt, 1, "one intent, the attempt execute ran");
    assert.equal(a.external_ref, "re_1");
    assert.deepEqual(a.params, { order, amount_cents: 4200 });

    const again = await generateText({ model, tools, prompt: `refund ${order} again` });
    assert.deepEqual(toolOutputs(again), [json({ refund_id: "re_1" })]);
    assert.equal(refunds.length, 1, "the replay ran nothing");
  });

  test("approved in Arbiter: the step ends with the SDK's approval request, and Arbiter's approval runs the tool once", async () => {
    const { tool: ledgerTool } = fresh();
    const order = fresh().key.split(":")[1];
    const { tools, refunds } = refundTool(ledgerTool, { requireApproval: (input) => input.amount_cents > 10_000 });
    const model = modelCalling({ order, amount_cents: 250_000 });
    const messages = [{ role: "user", content: `refund ${order}` }];
    // The call records its intent when the tool runs: held, the model hears it waits.
    const asked = await generateText({ model, tools, messages });
    assert.deepEqual(toolOutputs(asked).map(pendingText), [true], "the model hears the call waits for approval");
    assert.equal(refunds.length, 0);
    const held = await agent.actionByKey(`refund:${order}`);
    assert.equal(held.status, "awaiting_approval");
    // The same call again ends its step with the SDK's approval request.
    const first = await generateText({ model, tools, messages });
    const requests = first.content.filter((p) => p.type === "tool-approval-request");
    assert.equal(requests.length, 1, "the SDK asks for approval");

    // Nobody decided yet: nothing to answer.
    let answers = await arbiterApprovals(tools, first.content);
    assert.equal(answers.message, undefined);
    assert.equal(answers.undecided.length, 1);
    assert.equal(answers.undecided[0].decision.state, "pending");

    // The operator approves while the app waits for Arbiter.
    const waiting = arbiterApprovals(tools, first.content, { waitMs: 15_000, pollMs: 100 });
    await operator.decide(held.id, { decision: "approve", reason: "checked with the customer" });
    answers = await waiting;
    assert.deepEqual(answers.responses, [{ type: "tool-approval-response", approvalId: requests[0].approvalId, approved: true }]);
    assert.deepEqual(answers.undecided, []);

    messages.push(...first.response.messages, answers.message);
    const second = await generateText({ model, tools, messages });
    assert.deepEqual(toolOutputs(second), [json({ refund_id: "re_1" })]);
    assert.deepEqual(refunds, [{ order, amount_cents: 250_000, key: `refund:${order}`, attempt: 1 }]);
    const done = await agent.actionByKey(`refund:${order}`);
    assert.equal(done.status, "succeeded");
    assert.equal(done.approval.approvals[0].by.name, "sdk-operator@example.com");
  });

  test("rejected in Arbiter (a policy held it): the SDK refuses the call with who and why, and nothing runs", async () => {
    const { tool: ledgerTool } = fresh();
    const order = fresh().key.split(":")[1];
    await admin.createPolicy({ name: `refunds over 1000 (${ledgerTool})`, namespace: process.env.ARBITER_NAMESPACE, tools: [ledgerTool], condition: "params.amount_cents > 100000" });
    const { tools, refunds } = refundTool(ledgerTool);
    const model = modelCalling({ order, amount_cents: 250_000 });
    const messages = [{ role: "user", content: `refund ${order}` }];
    const asked = await generateText({ model, tools, messages });
    assert.deepEqual(toolOutputs(asked).map(pendingText), [true], "the policy's hold: the model hears the call waits for approval");
    const held = await agent.actionByKey(`refund:${order}`);
    assert.equal(held.status, "awaiting_approval");
    assert.equal(held.approval.policies.length, 1);
    const first = await generateText({ model, tools, messages });
    assert.equal(first.content.filter((p) => p.type === "tool-approval-request").length, 1, "the held call again is the SDK's approval request");

    await operator.decide(held.id, { decision: "reject", reason: "the order was never paid" });
    const answers = await arbiterApprovals(tools, first.content);
    assert.equal(answers.responses.length, 1);
    assert.equal(answers.responses[0].approved, false);
    assert.equal(answers.responses[0].reason, "Refused: a person rejected this call, or its approval expired. It will not run. Do not call the tool again; tell the user it was refused. Arbiter: rejected by sdk-operator@example.com: the order was never paid");

    messages.push(...first.response.messages, answers.message);
    const second = await generateText({ model, tools, messages });
    assert.deepEqual(toolOutputs(second), [{ type: "execution-denied", reason: "Refused: a person rejected this call, or its approval expired. It will not run. Do not call the tool again; tell the user it was refused. Arbiter: rejected by sdk-operator@example.com: the order was never paid" }]);
    assert.equal(refunds.length, 0);
    assert.equal((await agent.actionByKey(`refund:${order}`)).status, "denied");
  });

  test("denied by a limit: the model hears a limit refused it and which, and nothing runs", async () => {
    const { tool: ledgerTool } = fresh();
    const order = fresh().key.split(":")[1];
    const limit = await admin.createLimit({ name: `no refunds (${ledgerTool})`, namespace: process.env.ARBITER_NAMESPACE, tools: [ledgerTool], window: 60, max: 0, over: "deny" });
    const { tools, refunds } = refundTool(ledgerTool);
    const model = modelCalling({ order, amount_cents: 4200 });
    const messages = [{ role: "user", content: `refund ${order}` }];
    const text = `Refused: this call would go over a limit set on such actions (a budget or a rate), so it will not run. Do not call the tool again to get around it, not with other details either; tell the user a limit refused it and that a person can change the limit`;
    const first = await generateText({ model, tools, messages });
    const said = toolOutputs(first).map((o) => String(o?.value ?? o));
    assert.equal(said.length, 1);
    assert.ok(said[0].startsWith(text), said[0]);
    assert.match(said[0], new RegExp(`${JSON.stringify(limit.name).replace(/[()]/g, "\\$&")} \\(version 1\\) allows 0`), "names the limit");
    const a = await agent.actionByKey(`refund:${order}`);
    assert.equal(a.status, "denied");
    assert.equal(a.approval, null);
    // The same call again: no approval was ever asked, so no approval request; the model hears it again.
    const again = await generateText({ model, tools, messages });
    assert.equal(again.content.filter((p) => p.type === "tool-approval-request").length, 0);
    const saidAgain = toolOutputs(again).map((o) => String(o?.value ?? o));
    assert.equal(saidAgain.length, 1);
    assert.ok(saidAgain[0].startsWith(text), saidAgain[0]);
    assert.equal(refunds.length, 0);
    await admin.deleteLimit(limit.id);
  });

  test("approved in the app but not in Arbiter: the tool does not run, and the model hears it awaits approval", async () => {
    const { tool: ledgerTool } = fresh();
    const order = fresh().key.split(":")[1];
    const { tools, refunds } = refundTool(ledgerTool, { requireApproval: true });
    const model = modelCalling({ order, amount_cents: 100 });
    const messages = [{ role: "user", content: `refund ${order}` }];
    await generateText({ model, tools, messages });
    const first = await generateText({ model, tools, messages });
    const [request] = first.content.filter((p) => p.type === "tool-approval-request");
    messages.push(...first.response.messages, { role: "tool", content: [{ type: "tool-approval-response", approvalId: request.approvalId, approved: true }] });
    const second = await generateText({ model, tools, messages });
    assert.deepEqual(toolOutputs(second).map(pendingText), [true]);
    assert.equal(refunds.length, 0, "only Arbiter's approval runs it");
    assert.equal((await agent.actionByKey(`refund:${order}`)).status, "awaiting_approval");
  });

  test("a timeout is told to the model in the shared words of an unknown outcome, and the same call again in those of a held one", async () => {
    const { tool: ledgerTool } = fresh();
    const order = fresh().key.split(":")[1];
    const { tools } = refundTool(ledgerTool, {
      execute: async () => {
        throw new DOMException("The operation was aborted due to timeout", "TimeoutError");
      },
    });
    const model = modelCalling({ order, amount_cents: 700 });
    const first = await generateText({ model, tools, prompt: `refund ${order}` });
    const [told] = toolOutputs(first);
    assert.equal(told.type, "text", JSON.stringify(told));
    assert.match(told.value, /^Unknown: the call was made but its outcome could not be seen \(it may have taken effect\)\. A person will check it\. Do not call the tool again/);
    assert.match(told.value, /The operation was aborted due to timeout/);
    const a = await agent.actionByKey(`refund:${order}`);
    assert.equal(a.status, "timed_out", "recorded as an unknown outcome, not failed");

    const again = await generateText({ model, tools, prompt: `refund ${order} again` });
    const [held] = toolOutputs(again);
    assert.match(held.value, /^Not done: an earlier attempt's outcome is unknown and a person is checking it\. Do not call the tool again/);
    assert.ok(held.value.includes(agent.actionUrl(a.id)), held.value);
  });

  test("needsApproval only reads: asked for a call that then never runs, it records nothing", async () => {
    const { tool: ledgerTool } = fresh();
    const order = fresh().key.split(":")[1];
    const { tools, refunds } = refundTool(ledgerTool, { timeoutMs: 1000 });
    // The SDK asks needsApproval before it runs a call, and may then not
    // run it (the app refuses it, the step is aborted).
    assert.equal(await tools.refund.needsApproval({ order, amount_cents: 500 }, { toolCallId: "call-1", messages: [] }), false);
    await assert.rejects(agent.actionByKey(`refund:${order}`), (err) => err.status === 404, "no action was recorded");
    assert.equal(refunds.length, 0);
  });
});
