import { backoffPause, sleep } from "./backoff.js";
import type { Client } from "./client.js";
import { HeldError, InProgressError, retriable } from "./errors.js";
import { settle, type CompensateFunc, type GuardFunc, type GuardSpec } from "./guard.js";
import { lookUp, lookupDue, type LookupFunc } from "./lookup.js";
import type { Action, CallOptions, Reconciliation, Status } from "./types.js";

/** Receives one line per action the worker handles. */
export interface Logger {
  info(message: string, fields?: Record<string, unknown>): void;
  warn(message: string, fields?: Record<string, unknown>): void;
}

/** Configures a Worker. */
export interface WorkerOptions {
  /** Narrows the poll to one namespace, for a key that sees several. Entries are written with the client's key, which must be an agent key. */
  namespace?: string;
  /** The pause between polls while there is work (default 1000 ms); while idle it doubles up to maxPollMs (default 30 000). */
  pollMs?: number;
  maxPollMs?: number;
  /** Names the worker in the ledger (default the API key's name). */
  agent?: string;
  /** Default: lines on the console. */
  logger?: Logger;
  /**
   * Bounds one lookup (default 30 000 ms, at most 50 minutes). The lookup
   * lease asked of the ledger is 10 s longer, to report the answer.
   */
  lookupTimeoutMs?: number;
  /** The pause before a failed lookup is asked again (default 30 000 ms), doubling with each lookup of the attempt. */
  lookupRetryMs?: number;
}

/** The functions a worker has for one tool. */
export interface Handler {
  run?: GuardFunc;
  compensate?: CompensateFunc;
  lookup?: LookupFunc;
}

interface Delay {
  failures: number;
  until: number;
}

/**
 * Carries out operators' decisions for the tools it handles: it polls for
 * actions an operator asked to retry (retry_requested) or to compensate
 * (compensation_requested), and runs the registered handler through the
 * guard with the action's original key, tool, effect and params. For tools
 * with a lookup (handleLookup) it also polls for timed-out actions and asks
 * the downstream what happened before a person has to. The ledger's answer
 * decides who runs: of several workers only one gets proceed for an
 * attempt; the others get in_progress and skip it. Actions are handled one
 * at a time, oldest first.
 */
export class Worker {
  /** @internal */ readonly client: Client;
  /** @internal */ readonly opts: Required<Omit<WorkerOptions, "namespace" | "agent">> & Pick<WorkerOptions, "namespace" | "agent">;
  readonly #handlers = new Map<string, Handler>();
  readonly #delays = new Map<string, Delay>(); // action id → backoff after a failed try

  constructor(client: Client, options: WorkerOptions = {}) {
    this.client = client;
    const pollMs = options.pollMs && options.pollMs > 0 ? options.pollMs : 1000;
    this.opts = {
      namespace: options.namespace,
      agent: options.agent,
      pollMs,
      maxPollMs: Math.max(options.maxPollMs ?? 30_000, pollMs),
      logger: options.logger ?? consoleLogger,
      lookupTimeoutMs: Math.min(options.lookupTimeoutMs && options.lookupTimeoutMs > 0 ? options.lookupTimeoutMs : 30_000, 50 * 60_000),
      lookupRetryMs: options.lookupRetryMs && options.lookupRetryMs > 0 ? options.lookupRetryMs : 30_000,
    };
  }

  /**
   * Registers the function that performs tool's effect (run with the
   * action's stored params) and the one that undoes it (none if the agent
   * cannot compensate the tool). Register before run().
   */
  handle(tool: string, run: GuardFunc, compensate?: CompensateFunc): this {
    const h = this.#handlers.get(tool) ?? {};
    this.#handlers.set(tool, { ...h, run, compensate });
    return this;
  }

  /**
   * Registers how to find out whether tool's effect happened. The worker
   * then also polls for timed-out actions of the tool and looks each
   * attempt up before a person decides (see LookupFunc). When the answer
   * makes the ledger request a retry, the worker runs it at once with the
   * handler registered by handle().
   */
  handleLookup(tool: string, lookup: LookupFunc): this {
    const h = this.#handlers.get(tool) ?? {};
    this.#handlers.set(tool, { ...h, lookup });
    return this;
  }

