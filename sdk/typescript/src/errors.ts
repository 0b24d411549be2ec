// Every way a call can end other than success, as a class to catch with
// instanceof. The names follow the Go SDK (client/errors.go,
// client/guard_errors.go) and sdk/vectors.json.

import type { Action, ApprovalLimit, EntryResult, FreezeRef } from "./types.js";

/**
 * An answer from Arbiter that is not a success: a non-2xx status, or a
 * rejected entry. `code` is stable and lower_snake_case (key_reused,
 * lease_lost, not_found, …); match on it, not on the message.
 */
export class ArbiterError extends Error {
  override name = "ArbiterError";
  /** The HTTP status; 0 for an entry rejected inside a batch. */
  readonly status: number;
  readonly code: string;
  /** For a rejected entry: the ledger's whole answer (its action, if any, is the stored one). */
  readonly result?: EntryResult;

  constructor(status: number, code: string, message: string, result?: EntryResult) {
    super(status ? `arbiter: ${code}: ${message} (HTTP ${status})` : `arbiter: ${code}: ${message}`);
    this.status = status;
    this.code = code;
    this.detail = message;
    if (result) this.result = result;
  }

  /** The server's message, without the code and status. */
  readonly detail: string;
}

/**
 * The same key with another tool or other params: the stored action is
 * untouched and nothing ran. Mint a new key for a different action.
 */
export class KeyReusedError extends ArbiterError {
  override name = "KeyReusedError";
}

/** An ArbiterError of the right class for its code. */
export function apiError(status: number, code: string, message: string, result?: EntryResult): ArbiterError {
  return code === "key_reused"
    ? new KeyReusedError(status, code, message, result)
    : new ArbiterError(status, code, message, result);
}

/** A request that got no answer: Arbiter could not be reached, the connection broke, or the request ran out of time. */
export class NetworkError extends Error {
  override name = "NetworkError";
  readonly method: string;
  readonly path: string;
  constructor(method: string, path: string, cause: unknown) {
    super(`arbiter: ${method} ${path}: no answer: ${messageOf(cause)}`, { cause });
    this.method = method;
    this.path = path;
  }
}

/** Whether err is an ArbiterError with the given code. */
export function isCode(err: unknown, code: string): boolean {
  return err instanceof ArbiterError && err.code === code;
}

/**
 * Whether err means Arbiter could not be asked: no answer, or an answer
 * saying it is unavailable (503, or 502 and 504 from a proxy). Such
 * requests are safe to retry: every entry is idempotent by key and attempt.
 */
export function isUnavailable(err: unknown): boolean {
  if (err instanceof UnreachableError || err instanceof NetworkError) return true;
  if (!(err instanceof ArbiterError)) return false;
  return err.status === 502 || err.status === 503 || err.status === 504 || err.code === "unavailable";
}

/**
 * The guard could not record the intent, so the function did not run
 * (fail closed). Calling again later with the same key is safe: if the
 * lost intent did land, the ledger answers in_progress while its lease
 * lasts and held after.
 */
export class UnreachableError extends Error {
  override name = "UnreachableError";
  readonly key: string;
  constructor(key: string, cause: unknown) {
    super(`arbiter unreachable: the action was not started (key ${JSON.stringify(key)}): ${messageOf(cause)}`, { cause });
    this.key = key;
  }
}

/**
 * The action's outcome is unknown (an attempt's lease passed without a
 * report) and a person must decide before anything runs again: confirm,
 * retry, compensate or abandon. `compensation` is true when it is the
 * compensation whose outcome is unknown.
 */
export class HeldError extends Error {
  override name = "HeldError";
  constructor(
    readonly actionId: string,
    readonly key: string,
    readonly attempt: number,
    /** The action's page on the dashboard. */
    readonly url: string,
    readonly compensation: boolean,
  ) {
    super(
      compensation
        ? `arbiter: action ${actionId} (key ${JSON.stringify(key)}) is held: whether the compensation of attempt ${attempt} undid the effect is unknown and an operator must decide; see ${url}`
        : `arbiter: action ${actionId} (key ${JSON.stringify(key)}) is held: the outcome of attempt ${attempt} is unknown and an operator must decide; see ${url}`,
    );
  }
}

