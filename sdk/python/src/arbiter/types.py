"""The wire contract's shapes (web/openapi.json) as dataclasses, and the
vocabulary as Literal aliases and constants. Answers are decoded by field
type; fields the server adds later are ignored, so an older SDK keeps
working."""

from __future__ import annotations

import dataclasses
import re
import sys
import typing
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Dict, Final, List, Literal, Optional, Tuple, Type, TypeVar, Union

# Each group of the vocabulary is a Literal alias spelling the values of
# its enum in web/openapi.json (tests/test_vocabulary.py holds them to it),
# and a constant per value, typed as its Literal (Final), so a checker sees
# a misspelt value or one of the wrong group.

# Statuses of an action, in lifecycle order.
Status = Literal[
    "in_progress", "succeeded", "failed", "timed_out", "retry_requested", "confirmed", "compensation_requested",
    "compensated", "abandoned", "awaiting_approval", "approved", "denied",
]
IN_PROGRESS: Final = "in_progress"
SUCCEEDED: Final = "succeeded"
FAILED: Final = "failed"
TIMED_OUT: Final = "timed_out"
RETRY_REQUESTED: Final = "retry_requested"
CONFIRMED: Final = "confirmed"
COMPENSATION_REQUESTED: Final = "compensation_requested"
COMPENSATED: Final = "compensated"
ABANDONED: Final = "abandoned"
AWAITING_APPROVAL: Final = "awaiting_approval"
APPROVED: Final = "approved"
DENIED: Final = "denied"

# Effect classes: how safe a repeat of a tool call is.
Effect = Literal["read_only", "idempotent", "keyed", "unkeyed"]
# EffectOrDefault is what a caller may give: an effect, or "" for the
# server's default (unkeyed).
EffectOrDefault = Union[Effect, Literal[""]]
READ_ONLY: Final = "read_only"
IDEMPOTENT: Final = "idempotent"  # state-setting: safe to repeat
KEYED: Final = "keyed"  # the downstream honours the key: a retry with it is safe
UNKEYED: Final = "unkeyed"  # the downstream does not deduplicate (the default)

# Types of the entries an agent sends (Entry.type, EntryResult.type).
EntryType = Literal[
    "intent", "heartbeat", "succeeded", "failed", "outcome_unknown", "compensated", "note", "lookup", "lookup_result",
    "compensation_failed",
]
# Types of the entries of a timeline (LedgerEntry.type): an agent's, and
# those Arbiter records itself.
LedgerEntryType = Literal[
    "intent", "heartbeat", "succeeded", "failed", "outcome_unknown", "compensated", "note", "lookup", "lookup_result",
    "compensation_failed", "timed_out", "decision", "key_reused", "stale_outcome", "stale_heartbeat", "late_result",
    "lease_lost", "rejected", "approval_expired", "approval_escalated", "reconciled", "compensation_timed_out",
    "unfrozen",
]

# Outcomes of an entry (EntryResult.outcome).
EntryOutcome = Literal[
    "proceed", "replay", "in_progress", "held", "compensate", "recorded", "duplicate", "rejected", "pending_approval",
    "denied", "frozen",
]
PROCEED: Final = "proceed"
REPLAY: Final = "replay"
OUTCOME_IN_PROGRESS: Final = "in_progress"  # another attempt holds a live lease
HELD: Final = "held"
COMPENSATE: Final = "compensate"
RECORDED: Final = "recorded"
DUPLICATE: Final = "duplicate"
REJECTED: Final = "rejected"
PENDING_APPROVAL: Final = "pending_approval"
OUTCOME_DENIED: Final = "denied"  # its approval was rejected or expired
FROZEN: Final = "frozen"  # a freeze holds the tool back: nothing changed; ask again after Retry-After
# Deprecated as outcomes: IN_PROGRESS and DENIED are the statuses; they
# spell the outcomes of the same names too, and still compare equal to
# them, but name the outcomes OUTCOME_IN_PROGRESS and OUTCOME_DENIED.

# Answers of a lookup.
Answer = Literal["happened", "not_happened", "unknown"]
HAPPENED: Final = "happened"
NOT_HAPPENED: Final = "not_happened"
UNKNOWN: Final = "unknown"
ANSWERS: Tuple[Answer, ...] = (HAPPENED, NOT_HAPPENED, UNKNOWN)

