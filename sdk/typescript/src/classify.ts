// What a guard records when the guarded call threw: sdk/vectors.json
// "outcomes". Only an error that proves the effect did not happen is
// failed; a timeout, a lost connection and anything the SDK cannot
// classify leave the outcome unknown (a lookup, then a person).

import { RetriableError } from "./errors.js";

/** What an error says about the effect: it did not happen (final, or a later call may try again), or nobody knows. */
export type Classification = "failed" | "failed_retriable" | "outcome_unknown";

/** The kinds of error sdk/vectors.json "outcomes" names. */
export type ErrorKind = "timeout" | "connection_lost" | "connection_refused" | "not_done" | "http_status" | "other";

/**
 * Thrown by a guarded function (or a tool's execute): the effect did not
 * happen, as the function knows for certain (the provider refused the
 * request, a check failed before anything was sent). Recorded failed,
 * with retriable as given: a retriable failure lets a later intent try
 * again.
 */
export class NotDone extends Error {
  override name = "NotDone";
  readonly retriable: boolean;
  constructor(message: string, options: { retriable?: boolean; cause?: unknown } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.retriable = options.retriable ?? false;
  }
}

/** How one guarded call classifies what it threw: see GuardSpec.classify. */
export type Classifier = (err: unknown) => Classification;

const LOST = new Set(["ECONNRESET", "EPIPE", "ECONNABORTED", "UND_ERR_SOCKET", "UND_ERR_CLOSED"]);
const TIMEOUT = new Set(["ETIMEDOUT", "UND_ERR_HEADERS_TIMEOUT", "UND_ERR_BODY_TIMEOUT", "UND_ERR_CONNECT_TIMEOUT", "ABORT_ERR"]);

function codeOf(e: unknown): string {
  const c = (e as { code?: unknown } | null)?.code;
  return typeof c === "string" ? c : "";
}

/** The HTTP status an error carries (status, statusCode or response.status), if any. */
export function statusOf(err: unknown): number | undefined {
  for (let e = err, depth = 0; e != null && typeof e === "object" && depth < 8; depth++, e = (e as { cause?: unknown }).cause) {
    const o = e as { status?: unknown; statusCode?: unknown; response?: { status?: unknown } };
    for (const s of [o.status, o.statusCode, o.response?.status]) if (typeof s === "number" && s >= 100 && s <= 599) return s;
  }
  return undefined;
}

/**
 * The kind of err, looking through its causes: a fetch AbortError or
 * TimeoutError (or a socket/undici timeout) is a timeout; a reset, broken
 * pipe or closed socket after the request may have left is a lost
 * connection; ECONNREFUSED is a refused connection (nothing was sent);
 * NotDone and retriable() are not_done; an error with an HTTP status is
 * http_status; anything else is other.
 */
export function errorKind(err: unknown): ErrorKind {
  let status = false;
  for (let e = err, depth = 0; e != null && depth < 8; depth++, e = e instanceof Error ? e.cause : undefined) {
    if (e instanceof NotDone || e instanceof RetriableError) return "not_done";
    const name = e instanceof Error || (typeof DOMException !== "undefined" && e instanceof DOMException) ? (e as Error).name : "";
    const code = codeOf(e);
    if (name === "AbortError" || name === "TimeoutError" || TIMEOUT.has(code)) return "timeout";
    if (LOST.has(code)) return "connection_lost";
    if (code === "ECONNREFUSED") return "connection_refused";
    if (statusOf(e) !== undefined) status = true;
  }
  return status ? "http_status" : "other";
}

/**
 * sdk/vectors.json "outcomes": what the guard records for err. notDone
 * lists the HTTP statuses the tool maps as not done (the downstream
 * refused the request), e.g. [400, 402, 404, 409, 422]; none by default.
 */
export function classifyError(err: unknown, notDone: readonly number[] = []): Classification {
  switch (errorKind(err)) {
    case "not_done": {
      for (let e = err, depth = 0; e != null && depth < 8; depth++, e = e instanceof Error ? e.cause : undefined) {
        if (e instanceof NotDone) return e.retriable ? "failed_retriable" : "failed";
        if (e instanceof RetriableError) return "failed_retriable";
      }
      return "failed";
    }
    case "connection_refused":
      return "failed_retriable";
    case "http_status":
      return notDone.includes(statusOf(err)!) ? "failed" : "outcome_unknown";
    default:
      return "outcome_unknown";
  }
}

/** The tool's classifier (a classifier that throws, or answers something else, counts as outcome_unknown), or the default rule. */
export function classifyWith(err: unknown, classify: Classifier | undefined, notDone: readonly number[] | undefined): Classification {
  if (!classify) return classifyError(err, notDone);
  try {
    const c = classify(err);
    return c === "failed" || c === "failed_retriable" || c === "outcome_unknown" ? c : "outcome_unknown";
  } catch {
    return "outcome_unknown";
  }
}

/** The entry's error: the message, prefixed by its kind for timeouts and lost connections. */
export function kindPrefix(err: unknown): string {
  const k = errorKind(err);
  return k === "timeout" ? "timeout: " : k === "connection_lost" ? "connection lost: " : "";
}
