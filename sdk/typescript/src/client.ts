import { type Backoff, DEFAULT_BACKOFF } from "./backoff.js";
import { ArbiterError, NetworkError, apiError } from "./errors.js";
import { guard, type GuardFunc, type GuardSpec, type Outcome } from "./guard.js";
import { ROUTES, type RouteName } from "./routes.js";
import type {
  Action,
  ActionPage,
  AuditExportOptions,
  AuditProof,
  AuditProofOptions,
  Breaker,
  BreakerInput,
  BulkDecision,
  BulkResult,
  CallOptions,
  Decision,
  DecisionResult,
  Delivery,
  EntriesOptions,
  Entry,
  EntryPage,
  EntryResult,
  Freeze,
  FreezeFilter,
  FreezeInput,
  LedgerEntry,
  Limit,
  LimitInput,
  LimitUsage,
  ListOptions,
  Policy,
  PolicyInput,
  PolicyTest,
  PolicyTestResult,
  Webhook,
  WebhookInput,
} from "./types.js";

/** Configures a Client. */
export interface ClientOptions {
  /** Sends requests with this fetch instead of the global one (proxies, instrumentation). */
  fetch?: typeof fetch;
  /**
   * Bounds each request (default 30 000 ms; 0: no bound besides the
   * signal). A request that runs out of time counts as Arbiter being
   * unavailable.
   */
  timeoutMs?: number;
  /** Names the caller in the User-Agent header where the runtime allows it. */
  userAgent?: string;
  /** Where people open the dashboard, when it is not the API's base URL. Links in errors point there. */
  dashboardUrl?: string;
  /**
   * How long guard() keeps retrying an outcome report while Arbiter cannot
   * be reached (default 2 minutes). Past it the report is given up, and the
   * action times out and waits for a person.
   */
  reportBudgetMs?: number;
  /**
   * The first and largest pause between retries of an outcome report, of an
   * intent waiting for another attempt, and of the worker's tries (default
   * 200 ms and 10 s), each drawn at random up to the exponential bound.
   */
  backoff?: Backoff;
}

const MAX_APPROVAL_WAIT_S = 60;

/**
 * Talks to one Arbiter server with one API key. Every method takes an
 * optional AbortSignal (`{ signal }`) to give up; a signal that aborts
 * rejects the call with the signal's reason.
 */
export class Client {
  readonly baseUrl: string;
  readonly dashboardUrl: string;
  /** @internal */ readonly backoff: Backoff;
  /** @internal */ readonly reportBudgetMs: number;
  readonly #apiKey: string;
  readonly #fetch: typeof fetch;
  readonly #timeoutMs: number;
  readonly #userAgent: string;

  /** A client for the server at baseUrl (e.g. "http://127.0.0.1:8080") that authenticates with apiKey. */
  constructor(baseUrl: string, apiKey: string, options: ClientOptions = {}) {
    this.baseUrl = baseUrl.replace(/\/+$/, "");
    this.#apiKey = apiKey;
    this.#fetch = options.fetch ?? ((input, init) => globalThis.fetch(input, init));
    this.#timeoutMs = options.timeoutMs ?? 30_000;
    this.#userAgent = options.userAgent ?? "arbiter-ts-client";
    this.dashboardUrl = (options.dashboardUrl ?? this.baseUrl).replace(/\/+$/, "");
    this.reportBudgetMs = options.reportBudgetMs ?? 120_000;
    this.backoff = options.backoff ?? DEFAULT_BACKOFF;
  }

  /** The dashboard page of the action with the given id. */
  actionUrl(id: string): string {
    return `${this.dashboardUrl}/actions/${encodeURIComponent(id)}`;
  }

  /**
   * Performs one side effect the safe way, as the ledger decides. See
   * GuardSpec and the package README: intent first (fail closed when it
   * cannot be recorded), the function only on proceed, heartbeats while
   * it runs, the outcome reported until it lands.
   */
  guard<R = unknown>(spec: GuardSpec, fn: GuardFunc<R>, options: CallOptions = {}): Promise<Outcome<R>> {
    return guard(this, spec, fn, options.signal);
  }

  // Entries.