  /**
   * Polls and works until signal aborts, then resolves. Failures to reach
   * Arbiter are logged and retried with backoff. A handler running when
   * the signal aborts sees its signal abort; if it then throws, the outcome
   * is unknown and nothing is reported (see guard).
   */
  async run(options: CallOptions = {}): Promise<void> {
    const { signal } = options;
    let idle = 0;
    while (!signal?.aborted) {
      let n = 0;
      let failed = false;
      try {
        n = await this.runOnce({ signal });
      } catch (err) {
        if (signal?.aborted) return;
        failed = true;
        this.opts.logger.warn("arbiter worker: poll failed", { err: String(err) });
      }
      idle = n > 0 && !failed ? 0 : idle + 1;
      let pause = this.opts.pollMs;
      for (let i = 1; i < idle && pause < this.opts.maxPollMs; i++) pause *= 2;
      pause = Math.min(pause, this.opts.maxPollMs);
      // Half jitter: workers started together drift apart, and none polls
      // much faster than asked.
      pause = pause / 2 + Math.random() * (pause / 2);
      try {
        await sleep(pause, signal);
      } catch {
        return;
      }
    }
  }

  /** Polls once and handles every action waiting for a handler of this worker. Resolves to how many it tried. */
  async runOnce(options: CallOptions = {}): Promise<number> {
    const { signal } = options;
    const todo = await this.#waiting(signal);
    this.#forgetDelays(todo);
    let tried = 0;
    for (const a of todo) {
      if (signal?.aborted) return tried;
      const h = this.#handlerFor(a);
      if (!h) continue;
      tried++;
      if (a.status === "timed_out") {
        this.#backOff(a, await lookUp(this, a, h, signal).catch((err: unknown) => err ?? new Error("lookup failed")), true);
        continue;
      }
      await this.work(a, h, signal);
    }
    return tried;
  }

