// An agent framework's tool, guarded by Arbiter: the framework decides
// when the model's tool call runs, Arbiter decides whether it may. The
// adapters for the Vercel AI SDK (ai-sdk.ts) and OpenAI Agents
// (openai-agents.ts) are thin layers over this file, which knows no
// framework: they hand the framework an `execute` and a `needsApproval`
// built here, and read Arbiter's approval back into the framework's own
// approve and reject.

import type { Client } from "./client.js";
import {
  ArbiterError,
  CompensationRequestedError,
  DeniedError,
  LimitExceededError,
  FinishedError,
  FrozenError,
  HeldError,
  InProgressError,
  OutcomeUnknownError,
  PendingApprovalError,
  ReportError,
  UnreachableError,
  isCode,
  isUnavailable,
} from "./errors.js";
import type { Classifier } from "./classify.js";
import { deniedError, settle, type Attempt, type GuardSpec } from "./guard.js";
import { modelMessage } from "./messages.js";
import type { Action, Effect } from "./types.js";

/** Describes the side effect a framework tool performs and how Arbiter guards it. */
export interface ToolGuardOptions<I, O> {
  /** The ledger's name for the operation, e.g. "payments.refund". */
  tool: string;
  /** The action's key from the model's input: derive it from the business identity with key(), never from the call id. */
  key: (input: I) => string;
  /** How safe a repeat is (default unkeyed). */
  effect?: Effect;
  /** The params recorded (with the tool, the action's fingerprint). Default: the input itself. */
  params?: (input: I) => Record<string, unknown>;
  /** Holds the first intent for a person's approval (a policy may hold it too). */
  requireApproval?: boolean | ((input: I) => boolean);
  /** A business reference shown to operators. */
  reference?: (input: I) => string | undefined;
  /** The lease of an attempt (default 300 000 ms); see GuardSpec.timeoutMs. */
  timeoutMs?: number;
  /** How long the downstream honours the key; see GuardSpec.keyTtlMs. */
  keyTtlMs?: number;
  agent?: string;
  runId?: string;
  /** How long execute waits for another attempt in progress (default 0). */
  waitMs?: number;
  /**
   * How long execute waits, on the server (Prefer: wait), for people to
   * decide an intent held for approval (default 0: it answers the model
   * at once that the call waits for approval).
   */
  approvalWaitMs?: number;
  /**
   * How long execute waits out a freeze that holds the tool (a retry or an
   * approved call answered frozen) before it throws FrozenError (default 0);
   * see GuardSpec.frozenWaitMs.
   */
  frozenWaitMs?: number;
  /** HTTP statuses of the downstream that prove the effect did not happen: see GuardSpec.notDoneStatuses. */
  notDoneStatuses?: number[];
  /** Replaces the rule for what execute threw: see GuardSpec.classify. */
  classify?: Classifier;
  /** The effect's id downstream, from what execute returned: saved on the action. */
  externalRef?: (output: O) => string | undefined;
  /**
   * Performs the effect, once the ledger said proceed. Pass attempt.key to
   * the downstream as its idempotency key. Its errors mean what a
   * GuardFunc's do (retriable(), unknown()). What it returns is saved as
   * the action's result (JSON, at most 64 KiB) and given to the model; a
   * replay gives the model the saved result without running it.
   */
  execute: (input: I, attempt: Attempt, signal: AbortSignal) => Promise<O> | O;
}

/**
 * The input a tool's schema describes, for arbiterTool's `schema` option:
 * a Standard Schema's output (zod 4, valibot, arktype), zod 3's _output,
 * or the AI SDK's jsonSchema<T>()/Schema<T>; unknown for anything else.
 */
export type InputOf<S> = S extends { readonly "~standard": { readonly types?: infer T } }
  ? NonNullable<T> extends { readonly output: infer Out }
    ? Out
    : unknown
  : S extends { readonly _output: infer Out }
    ? Out
    : S extends { readonly _type: infer Out }
      ? Out
      : unknown;

/** What Arbiter decided about the approval of the action a tool call would perform. */
export type ApprovalState =
  | { state: "approved"; action: Action }
  | { state: "denied"; reason: string; action: Action }
  | { state: "pending"; action: Action | null; url: string };

/** The property under which an adapter's needsApproval carries its ToolGuard, for the approval helpers. */
export const TOOL_GUARD: unique symbol = Symbol.for("@arbiter-ledger/arbiter.toolGuard");

/** A framework-neutral guarded tool: see ToolGuardOptions. */
export class ToolGuard<I, O> {
  readonly client: Client;
  readonly options: ToolGuardOptions<I, O>;

  constructor(client: Client, options: ToolGuardOptions<I, O>) {
    this.client = client;
    this.options = options;
  }