# How many lookups the ledger grants one attempt.
MAX_LOOKUPS = 3

# Decisions an operator can take.
Decision = Literal["confirm", "retry", "compensate", "mark_compensated", "abandon", "approve", "reject", "acknowledge"]
CONFIRM: Final = "confirm"
RETRY: Final = "retry"
DECISION_COMPENSATE: Final = "compensate"
MARK_COMPENSATED: Final = "mark_compensated"
ABANDON: Final = "abandon"
APPROVE: Final = "approve"
REJECT: Final = "reject"
ACKNOWLEDGE: Final = "acknowledge"
# Deprecated as a decision: COMPENSATE is the outcome; it spells the
# decision too, but name the decision DECISION_COMPENSATE.

# Who wrote an entry (Actor.kind).
ActorKind = Literal["agent", "operator", "system"]

# Alerts (Webhook.event_types, Delivery.event_type) and how they are sent.
EventType = Literal[
    "action.timed_out", "action.decided", "action.key_reused", "action.stale_outcome", "action.late_result",
    "action.compensated", "action.failed", "action.approval_requested", "action.approved",
    "action.approval_escalated", "action.approval_expired", "action.reconciled", "action.limit_exceeded",
    "freeze.started", "freeze.lifted", "audit.checkpoint", "audit.mismatch", "webhook.test",
]
WebhookFormat = Literal["standard", "slack"]
# WebhookFormatOrDefault: a format, or "" for the server's default (standard).
WebhookFormatOrDefault = Union[WebhookFormat, Literal[""]]
DeliveryState = Literal["pending", "succeeded", "failed"]

# The stable codes of the API's errors (ErrorDetail.code). APIError.code
# may also be one the SDK gives an answer that is not Arbiter's
# (unexpected_answer, unavailable).
ErrorCode = Literal[
    "invalid", "invalid_json", "invalid_policy", "invalid_limit", "invalid_breaker", "too_many_entries", "body_too_large",
    "unsupported_media_type", "unauthorized", "forbidden", "not_found", "method_not_allowed", "key_reused",
    "duplicate_risk_unacknowledged", "stale_attempt", "lease_lost", "invalid_transition", "version_conflict",
    "already_approved", "approval_expired", "limit_exceeded", "frozen", "approver_unknown", "conflict", "too_many_matched",
    "unavailable", "internal",
]

# How a policy or a limit applies: enforce holds (or denies); shadow is
# evaluated and recorded on the intent's entry (a shadow limit is charged
# and counted in its usage) but holds and denies nothing.
Mode = Literal["enforce", "shadow"]
MODE_ENFORCE: Final = "enforce"
MODE_SHADOW: Final = "shadow"

# What a limit does to a first intent that would take its group over its
# max: hold it for people's approval, or deny it.
LimitOver = Literal["hold", "deny"]
LIMIT_HOLD: Final = "hold"
LIMIT_DENY: Final = "deny"

T = TypeVar("T")

_TIME = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?(Z|[+-]\d\d:\d\d)$")


def parse_time(s: str) -> datetime:
    """Parses RFC 3339 as the server writes it (nanoseconds, "Z"), which
    datetime.fromisoformat does not before Python 3.11."""
    m = _TIME.match(s)
    if not m:
        raise ValueError(f"not an RFC 3339 time: {s!r}")
    frac = (m.group(2) or "")[:7].ljust(7, "0") if m.group(2) else ""
    zone = "+00:00" if m.group(3) == "Z" else m.group(3)
    return datetime.fromisoformat(m.group(1) + frac + zone)


def format_time(t: datetime) -> str:
    if t.tzinfo is None:
        t = t.replace(tzinfo=timezone.utc)
    return t.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")


def decode(cls: Type[T], data: Any) -> T:
    """Builds dataclass cls from a decoded JSON object."""
    return typing.cast(T, _decode(cls, data))


_hints_cache: Dict[type, Dict[str, Any]] = {}


def _hints(cls: type) -> Dict[str, Any]:
    h = _hints_cache.get(cls)
    if h is None:
        h = typing.get_type_hints(cls, vars(sys.modules[cls.__module__]))
        _hints_cache[cls] = h
    return h


