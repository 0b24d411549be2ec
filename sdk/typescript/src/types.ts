// The wire vocabulary of Arbiter, as web/openapi.json defines it. Times
// are RFC 3339 strings, as the server sends them; JSON values stay as
// parsed.

/** Status of an action, in lifecycle order. */
export type Status =
  | "in_progress"
  | "succeeded"
  | "failed"
  | "timed_out"
  | "retry_requested"
  | "confirmed"
  | "compensation_requested"
  | "compensated"
  | "abandoned"
  | "awaiting_approval"
  | "approved"
  | "denied";

/**
 * How safe a repeat of a tool call is: `keyed` (the downstream honours the
 * key, so a retry with it is safe), `idempotent` (state-setting),
 * `read_only`, or `unkeyed` (the downstream does not deduplicate; the
 * default, the cautious one).
 */
export type Effect = "read_only" | "idempotent" | "keyed" | "unkeyed";

/** Entry types an agent sends. */
export type EntryType =
  | "intent"
  | "heartbeat"
  | "succeeded"
  | "failed"
  | "outcome_unknown"
  | "compensated"
  | "note"
  | "lookup"
  | "lookup_result"
  | "compensation_failed";

/** The ledger's answer to one entry. */
export type Outcome =
  | "proceed"
  | "replay"
  | "in_progress"
  | "held"
  | "compensate"
  | "recorded"
  | "duplicate"
  | "rejected"
  | "pending_approval"
  | "denied"
  | "frozen";

/** What a lookup found out about an attempt whose outcome was unknown. */
export type Answer = "happened" | "not_happened" | "unknown";

/** Every answer a lookup may give. */
export const ANSWERS: readonly Answer[] = ["happened", "not_happened", "unknown"];

/** How many lookups the ledger grants one attempt. */
export const MAX_LOOKUPS = 3;

/** Decisions an operator can take. */
export type DecisionName =
  | "confirm"
  | "retry"
  | "compensate"
  | "mark_compensated"
  | "abandon"
  | "approve"
  | "reject"
  | "acknowledge";

/** JSON as it travels. */
export type JsonValue = null | boolean | number | string | JsonValue[] | { [k: string]: JsonValue };

/**
 * One ledger entry as an agent sends it. Which fields a type takes is in
 * the OpenAPI document; the server rejects unknown combinations (invalid).
 */
export interface Entry {
  key: string;
  type: EntryType;
  // Intents.
  tool?: string;
  effect?: Effect;
  params?: Record<string, unknown>;
  /** Lease in seconds (intents, heartbeats and lookups). */
  timeout?: number;
  reference?: string;
  /** Hold a first intent until a person approves it. */
  require_approval?: boolean;
  /** How long the downstream honours the key, in seconds from the action's creation. */
  key_ttl?: number;
  // Every type.
  agent?: string;
  run_id?: string;
  occurred_at?: string;
  // Heartbeats, outcomes and lookups: the attempt they belong to.
  attempt?: number;
  result?: unknown;
  external_ref?: string;
  error?: string;
  retriable?: boolean;
  message?: string;
  // Lookup results.
  answer?: Answer;
  evidence?: unknown;
}

/**
 * The stable codes of the API's errors (web/openapi.json ErrorDetail.code).
 * ArbiterError.code may also be one the SDK gives an answer that is not
 * Arbiter's (unexpected_answer, unavailable).
 */
export type ErrorCode =
  | "invalid"
  | "invalid_json"
  | "invalid_policy"
  | "invalid_limit"
  | "invalid_breaker"
  | "too_many_entries"
  | "body_too_large"
  | "unsupported_media_type"
  | "unauthorized"
  | "forbidden"
  | "not_found"
  | "method_not_allowed"
  | "key_reused"
  | "duplicate_risk_unacknowledged"
  | "stale_attempt"
  | "lease_lost"
  | "invalid_transition"
  | "version_conflict"
  | "already_approved"
  | "approval_expired"
  | "limit_exceeded"
  | "frozen"
  | "approver_unknown"
  | "conflict"
  | "too_many_matched"
  | "unavailable"
  | "internal";

