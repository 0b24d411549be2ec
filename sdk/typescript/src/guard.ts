import { backoffPause, sleep } from "./backoff.js";
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
  ResultNotSavedError,
  UnreachableError,
  isCode,
  isRetriable,
  isUnavailable,
  isUnknown,
  messageOf,
  retriable,
} from "./errors.js";
import { classifyWith, kindPrefix, type Classifier } from "./classify.js";
import { startHeartbeats } from "./heartbeat.js";
import type { Action, Effect, Entry, EntryResult, EntryType } from "./types.js";

/** The server's lease when an intent names none. */
const DEFAULT_LEASE_MS = 300_000;
/** The ledger keeps results, evidence and errors up to these sizes. */
export const MAX_RESULT_BYTES = 64 << 10;
const MAX_ERROR_BYTES = 8 << 10;

/** The attempt a guarded function runs as. */
export interface Attempt {
  actionId: string;
  key: string;
  tool: string;
  /** The attempt number, 1, 2, … */
  number: number;
  /** The action's params as the ledger stores them. */
  params: Record<string, unknown>;
}

/** What a guarded function returns: the result to save (any JSON) and the effect's id downstream. */
export interface GuardReturn<R = unknown> {
  result?: R;
  externalRef?: string;
}

/**
 * Performs the side effect of one attempt. Pass `attempt.key` to the
 * downstream as its idempotency key when it takes one. `signal` aborts
 * when the attempt may no longer continue (its lease was lost: reason
 * LeaseLostError) or the caller gave up.
 *
 * What it throws says what is known about the effect (sdk/vectors.json
 * "outcomes", or spec.classify):
 *  - NotDone (or retriable(err)): it did not happen (recorded failed;
 *    NotDone's retriable, or retriable(), lets a later intent try again);
 *    so does a connection refused, and an HTTP status in
 *    spec.notDoneStatuses;
 *  - anything else (a timeout, a lost connection, unknown(err), an error
 *    the SDK cannot classify): it may have happened; recorded
 *    outcome_unknown, the action goes to a lookup and then a person, and
 *    the next call gets HeldError.
 */
export type GuardFunc<R = unknown> = (attempt: Attempt, signal: AbortSignal) => Promise<GuardReturn<R> | void> | GuardReturn<R> | void;

/**
 * Undoes the effect of an action an operator asked to compensate; returns
 * the id of the undoing downstream. Its errors mean what a GuardFunc's do:
 * a plain or retriable error, nothing was undone (reported
 * compensation_failed; the next intent compensates again); unknown(err),
 * or any error after its signal aborted, the undo may have happened
 * (nothing is reported; the lease passes and a person decides).
 */
export type CompensateFunc = (
  attempt: Attempt,
  signal: AbortSignal,
) => Promise<{ externalRef?: string } | void> | { externalRef?: string } | void;