/** Another attempt held a live lease for the whole of the guard's `waitMs`. Nothing ran. */
export class InProgressError extends Error {
  override name = "InProgressError";
  constructor(
    readonly actionId: string,
    readonly key: string,
    readonly attempt: number,
    readonly leaseUntil: string | null,
    readonly waitedMs: number,
  ) {
    super(
      `arbiter: action ${actionId} (key ${JSON.stringify(key)}) is in progress in attempt ${attempt} (lease until ${leaseUntil ?? "unknown"}); waited ${Math.round(waitedMs)}ms`,
    );
  }
}

/**
 * The action waits for people's approval, or for the freezes that hold it
 * (`frozenBy`) to be lifted: nothing ran. Call the guard again later; it
 * runs once approved.
 */
export class PendingApprovalError extends Error {
  override name = "PendingApprovalError";
  constructor(
    readonly actionId: string,
    readonly key: string,
    /** The action's page, where operators approve it. */
    readonly url: string,
    readonly waitedMs: number,
    /** Run-time errors of the policies that hold it (approval.policies[i].error), as "NAME: ERROR". */
    readonly policyErrors: string[] = [],
    /** The freezes that hold it (approval.frozen_by): it is approved once each is lifted (and its people approved it). */
    readonly frozenBy: FreezeRef[] = [],
  ) {
    super(
      `arbiter: action ${JSON.stringify(key)} awaits approval; nothing was run (${url})` +
        frozenBy.map((f) => `; frozen by ${f.id}: ${f.reason}`).join("") +
        (policyErrors.length ? `; held because a policy's condition failed: ${policyErrors.join("; ")}` : ""),
    );
  }
}

/**
 * A freeze holds the action's tool back: nothing ran and nothing changed.
 * Ask again after `retryAfter` seconds (the guard does, for up to its
 * `frozenWaitMs`); the freeze ends when a person lifts it. `detail` is
 * Arbiter's account, naming the freezes and their reasons.
 */
export class FrozenError extends Error {
  override name = "FrozenError";
  constructor(
    readonly actionId: string,
    readonly key: string,
    /** The action's page on the dashboard. */
    readonly url: string,
    /** Seconds to wait before asking again (the answer's error.retry_after or Retry-After header; 5 when it says none). */
    readonly retryAfter: number,
    readonly waitedMs: number,
    readonly detail: string,
  ) {
    super(`arbiter: action ${JSON.stringify(key)} is frozen: ${detail} (${url})`);
  }
}

/**
 * The action was denied: its approval was rejected (`by`, `reason`) or
 * expired (`expired`), or a limit across actions denied it (then it is a
 * LimitExceededError): nothing ran, and must not under this key.
 */
export class DeniedError extends Error {
  override name = "DeniedError";
  constructor(
    readonly actionId: string,
    readonly key: string,
    readonly url: string,
    readonly expired: boolean,
    readonly by: string,
    readonly reason: string,
    message?: string,
  ) {
    super(
      message ??
        (expired
          ? `arbiter: action ${JSON.stringify(key)} was denied: its approval expired; nothing was run (${url})`
          : `arbiter: action ${JSON.stringify(key)} was rejected by ${by} (${JSON.stringify(reason)}); nothing was run (${url})`),
    );
  }
}

/**
 * A limit across actions denied the action: its group's counted use plus
 * this intent's amount was over the limit's max. `limits` are the limits
 * that denied it, with the use when its first intent came (the answer's
 * error.limits; empty when only the action was read, whose `limits` still
 * name them), `detail` Arbiter's account of it. It is a DeniedError too:
 * nothing ran, and must not under this key.
 */
export class LimitExceededError extends DeniedError {
  override name = "LimitExceededError";
  constructor(
    actionId: string,
    key: string,
    url: string,
    readonly limits: ApprovalLimit[],
    readonly detail: string,
  ) {
    super(actionId, key, url, false, "", "", `arbiter: action ${JSON.stringify(key)} was denied by a limit: ${detail}; nothing was run (${url})`);
  }
}

/**
 * The action ended before without its effect in place (failed, abandoned
 * or compensated); the ledger replays that ending and nothing runs again.
 */
export class FinishedError extends Error {
  override name = "FinishedError";
  constructor(readonly action: Action) {
    super(`arbiter: action ${action.id} (key ${JSON.stringify(action.key)}) already ended ${action.status}; it is not run again`);
  }
}

/**
 * The function threw an error marked with unknown(), or any error after
 * its signal aborted (the caller gave up, or the lease was lost): the
 * effect may have happened, so nothing was reported. The action times out
 * and a person (or a lookup, or a later report) resolves it.
 */