/** An API error as the server describes it. */
export interface ErrorDetail {
  code: ErrorCode;
  message: string;
  /**
   * With limit_exceeded only: the limits that denied the intent, each with
   * its group's counted use when the first intent came, the intent's
   * amount and the limit's max.
   */
  limits?: ApprovalLimit[];
  /**
   * With frozen only: seconds to wait before asking again (the Retry-After
   * header of a single entry's answer says the same).
   */
  retry_after?: number;
}

/** The ledger's answer to one entry. */
export interface EntryResult {
  key: string;
  type: string;
  outcome: Outcome;
  attempt: number | null;
  lease_until: string | null;
  action: Action | null;
  error: ErrorDetail | null;
}

/** Says who wrote a ledger entry. */
export interface Actor {
  kind: "agent" | "operator" | "system";
  /** The person (an operator's email) or the agent's or system's name. */
  name: string;
  /** How an operator decided: "dashboard", or "api_key:<key name>". */
  via?: string;
}

/** One person's yes, or the rejection. */
export interface ApprovalVote {
  by: Actor;
  at: string;
  reason: string;
}

/** What an action held for approval needs and has. */
export interface Approval {
  /** Distinct people who must approve; 0 when only a freeze holds the action. */
  required: number;
  approvals: ApprovalVote[];
  expires_at: string;
  escalate_at: string | null;
  /**
   * The policies that hold it; error is the condition's run-time error
   * (the action is held because the condition could not be evaluated),
   * null or absent when it evaluated.
   */
  policies: { id: string; name: string; version: number; error?: string | null }[];
  /** The limits whose max the action would take its group over: the people who approve it let it run over them. */
  limits: ApprovalLimit[];
  /** The active freezes that hold it: it is approved once each is lifted and its people have approved it. */
  frozen_by: FreezeRef[];
  rejection: ApprovalVote | null;
}

/** One answered lookup, as the action keeps it for whoever decides next. */
export interface LookupAnswerRecord {
  attempt: number;
  answer: Answer;
  at: string;
  by: Actor;
  external_ref: string | null;
  /** The start of the evidence the downstream gave, as compact JSON. */
  said: string;
}

/**
 * What an action carries about finding out what happened: key expiry,
 * the lookups of its current attempt, and how its compensation went.
 */
export interface Reconciliation {
  key_expires_at: string | null;
  lookup_attempt: number;
  lookups: number;
  lookup_until: string | null;
  last_lookup: LookupAnswerRecord | null;
  compensation_failures: number;
  compensation_error: string | null;
  compensation_retriable: boolean;
  compensation_timed_out: boolean;
}

/** The authoritative record of one intended side effect. */
export interface Action {
  id: string;
  namespace: string;
  key: string;
  tool: string;
  effect: Effect;
  status: Status;
  attempt: number;
  version: number;
  lease_until: string | null;
  reference: string | null;
  agent: string | null;
  params: Record<string, unknown>;
  result: unknown;
  external_ref: string | null;
  created_at: string;
  updated_at: string;
  approval: Approval | null;
  reconciliation: Reconciliation | null;
  /** What the limits that matched the first intent charged it, each at the version it had then; null when none matched. */
  limits: LimitCharge[] | null;
}

/** One immutable record of an action's timeline. */
export interface LedgerEntry {
  id: string;
  seq: number;
  type: string;
  actor: Actor;
  attempt: number | null;
  payload: Record<string, unknown>;
  occurred_at: string | null;
  recorded_at: string;
  /**
   * The entry's leaf in the evidence log (auditProof), once it joined the
   * log, within 2 s of its commit; absent before (and from servers older
   * than the log).
   */
  log_index?: number;
}

/** One page of actions, newest first. */
export interface ActionPage {
  actions: Action[];
  next_cursor: string | null;
}

/** One page of a timeline, oldest first: at most its limit of entries and about 4 MiB. */
export interface EntryPage {
  entries: LedgerEntry[];
  next_cursor: string | null;
}

/** Selects one page of a timeline. */
export interface EntriesOptions {
  /** 1–1000, default 1000. */
  limit?: number;
  /** `next_cursor` of the previous page. */
  cursor?: string;
}