  /**
   * Sends one entry. Every outcome but rejected resolves, whatever the HTTP
   * status (in_progress and held are answered 409). A rejected entry
   * throws an ArbiterError (a KeyReusedError for key_reused) whose `result`
   * is the ledger's answer.
   */
  async submit(entry: Entry, options: CallOptions = {}): Promise<EntryResult> {
    const { status, body, retryAfter } = await this.send("submit", { body: entry, signal: options.signal });
    return entryResult(status, body, retryAfter);
  }

  /**
   * Sends one intent and, if it is held for approval, asks the server to
   * hold the answer until the action is approved (proceed) or denied, for
   * up to waitSeconds (at most 60; Prefer: wait). Any other answer comes at
   * once, as from submit.
   */
  async submitWait(entry: Entry, waitSeconds: number, options: CallOptions = {}): Promise<EntryResult> {
    const wait = Math.floor(Math.min(Math.max(waitSeconds, 0), MAX_APPROVAL_WAIT_S));
    const { status, body, retryAfter } = await this.send("submitWait", {
      body: entry,
      signal: options.signal,
      headers: { Prefer: `wait=${wait}` },
      timeoutMs: this.#timeoutMs > 0 ? this.#timeoutMs + wait * 1000 : 0,
    });
    return entryResult(status, body, retryAfter);
  }

  /**
   * Sends 1–500 entries in one request, applied in order and answered one
   * result each. A rejected entry does not affect the others and does not
   * throw here: check each result's outcome.
   */
  async submitBatch(entries: Entry[], options: CallOptions = {}): Promise<EntryResult[]> {
    const out = await this.call<{ results: EntryResult[] }>("submitBatch", { body: { entries }, signal: options.signal });
    if (out.results.length !== entries.length) {
      throw new ArbiterError(200, "unexpected_answer", `${out.results.length} results for ${entries.length} entries`);
    }
    return out.results;
  }

  // Actions.

  /** One page of actions matching the options, newest first. */
  listActions(options: ListOptions & CallOptions = {}): Promise<ActionPage> {
    return this.call("listActions", { query: listQuery(options), signal: options.signal });
  }

  /** The action for key, in the key's own namespace (admin keys name one). */
  actionByKey(key: string, options: { namespace?: string } & CallOptions = {}): Promise<Action> {
    const query = new URLSearchParams({ key });
    if (options.namespace) query.set("namespace", options.namespace);
    return this.call("actionByKey", { query, signal: options.signal });
  }

  /** The action with the given id. */
  action(id: string, options: CallOptions = {}): Promise<Action> {
    return this.call("action", { id, signal: options.signal });
  }

  /** One page of the timeline of the action with the given id, oldest first. */
  entriesPage(id: string, options: EntriesOptions & CallOptions = {}): Promise<EntryPage> {
    const query = new URLSearchParams();
    if (options.limit !== undefined) query.set("limit", String(options.limit));
    if (options.cursor) query.set("cursor", options.cursor);
    return this.call("entriesPage", { id, query, signal: options.signal });
  }

  /**
   * Every entry of the action's timeline, oldest first, from `cursor` (the
   * start when absent), fetching the next page of `limit` as the loop reaches it.
   */
  async *allEntries(id: string, options: EntriesOptions & CallOptions = {}): AsyncGenerator<LedgerEntry, void, undefined> {
    let cursor = options.cursor;
    for (;;) {
      const page = await this.entriesPage(id, { ...options, cursor });
      yield* page.entries;
      if (!page.next_cursor || page.next_cursor === cursor) return;
      cursor = page.next_cursor;
    }
  }

  /** The whole timeline of the action with the given id, oldest first, read page by page. */
  async entries(id: string, options: CallOptions = {}): Promise<LedgerEntry[]> {
    const out: LedgerEntry[] = [];
    for await (const e of this.allEntries(id, options)) out.push(e);
    return out;
  }

  /** Takes an operator decision on the action (operator or admin key). */
  decide(id: string, decision: Decision, options: CallOptions = {}): Promise<DecisionResult> {
    return this.call("decide", { id, body: decision, signal: options.signal });
  }

  /**
   * Takes one decision on many actions (an operator key in its namespace,
   * or an admin key), each decided as if alone; with dry_run, counts what
   * it would decide and writes nothing.
   */
  decideMany(decision: BulkDecision, options: CallOptions = {}): Promise<BulkResult> {
    return this.call("decideMany", { body: decision, signal: options.signal });
  }

  // Webhook endpoints (admin key).

  createWebhook(input: WebhookInput, options: CallOptions = {}): Promise<Webhook> {
    return this.call("createWebhook", { body: input, signal: options.signal });
  }