def _decode(tp: Any, v: Any) -> Any:
    if v is None:
        return None
    origin = typing.get_origin(tp)
    if origin is typing.Union:
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return _decode(args[0], v) if len(args) == 1 else v
    if origin in (list, List):
        (item,) = typing.get_args(tp)
        return [_decode(item, x) for x in v]
    if tp is datetime:
        return parse_time(v)
    if dataclasses.is_dataclass(tp) and isinstance(v, dict):
        hints = _hints(tp)  # type: ignore[arg-type]
        kw = {f.name: _decode(hints[f.name], v[f.name]) for f in dataclasses.fields(tp) if f.name in v}
        return typing.cast(Any, tp)(**kw)  # a dataclass: is_dataclass narrows to an instance too
    return v


# The answers' dataclasses: a field the wire always carries (web/openapi.json
# "required", perhaps null) has no default; one it may leave out defaults
# to None.


@dataclass
class Actor:
    """Who wrote a ledger entry or took a decision."""

    kind: ActorKind
    name: str  # the person (an operator's email), or the agent's or system's name
    via: Optional[str] = None  # how an operator decided: "dashboard" or "api_key:<key name>"


@dataclass
class ApprovalVote:
    by: Actor
    at: datetime
    reason: str


@dataclass
class ApprovalPolicy:
    id: str
    name: str
    version: int
    # Why the policy's condition failed at run time (a missing param, a
    # type error): the intent was held anyway (fail closed). None when it
    # evaluated.
    error: Optional[str] = None


@dataclass
class ApprovalLimit:
    """A limit whose max the action would take its group over, with the
    group's counted use when its first intent came (Approval.limits, and
    ErrorDetail.limits of a limit_exceeded denial)."""

    id: str
    name: str
    version: int
    group: str  # the business group the limit's group_by gave; "" when it has none
    used: float
    amount: float
    max: float


@dataclass
class FreezeRef:
    """A freeze that holds an action (Approval.frozen_by)."""

    id: str
    reason: str


@dataclass
class Approval:
    """What an action held for approval needs and has: the policies that
    caught it, the limits it would exceed (the people who approve it let
    it run over them) and the freezes that hold it."""

    required: int  # distinct people who must approve; 0 when only a freeze holds it
    approvals: List[ApprovalVote]
    expires_at: datetime
    escalate_at: Optional[datetime]
    policies: List[ApprovalPolicy]
    rejection: Optional[ApprovalVote]
    # Always sent by a server with limits; empty when none is exceeded (and
    # in the answers of a server older than limits).
    limits: List[ApprovalLimit] = dataclasses.field(default_factory=list)
    # The active freezes that hold the action: it is approved once each is
    # lifted and its people have approved it. Always sent by a server with
    # freezes; empty when none holds it (and in older servers' answers).
    frozen_by: List[FreezeRef] = dataclasses.field(default_factory=list)


@dataclass
class LimitCharge:
    """What one limit charged an action's first intent (Action.limits), at
    the version the limit had then. ``exceeded``: the intent took its group
    over the limit's max (or its amount could not be evaluated: fail
    closed), whether or not the limit acted on it (a shadow one does not)."""

    id: str
    name: str
    version: int
    group: str  # "" when the limit has no group_by
    amount: float
    exceeded: bool


@dataclass
class LookupAnswer:
    """One answered lookup, as the action keeps it for whoever decides."""

    attempt: int
    answer: Answer
    at: datetime
    by: Actor
    external_ref: Optional[str]
    said: str  # the start of the evidence, as compact JSON


@dataclass
class Reconciliation:
    """Look before you resend: the key's expiry, the lookups of the current
    attempt and the last answer, and how the compensation went."""

    key_expires_at: Optional[datetime]
    lookup_attempt: int
    lookups: int
    lookup_until: Optional[datetime]
    last_lookup: Optional[LookupAnswer]
    compensation_failures: int
    compensation_error: Optional[str]
    compensation_retriable: bool
    compensation_timed_out: bool


@dataclass
class Action:
    """The authoritative record of one intended side effect, identified by
    (namespace, key)."""

    id: str
    namespace: str
    key: str
    tool: str
    effect: Effect
    status: Status
    attempt: int
    version: int
    lease_until: Optional[datetime]
    reference: Optional[str]
    agent: Optional[str]
    params: Any
    result: Any
    external_ref: Optional[str]
    created_at: datetime
    updated_at: datetime
    approval: Optional[Approval]
    reconciliation: Optional[Reconciliation]
    # What the limits that matched the first intent charged it; None when
    # no limit matched (or a server older than limits answered).
    limits: Optional[List[LimitCharge]] = None