  /** The guard spec for one tool call. */
  spec(input: I): GuardSpec {
    const o = this.options;
    const spec: GuardSpec = {
      key: o.key(input),
      tool: o.tool,
      params: o.params ? o.params(input) : paramsOf(input),
    };
    if (o.effect) spec.effect = o.effect;
    if (typeof o.requireApproval === "function" ? o.requireApproval(input) : o.requireApproval) spec.requireApproval = true;
    const ref = o.reference?.(input);
    if (ref) spec.reference = ref;
    if (o.timeoutMs) spec.timeoutMs = o.timeoutMs;
    if (o.keyTtlMs) spec.keyTtlMs = o.keyTtlMs;
    if (o.agent) spec.agent = o.agent;
    if (o.runId) spec.runId = o.runId;
    if (o.waitMs) spec.waitMs = o.waitMs;
    if (o.approvalWaitMs) spec.approvalWaitMs = o.approvalWaitMs;
    if (o.frozenWaitMs) spec.frozenWaitMs = o.frozenWaitMs;
    if (o.notDoneStatuses) spec.notDoneStatuses = o.notDoneStatuses;
    if (o.classify) spec.classify = o.classify;
    return spec;
  }

  /**
   * Whether the framework should ask for approval before it runs the call:
   * true while the action awaits people's approval in Arbiter, and once
   * Arbiter approved or denied it (the framework's approval then carries
   * Arbiter's answer: see decision()), except a denial by a limit, which
   * asked nobody's approval: execute tells the model. It only reads: a
   * framework asks it before its own checks (OpenAI Agents: before tool input guardrails),
   * for calls it may then drop, so the intent is recorded by execute
   * alone, when the tool really runs. A key the ledger has not seen is
   * false: execute records the intent, and an intent held for approval
   * answers the model that it waits (see execute). It never throws: when
   * Arbiter cannot be asked it answers false, and execute fails closed.
   */
  async needsApproval(input: I, signal?: AbortSignal): Promise<boolean> {
    try {
      const a = await this.#action(this.spec(input).key, signal);
      // A limit's denial asked nobody's approval: execute answers it (DeniedError).
      return a !== null && (a.status === "awaiting_approval" || a.status === "approved" || (a.status === "denied" && a.approval !== null));
    } catch {
      return false;
    }
  }

  /**
   * Runs the tool call through the guard: the intent recorded now, the
   * effect only when the ledger answers proceed, its result saved; a
   * replay returns the saved result. An intent held for approval waits up
   * to approvalWaitMs on the server (Prefer: wait) and runs once approved;
   * still undecided, it returns the model's pending_approval message
   * (sdk/vectors.json "model_messages") as the tool's output, and the
   * next call of the same key interrupts for approval (needsApproval).
   * Every other answer throws the guard's error (HeldError, DeniedError,
   * KeyReusedError, UnreachableError, …), which the framework hands to
   * the model (see modelAnswer). Compensations are the Worker's: a
   * compensate answer throws CompensationRequestedError and releases the
   * lease.
   */
  async execute(input: I, signal?: AbortSignal): Promise<O | string> {
    const spec = this.spec(input);
    let output: O | undefined;
    let ran = false;
    const s = await settle(
      this.client,
      spec,
      async (attempt, sig) => {
        output = await this.options.execute(input, attempt, sig);
        ran = true;
        const ref = output === undefined ? undefined : this.options.externalRef?.(output);
        return ref ? { result: output, externalRef: ref } : { result: output };
      },
      signal,
    );
    if (s.error instanceof PendingApprovalError) return modelAnswer(s.error, this.client)!;
    if (s.error !== undefined) throw s.error;
    return ran ? (output as O) : (s.outcome!.result as O);
  }

  /** What Arbiter decided about the approval of the call's action. Never writes. */
  async decision(input: I, signal?: AbortSignal): Promise<ApprovalState> {
    const a = await this.#action(this.spec(input).key, signal);
    if (!a || a.status === "awaiting_approval") {
      return { state: "pending", action: a, url: a ? this.client.actionUrl(a.id) : "" };
    }
    if (a.status === "denied") {
      const url = this.client.actionUrl(a.id);
      if (a.approval === null) {
        return { state: "denied", reason: modelAnswer(deniedError(a, a.key, url), this.client)!, action: a };
      }
      const rej = a.approval.rejection;
      const reason = rej
        ? modelMessage("denied", `Arbiter: rejected by ${rej.by.name}${rej.reason ? `: ${rej.reason}` : ""}`, url)
        : modelMessage("denied", "Arbiter: the approval expired before anyone approved it", url);
      return { state: "denied", reason, action: a };
    }
    // Approved, or approved and run since: running it again is the
    // guard's to answer (proceed, replay, in_progress).
    return { state: "approved", action: a };
  }

  /** The action for key, or null when the ledger has none. */
  async #action(key: string, signal?: AbortSignal): Promise<Action | null> {
    try {
      return await this.client.actionByKey(key, { signal });
    } catch (err) {
      if (isCode(err, "not_found")) return null;
      throw err;
    }
  }
}