  /** The actions waiting for a handler of this worker, oldest first, asked per tool. */
  async #waiting(signal?: AbortSignal): Promise<Action[]> {
    const all: Action[] = [];
    for (const tool of [...this.#handlers.keys()].sort()) {
      const statuses = statusesOf(this.#handlers.get(tool)!);
      if (statuses.length === 0) continue;
      let cursor: string | undefined;
      do {
        const page = await this.client.listActions({
          status: statuses,
          tool,
          namespace: this.opts.namespace,
          limit: 500,
          cursor,
          signal,
        });
        all.push(...page.actions);
        cursor = page.next_cursor ?? undefined;
      } while (cursor);
    }
    // Ids are UUIDv7: their order is creation order.
    return all.sort((x, y) => (x.id < y.id ? -1 : x.id > y.id ? 1 : 0));
  }

  /** The handler for an action that has work for this worker now. */
  #handlerFor(a: Action): Handler | undefined {
    const h = this.#handlers.get(a.tool);
    const now = Date.now();
    if (!h || now < (this.#delays.get(a.id)?.until ?? 0)) return undefined;
    switch (a.status) {
      case "retry_requested":
        return h.run ? h : undefined;
      case "compensation_requested": {
        // Not while another worker's compensation holds the lease, nor
        // after a lease passed without a report: a person decides then.
        const leaseLive = a.lease_until != null && now < Date.parse(a.lease_until);
        return h.compensate && !leaseLive && compensationDue(a.reconciliation) ? h : undefined;
      }
      case "timed_out":
        return h.lookup && lookupDue(a, now, this.opts.lookupRetryMs) ? h : undefined;
      default:
        return undefined;
    }
  }

  /** @internal Runs one action through the guard and logs what came of it. */
  async work(a: Action, h: Handler, signal?: AbortSignal): Promise<void> {
    const spec: GuardSpec = {
      key: a.key,
      tool: a.tool,
      effect: a.effect,
      params: a.params,
      timeoutMs: await this.#leaseOf(a, signal),
      compensate: h.compensate,
    };
    if (this.opts.agent) spec.agent = this.opts.agent;
    if (a.reference != null) spec.reference = a.reference;
    const log = this.opts.logger;
    const fields = { action_id: a.id, key: a.key, tool: a.tool, status: a.status };
    log.info("arbiter worker: picked up action", fields);
    const run: GuardFunc =
      h.run ??
      (() => {
        // The action moved to a retry since the poll: nothing ran, and a
        // worker that can run it may.
        throw retriable(new Error(`this worker has no handler to run ${a.tool}`));
      });
    const { outcome: out, error: err } = await settle(this.client, spec, run, signal);
    if (err === undefined && out?.compensated) {
      log.info("arbiter worker: compensated", { ...fields, attempt: out.attempt, external_ref: out.externalRef });
    } else if (err === undefined && out?.ran) {
      log.info("arbiter worker: ran and recorded succeeded", { ...fields, attempt: out.attempt, external_ref: out.externalRef });
    } else if (err === undefined) {
      log.info("arbiter worker: already finished; replayed", { ...fields, attempt: out?.attempt });
    } else if (err instanceof InProgressError) {
      log.info("arbiter worker: another worker is running it", { ...fields, attempt: err.attempt });
    } else if (err instanceof HeldError) {
      log.warn("arbiter worker: held for an operator", { ...fields, url: err.url });
    } else if (out?.ran) {
      log.warn("arbiter worker: ran and recorded failed", { ...fields, attempt: out.attempt, err: String(err) });
    } else {
      log.warn("arbiter worker: could not handle the action", { ...fields, err: String(err) });
    }
    // Still waiting (say, the compensation failed): try it again later,
    // not at every poll.
    this.#backOff(a, err === undefined || out !== undefined ? undefined : err, false);
  }

  /** Keeps an action that could not be handled for a later poll, with backoff; forgets the backoff when it was. */
  #backOff(a: Action, err: unknown, lookup: boolean): void {
    if (err === undefined) {
      if (!lookup) this.#delays.delete(a.id);
      return;
    }
    if (lookup) {
      this.opts.logger.warn("arbiter worker: could not look up the action", { action_id: a.id, key: a.key, err: String(err) });
    }
    const d = this.#delays.get(a.id) ?? { failures: 0, until: 0 };
    d.failures++;
    d.until = Date.now() + Math.max(this.opts.pollMs, backoffPause(this.client.backoff, d.failures));
    this.#delays.set(a.id, d);
  }

  /** Drops the backoff of actions that no longer wait, so the map does not grow. */
  #forgetDelays(waiting: Action[]): void {
    const ids = new Set(waiting.map((a) => a.id));
    for (const id of this.#delays.keys()) if (!ids.has(id)) this.#delays.delete(id);
  }

  /**
   * The lease the agent asked for in the action's last intent, so a retry
   * runs under the same terms; undefined (the server's default) if the
   * timeline cannot tell.
   */
  async #leaseOf(a: Action, signal?: AbortSignal): Promise<number | undefined> {
    let entries;
    try {
      entries = await this.client.entries(a.id, { signal });
    } catch {
      return undefined;
    }
    for (let i = entries.length - 1; i >= 0; i--) {
      if (entries[i]!.type !== "intent") continue;
      const t = entries[i]!.payload["timeout"];
      return typeof t === "number" && t >= 1 ? t * 1000 : undefined;
    }
    return undefined;
  }
}

/** The statuses of the actions h has work for. */
function statusesOf(h: Handler): Status[] {
  const s: Status[] = [];
  if (h.run) s.push("retry_requested");
  if (h.compensate) s.push("compensation_requested");
  if (h.lookup) s.push("timed_out");
  return s;
}

const consoleLogger: Logger = {
  info: (message, fields) => console.info(line(message, fields)),
  warn: (message, fields) => console.warn(line(message, fields)),
};

function line(message: string, fields?: Record<string, unknown>): string {
  const kv = Object.entries(fields ?? {})
    .filter(([, v]) => v !== undefined)
    .map(([k, v]) => `${k}=${typeof v === "string" && /^[^\s"=]+$/.test(v) ? v : JSON.stringify(v)}`);
  return [new Date().toISOString(), message, ...kv].join(" ");
}

/**
 * Whether a worker may run a requested compensation, as far as its history
 * goes (sdk/vectors.json "compensations"): not after its lease passed
 * without a report, and not after a failure that said it may not be
 * retried.
 */
export function compensationDue(rc: Reconciliation | null | undefined): boolean {
  if (!rc) return true;
  return !rc.compensation_timed_out && (rc.compensation_failures === 0 || rc.compensation_retriable);
}
