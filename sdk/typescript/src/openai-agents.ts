/**
 * Arbiter for OpenAI Agents JS (`@openai/agents`, tested with the versions
 * the README names): a tool's execute guarded by the ledger, and its
 * needsApproval answered from Arbiter's approval. Nothing of the framework
 * is imported: spread what arbiterTool returns into its own tool().
 *
 *   const refund = tool({
 *     name: "refund",
 *     description: "Refund an order",
 *     parameters: z.object({ order: z.string(), amountCents: z.number() }),
 *     ...arbiterTool(arbiter, {
 *       tool: "payments.refund",
 *       key: (input: Refund) => key("refund", input.order),
 *       effect: "keyed",
 *       requireApproval: true,
 *       execute: (input, attempt, signal) => payments.refund(input, { idempotencyKey: attempt.key, signal }),
 *     }),
 *   });
 *
 * A call whose action waits for people's approval in Arbiter interrupts
 * the run (result.interruptions); applyArbiterApprovals() approves or
 * rejects each interruption on the run state as Arbiter decided, and
 * run(agent, result.state) goes on: approved runs the tool, rejected (or
 * expired) gives the model who refused it and why.
 */

import type { Client } from "./client.js";
import { carrying, decisions, modelAnswer, toolGuardOf, ToolGuard, type ApprovalState, type InputOf, type ToolGuardOptions } from "./tools.js";

export { ToolGuard, modelAnswer, type ApprovalState, type InputOf, type ToolGuardOptions } from "./tools.js";
export { MODEL_MESSAGES, modelMessage, type ModelMessageKind } from "./messages.js";

/** The part of an OpenAI Agents function tool that Arbiter supplies. */
export interface ArbiterAgentsTool<I, O> {
  /** Records the intent and runs the effect on proceed; an intent held for approval answers the model's pending_approval message. */
  execute: (input: I, context?: unknown, details?: { signal?: AbortSignal }) => Promise<O | string>;
  /** Reads Arbiter only (the framework asks it before tool input guardrails): true while or once the action's approval is decided. */
  needsApproval: (runContext: unknown, input: I, callId?: string) => Promise<boolean>;
  /** What the model hears when the call did not complete: sdk/vectors.json "model_messages" for Arbiter's answers; the framework's default for other errors. */
  errorFunction: (context: unknown, error: unknown) => string;
}

/** The framework's own answer to a failed tool call, for errors that are not Arbiter's. */
const DEFAULT_TOOL_ERROR = "An error occurred while running the tool. Please try again.";

/**
 * The execute, needsApproval and errorFunction of an OpenAI Agents tool
 * guarded by Arbiter; execute and needsApproval behave as the AI SDK
 * adapter's (see ai-sdk.ts): needsApproval only reads, and the intent is
 * recorded by execute, which the framework calls after the tool's input
 * guardrails, so a call a guardrail rejects leaves nothing in Arbiter.
 * The errorFunction tells the model why the call did not run (held for a
 * person, awaiting approval, denied) in the words of sdk/vectors.json
 * "model_messages", where the framework's default would invite it to try
 * again.
 */
export function arbiterTool<S, O>(client: Client, options: ToolGuardOptions<InputOf<S>, O> & { schema: S }): ArbiterAgentsTool<InputOf<S>, O> & { parameters: S };
export function arbiterTool<I, O>(client: Client, options: ToolGuardOptions<I, O>): ArbiterAgentsTool<I, O>;
/**
 * With `schema` (the tool's zod schema), the input's type is the schema's
 * and the result carries it as parameters, so tool({ name, description,
 * ...arbiterTool(arbiter, { schema, … }) }) needs it once.
 */
export function arbiterTool<I, O>(client: Client, options: ToolGuardOptions<I, O> & { schema?: unknown }): ArbiterAgentsTool<I, O> & { parameters?: unknown } {
  const { schema, ...rest } = options;
  const g = new ToolGuard<I, O>(client, rest);
  const t: ArbiterAgentsTool<I, O> & { parameters?: unknown } = {
    execute: (input, _context, details) => g.execute(input, details?.signal),
    needsApproval: carrying((_runContext: unknown, input: I) => g.needsApproval(input), g),
    errorFunction: (_context, error) => modelAnswer(error, client) ?? DEFAULT_TOOL_ERROR,
  };
  if (schema !== undefined) t.parameters = schema;
  return t;
}

/** The parts of a run's approval item and result this module reads. */
export interface ApprovalItem {
  name?: string | undefined;
  arguments?: string | undefined;
  agent: { tools: readonly unknown[] };
}
export interface InterruptedRun<T extends ApprovalItem> {
  interruptions: readonly T[];
  state: {
    approve(item: T): void;
    reject(item: T, options?: { message?: string }): void;
  };
}

/**
 * Approves or rejects, on result.state, each interruption of tools that
 * arbiterTool built, as Arbiter decided: approved → state.approve;
 * rejected or expired → state.reject with who and why as the message the
 * model sees. Waits up to waitMs (default 0) for undecided ones, polling.
 * Then run(agent, result.state) goes on; with undecided ones left, the
 * run interrupts again on them.
 */
export async function applyArbiterApprovals<T extends ApprovalItem>(
  result: InterruptedRun<T>,
  options: { waitMs?: number; pollMs?: number; signal?: AbortSignal } = {},
): Promise<{ approved: T[]; rejected: T[]; undecided: { item: T; decision: ApprovalState }[] }> {
  const calls = [];
  for (const item of result.interruptions) {
    const t = item.agent.tools.find((t) => (t as { name?: string }).name === item.name) as { needsApproval?: unknown } | undefined;
    const guard = toolGuardOf(t?.needsApproval);
    if (!guard) continue;
    let input: unknown;
    try {
      input = JSON.parse(item.arguments ?? "{}");
    } catch {
      continue; // the framework refuses input it cannot parse itself
    }
    calls.push({ item, guard, input });
  }
  const { decided, undecided } = await decisions(calls, options);
  const approved: T[] = [];
  const rejected: T[] = [];
  for (const { item, decision } of decided) {
    if (decision.state === "approved") {
      result.state.approve(item);
      approved.push(item);
    } else if (decision.state === "denied") {
      result.state.reject(item, { message: decision.reason });
      rejected.push(item);
    }
  }
  return { approved, rejected, undecided };
}