  async webhooks(options: CallOptions = {}): Promise<Webhook[]> {
    return (await this.call<{ endpoints: Webhook[] }>("webhooks", { signal: options.signal })).endpoints;
  }

  webhook(id: string, options: CallOptions = {}): Promise<Webhook> {
    return this.call("webhook", { id, signal: options.signal });
  }

  updateWebhook(id: string, input: WebhookInput, options: CallOptions = {}): Promise<Webhook> {
    return this.call("updateWebhook", { id, body: input, signal: options.signal });
  }

  async deleteWebhook(id: string, options: CallOptions = {}): Promise<void> {
    await this.call("deleteWebhook", { id, signal: options.signal });
  }

  /** A new secret, in `secret`; the old one keeps signing for a while. */
  rotateWebhookSecret(id: string, options: CallOptions = {}): Promise<Webhook> {
    return this.call("rotateWebhookSecret", { id, signal: options.signal });
  }

  /** Queues a webhook.test message to the endpoint. */
  testWebhook(id: string, options: CallOptions = {}): Promise<Delivery> {
    return this.call("testWebhook", { id, signal: options.signal });
  }

  /** The endpoint's latest deliveries, newest first. */
  async webhookDeliveries(id: string, options: { limit?: number } & CallOptions = {}): Promise<Delivery[]> {
    const query = options.limit ? new URLSearchParams({ limit: String(options.limit) }) : undefined;
    return (await this.call<{ deliveries: Delivery[] }>("webhookDeliveries", { id, query, signal: options.signal }))
      .deliveries;
  }

  /** Sends a delivery's message again, as a new delivery with the same webhook-id. */
  redeliver(deliveryId: string, options: CallOptions = {}): Promise<Delivery> {
    return this.call("redeliver", { id: deliveryId, signal: options.signal });
  }

  // Approval policies.

  /** Adds a policy (admin key). */
  createPolicy(input: PolicyInput, options: CallOptions = {}): Promise<Policy> {
    return this.call("createPolicy", { body: input, signal: options.signal });
  }

  /** The policies the key may see, of one namespace if given. */
  async policies(options: { namespace?: string } & CallOptions = {}): Promise<Policy[]> {
    const query = options.namespace ? new URLSearchParams({ namespace: options.namespace }) : undefined;
    return (await this.call<{ policies: Policy[] }>("policies", { query, signal: options.signal })).policies;
  }

  policy(id: string, options: CallOptions = {}): Promise<Policy> {
    return this.call("policy", { id, signal: options.signal });
  }

  /** Changes the fields set, as a new version (admin key). */
  updatePolicy(id: string, input: PolicyInput, options: CallOptions = {}): Promise<Policy> {
    return this.call("updatePolicy", { id, body: input, signal: options.signal });
  }

  /** Stops a policy from applying; its versions stay readable (admin key). */
  async deletePolicy(id: string, options: CallOptions = {}): Promise<void> {
    await this.call("deletePolicy", { id, signal: options.signal });
  }

  /** Every version of a policy, oldest first. */
  async policyVersions(id: string, options: CallOptions = {}): Promise<Policy[]> {
    return (await this.call<{ versions: Policy[] }>("policyVersions", { id, signal: options.signal })).versions;
  }

  /** What a rule would have caught; nothing is written. */
  testPolicy(input: PolicyTest, options: CallOptions = {}): Promise<PolicyTestResult> {
    return this.call("testPolicy", { body: input, signal: options.signal });
  }

  // Limits across actions.

  /** Adds a limit (admin key). */
  createLimit(input: LimitInput, options: CallOptions = {}): Promise<Limit> {
    return this.call("createLimit", { body: input, signal: options.signal });
  }

  /** The limits the key may see, of one namespace if given (not agent keys). */
  async limits(options: { namespace?: string } & CallOptions = {}): Promise<Limit[]> {
    const query = options.namespace ? new URLSearchParams({ namespace: options.namespace }) : undefined;
    return (await this.call<{ limits: Limit[] }>("limits", { query, signal: options.signal })).limits;
  }

  limit(id: string, options: CallOptions = {}): Promise<Limit> {
    return this.call("limit", { id, signal: options.signal });
  }