@dataclass
class ErrorDetail:
    code: ErrorCode
    message: str
    # With limit_exceeded only: the limits that denied the intent, each with
    # its group's counted use when the first intent came, the intent's
    # amount and the limit's max (a retry of the denied key gets the same).
    limits: Optional[List[ApprovalLimit]] = None
    # With frozen only: seconds to wait before asking again (the answer's
    # Retry-After header says the same; the client fills it in from the
    # header when the body does not).
    retry_after: Optional[int] = None


@dataclass
class EntryResult:
    """The ledger's answer to one entry."""

    key: str
    type: EntryType
    outcome: EntryOutcome
    attempt: Optional[int]
    lease_until: Optional[datetime]
    action: Optional[Action]
    error: Optional[ErrorDetail]  # set exactly when outcome is rejected


@dataclass
class Entry:
    """One ledger entry as an agent sends it. Fields left None are not sent;
    which fields a type takes is in the OpenAPI document."""

    key: str
    type: EntryType
    tool: Optional[str] = None
    effect: Optional[Effect] = None
    params: Any = None
    timeout: Optional[float] = None  # lease in seconds (intent, heartbeat, lookup)
    reference: Optional[str] = None
    require_approval: Optional[bool] = None
    key_ttl: Optional[float] = None
    agent: Optional[str] = None
    run_id: Optional[str] = None
    occurred_at: Optional[datetime] = None
    attempt: Optional[int] = None
    result: Any = None
    external_ref: Optional[str] = None
    error: Optional[str] = None
    retriable: Optional[bool] = None
    message: Optional[str] = None
    answer: Optional[Answer] = None
    evidence: Any = None

    def to_json(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {}
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if v is None:
                continue
            out[f.name] = format_time(v) if isinstance(v, datetime) else v
        return out


@dataclass
class LedgerEntry:
    """One immutable record of an action's timeline: what an agent sent, or
    what Arbiter recorded (timed_out, decision, key_reused, …)."""

    id: str
    seq: int
    type: LedgerEntryType
    actor: Actor
    attempt: Optional[int]
    payload: Dict[str, Any]
    occurred_at: Optional[datetime]
    recorded_at: datetime
    # The entry's leaf in the evidence log (audit_proof), once it joined
    # the log, within 2 s of its commit; None before (and from servers
    # older than the log).
    log_index: Optional[int] = None


@dataclass
class AuditProof:
    """An entry's inclusion proof (RFC 6962) in the tree of a signed
    checkpoint: hash the entry's leaf (SHA-256 of 0x00 and the leaf),
    combine it with ``inclusion`` as RFC 6962 does, and compare with the
    checkpoint's root hash."""

    log_index: int
    tree_size: int
    leaf_hash: str  # base64 of the leaf's hash
    inclusion: List[str]  # base64 hashes, from the leaf's sibling up
    checkpoint: str  # the checkpoint proved against, a C2SP signed note


@dataclass
class ActionPage:
    """One page of actions, newest first; next_cursor fetches the next."""

    actions: List[Action]
    next_cursor: Optional[str]


@dataclass
class EntryPage:
    """One page of a timeline, oldest first (at most its limit of entries and
    about 4 MiB); next_cursor fetches the next."""

    entries: List[LedgerEntry]
    next_cursor: Optional[str]


@dataclass
class DecisionResult:
    action: Action
    entry: LedgerEntry


@dataclass
class BulkSkip:
    id: str
    code: str  # what a single decision on it would have got


@dataclass
class BulkDecisionResult:
    """What a bulk decision did (applied, skipped) or, for a dry run, would
    do (matched, allowed, sample): the answer of a dry run leaves applied
    and skipped None, the answer of a decision matched, allowed and sample."""

    matched: Optional[int] = None
    allowed: Optional[int] = None
    sample: Optional[List[Action]] = None
    applied: Optional[int] = None
    skipped: Optional[List[BulkSkip]] = None


@dataclass
class Policy:
    """An approval policy: which first intents wait for people's approval."""

    id: str
    namespace: str
    name: str
    tools: List[str]
    condition: str
    approvals_required: int
    expires_after: int
    escalate_after: Optional[int]
    mode: Mode  # shadow: evaluated and recorded on the intent's entry, nothing is held
    enabled: bool
    version: int
    created_at: datetime
    updated_at: datetime


@dataclass
class PolicyTestResult:
    examined: int
    matched: int
    sample: List[Action]
    errors: Optional[int] = None  # intents the condition failed on (counted as matched)
    partial: Optional[bool] = None  # the time budget ran out before every intent read was examined


@dataclass
class Limit:
    """A limit across actions: it charges the first intents it matches
    ``amount`` in their business group (``group_by``), and holds or denies
    (``over``) one that would take its group's use within the sliding
    ``window`` over ``max``."""

    id: str
    namespace: str
    name: str
    tools: List[str]  # patterns; * matches any run of characters
    condition: str  # which first intents it applies to: a CEL bool, as a policy's; empty means all
    amount: str  # CEL, an int or a double: the intent's size; empty charges 1 (the limit counts actions)
    group_by: str  # CEL, a string: the business group; empty is one group for the namespace
    window: int  # seconds
    max: float
    over: LimitOver
    approvals_required: int
    mode: Mode
    enabled: bool
    version: int
    created_at: datetime
    updated_at: datetime


@dataclass
class GroupUsage:
    """One group's counted use: ``actions`` charges count, the oldest made
    at ``oldest_at`` (its use leaves the window ``window`` seconds later)."""

    group: str
    used: float
    actions: int
    oldest_at: datetime


@dataclass
class LimitUsage:
    """A limit's counted use now: the groups with the most, most first (at
    most 100)."""

    window: int
    max: float
    groups: List[GroupUsage]


@dataclass
class Freeze:
    """The brake on a namespace's tools. While ``lifted_at`` is None, new
    keys of ``tools`` wait for approval (Approval.frozen_by) and every other
    intent that would proceed or compensate is answered frozen. ``by`` is
    the operator who started it, or the system for a breaker (name
    ``breaker:<name>``, ``breaker_id`` set)."""

    id: str
    namespace: str
    tools: List[str]  # patterns; * matches any run of characters
    reason: str
    by: Actor
    breaker_id: Optional[str]
    started_at: datetime
    lifted_at: Optional[datetime]
    lifted_by: Optional[Actor]
    lift_reason: Optional[str]


@dataclass
class BreakerState:
    """What a breaker counts now: its tools' actions since ``since`` (its
    window's start, or the lift of its last freeze if later) that have an
    outcome or lost it, and the freeze it started while that is active."""

    since: datetime
    actions: int
    timed_out: int
    failed: int
    freeze: Optional[Freeze]


@dataclass
class Breaker:
    """Starts a freeze of its tools when, among their actions of the last
    ``window`` seconds that have an outcome or lost it (at least
    ``min_actions``), the share timed out is above ``max_unknown_ratio`` or
    the share failed above ``max_failure_ratio``. It does not trip again
    while its freeze is active; lifting it is a person's decision."""

    id: str
    namespace: str
    name: str
    tools: List[str]
    window: int  # seconds
    min_actions: int
    max_unknown_ratio: Optional[float]
    max_failure_ratio: Optional[float]
    enabled: bool
    version: int
    created_at: datetime
    updated_at: datetime
    # What it counts now: in the answers of breaker and breakers (not in
    # those of create, update and versions).
    state: Optional[BreakerState] = None


@dataclass
class Webhook:
    """An endpoint that receives alerts. ``secret`` is set only in the
    answers to create_webhook and rotate_webhook_secret."""

    id: str
    url: str
    event_types: List[EventType]
    namespaces: List[str]
    format: WebhookFormat
    description: str
    enabled: bool
    disabled_reason: Optional[str]
    failing_since: Optional[datetime]
    created_at: datetime
    updated_at: datetime
    secret: Optional[str] = None


@dataclass
class DeliveryAttempt:
    attempted_at: datetime
    status_code: Optional[int]
    latency_ms: int
    response_excerpt: str
    error: Optional[str]


@dataclass
class Delivery:
    """One alert message on its way to one endpoint, with every attempt."""

    id: str
    message_id: str
    webhook_id: str
    endpoint_id: str
    event_type: EventType
    action_id: Optional[str]
    state: DeliveryState
    attempt_count: int
    next_attempt_at: Optional[datetime]
    last_status: Optional[int]
    last_error: Optional[str]
    created_at: datetime
    updated_at: datetime
    attempts: List[DeliveryAttempt]