/** Describes the side effect a guarded call performs. */
export interface GuardSpec {
  /** Identifies the action; derive it from the business identity with key(). Required. */
  key: string;
  /** Names the operation, e.g. "payments.refund". Required. */
  tool: string;
  /** How safe a repeat is (default unkeyed). */
  effect?: Effect;
  /** What the action does. With the tool, its fingerprint: the same key with other params is key_reused. */
  params?: Record<string, unknown>;
  /**
   * The lease of an attempt (default 300 000 ms, at least 1000): how long
   * the function may run without a heartbeat. The guard heartbeats about
   * every third of it, so it matters mostly when the process dies: then
   * the action times out after it.
   */
  timeoutMs?: number;
  /** A business reference shown to operators. */
  reference?: string;
  /** Who runs the action (agent defaults to the API key's name). */
  agent?: string;
  runId?: string;
  /**
   * How long to wait, with backoff, for another attempt that holds the
   * action (in_progress) before throwing InProgressError. 0 gives up at once.
   */
  waitMs?: number;
  /**
   * How long the downstream honours the key as its idempotency key (Stripe:
   * 24 h), from the action's creation; absent: as long as the ledger keeps
   * the action. After it a keyed action counts as unkeyed: a lookup that
   * finds nothing no longer makes a retry safe.
   */
  keyTtlMs?: number;
  /** Undoes the effect when an operator asked for it, under the compensation's lease, with heartbeats. */
  compensate?: CompensateFunc;
  /** Holds the action's first intent until a person approves it. */
  requireApproval?: boolean;
  /**
   * HTTP statuses of the downstream that prove the effect did not happen
   * (e.g. [400, 402, 404, 409, 422]): an error carrying one (status,
   * statusCode or response.status) is recorded failed. None by default.
   */
  notDoneStatuses?: number[];
  /**
   * Replaces the rule of sdk/vectors.json "outcomes" for what the function
   * threw: "failed", "failed_retriable" or "outcome_unknown" (a classifier
   * that throws counts as outcome_unknown).
   */
  classify?: Classifier;
  /**
   * How long to wait for the decision on an action held for approval (by
   * requireApproval or a policy): the guard waits on the server (Prefer:
   * wait), runs the function as soon as it is approved, and throws
   * DeniedError if denied and PendingApprovalError if nobody decided in
   * time. 0 throws PendingApprovalError at once. A new key of a frozen
   * tool waits here too: it is held for approval until the freeze is lifted
   * (PendingApprovalError.frozenBy).
   */
  approvalWaitMs?: number;
  /**
   * How long to wait out a freeze that holds the action's tool (outcome
   * frozen: a retry, an approved action's first run, a compensation),
   * asking again after each Retry-After, before throwing FrozenError. 0
   * (the default) throws FrozenError at once.
   */
  frozenWaitMs?: number;
}

/** Seconds the guard waits before asking again about a frozen action when the answer does not say. */
export const DEFAULT_FROZEN_RETRY_S = 5;

/**
 * What a guarded call came to. R is the type of the result the guarded
 * function returns; a replay gives back the saved result (as JSON keeps
 * it), and undefined when none was saved (confirmed without a result).
 */
export interface Outcome<R = unknown> {
  /** The function ran in this call; false for a replay or a compensation. */
  ran: boolean;
  /** The call undid the effect at an operator's request. */
  compensated: boolean;
  /** The attempt the outcome belongs to. */
  attempt: number;
  /** The action as the ledger last answered, if it answered. */
  action: Action | null;
  /** The saved result, and the effect's id downstream ("" if none). */
  result: R | undefined;
  externalRef: string;
}

/** How a guarded call ended: an outcome, an error, or (when the function ran and failed) both. */
export interface Settled {
  outcome?: Outcome;
  error?: unknown;
}

/** The guard of Client.guard: see the README and GuardSpec. */
export async function guard<R = unknown>(client: Client, spec: GuardSpec, fn: GuardFunc<R>, signal?: AbortSignal): Promise<Outcome<R>> {
  const s = await settle(client, spec, fn as GuardFunc, signal);
  if ("error" in s) throw s.error;
  return s.outcome! as Outcome<R>;
}

/**
 * Runs the guard to its end. It records the intent first, and if Arbiter
 * cannot be reached then the function does not run (UnreachableError).
 * Then, by the ledger's answer: proceed runs the function with heartbeats
 * and reports its outcome; replay returns the saved result (or a
 * FinishedError); in_progress waits up to spec.waitMs; frozen asks again
 * after each Retry-After for up to spec.frozenWaitMs; held, denied, frozen
 * and pending approval (after spec.approvalWaitMs) throw their errors;
 * compensate runs spec.compensate. `first` is the answer to the intent
 * when the caller recorded it already (submitIntent): the guard goes on
 * from it instead of recording the intent again.
 */
