// Look before you resend: a timed-out attempt's outcome is unknown, and
// the agent's own worker knows how to ask its downstream (find a refund by
// its idempotency key, a message by its id). The worker asks before a
// person has to, under a lookup lease, and reports the answer; the ledger
// confirms the action, requests the retry its effect class makes safe, or
// leaves it to a person with the answer shown.

import type { Client } from "./client.js";
import { isCode, messageOf } from "./errors.js";
import { MAX_RESULT_BYTES, entryOf, errorText, report } from "./guard.js";
import type { Handler, Worker } from "./worker.js";
import { ANSWERS, MAX_LOOKUPS, type Action, type Answer, type Effect, type Entry } from "./types.js";

/** The timed-out attempt a lookup asks about. */
export interface LookupRequest {
  actionId: string;
  /** The action's key: the idempotency key the attempt passed downstream, if it takes one. */
  key: string;
  tool: string;
  effect: Effect;
  reference: string;
  /** The action's params as the ledger stores them. */
  params: Record<string, unknown>;
  /** The attempt whose outcome is unknown. */
  attempt: number;
  /**
   * The downstream ids the ledger heard of for this action, oldest first:
   * from earlier reports, lookups and operators' decisions. Usually none.
   */
  externalRefs: string[];
  /** When the action was created: nothing it did downstream is older. */
  createdAt: string;
}

/** What a lookup found. */
export interface LookupAnswer {
  answer: Answer;
  /** What the downstream said (any JSON; at most 64 KiB is kept), shown to whoever decides. */
  evidence?: unknown;
  /** For happened: the effect's id downstream and the result to save on the action. */
  externalRef?: string;
  result?: unknown;
}

/**
 * Asks the downstream whether the effect of a timed-out attempt happened.
 * Search by what the attempt sent: its key, reference, params or one of
 * externalRefs. Answer:
 *  - happened, with externalRef and a result: the action is confirmed;
 *  - not_happened when the downstream provably has no such effect: a keyed
 *    (key still honoured), idempotent or read-only action is retried with
 *    its key; any other waits for a person;
 *  - unknown when the downstream can never tell: a person decides, and
 *    the attempt is not looked up again.
 * Throw when the downstream could not be asked now (it is down): the
 * worker reports unknown with the error as evidence and asks again later,
 * with backoff, while the ledger grants lookups. `signal` aborts at the
 * worker's lookupTimeoutMs; a lookup still running then counts as failed.
 */
export type LookupFunc = (request: LookupRequest, signal: AbortSignal) => Promise<LookupAnswer> | LookupAnswer;

/**
 * The evidence of a lookup that could not ask the downstream starts with
 * this, so any worker, after a restart too, knows from the action's last
 * answer (reconciliation.last_lookup.said) that the attempt is worth
 * asking about again. The same as the Go SDK's.
 */
const LOOKUP_ERROR_SAID = '{"lookup_error":';

/** The lookup lease beyond the lookup's own timeout: time to report the answer. */
export const LOOKUP_LEASE_MARGIN_MS = 10_000;

/** The lookup lease, in seconds, a worker asks for a lookup that may run timeoutMs: at most an hour. */
export function lookupLeaseS(timeoutMs: number): number {
  return Math.min(timeoutMs + LOOKUP_LEASE_MARGIN_MS, 3_600_000) / 1000;
}

/**
 * Whether the worker should look the timed-out action up now: not while
 * another lookup's lease is live, not once the attempt's lookups are
 * spent, and not again after an answer that asking again will not change.
 * A failed lookup is asked again after retryMs, doubling with each lookup
 * of the attempt.
 */
export function lookupDue(a: Action, now: number, retryMs: number): boolean {
  const rc = a.reconciliation;
  if (!rc || rc.lookup_attempt !== a.attempt) return true; // never looked up
  if (rc.lookup_until && now < Date.parse(rc.lookup_until)) return false;
  if (rc.lookups >= MAX_LOOKUPS) return false;
  const last = rc.last_lookup;
  if (!last || last.attempt !== a.attempt) return true; // a lookup whose worker never answered: its lease passed
  if (!last.said.startsWith(LOOKUP_ERROR_SAID)) return false; // the downstream's own answer: a person decides
  let wait = retryMs;
  for (let i = 1; i < rc.lookups; i++) wait *= 2;
  return now >= Date.parse(last.at) + wait;
}

/**
 * Takes a lookup lease on the action's timed-out attempt, runs the tool's
 * lookup, and reports its answer; if the ledger then requests a retry, runs
 * it. Rejects when the action should be tried again later, not at the next
 * poll.
 */
