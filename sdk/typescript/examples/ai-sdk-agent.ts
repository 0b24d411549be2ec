// ai-sdk-agent: a Vercel AI SDK agent whose refund tool is guarded by
// Arbiter. The model is the SDK's MockLanguageModelV3 (no API key): it
// calls `refund` with the order and amount given, then reports what the
// tool answered. Refunds over 100.00 wait for a person's approval in
// Arbiter: the SDK's approval request carries it, the program waits for
// the decision on the dashboard (or an operator key), and the tool runs
// only once approved.
//
//   ARBITER_URL=http://127.0.0.1:8080 ARBITER_API_KEY=ak_… npm run example:ai-sdk -- --order order-9100 --amount 25000

import { parseArgs } from "node:util";
import { generateText, stepCountIs, tool, type ModelMessage } from "ai";
import { MockLanguageModelV3 } from "ai/test";
import { z } from "zod";
import { Client, key } from "@arbiter-ledger/arbiter";
import { arbiterApprovals, arbiterTool } from "@arbiter-ledger/arbiter/ai-sdk";

const { values: flags } = parseArgs({
  options: {
    order: { type: "string", default: "order-8812" },
    amount: { type: "string", default: "4200" },
    wait: { type: "string", default: "600" },
  },
});
const apiKey = process.env.ARBITER_API_KEY;
if (!apiKey) {
  console.error("set ARBITER_API_KEY to an agent key: arbiter keys create --namespace shop --name ai-sdk-agent --role agent");
  process.exit(1);
}
const arbiter = new Client(process.env.ARBITER_URL || "http://127.0.0.1:8080", apiKey);

// A fake payment provider that deduplicates by idempotency key.
const provider = new Map<string, string>();

type Refund = { order: string; amountCents: number };

// The whole integration: the SDK's tool(), with execute and needsApproval from Arbiter.
const refund = tool({
  description: "Refund an order",
  inputSchema: z.object({ order: z.string(), amountCents: z.number().int() }),
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
const tools = { refund };

const input: Refund = { order: flags.order!, amountCents: Number(flags.amount) };
const usage = { inputTokens: { total: 0, noCache: 0, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: 0, text: 0, reasoning: 0 } };
const model = new MockLanguageModelV3({
  doGenerate: async ({ prompt }) => {
    const last = prompt.at(-1)!;
    if (last.role === "tool") {
      return { content: [{ type: "text", text: `the refund tool said: ${JSON.stringify(last.content.map((p) => ("output" in p ? p.output : p)))}` }], finishReason: { unified: "stop", raw: "stop" }, usage, warnings: [] };
    }
    return { content: [{ type: "tool-call", toolCallId: "call-1", toolName: "refund", input: JSON.stringify(input) }], finishReason: { unified: "tool-calls", raw: "tool_calls" }, usage, warnings: [] };
  },
});

const messages: ModelMessage[] = [{ role: "user", content: `Refund ${input.amountCents} cents on ${input.order}.` }];
let result = await generateText({ model, tools, messages, stopWhen: stepCountIs(5) });
if (["awaiting_approval", "approved", "denied"].includes((await arbiter.actionByKey(key("refund", input.order)).catch(() => null))?.status ?? "")) {
  // The tool recorded its intent and Arbiter held it for approval: the
  // model heard it waits. Asked again, the call ends its step with the
  // SDK's approval request.
  console.log(`model: ${result.text}`);
  result = await generateText({ model, tools, messages, stopWhen: stepCountIs(5) });
}
const requests = result.content.filter((p) => p.type === "tool-approval-request");
if (requests.length > 0) {
  const held = await arbiter.actionByKey(key("refund", input.order));
  console.log(`awaiting approval in Arbiter: ${arbiter.actionUrl(held.id)}`);
  const { message, undecided } = await arbiterApprovals(tools, result.content, { waitMs: Number(flags.wait) * 1000 });
  if (!message || undecided.length > 0) {
    console.log("nobody decided in time; run again later to pick the decision up");
    process.exit(0);
  }
  for (const r of message.content) console.log(r.approved ? "approved in Arbiter" : `refused: ${r.reason}`);
  messages.push(...result.response.messages, message);
  result = await generateText({ model, tools, messages, stopWhen: stepCountIs(5) });
}
console.log(`model: ${result.text}`);
const a = await arbiter.actionByKey(key("refund", input.order));
console.log(`the action is ${a.status}; the provider made ${provider.size} refund(s)`);