export async function settle(client: Client, spec: GuardSpec, fn: GuardFunc, signal?: AbortSignal, first?: EntryResult): Promise<Settled> {
  try {
    const intent = intentOf(spec);
    const start = Date.now();
    for (let n = 0; ; n++) {
      let res: EntryResult;
      try {
        const left = approvalWaitLeftS(spec, start);
        if (n === 0 && first) res = first; // the intent was recorded already (see submitIntent)
        else res = n > 0 && left > 0 ? await client.submitWait(intent, left, { signal }) : await client.submit(intent, { signal });
      } catch (err) {
        if (isUnavailable(err)) throw new UnreachableError(spec.key, err);
        throw err;
      }
      const action = res.action;
      if (!action) {
        throw new ArbiterError(0, "unexpected_answer", `guard ${JSON.stringify(spec.key)}: the answer to the intent (${res.outcome}) carries no action`);
      }
      const url = client.actionUrl(action.id);
      switch (res.outcome) {
        case "proceed":
          return await execute(client, spec, res, fn, signal);
        case "replay":
          return replayed(res, action);
        case "compensate":
          return await compensate(client, spec, res, signal);
        case "held":
          throw new HeldError(action.id, spec.key, res.attempt ?? 0, url, action.status === "compensation_requested");
        case "pending_approval":
          if (approvalWaitLeftS(spec, start) <= 0) {
            const policyErrors = (action.approval?.policies ?? []).filter((p) => p.error).map((p) => `${p.name}: ${p.error}`);
            throw new PendingApprovalError(action.id, spec.key, url, Date.now() - start, policyErrors, action.approval?.frozen_by ?? []);
          }
          break; // ask again, waiting on the server for the decision
        case "denied":
          throw deniedError(action, spec.key, url, res);
        case "frozen": {
          const err = frozenError(action, spec.key, url, res, Date.now() - start);
          const left = (spec.frozenWaitMs ?? 0) - (Date.now() - start);
          if (left <= 0) throw err;
          await sleep(Math.min(err.retryAfter * 1000, left), signal);
          break; // ask again: the freeze may be lifted
        }
        case "in_progress": {
          const left = (spec.waitMs ?? 0) - (Date.now() - start);
          if (left <= 0) {
            throw new InProgressError(action.id, spec.key, res.attempt ?? 0, res.lease_until, Date.now() - start);
          }
          await sleep(Math.min(backoffPause(client.backoff, n), left), signal);
          break;
        }
        default:
          throw new ArbiterError(0, "unexpected_answer", `guard ${JSON.stringify(spec.key)}: unexpected outcome ${res.outcome} for an intent`);
      }
    }
  } catch (error) {
    return { error };
  }
}

/**
 * The error of a denied action: a LimitExceededError when a limit denied
 * it (no approval was asked; res, the answer to its intent, names the
 * limits with their use), else a DeniedError for the approval's rejection
 * or expiry.
 */
export function deniedError(action: Action, key: string, url: string, res?: EntryResult): DeniedError {
  if (action.approval == null) {
    const err = res?.error?.code === "limit_exceeded" ? res.error : null;
    const named = (action.limits ?? [])
      .filter((l) => l.exceeded)
      .map((l) => `limit ${JSON.stringify(l.name)} (version ${l.version})${l.group ? ` in group ${JSON.stringify(l.group)}` : ""}`);
    return new LimitExceededError(action.id, key, url, err?.limits ?? [], err?.message ?? `it exceeded ${named.join(" or ")}`);
  }
  const rej = action.approval.rejection;
  return new DeniedError(action.id, key, url, rej == null, rej?.by.name ?? "", rej?.reason ?? "");
}

/** The error of a frozen intent's answer: the freezes named in Arbiter's message, and when to ask again. */
export function frozenError(action: Action, key: string, url: string, res: EntryResult, waitedMs: number): FrozenError {
  const ra = res.error?.retry_after;
  const retryAfter = typeof ra === "number" && ra > 0 ? ra : DEFAULT_FROZEN_RETRY_S;
  return new FrozenError(action.id, key, url, retryAfter, waitedMs, res.error?.message || "a freeze holds this tool");
}

/** Whole seconds the guard may still wait for an approval decision. */
function approvalWaitLeftS(spec: GuardSpec, start: number): number {
  return Math.floor(((spec.approvalWaitMs ?? 0) - (Date.now() - start)) / 1000);
}