export async function lookUp(w: Worker, a: Action, h: Handler, signal?: AbortSignal): Promise<void> {
  const client: Client = w.client;
  const log = w.opts.logger;
  const fields = { action_id: a.id, key: a.key, tool: a.tool, attempt: a.attempt };
  // The timeline first: failing to read it costs no lookup of the budget.
  const entries = await client.entries(a.id, { signal });
  const who = { key: a.key, agent: w.opts.agent };
  const take = entryOf(who, "lookup", a.attempt);
  take.timeout = lookupLeaseS(w.opts.lookupTimeoutMs);
  let res;
  try {
    res = await client.submit(take, { signal });
  } catch (err) {
    if (isCode(err, "stale_attempt") || isCode(err, "invalid_transition")) {
      log.info("arbiter worker: the action moved on before the lookup", { ...fields, err: String(err) });
      return;
    }
    throw err;
  }
  switch (res.outcome) {
    case "proceed":
      break;
    case "in_progress":
      log.info("arbiter worker: another worker is looking it up", fields);
      return;
    case "held":
      log.info("arbiter worker: no lookups left for this attempt; held for an operator", fields);
      return;
    default:
      throw new Error(`arbiter: lookup ${JSON.stringify(a.key)}: unexpected outcome ${res.outcome}`);
  }

  const q: LookupRequest = {
    actionId: a.id,
    key: a.key,
    tool: a.tool,
    effect: a.effect,
    reference: a.reference ?? "",
    params: a.params,
    attempt: a.attempt,
    externalRefs: externalRefs(a, entries),
    createdAt: a.created_at,
  };
  log.info("arbiter worker: looking up a timed-out attempt", fields);
  let ans: LookupAnswer | undefined;
  let lookupErr: unknown;
  try {
    ans = await withTimeout(w.opts.lookupTimeoutMs, signal, (s) => h.lookup!(q, s));
  } catch (err) {
    lookupErr = err ?? new Error("the lookup failed");
  }
  if (signal?.aborted) return; // stopping: the lookup lease passes and a worker asks again
  const e = lookupResult(entryOf(who, "lookup_result", a.attempt), ans, lookupErr);
  const stored = await report(client, { actionId: a.id, key: a.key, number: a.attempt }, e, undefined);
  const status = stored.action?.status;
  const said = { ...fields, answer: e.answer, status };
  if (lookupErr !== undefined) {
    log.warn("arbiter worker: the lookup failed; reported unknown, to ask again later", { ...said, err: messageOf(lookupErr) });
  } else if (status === "retry_requested" && !h.run) {
    log.info("arbiter worker: the lookup found no effect; a worker with a handler for the tool retries it", said);
  } else if (status === "retry_requested") {
    log.info("arbiter worker: the lookup found no effect; retrying with the same key", said);
  } else {
    log.info("arbiter worker: reported the lookup's answer", said);
  }
  if (status === "retry_requested" && h.run && stored.action) {
    await w.work(stored.action, h, signal);
  }
}

/** Runs fn with a signal that aborts after ms or with the caller's; rejects at the deadline even if fn ignores it. */
async function withTimeout<T>(ms: number, signal: AbortSignal | undefined, fn: (s: AbortSignal) => Promise<T> | T): Promise<T> {
  const ctl = new AbortController();
  const onAbort = () => ctl.abort(signal!.reason);
  signal?.addEventListener("abort", onAbort, { once: true });
  let timer: ReturnType<typeof setTimeout> | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      const err = new Error(`the lookup ran past its timeout of ${ms}ms`);
      ctl.abort(err);
      reject(err);
    }, ms);
  });
  try {
    return await Promise.race([Promise.resolve().then(() => fn(ctl.signal)), deadline]);
  } finally {
    clearTimeout(timer);
    signal?.removeEventListener("abort", onAbort);
  }
}

/**
 * Fills the lookup_result entry from what the lookup returned. A failed
 * lookup is answered unknown with its error as evidence; evidence or a
 * result the ledger would refuse is left out rather than losing the answer.
 */
function lookupResult(e: Entry, ans: LookupAnswer | undefined, lookupErr: unknown): Entry {
  if (lookupErr === undefined && !ANSWERS.includes(ans?.answer as Answer)) {
    lookupErr = new Error(`the lookup answered ${JSON.stringify(ans?.answer)}, which is none of ${ANSWERS.join(", ")}`);
  }
  if (lookupErr !== undefined || !ans) {
    e.answer = "unknown";
    e.evidence = { lookup_error: errorText(lookupErr) };
    return e;
  }
  e.answer = ans.answer;
  if (ans.evidence !== undefined) e.evidence = keptJSON("evidence", ans.evidence);
  if (ans.answer === "happened") {
    if (ans.result !== undefined) e.result = keptJSON("result", ans.result);
    if (ans.externalRef) e.external_ref = ans.externalRef;
  }
  return e;
}

/** v as JSON the ledger keeps (at most 64 KiB); what it cannot keep becomes a string that says so. */
function keptJSON(field: string, v: unknown): unknown {
  let json: string | undefined;
  try {
    json = JSON.stringify(v);
  } catch (err) {
    return `the ${field} was not JSON and was not kept: ${messageOf(err)}`;
  }
  if (json === undefined) return undefined;
  const size = new TextEncoder().encode(json).length;
  if (size > MAX_RESULT_BYTES) return `the ${field} was ${size} bytes, over the ${MAX_RESULT_BYTES} the ledger keeps; it was not kept`;
  return JSON.parse(json);
}

/** The downstream ids the ledger heard of for the action, oldest first, each once. */
function externalRefs(a: Action, entries: { payload: Record<string, unknown> }[]): string[] {
  const refs: string[] = [];
  const add = (ref: unknown) => {
    if (typeof ref === "string" && ref !== "" && !refs.includes(ref)) refs.push(ref);
  };
  for (const e of entries) add(e.payload?.["external_ref"]);
  add(a.external_ref);
  return refs;
}