/** The ToolGuard an adapter's needsApproval carries, if it is one. */
export function toolGuardOf(needsApproval: unknown): ToolGuard<unknown, unknown> | undefined {
  if (typeof needsApproval !== "function") return undefined;
  const g = (needsApproval as unknown as Record<symbol, unknown>)[TOOL_GUARD];
  return g instanceof ToolGuard ? g : undefined;
}

/** Marks fn as the needsApproval of g. */
export function carrying<F extends object>(fn: F, g: ToolGuard<any, any>): F {
  Object.defineProperty(fn, TOOL_GUARD, { value: g });
  return fn;
}

/** The input as params: the object itself, anything else under "input". */
function paramsOf(input: unknown): Record<string, unknown> {
  return input !== null && typeof input === "object" && !Array.isArray(input) ? (input as Record<string, unknown>) : { input };
}

/**
 * Asks Arbiter, until every call is decided or waitMs passed (polling
 * every pollMs), what it decided about each; resolves with the decided
 * ones and the rest.
 */
export async function decisions<T>(
  calls: { item: T; guard: ToolGuard<unknown, unknown>; input: unknown }[],
  options: { waitMs?: number; pollMs?: number; signal?: AbortSignal } = {},
): Promise<{ decided: { item: T; decision: ApprovalState }[]; undecided: { item: T; decision: ApprovalState }[] }> {
  const deadline = Date.now() + (options.waitMs ?? 0);
  const decided: { item: T; decision: ApprovalState }[] = [];
  let todo = calls;
  for (;;) {
    const rest: typeof calls = [];
    const undecided: { item: T; decision: ApprovalState }[] = [];
    for (const c of todo) {
      let d: ApprovalState;
      try {
        d = await c.guard.decision(c.input, options.signal);
      } catch (err) {
        if (!isUnavailable(err)) throw err;
        d = { state: "pending", action: null, url: "" };
      }
      if (d.state === "pending") {
        rest.push(c);
        undecided.push({ item: c.item, decision: d });
      } else decided.push({ item: c.item, decision: d });
    }
    if (rest.length === 0 || Date.now() >= deadline) return { decided, undecided };
    todo = rest;
    await new Promise((r) => setTimeout(r, Math.min(options.pollMs ?? 1000, Math.max(deadline - Date.now(), 0))));
    options.signal?.throwIfAborted();
  }
}

/** The guard's answer in err or its causes (a framework may wrap it). */
function answerIn(err: unknown): Error | undefined {
  const answers = [ArbiterError, CompensationRequestedError, DeniedError, FinishedError, FrozenError, HeldError, InProgressError, OutcomeUnknownError, PendingApprovalError, ReportError, UnreachableError];
  for (let e = err, depth = 0; e instanceof Error && depth < 8; depth++, e = e.cause) {
    if (answers.some((c) => e instanceof c)) return e as Error;
  }
  return undefined;
}

/**
 * What the model is told (sdk/vectors.json "model_messages") when the
 * guard's answer err (or an error it caused) kept the call from running
 * now, or left its outcome unknown; undefined for errors that are not the
 * guard's answers. The error's own message is the detail.
 */
export function modelAnswer(err: unknown, client: Client): string | undefined {
  const e = answerIn(err);
  if (!e) return undefined;
  const url = (id: string) => (id ? client.actionUrl(id) : "");
  if (e instanceof PendingApprovalError && e.frozenBy.length > 0) return modelMessage("frozen", frozenDetail(e), e.url);
  if (e instanceof PendingApprovalError) return modelMessage("pending_approval", e.message, e.url);
  if (e instanceof FrozenError) return modelMessage("frozen", e.detail, e.url);
  if (e instanceof LimitExceededError) return modelMessage("limit_exceeded", e.message, e.url);
  if (e instanceof DeniedError) return modelMessage("denied", e.message, e.url);
  if (e instanceof HeldError) return modelMessage("held", e.message, e.url);
  if (e instanceof InProgressError) return modelMessage("in_progress", e.message, url(e.actionId));
  if (e instanceof OutcomeUnknownError || e instanceof ReportError) return modelMessage("outcome_unknown", e.message, url(e.actionId));
  if (e instanceof FinishedError) return modelMessage("finished", e.message, url(e.action.id));
  if (e instanceof ArbiterError && e.code === "key_reused") return modelMessage("key_reused", e.message, url(e.result?.action?.id ?? ""));
  return e.message;
}

/** What the model is told of the freezes that hold a new key: each freeze and its reason, as Arbiter names them in a frozen answer. */
function frozenDetail(e: PendingApprovalError): string {
  return `${e.frozenBy.map((f) => `freeze ${f.id} (${JSON.stringify(f.reason)})`).join(", ")} holds this tool`;
}
