// openai-agents-agent: an OpenAI Agents JS agent whose refund tool is
// guarded by Arbiter. The model is scripted through the framework's Model
// interface (no API key): it calls `refund` with the order and amount
// given, then reports what the tool answered. Refunds over 100.00 wait for
// a person's approval in Arbiter: the run is interrupted, the program
// waits for the decision on the dashboard (or an operator key), applies it
// to the run state, and the run goes on.
//
//   ARBITER_URL=http://127.0.0.1:8080 ARBITER_API_KEY=ak_… npm run example:openai-agents -- --order order-9200 --amount 25000

import { parseArgs } from "node:util";
import { Agent, Usage, run, setTracingDisabled, tool, type Model, type ModelRequest, type ModelResponse } from "@openai/agents";
import { z } from "zod";
import { Client, key } from "@arbiter-ledger/arbiter";
import { applyArbiterApprovals, arbiterTool } from "@arbiter-ledger/arbiter/openai-agents";

const { values: flags } = parseArgs({
  options: {
    order: { type: "string", default: "order-8812" },
    amount: { type: "string", default: "4200" },
    wait: { type: "string", default: "600" },
  },
});
const apiKey = process.env.ARBITER_API_KEY;
if (!apiKey) {
  console.error("set ARBITER_API_KEY to an agent key: arbiter keys create --namespace shop --name agents-refund --role agent");
  process.exit(1);
}
setTracingDisabled(true);
const arbiter = new Client(process.env.ARBITER_URL || "http://127.0.0.1:8080", apiKey);

// A fake payment provider that deduplicates by idempotency key.
const provider = new Map<string, string>();

type Refund = { order: string; amountCents: number };

// The whole integration: the framework's tool(), with execute, needsApproval and errorFunction from Arbiter.
const refund = tool({
  name: "refund",
  description: "Refund an order",
  parameters: z.object({ order: z.string(), amountCents: z.number().int() }),
  ...arbiterTool(arbiter, {
    tool: "payments.refund",
    key: (input: Refund) => key("refund", input.order),
    effect: "keyed",
    requireApproval: (input) => input.amountCents > 10_000,
    execute: async (input, attempt) => {
      // The action's key is the provider's idempotency key.
      if (!provider.has(attempt.key)) provider.set(attempt.key, `re_${provider.size + 1}`);
      return { refundId: provider.get(attempt.key)!, amountCents: input.amountCents };
    },
    externalRef: (out) => out.refundId, // saved on the action
  }),
});

const input: Refund = { order: flags.order!, amountCents: Number(flags.amount) };
class ScriptedModel implements Model {
  async getResponse(request: ModelRequest): Promise<ModelResponse> {
    const items = Array.isArray(request.input) ? request.input : [];
    const answer = items.filter((i) => i.type === "function_call_result").at(-1);
    if (answer) {
      const text = `the refund tool said: ${JSON.stringify(answer.output)}`;
      return { usage: new Usage(), output: [{ type: "message", role: "assistant", status: "completed", content: [{ type: "output_text", text }] }] };
    }
    return { usage: new Usage(), output: [{ type: "function_call", callId: "call-1", name: "refund", arguments: JSON.stringify(input), status: "completed" }] };
  }
  // eslint-disable-next-line require-yield
  async *getStreamedResponse(): AsyncIterable<never> {
    throw new Error("this example does not stream");
  }
}

const agent = new Agent({ name: "refunds", instructions: "Refund what the user asks.", model: new ScriptedModel(), tools: [refund] });
let result = await run(agent, `Refund ${input.amountCents} cents on ${input.order}.`);
if (result.interruptions.length === 0 && ["awaiting_approval", "approved", "denied"].includes((await arbiter.actionByKey(key("refund", input.order)).catch(() => null))?.status ?? "")) {
  // The tool recorded its intent and Arbiter held it for approval: the
  // model heard it waits. Asked again, the call interrupts the run.
  console.log(`model: ${result.finalOutput}`);
  result = await run(agent, `Refund ${input.amountCents} cents on ${input.order}.`);
}
if (result.interruptions.length > 0) {
  const held = await arbiter.actionByKey(key("refund", input.order));
  console.log(`awaiting approval in Arbiter: ${arbiter.actionUrl(held.id)}`);
  const { approved, rejected, undecided } = await applyArbiterApprovals(result, { waitMs: Number(flags.wait) * 1000 });
  if (undecided.length > 0) {
    console.log("nobody decided in time; run again later to pick the decision up");
    process.exit(0);
  }
  if (approved.length > 0) console.log("approved in Arbiter");
  if (rejected.length > 0) console.log("refused in Arbiter");
  result = await run(agent, result.state);
}
console.log(`model: ${result.finalOutput}`);
const a = await arbiter.actionByKey(key("refund", input.order));
console.log(`the action is ${a.status}; the provider made ${provider.size} refund(s)`);