  /** Changes the fields set, as a new version (admin key). Charges already made stay as they were. */
  updateLimit(id: string, input: LimitInput, options: CallOptions = {}): Promise<Limit> {
    return this.call("updateLimit", { id, body: input, signal: options.signal });
  }

  /** Stops a limit from applying; its versions stay readable (admin key). */
  async deleteLimit(id: string, options: CallOptions = {}): Promise<void> {
    await this.call("deleteLimit", { id, signal: options.signal });
  }

  /** Every version of a limit, oldest first. */
  async limitVersions(id: string, options: CallOptions = {}): Promise<Limit[]> {
    return (await this.call<{ versions: Limit[] }>("limitVersions", { id, signal: options.signal })).versions;
  }

  /** A limit's counted use now: the 100 groups with the most, or only `group` if given. */
  limitUsage(id: string, options: { group?: string } & CallOptions = {}): Promise<LimitUsage> {
    const query = options.group ? new URLSearchParams({ group: options.group }) : undefined;
    return this.call("limitUsage", { id, query, signal: options.signal });
  }

  // Freezes: the brake on a namespace's tools.

  /**
   * Starts a freeze (an operator key of the namespace, or an admin key):
   * while it is active, new keys of its tools wait for approval
   * (approval.frozen_by) and every other intent that would run or
   * compensate is answered frozen (the guard's FrozenError). It holds on
   * every replica within a second.
   */
  startFreeze(input: FreezeInput, options: CallOptions = {}): Promise<Freeze> {
    return this.call("startFreeze", { body: input, signal: options.signal });
  }

  /**
   * Lifts an active freeze, saying why: the actions only it held are
   * approved and their waiting agents proceed. A freeze lifted already is
   * an ArbiterError with code conflict.
   */
  liftFreeze(id: string, reason: string, options: CallOptions = {}): Promise<Freeze> {
    return this.call("liftFreeze", { id, body: { reason }, signal: options.signal });
  }

  /** The freezes the key may see, newest first (at most 500): of one namespace, only the active ones, if asked. */
  async freezes(options: FreezeFilter & CallOptions = {}): Promise<Freeze[]> {
    const query = new URLSearchParams();
    if (options.namespace) query.set("namespace", options.namespace);
    if (options.active) query.set("active", "true");
    return (await this.call<{ freezes: Freeze[] }>("freezes", { query, signal: options.signal })).freezes;
  }

  freeze(id: string, options: CallOptions = {}): Promise<Freeze> {
    return this.call("freeze", { id, signal: options.signal });
  }

  // Breakers: freezes started when too many of a tool's actions time out or fail.

  /** Adds a breaker (admin key). */
  createBreaker(input: BreakerInput, options: CallOptions = {}): Promise<Breaker> {
    return this.call("createBreaker", { body: input, signal: options.signal });
  }

  /** The breakers the key may see, of one namespace if given, each with what it counts now (`state`). */
  async breakers(options: { namespace?: string } & CallOptions = {}): Promise<Breaker[]> {
    const query = options.namespace ? new URLSearchParams({ namespace: options.namespace }) : undefined;
    return (await this.call<{ breakers: Breaker[] }>("breakers", { query, signal: options.signal })).breakers;
  }

  /** One breaker, with what it counts now (`state`). */
  breaker(id: string, options: CallOptions = {}): Promise<Breaker> {
    return this.call("breaker", { id, signal: options.signal });
  }

  /** Changes the fields set, as a new version (admin key). */
  updateBreaker(id: string, input: BreakerInput, options: CallOptions = {}): Promise<Breaker> {
    return this.call("updateBreaker", { id, body: input, signal: options.signal });
  }

  /** Stops a breaker (admin key); a freeze it started stays until someone lifts it. */
  async deleteBreaker(id: string, options: CallOptions = {}): Promise<void> {
    await this.call("deleteBreaker", { id, signal: options.signal });
  }

  /** Every version of a breaker, oldest first, without `state`. */
  async breakerVersions(id: string, options: CallOptions = {}): Promise<Breaker[]> {
    return (await this.call<{ versions: Breaker[] }>("breakerVersions", { id, signal: options.signal })).versions;
  }

  // The evidence log.

  /**
   * The key that checks the log's checkpoints, in the note format
   * (`origin+hash+base64`), as `arbiter audit key` prints it. Any key, or
   * none, may ask.
   */
  async auditKey(options: CallOptions = {}): Promise<string> {
    return (await this.raw("auditKey", { signal: options.signal, headers: { Accept: "text/plain, application/json" } })).trim();
  }

