/**
 * The TypeScript SDK for Arbiter, the action ledger for AI agents. It owns
 * three things, as the Go SDK does:
 *
 *  - Client: a typed client for every route of the HTTP API; every answer
 *    that is not a success is an ArbiterError carrying the stable code.
 *  - client.guard(): one call that wraps a side effect the safe way: the
 *    intent first, under a key derived from the business identity (key()),
 *    the function only on proceed, heartbeats while it runs, and the
 *    outcome reported until it lands.
 *  - Worker: carries out operators' decisions (retries, compensations) and
 *    looks timed-out attempts up at the downstream before a person decides.
 *
 * No runtime dependencies: global fetch and AbortSignal (Node 20+, Deno, Bun).
 */
export { Client, type ClientOptions } from "./client.js";
export {
  DEFAULT_FROZEN_RETRY_S,
  type Attempt,
  type CompensateFunc,
  type GuardFunc,
  type GuardReturn,
  type GuardSpec,
  type Outcome,
} from "./guard.js";
export { Worker, compensationDue, type Handler, type Logger, type WorkerOptions } from "./worker.js";
export { LOOKUP_LEASE_MARGIN_MS, lookupDue, lookupLeaseS, type LookupAnswer, type LookupFunc, type LookupRequest } from "./lookup.js";
export { key, MAX_KEY_BYTES } from "./key.js";
export { NotDone, classifyError, classifyWith, errorKind, type Classification, type Classifier, type ErrorKind } from "./classify.js";
export { type Backoff, DEFAULT_BACKOFF, backoffBound, backoffPause } from "./backoff.js";
export { ROUTES, type Route, type RouteName } from "./routes.js";
export {
  ArbiterError,
  CompensationRequestedError,
  DeniedError,
  LimitExceededError,
  FinishedError,
  FrozenError,
  HeldError,
  InProgressError,
  KeyReusedError,
  LeaseLostError,
  NetworkError,
  OutcomeUnknownError,
  PendingApprovalError,
  ReportError,
  ResultNotSavedError,
  RetriableError,
  UnknownOutcome,
  UnreachableError,
  isCode,
  isRetriable,
  isUnavailable,
  isUnknown,
  retriable,
  unknown,
} from "./errors.js";
export * from "./types.js";