/** An operator's resolution of an action. */
export interface Decision {
  decision: DecisionName;
  /** Required, except for approve. */
  reason?: string;
  /** Refuses the decision (409 version_conflict) if the action changed since. */
  expected_version?: number;
  /** Required to retry an unkeyed action. */
  acknowledge_duplicate_risk?: boolean;
  /** Evidence for confirm. */
  external_ref?: string;
  result?: unknown;
}

/** The action after a decision and the entry recording it. */
export interface DecisionResult {
  action: Action;
  entry: LedgerEntry;
}

/** Selects the actions of a bulk decision: every criterion given must hold, and at least one must be given. */
export interface BulkFilter {
  ids?: string[];
  status?: Status[];
  tool?: string;
  agent?: string;
  namespace?: string;
  /** Created at or after. */
  since?: string;
  /** Created before. */
  until?: string;
}

/**
 * One decision on the actions `filter` selects. Unless `dry_run`, `reason`
 * (except to approve) and `max_count` are required: if the decision is
 * allowed on more than max_count actions, nothing is written and the error's
 * code is too_many_matched.
 */
export interface BulkDecision {
  filter: BulkFilter;
  decision: DecisionName;
  reason?: string;
  acknowledge_duplicate_risk?: boolean;
  dry_run?: boolean;
  max_count?: number;
}

/**
 * What a bulk decision did: a dry run sets matched, allowed and sample; an
 * applied one sets applied and skipped (the matched actions not decided,
 * with the code a single decision would have got, and ids not found).
 */
export interface BulkResult {
  matched?: number;
  allowed?: number;
  sample?: Action[];
  applied?: number;
  skipped?: { id: string; code: string }[];
}

/** An approval policy. */
export interface Policy {
  id: string;
  namespace: string;
  name: string;
  tools: string[];
  condition: string;
  approvals_required: number;
  expires_after: number;
  escalate_after: number | null;
  mode: Mode;
  enabled: boolean;
  version: number;
  created_at: string;
  updated_at: string;
}

/** Creates a policy (name, namespace and tools required) or changes the fields set. */
export interface PolicyInput {
  name?: string;
  namespace?: string;
  tools?: string[];
  condition?: string;
  approvals_required?: number;
  expires_after?: number;
  escalate_after?: number;
  /** Default enforce. */
  mode?: Mode;
  enabled?: boolean;
}

/** Asks what a rule would have caught among the namespace's latest first intents. */
export interface PolicyTest {
  namespace: string;
  tools: string[];
  condition?: string;
  limit?: number;
}

export interface PolicyTestResult {
  examined: number;
  matched: number;
  sample: Action[];
  errors?: number;
}

/**
 * How a policy or a limit applies: `enforce` holds (or denies), `shadow`
 * is evaluated and recorded on the intent's entry (a shadow limit is
 * charged and counted in its usage) but holds and denies nothing.
 */
export type Mode = "enforce" | "shadow";

/** What a limit does to a first intent that would take its group over max: hold it for approval, or deny it. */
export type LimitOver = "hold" | "deny";

/**
 * A limit across actions: it charges the first intents it matches
 * `amount` in their business group (`group_by`), and holds or denies one
 * that would take its group's use within the sliding `window` over `max`.
 */
export interface Limit {
  id: string;
  namespace: string;
  name: string;
  /** Tool patterns; `*` matches any run of characters. */
  tools: string[];
  /** Which first intents of these tools it applies to: a CEL bool, as a policy's condition; empty means all. */
  condition: string;
  /** CEL, an int or a double: the intent's size; empty charges 1, so the limit counts actions. */
  amount: string;
  /** CEL, a string: the business group the budget is kept for; empty is one group for the namespace. */
  group_by: string;
  /** Seconds, 1–2592000: a sliding window. */
  window: number;
  /** The most a group may use in the window; 0 holds or denies everything the limit covers. */
  max: number;
  over: LimitOver;
  approvals_required: number;
  mode: Mode;
  enabled: boolean;
  version: number;
  created_at: string;
  updated_at: string;
}