  /**
   * The newest signed checkpoint, a C2SP signed note (origin, tree size and
   * base64 root hash, then its signature), exactly as sent. Any key, or
   * none, may ask; before the first checkpoint is signed (about 10 s after
   * the first entry) it is an ArbiterError with code not_found.
   */
  auditCheckpoint(options: CallOptions = {}): Promise<string> {
    return this.raw("auditCheckpoint", { signal: options.signal, headers: { Accept: "text/plain, application/json" } });
  }

  /**
   * The inclusion proof of the entry with the given id against the newest
   * checkpoint, or the one of tree size `size` (readers of its namespace,
   * operators and admins; an agent key is forbidden). An entry not logged
   * yet, or not in that checkpoint yet, is an ArbiterError with code not_found.
   */
  auditProof(entryId: string, options: AuditProofOptions & CallOptions = {}): Promise<AuditProof> {
    const query = options.size !== undefined ? new URLSearchParams({ size: String(options.size) }) : undefined;
    return this.call("auditProof", { id: entryId, query, signal: options.signal });
  }

  /**
   * The RFC 6962 consistency proof (base64 hashes) that the tree of size
   * `from` is a prefix of the tree of size `to` (at most the newest
   * checkpoint's).
   */
  async auditConsistency(from: number, to: number, options: CallOptions = {}): Promise<string[]> {
    const query = new URLSearchParams({ from: String(from), to: String(to) });
    return (await this.call<{ proof: string[] }>("auditConsistency", { query, signal: options.signal })).proof;
  }

  /**
   * The namespace's evidence bundle, NDJSON, as `arbiter audit export`
   * writes it: a first line with the `checkpoint` and the `verifier_key`,
   * then one line per logged entry recorded in [since, until), in log
   * order, with its inclusion proof. `arbiter audit verify BUNDLE --key
   * KEY` checks it offline.
   */
  auditExport(namespace: string, options: AuditExportOptions & CallOptions = {}): Promise<string> {
    const query = new URLSearchParams({ namespace });
    if (options.since !== undefined) query.set("since", new Date(options.since).toISOString());
    if (options.until !== undefined) query.set("until", new Date(options.until).toISOString());
    return this.raw("auditExport", { query, signal: options.signal, headers: { Accept: "application/x-ndjson, application/json" } });
  }

  // The service.

  /** Resolves when the server process is up. */
  async health(options: CallOptions = {}): Promise<void> {
    await this.call("health", { signal: options.signal });
  }

  /** Resolves when the server can serve (database reachable, schema current); a 503 otherwise. */
  async ready(options: CallOptions = {}): Promise<void> {
    await this.call("ready", { signal: options.signal });
  }

  /** The server's Prometheus metrics, in the text format. */
  async metrics(options: CallOptions = {}): Promise<string> {
    return this.raw("metrics", { signal: options.signal });
  }

  /** The OpenAPI 3.1 document the server implements. */
  async openapi(options: CallOptions = {}): Promise<Record<string, unknown>> {
    return JSON.parse(await this.raw("openapi", { signal: options.signal })) as Record<string, unknown>;
  }

  // Plumbing.

  /** Sends the request of a route and decodes a successful JSON answer; any other answer throws an ArbiterError. */
  private async call<T>(name: RouteName, req: RequestParts = {}): Promise<T> {
    const { status, body } = await this.send(name, req);
    if (status < 200 || status > 299) throw answerError(status, body);
    return (body === "" ? undefined : JSON.parse(body)) as T;
  }

  /** Sends the request of a route and returns a successful answer's text as sent; any other answer throws an ArbiterError. */
  private async raw(name: RouteName, req: RequestParts = {}): Promise<string> {
    const { status, body } = await this.send(name, req);
    if (status < 200 || status > 299) throw answerError(status, body);
    return body;
  }