function leaseMs(spec: GuardSpec): number {
  return spec.timeoutMs && spec.timeoutMs > 0 ? spec.timeoutMs : DEFAULT_LEASE_MS;
}

/** An entry of type typ for the spec's key, naming the agent and run. */
export function entryOf(spec: Pick<GuardSpec, "key" | "agent" | "runId">, type: EntryType, attempt?: number): Entry {
  const e: Entry = { key: spec.key, type };
  if (attempt && attempt > 0) e.attempt = attempt;
  if (spec.agent) e.agent = spec.agent;
  if (spec.runId) e.run_id = spec.runId;
  return e;
}

/** Records the spec's intent, as the guard's first step does; settle(…, first) goes on from its answer. */
export function submitIntent(client: Client, spec: GuardSpec, signal?: AbortSignal): Promise<EntryResult> {
  return client.submit(intentOf(spec), { signal });
}

function intentOf(spec: GuardSpec): Entry {
  const e = entryOf(spec, "intent");
  e.tool = spec.tool;
  if (spec.effect) e.effect = spec.effect;
  if (spec.timeoutMs && spec.timeoutMs > 0) e.timeout = spec.timeoutMs / 1000;
  if (spec.reference) e.reference = spec.reference;
  if (spec.requireApproval) e.require_approval = true;
  if (spec.keyTtlMs && spec.keyTtlMs > 0) e.key_ttl = Math.max(spec.keyTtlMs, 1000) / 1000;
  if (spec.params !== undefined) e.params = spec.params;
  return e;
}

function attemptOf(spec: GuardSpec, res: EntryResult): Attempt {
  return {
    actionId: res.action?.id ?? "",
    key: spec.key,
    tool: spec.tool,
    number: res.attempt ?? 0,
    params: res.action?.params ?? {},
  };
}

function replayed(res: EntryResult, action: Action): Settled {
  if (action.status !== "succeeded" && action.status !== "confirmed") return { error: new FinishedError(action) };
  return {
    outcome: {
      ran: false,
      compensated: false,
      attempt: res.attempt ?? action.attempt,
      action,
      result: action.result,
      externalRef: action.external_ref ?? "",
    },
  };
}

/** Runs fn (or a compensation) under the attempt's lease, with heartbeats. */
async function runLeased<T>(
  client: Client,
  spec: GuardSpec,
  a: Attempt,
  signal: AbortSignal | undefined,
  fn: (signal: AbortSignal) => Promise<T> | T,
): Promise<{ value?: T; threw: boolean; err?: unknown; lost: unknown }> {
  const run = new AbortController();
  const onAbort = () => run.abort(signal!.reason);
  if (signal?.aborted) run.abort(signal.reason);
  signal?.addEventListener("abort", onAbort, { once: true });
  const beat = entryOf(spec, "heartbeat", a.number);
  if (spec.timeoutMs && spec.timeoutMs > 0) beat.timeout = spec.timeoutMs / 1000;
  const hb = startHeartbeats(client, beat, leaseMs(spec), run);
  try {
    // A function that throws is an answer; one that never settles keeps
    // the heartbeats going, as a slow effect should.
    const value = await fn(run.signal);
    return { value, threw: false, lost: await hb.stop() };
  } catch (err) {
    return { threw: true, err, lost: await hb.stop() };
  } finally {
    signal?.removeEventListener("abort", onAbort);
  }
}

/** The attempt's effect may have happened: report nothing, leave a note when the function said so. */
async function outcomeUnknown(
  client: Client,
  spec: GuardSpec,
  a: Attempt,
  err: unknown,
  lost: unknown,
  signal: AbortSignal | undefined,
  compensation: boolean,
): Promise<Settled> {
  if (isUnknown(err) && !lost && !signal?.aborted) {
    // Best effort: the operator who finds the action timed out learns why.
    const note = entryOf(spec, "note", a.number);
    note.message = `${compensation ? "compensation outcome" : "outcome"} unknown: ${errorText(err)}`;
    await client.submit(note, { signal }).catch(() => undefined);
  }
  return { error: new OutcomeUnknownError(a.actionId, a.key, a.number, compensation, err) };
}