export class OutcomeUnknownError extends Error {
  override name = "OutcomeUnknownError";
  constructor(
    readonly actionId: string,
    readonly key: string,
    readonly attempt: number,
    readonly compensation: boolean,
    cause: unknown,
  ) {
    super(
      `arbiter: ${compensation ? "the compensation of attempt" : "attempt"} ${attempt} of action ${actionId} (key ${JSON.stringify(key)}) was interrupted (${messageOf(cause)}); the outcome is unknown and was not reported`,
      { cause },
    );
  }
}

/**
 * An outcome could not be recorded within the report budget. The effect
 * happened (or failed) but the ledger does not know: the action times out
 * and a person decides. `outcome` is what the call came to.
 */
export class ReportError extends Error {
  override name = "ReportError";
  /** When the function (or compensation) failed and that failure could not be recorded: its error. */
  functionError?: unknown;
  constructor(
    readonly actionId: string,
    readonly key: string,
    readonly attempt: number,
    /** succeeded, failed, compensated, compensation_failed or lookup_result */
    readonly type: string,
    cause: unknown,
  ) {
    super(
      `arbiter: could not record ${type} for attempt ${attempt} of action ${actionId} (key ${JSON.stringify(key)}): ${messageOf(cause)}`,
      { cause },
    );
  }
}

/** An operator asked to undo the action and the guard has no compensate function; the lease was released for one that has. */
export class CompensationRequestedError extends Error {
  override name = "CompensationRequestedError";
  constructor(
    readonly actionId: string,
    readonly key: string,
    readonly url: string,
  ) {
    super(
      `arbiter: an operator asked to compensate action ${actionId} (key ${JSON.stringify(key)}) and no compensate function was given; see ${url}`,
    );
  }
}

/**
 * The reason of the signal given to a guarded function when Arbiter says
 * its attempt may no longer continue: its lease passed, an operator
 * decided, or a newer attempt started. Stop, and do not start the effect
 * if it has not started yet.
 */
export class LeaseLostError extends Error {
  override name = "LeaseLostError";
  constructor(cause: unknown) {
    super(`arbiter: the lease of this attempt was lost: ${messageOf(cause)}`, { cause });
  }
}

/**
 * The result was not saved (not JSON, or over 64 KiB), though the success
 * was recorded. `outcome` is what the call came to.
 */
export class ResultNotSavedError extends Error {
  override name = "ResultNotSavedError";
  outcome?: unknown;
}

/** Marks an error as retriable: see retriable(). */
export class RetriableError extends Error {
  override name = "RetriableError";
  constructor(cause: unknown) {
    super(messageOf(cause), { cause });
  }
}

/** Marks an error as leaving the outcome unknown: see unknown(). */
export class UnknownOutcome extends Error {
  override name = "UnknownOutcome";
  constructor(cause: unknown) {
    super(messageOf(cause), { cause });
  }
}

/**
 * Marks a guarded function's error as retriable: the failure is recorded
 * with retriable true, and the next intent for the key gets a new attempt
 * instead of a replay of the failure. Use it for failures known to have
 * had no effect (the provider refused the request).
 */
export function retriable(err: unknown): RetriableError {
  return new RetriableError(err);
}

/**
 * Marks a guarded function's error as leaving the outcome unknown: the
 * request may have reached the downstream and the answer was lost (a
 * timeout, a broken connection). The guard then reports nothing, leaves a
 * note for the operators, and throws an OutcomeUnknownError; the lease
 * passes and a person (or a lookup) resolves it.
 */
export function unknown(err: unknown): UnknownOutcome {
  return new UnknownOutcome(err);
}

/** Whether err, or an error in its cause chain, was marked with retriable(). */
export function isRetriable(err: unknown): boolean {
  return inChain(err, (e) => e instanceof RetriableError);
}

/** Whether err, or an error in its cause chain, was marked with unknown(). */
export function isUnknown(err: unknown): boolean {
  return inChain(err, (e) => e instanceof UnknownOutcome);
}

function inChain(err: unknown, test: (e: unknown) => boolean): boolean {
  for (let e = err, depth = 0; e != null && depth < 32; depth++) {
    if (test(e)) return true;
    e = e instanceof Error ? e.cause : undefined;
  }
  return false;
}

/** The message of anything thrown. */
export function messageOf(err: unknown): string {
  if (err instanceof Error) return err.message || err.name;
  if (typeof err === "string") return err;
  try {
    return JSON.stringify(err) ?? String(err);
  } catch {
    return String(err);
  }
}