/**
 * Creates a limit (name, namespace, tools, window and max required) or
 * changes the fields set. CEL that does not compile to what its field
 * needs is an ArbiterError with code invalid_limit.
 */
export interface LimitInput {
  name?: string;
  namespace?: string;
  tools?: string[];
  condition?: string;
  amount?: string;
  group_by?: string;
  window?: number;
  max?: number;
  /** Default hold. */
  over?: LimitOver;
  /** 1–5, default 1: how many people approve an intent a hold limit holds. */
  approvals_required?: number;
  /** Default enforce. */
  mode?: Mode;
  enabled?: boolean;
}

/** What one limit charged an action's first intent (Action.limits), at the version the limit had then. */
export interface LimitCharge {
  id: string;
  name: string;
  version: number;
  /** The business group `group_by` gave; "" when the limit has none. */
  group: string;
  amount: number;
  /**
   * The intent took its group over the limit's max (or its amount could not
   * be evaluated: fail closed), whether or not the limit acted on it (a
   * shadow limit does not).
   */
  exceeded: boolean;
}

/** A limit whose max an action held for approval would take its group over (Approval.limits). */
export interface ApprovalLimit {
  id: string;
  name: string;
  version: number;
  group: string;
  /** The group's counted use when the intent came. */
  used: number;
  amount: number;
  max: number;
}

/** A limit's counted use now. */
export interface LimitUsage {
  window: number;
  max: number;
  /** The groups with the most counted use, most first (at most 100). */
  groups: GroupUsage[];
}

/** One group's counted use. */
export interface GroupUsage {
  group: string;
  used: number;
  /** How many actions' charges count. */
  actions: number;
  /** When the oldest counting charge was made: its use leaves the window `window` seconds later. */
  oldest_at: string;
}

/** A freeze that holds an action (Approval.frozen_by). */
export interface FreezeRef {
  id: string;
  reason: string;
}

/**
 * The brake on a namespace's tools. While `lifted_at` is null, new keys of
 * those tools wait for approval (Approval.frozen_by) and every other intent
 * that would proceed or compensate is answered `frozen` (FrozenError).
 * `by` is the operator who started it, or the system for a breaker (name
 * `breaker:<name>`, `breaker_id` set).
 */
export interface Freeze {
  id: string;
  namespace: string;
  /** Tool patterns; `*` matches any run of characters. */
  tools: string[];
  reason: string;
  by: Actor;
  breaker_id: string | null;
  started_at: string;
  lifted_at: string | null;
  lifted_by: Actor | null;
  lift_reason: string | null;
}

/** Starts a freeze (an operator key of the namespace, or an admin key). */
export interface FreezeInput {
  namespace: string;
  /** Default every tool (`["*"]`). */
  tools?: string[];
  /** Required: why, for the people who see the actions it holds. */
  reason: string;
}

/** Selects freezes: of one namespace, only the active ones. */
export interface FreezeFilter {
  namespace?: string;
  active?: boolean;
}

/**
 * Starts a freeze of its tools when, among their actions of the last
 * `window` seconds that have an outcome or lost it (at least
 * `min_actions`), the share timed out is above `max_unknown_ratio` or the
 * share failed above `max_failure_ratio`. It does not trip again while its
 * freeze is active. `state` is in the answers of breaker() and breakers().
 */
export interface Breaker {
  id: string;
  namespace: string;
  name: string;
  tools: string[];
  /** Seconds, 1–86400. */
  window: number;
  /** 1–100000. */
  min_actions: number;
  /** 0–1, or null: the share of timed-out actions that trips it. */
  max_unknown_ratio: number | null;
  /** 0–1, or null: the share of failed actions that trips it. */
  max_failure_ratio: number | null;
  enabled: boolean;
  version: number;
  created_at: string;
  updated_at: string;
  state?: BreakerState;
}

/**
 * What a breaker counts now: its tools' actions since `since` (its
 * window's start, or the lift of its last freeze if later) that have an
 * outcome or lost it, and the freeze it started while that is active.
 */