/**
 * The attempt's effect may have happened: record outcome_unknown (the
 * action is timed out at once: a lookup, then a person), unless the lease
 * was lost (the attempt is no longer this caller's to report). A server
 * that does not know the entry type gets a note instead, and the lease
 * passes.
 */
async function reportOutcomeUnknown(client: Client, spec: GuardSpec, a: Attempt, err: unknown, lost: unknown): Promise<Settled> {
  if (!lost) {
    const e = entryOf(spec, "outcome_unknown", a.number);
    e.error = errorText(`${kindPrefix(err)}${messageOf(err)}`);
    try {
      await report(client, a, e, undefined);
    } catch (reportErr) {
      if (!(reportErr instanceof ArbiterError && (reportErr.status === 400 || reportErr.status === 422))) {
        return { error: withFunctionError(reportErr, new OutcomeUnknownError(a.actionId, a.key, a.number, false, err)) };
      }
      const note = entryOf(spec, "note", a.number);
      note.message = `outcome unknown: ${e.error}`;
      await client.submit(note).catch(() => undefined);
    }
  }
  return { error: new OutcomeUnknownError(a.actionId, a.key, a.number, false, err) };
}

/** Runs fn for the attempt the ledger granted and records its outcome. */
async function execute(client: Client, spec: GuardSpec, res: EntryResult, fn: GuardFunc, signal?: AbortSignal): Promise<Settled> {
  const a = attemptOf(spec, res);
  const r = await runLeased(client, spec, a, signal, (s) => fn(a, s));
  const classified = r.threw && !r.lost ? classifyWith(r.err, spec.classify, spec.notDoneStatuses) : "outcome_unknown";
  if (r.threw && classified === "outcome_unknown") {
    return reportOutcomeUnknown(client, spec, a, r.err, r.lost);
  }
  const outcome: Outcome = { ran: true, compensated: false, attempt: a.number, action: null, result: undefined, externalRef: "" };
  if (r.threw) {
    const e = entryOf(spec, "failed", a.number);
    e.error = errorText(r.err);
    e.retriable = classified === "failed_retriable";
    try {
      outcome.action = (await report(client, a, e, signal)).action;
    } catch (reportErr) {
      return { outcome, error: withFunctionError(reportErr, r.err) };
    }
    return { outcome, error: r.err };
  }
  // The effect happened: record it even if the caller stopped waiting.
  const e = entryOf(spec, "succeeded", a.number);
  const ret = r.value ?? {};
  let resultErr: ResultNotSavedError | undefined;
  if (ret.result !== undefined) {
    let json: string | undefined;
    try {
      json = JSON.stringify(ret.result);
    } catch (err) {
      resultErr = new ResultNotSavedError(`arbiter: guard ${JSON.stringify(spec.key)}: the result is not JSON and was not saved: ${messageOf(err)}`, { cause: err });
    }
    const size = json === undefined ? 0 : new TextEncoder().encode(json).length;
    if (size > MAX_RESULT_BYTES) {
      // Saving the success matters more than saving its details.
      resultErr = new ResultNotSavedError(`arbiter: guard ${JSON.stringify(spec.key)}: the result is ${size} bytes, over the ${MAX_RESULT_BYTES} the ledger keeps; it was not saved`);
    } else if (json !== undefined && !resultErr) {
      e.result = JSON.parse(json);
      outcome.result = e.result;
    }
  }
  if (ret.externalRef) {
    e.external_ref = ret.externalRef;
    outcome.externalRef = ret.externalRef;
  }
  try {
    outcome.action = (await report(client, a, e, undefined)).action;
  } catch (reportErr) {
    return { outcome, error: reportErr };
  }
  if (resultErr) {
    resultErr.outcome = outcome;
    return { outcome, error: resultErr };
  }
  return { outcome };
}

