/**
 * Arbiter for the Vercel AI SDK (`ai`, tested with the versions the README
 * names): a tool's execute guarded by the ledger, and its needsApproval
 * answered from Arbiter's approval. Nothing of `ai` is imported: spread
 * what arbiterTool returns into the SDK's own tool().
 *
 *   const refund = tool({
 *     description: "Refund an order",
 *     inputSchema: z.object({ order: z.string(), amountCents: z.number() }),
 *     ...arbiterTool(arbiter, {
 *       tool: "payments.refund",
 *       key: (input: Refund) => key("refund", input.order),
 *       effect: "keyed",
 *       requireApproval: (input) => input.amountCents > 10_000,
 *       execute: (input, attempt, signal) => payments.refund(input, { idempotencyKey: attempt.key, signal }),
 *     }),
 *   });
 *
 * A call whose action waits for people's approval in Arbiter ends the
 * step with the SDK's tool-approval-request; arbiterApprovals() turns
 * Arbiter's decisions into the tool-approval-responses of the next call:
 * approved runs the tool, rejected (or expired) refuses it with who and why.
 */

import type { Client } from "./client.js";
import { carrying, decisions, modelAnswer, toolGuardOf, ToolGuard, type ApprovalState, type InputOf, type ToolGuardOptions } from "./tools.js";

export { ToolGuard, modelAnswer, type ApprovalState, type InputOf, type ToolGuardOptions } from "./tools.js";
export { MODEL_MESSAGES, modelMessage, type ModelMessageKind } from "./messages.js";

/** The part of an AI SDK tool that Arbiter supplies. */
export interface ArbiterAiTool<I, O> {
  execute: (input: I, options: { abortSignal?: AbortSignal }) => Promise<O | string>;
  needsApproval: (input: I, options?: { toolCallId?: string }) => Promise<boolean>;
}

/**
 * The execute and needsApproval of an AI SDK tool guarded by Arbiter.
 * needsApproval only reads: it is true while, or once, the action's
 * approval is decided in Arbiter (the SDK may ask it for a call it then
 * never executes, e.g. one the app refuses). execute records the intent
 * and runs options.execute only when the ledger answers proceed; an
 * intent held for approval (requireApproval or a policy) answers the
 * model's pending_approval message, and the same call again ends its step
 * with a tool-approval-request. Every other answer the ledger gives
 * (denied, held, in progress, outcome unknown, finished, key reused)
 * and an error whose outcome is unknown reach the model as the shared
 * texts of sdk/vectors.json "model_messages", the same words the OpenAI
 * Agents adapter uses, none inviting another call; other errors are
 * thrown (the SDK shows them to the model as the tool's error).
 */
export function arbiterTool<S, O>(client: Client, options: ToolGuardOptions<InputOf<S>, O> & { schema: S }): ArbiterAiTool<InputOf<S>, O> & { inputSchema: S };
export function arbiterTool<I, O>(client: Client, options: ToolGuardOptions<I, O>): ArbiterAiTool<I, O>;
/**
 * With `schema` (the tool's zod schema, or any Standard Schema), the
 * input's type is the schema's and the result carries it as inputSchema,
 * so tool({ description, ...arbiterTool(arbiter, { schema, … }) }) needs
 * it once.
 */
export function arbiterTool<I, O>(client: Client, options: ToolGuardOptions<I, O> & { schema?: unknown }): ArbiterAiTool<I, O> & { inputSchema?: unknown } {
  const { schema, ...rest } = options;
  const g = new ToolGuard<I, O>(client, rest);
  const t: ArbiterAiTool<I, O> & { inputSchema?: unknown } = {
    execute: async (input, opts) => {
      try {
        return await g.execute(input, opts?.abortSignal);
      } catch (err) {
        const text = modelAnswer(err, client);
        if (text === undefined) throw err;
        return text;
      }
    },
    needsApproval: carrying((input: I) => g.needsApproval(input), g),
  };
  if (schema !== undefined) t.inputSchema = schema;
  return t;
}

/** The SDK's answer to one tool-approval-request. */
export interface ToolApprovalResponse {
  type: "tool-approval-response";
  approvalId: string;
  approved: boolean;
  reason?: string;
}

/** A tool-approval-request as generateText's and streamText's content carry it. */
export interface ToolApprovalRequest {
  type: "tool-approval-request";
  approvalId: string;
  toolCall: { toolCallId: string; toolName: string; input: unknown };
}

/** What Arbiter decided about the approval requests of a step. */
export interface ArbiterApprovals {
  /** The responses to the decided requests, for the next call's messages. */
  responses: ToolApprovalResponse[];
  /** The same as one tool message, or undefined when nothing was decided. */
  message: { role: "tool"; content: ToolApprovalResponse[] } | undefined;
  /** Requests Arbiter has not decided yet (still awaiting approval): ask again later. */
  undecided: { request: ToolApprovalRequest; decision: ApprovalState }[];
}

/**
 * Answers the tool-approval-requests in `content` (result.content of
 * generateText, or the awaited content of streamText) from Arbiter: an
 * approved action is approved, a rejected or expired one refused with
 * who and why. Waits up to waitMs (default 0) for undecided ones, polling.
 * Requests for tools that arbiterTool did not build are left alone.
 *
 *   messages.push(...result.response.messages);
 *   const { message, undecided } = await arbiterApprovals(tools, result.content, { waitMs: 60_000 });
 *   if (undecided.length === 0) result = await generateText({ model, tools, messages: [...messages, message!] });
 */
export async function arbiterApprovals(
  tools: Record<string, { needsApproval?: unknown }>,
  content: readonly { type: string }[],
  options: { waitMs?: number; pollMs?: number; signal?: AbortSignal } = {},
): Promise<ArbiterApprovals> {
  const calls = [];
  for (const part of content) {
    if (part.type !== "tool-approval-request") continue;
    const request = part as ToolApprovalRequest;
    const guard = toolGuardOf(tools[request.toolCall.toolName]?.needsApproval);
    if (guard) calls.push({ item: request, guard, input: request.toolCall.input });
  }
  const { decided, undecided } = await decisions(calls, options);
  const responses = decided.map(({ item, decision }): ToolApprovalResponse => {
    const r: ToolApprovalResponse = { type: "tool-approval-response", approvalId: item.approvalId, approved: decision.state === "approved" };
    if (decision.state === "denied") r.reason = decision.reason;
    return r;
  });
  return {
    responses,
    message: responses.length ? { role: "tool", content: responses } : undefined,
    undecided: undecided.map(({ item, decision }) => ({ request: item, decision })),
  };
}