  /**
   * Performs the request of a route, as listed in ROUTES, and returns the
   * status and body whatever the status. No answer is a NetworkError,
   * unless the caller's signal aborted: then its reason.
   */
  private async send(name: RouteName, req: RequestParts): Promise<{ status: number; body: string; retryAfter: string | null }> {
    const route = ROUTES[name];
    let path: string = route.path;
    if (path.includes("{id}")) {
      if (!req.id) throw new ArbiterError(0, "invalid", `${name}: the id is empty`);
      path = path.replace("{id}", encodeURIComponent(req.id));
    }
    let url = this.baseUrl + path;
    const qs = req.query?.toString();
    if (qs) url += "?" + qs;
    const headers: Record<string, string> = { Accept: "application/json", "User-Agent": this.#userAgent };
    if (req.body !== undefined) headers["Content-Type"] = "application/json";
    if (this.#apiKey) headers["Authorization"] = `Bearer ${this.#apiKey}`;
    Object.assign(headers, req.headers);

    req.signal?.throwIfAborted();
    const timeoutMs = req.timeoutMs ?? this.#timeoutMs;
    const ctl = new AbortController();
    const onAbort = () => ctl.abort(req.signal!.reason);
    req.signal?.addEventListener("abort", onAbort, { once: true });
    const timer = timeoutMs > 0 ? setTimeout(() => ctl.abort(new Error(`no answer within ${timeoutMs}ms`)), timeoutMs) : undefined;
    try {
      const res = await this.#fetch(url, {
        method: route.method,
        headers,
        body: req.body === undefined ? undefined : JSON.stringify(req.body),
        signal: ctl.signal,
      });
      return { status: res.status, body: await res.text(), retryAfter: res.headers?.get?.("Retry-After") ?? null };
    } catch (err) {
      if (req.signal?.aborted) throw req.signal.reason;
      throw new NetworkError(route.method, path, ctl.signal.aborted ? ctl.signal.reason : err);
    } finally {
      clearTimeout(timer);
      req.signal?.removeEventListener("abort", onAbort);
    }
  }
}

interface RequestParts {
  id?: string;
  query?: URLSearchParams | undefined;
  body?: unknown;
  headers?: Record<string, string>;
  timeoutMs?: number;
  signal?: AbortSignal | undefined;
}

function listQuery(o: ListOptions): URLSearchParams {
  const q = new URLSearchParams();
  if (o.status !== undefined) {
    const s = Array.isArray(o.status) ? o.status : [o.status];
    if (s.length > 0) q.set("status", s.join(","));
  }
  const set = (k: string, v: string | undefined) => {
    if (v) q.set(k, v);
  };
  set("tool", o.tool);
  set("agent", o.agent);
  set("q", o.q);
  set("namespace", o.namespace);
  set("cursor", o.cursor);
  if (o.since !== undefined) q.set("since", new Date(o.since).toISOString());
  if (o.until !== undefined) q.set("until", new Date(o.until).toISOString());
  if (o.limit) q.set("limit", String(o.limit));
  return q;
}

/**
 * Reads the answer to one entry. A frozen answer whose error does not say
 * when to ask again takes the Retry-After header's seconds.
 */
function entryResult(status: number, body: string, retryAfter: string | null = null): EntryResult {
  let r: EntryResult | undefined;
  try {
    r = JSON.parse(body) as EntryResult;
  } catch {
    r = undefined;
  }
  if (!r || typeof r !== "object" || !r.outcome) {
    // Not an entry result: the request itself failed (401, 413, 503, …).
    throw answerError(status, body);
  }
  if (r.outcome === "rejected") {
    const e: { code: string; message: string } = r.error ?? { code: "unexpected_answer", message: "entry rejected without an error" };
    throw apiError(status, e.code, e.message, r);
  }
  if (r.outcome === "frozen" && r.error && !(typeof r.error.retry_after === "number" && r.error.retry_after > 0)) {
    const s = Number(retryAfter);
    if (retryAfter && Number.isInteger(s) && s > 0) r.error.retry_after = s;
  }
  return r;
}

/**
 * Reads the error body {"error": {"code", "message"}} of a non-2xx answer.
 * An answer that is not Arbiter's (a proxy's HTML page) still becomes an
 * ArbiterError, with the status and an excerpt of the body.
 */
function answerError(status: number, body: string): ArbiterError {
  try {
    const e = (JSON.parse(body) as { error?: { code?: string; message?: string } }).error;
    if (e?.code) return apiError(status, e.code, e.message ?? "");
  } catch {
    // not JSON
  }
  const code = status === 502 || status === 503 || status === 504 ? "unavailable" : "unexpected_answer";
  let msg = body.trim();
  if (msg.length > 200) msg = msg.slice(0, 200) + "…";
  return new ArbiterError(status, code, msg || `HTTP ${status}`);
}