/** Undoes the effect at an operator's request, under the compensation's lease, and records what came of it. */
async function compensate(client: Client, spec: GuardSpec, res: EntryResult, signal?: AbortSignal): Promise<Settled> {
  const a = attemptOf(spec, res);
  const undo = spec.compensate;
  if (!undo) {
    // Release the lease at once: another process that can undo it, or a
    // person, takes over, and nobody waits for a lease to pass.
    const error = new CompensationRequestedError(a.actionId, a.key, client.actionUrl(a.actionId));
    try {
      await reportCompensationFailed(client, spec, a, retriable(new Error(`this caller of guard has no compensate function for ${spec.tool}`)), signal);
    } catch (reportErr) {
      return { error: withFunctionError(reportErr, error) };
    }
    return { error };
  }
  const r = await runLeased(client, spec, a, signal, (s) => undo(a, s));
  if (r.threw && (r.lost || signal?.aborted || isUnknown(r.err))) {
    return outcomeUnknown(client, spec, a, r.err, r.lost, signal, true);
  }
  if (r.threw) {
    try {
      await reportCompensationFailed(client, spec, a, r.err, signal);
    } catch (reportErr) {
      return { error: withFunctionError(reportErr, r.err) };
    }
    return { error: r.err };
  }
  const e = entryOf(spec, "compensated", a.number);
  const ref = r.value?.externalRef ?? "";
  if (ref) e.external_ref = ref;
  const outcome: Outcome = { ran: false, compensated: true, attempt: a.number, action: null, result: undefined, externalRef: ref };
  try {
    outcome.action = (await report(client, a, e, undefined)).action;
  } catch (error) {
    return { outcome, error };
  }
  return { outcome };
}

/**
 * Records that the compensation did not undo the effect, which releases
 * its lease; the action stays compensation_requested for the next intent
 * or a person.
 */
function reportCompensationFailed(client: Client, spec: GuardSpec, a: Attempt, cause: unknown, signal?: AbortSignal) {
  const e = entryOf(spec, "compensation_failed", a.number);
  e.error = errorText(cause);
  e.retriable = isRetriable(cause);
  return report(client, a, e, signal);
}

/**
 * Records an outcome, retrying with backoff and jitter while Arbiter is
 * unavailable, within the client's report budget. The entry names its
 * attempt, so a report that landed before its answer was lost comes back
 * duplicate, which counts as done.
 */
export async function report(
  client: Client,
  a: Pick<Attempt, "actionId" | "key" | "number">,
  e: Entry,
  signal?: AbortSignal,
): Promise<EntryResult> {
  const deadline = Date.now() + client.reportBudgetMs;
  for (let n = 0; ; n++) {
    try {
      return await client.submit(e, { signal });
    } catch (err) {
      if (signal?.aborted || !retryable(err)) throw err;
      const pause = backoffPause(client.backoff, n);
      if (Date.now() + pause > deadline) throw new ReportError(a.actionId, a.key, a.number, e.type, err);
      try {
        await sleep(pause, signal);
      } catch (abort) {
        throw new ReportError(a.actionId, a.key, a.number, e.type, abort);
      }
    }
  }
}

/** Whether sending the same entry again may succeed. */
function retryable(err: unknown): boolean {
  return isUnavailable(err) || isCode(err, "conflict") || isCode(err, "internal");
}

/** A report that failed after the function failed keeps the function's error at hand. */
function withFunctionError(reportErr: unknown, fnErr: unknown): unknown {
  if (reportErr instanceof ReportError) reportErr.functionError = fnErr;
  return reportErr;
}

/** err's message as the ledger accepts it: non-empty, without NUL, and short enough to store. */
export function errorText(err: unknown): string {
  let msg = messageOf(err).replaceAll("\u0000", "");
  const bytes = new TextEncoder().encode(msg);
  if (bytes.length > MAX_ERROR_BYTES) {
    msg = new TextDecoder().decode(bytes.subarray(0, MAX_ERROR_BYTES)).replace(/\uFFFD$/, "") + "…";
  }
  if (msg.trim() === "") msg = `${err instanceof Error ? err.name : typeof err} with an empty message`;
  // Lone surrogates are not UTF-8: replace them, as Go's ToValidUTF8 does.
  return msg.replace(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g, "\uFFFD");
}