export interface BreakerState {
  since: string;
  actions: number;
  timed_out: number;
  failed: number;
  freeze: Freeze | null;
}

/**
 * Creates a breaker (name, namespace, tools and a ratio required) or
 * changes the fields set. Numbers out of range, or no ratio at all, are an
 * ArbiterError with code invalid_breaker.
 */
export interface BreakerInput {
  name?: string;
  namespace?: string;
  tools?: string[];
  /** Seconds, 1–86400, default 300. */
  window?: number;
  /** 1–100000, default 10. */
  min_actions?: number;
  /** 0–1. */
  max_unknown_ratio?: number;
  /** 0–1. */
  max_failure_ratio?: number;
  /** Default true. */
  enabled?: boolean;
}

export type WebhookEventType =
  | "action.timed_out"
  | "action.decided"
  | "action.key_reused"
  | "action.stale_outcome"
  | "action.late_result"
  | "action.compensated"
  | "action.failed"
  | "action.approval_requested"
  | "action.approved"
  | "action.approval_escalated"
  | "action.approval_expired"
  | "action.reconciled"
  | "action.limit_exceeded"
  | "freeze.started"
  | "freeze.lifted"
  | "audit.checkpoint"
  | "audit.mismatch"
  | "webhook.test";

/** An endpoint that receives alerts. `secret` is set only on creation and rotation. */
export interface Webhook {
  id: string;
  url: string;
  event_types: WebhookEventType[];
  namespaces: string[];
  format: "standard" | "slack";
  description: string;
  enabled: boolean;
  disabled_reason: string | null;
  failing_since: string | null;
  created_at: string;
  updated_at: string;
  secret?: string;
}

export interface WebhookInput {
  url?: string;
  event_types?: WebhookEventType[];
  /** Empty: every namespace. */
  namespaces?: string[];
  format?: "standard" | "slack";
  description?: string;
  enabled?: boolean;
}

export interface DeliveryAttempt {
  attempted_at: string;
  status_code: number | null;
  latency_ms: number;
  response_excerpt: string;
  error: string | null;
}

/** One alert message on its way to one endpoint. */
export interface Delivery {
  id: string;
  message_id: string;
  webhook_id: string;
  endpoint_id: string;
  event_type: WebhookEventType;
  action_id: string | null;
  state: "pending" | "succeeded" | "failed";
  attempt_count: number;
  next_attempt_at: string | null;
  last_status: number | null;
  last_error: string | null;
  created_at: string;
  updated_at: string;
  attempts: DeliveryAttempt[];
}

/**
 * An entry's inclusion proof (RFC 6962) in the tree of a signed
 * checkpoint: hash the entry's leaf (SHA-256 of 0x00 and the leaf),
 * combine it with `inclusion` as RFC 6962 does, and compare with the
 * checkpoint's root hash.
 */
export interface AuditProof {
  log_index: number;
  tree_size: number;
  /** Base64 of the leaf's hash. */
  leaf_hash: string;
  /** Base64 hashes, from the leaf's sibling up. */
  inclusion: string[];
  /** The checkpoint proved against, a C2SP signed note. */
  checkpoint: string;
}

/** Picks the checkpoint an inclusion proof is against. */
export interface AuditProofOptions {
  /** The tree size of a signed checkpoint; absent: the newest. */
  size?: number;
}

/** Selects the entries of an evidence bundle, by the time they were recorded. */
export interface AuditExportOptions {
  /** Recorded at or after. */
  since?: Date | string;
  /** Recorded before. */
  until?: Date | string;
}

/** Filters a list of actions; absent fields match everything. */
export interface ListOptions {
  status?: Status | Status[];
  tool?: string;
  agent?: string;
  /** Created at or after. */
  since?: Date | string;
  /** Created before. */
  until?: Date | string;
  /** A key or a reference, exactly. */
  q?: string;
  /** For admin keys; other keys see their own namespace only. */
  namespace?: string;
  /** 1–500, default 50. */
  limit?: number;
  /** `next_cursor` of the previous page. */
  cursor?: string;
}

/** Every call takes an AbortSignal to give up. */
export interface CallOptions {
  signal?: AbortSignal;
}
