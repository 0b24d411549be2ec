"""The wire contract's shapes (web/openapi.json) as dataclasses, and the
vocabulary as constants. Answers are decoded by field type; fields the
server adds later are ignored, so an older SDK keeps working."""

from __future__ import annotations

import dataclasses
import re
import sys
import typing
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Dict, List, Optional, Type, TypeVar

# Statuses of an action, in lifecycle order.
IN_PROGRESS = "in_progress"
SUCCEEDED = "succeeded"
FAILED = "failed"
TIMED_OUT = "timed_out"
RETRY_REQUESTED = "retry_requested"
CONFIRMED = "confirmed"
COMPENSATION_REQUESTED = "compensation_requested"
COMPENSATED = "compensated"
ABANDONED = "abandoned"
AWAITING_APPROVAL = "awaiting_approval"
APPROVED = "approved"
DENIED = "denied"

# Effect classes: how safe a repeat of a tool call is.
READ_ONLY = "read_only"
IDEMPOTENT = "idempotent"  # state-setting: safe to repeat
KEYED = "keyed"  # the downstream honours the key: a retry with it is safe
UNKEYED = "unkeyed"  # the downstream does not deduplicate (the default)

# Outcomes of an entry.
PROCEED = "proceed"
REPLAY = "replay"
HELD = "held"
COMPENSATE = "compensate"
RECORDED = "recorded"
DUPLICATE = "duplicate"
REJECTED = "rejected"
PENDING_APPROVAL = "pending_approval"
# DENIED and IN_PROGRESS are outcomes too, spelled as the statuses.

# Answers of a lookup.
HAPPENED = "happened"
NOT_HAPPENED = "not_happened"
UNKNOWN = "unknown"
ANSWERS = (HAPPENED, NOT_HAPPENED, UNKNOWN)

# How many lookups the ledger grants one attempt.
MAX_LOOKUPS = 3

# Decisions an operator can take.
CONFIRM = "confirm"
RETRY = "retry"
MARK_COMPENSATED = "mark_compensated"
ABANDON = "abandon"
APPROVE = "approve"
REJECT = "reject"
# COMPENSATE is also the decision "compensate".

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
        return tp(**kw)
    return v


@dataclass
class Actor:
    """Who wrote a ledger entry or took a decision."""

    kind: str = ""  # agent, operator or system
    name: str = ""  # the person (an operator's email), or the agent's or system's name
    via: str = ""  # how an operator decided: "dashboard" or "api_key:<key name>"


@dataclass
class ApprovalVote:
    by: Actor = field(default_factory=Actor)
    at: Optional[datetime] = None
    reason: str = ""


@dataclass
class ApprovalPolicy:
    id: str = ""
    name: str = ""
    version: int = 0
    # Why the policy's condition failed at run time (a missing param, a
    # type error): the intent was held anyway (fail closed). None when it
    # evaluated.
    error: Optional[str] = None


@dataclass
class Approval:
    """What an action held for approval needs and has."""

    required: int = 0
    approvals: List[ApprovalVote] = field(default_factory=list)
    expires_at: Optional[datetime] = None
    escalate_at: Optional[datetime] = None
    policies: List[ApprovalPolicy] = field(default_factory=list)
    rejection: Optional[ApprovalVote] = None


@dataclass
class LookupAnswer:
    """One answered lookup, as the action keeps it for whoever decides."""

    attempt: int = 0
    answer: str = ""
    at: Optional[datetime] = None
    by: Actor = field(default_factory=Actor)
    external_ref: Optional[str] = None
    said: str = ""  # the start of the evidence, as compact JSON


@dataclass
class Reconciliation:
    """Look before you resend: the key's expiry, the lookups of the current
    attempt and the last answer, and how the compensation went."""

    key_expires_at: Optional[datetime] = None
    lookup_attempt: int = 0
    lookups: int = 0
    lookup_until: Optional[datetime] = None
    last_lookup: Optional[LookupAnswer] = None
    compensation_failures: int = 0
    compensation_error: Optional[str] = None
    compensation_retriable: bool = False
    compensation_timed_out: bool = False


@dataclass
class Action:
    """The authoritative record of one intended side effect, identified by
    (namespace, key)."""

    id: str = ""
    namespace: str = ""
    key: str = ""
    tool: str = ""
    effect: str = ""
    status: str = ""
    attempt: int = 0
    version: int = 0
    lease_until: Optional[datetime] = None
    reference: Optional[str] = None
    agent: Optional[str] = None
    params: Any = None
    result: Any = None
    external_ref: Optional[str] = None
    created_at: Optional[datetime] = None
    updated_at: Optional[datetime] = None
    approval: Optional[Approval] = None
    reconciliation: Optional[Reconciliation] = None


@dataclass
class ErrorDetail:
    code: str = ""
    message: str = ""


@dataclass
class EntryResult:
    """The ledger's answer to one entry."""

    key: str = ""
    type: str = ""
    outcome: str = ""
    attempt: Optional[int] = None
    lease_until: Optional[datetime] = None
    action: Optional[Action] = None
    error: Optional[ErrorDetail] = None  # set exactly when outcome is rejected


@dataclass
class Entry:
    """One ledger entry as an agent sends it. Fields left None are not sent;
    which fields a type takes is in the OpenAPI document."""

    key: str
    type: str
    tool: Optional[str] = None
    effect: Optional[str] = None
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
    answer: Optional[str] = None
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

    id: str = ""
    seq: int = 0
    type: str = ""
    actor: Actor = field(default_factory=Actor)
    attempt: Optional[int] = None
    payload: Dict[str, Any] = field(default_factory=dict)
    occurred_at: Optional[datetime] = None
    recorded_at: Optional[datetime] = None


@dataclass
class ActionPage:
    """One page of actions, newest first; next_cursor fetches the next."""

    actions: List[Action] = field(default_factory=list)
    next_cursor: Optional[str] = None


@dataclass
class EntryPage:
    """One page of a timeline, oldest first (at most its limit of entries and
    about 4 MiB); next_cursor fetches the next."""

    entries: List[LedgerEntry] = field(default_factory=list)
    next_cursor: Optional[str] = None


@dataclass
class DecisionResult:
    action: Optional[Action] = None
    entry: Optional[LedgerEntry] = None


@dataclass
class BulkSkip:
    id: str = ""
    code: str = ""  # what a single decision on it would have got


@dataclass
class BulkDecisionResult:
    """What a bulk decision did (applied, skipped) or, for a dry run, would
    do (matched, allowed, sample)."""

    matched: int = 0
    allowed: int = 0
    sample: List[Action] = field(default_factory=list)
    applied: int = 0
    skipped: List[BulkSkip] = field(default_factory=list)


@dataclass
class Policy:
    """An approval policy: which first intents wait for people's approval."""

    id: str = ""
    namespace: str = ""
    name: str = ""
    tools: List[str] = field(default_factory=list)
    condition: str = ""
    approvals_required: int = 0
    expires_after: int = 0
    escalate_after: Optional[int] = None
    enabled: bool = False
    version: int = 0
    created_at: Optional[datetime] = None
    updated_at: Optional[datetime] = None


@dataclass
class PolicyTestResult:
    examined: int = 0
    matched: int = 0
    sample: List[Action] = field(default_factory=list)
    errors: int = 0


@dataclass
class Webhook:
    """An endpoint that receives alerts. ``secret`` is set only in the
    answers to create_webhook and rotate_webhook_secret."""

    id: str = ""
    url: str = ""
    event_types: List[str] = field(default_factory=list)
    namespaces: List[str] = field(default_factory=list)
    format: str = ""
    description: str = ""
    enabled: bool = False
    disabled_reason: Optional[str] = None
    failing_since: Optional[datetime] = None
    created_at: Optional[datetime] = None
    updated_at: Optional[datetime] = None
    secret: Optional[str] = None


@dataclass
class DeliveryAttempt:
    attempted_at: Optional[datetime] = None
    status_code: Optional[int] = None
    latency_ms: int = 0
    response_excerpt: str = ""
    error: Optional[str] = None


@dataclass
class Delivery:
    """One alert message on its way to one endpoint, with every attempt."""

    id: str = ""
    message_id: str = ""
    webhook_id: str = ""
    endpoint_id: str = ""
    event_type: str = ""
    action_id: Optional[str] = None
    state: str = ""
    attempt_count: int = 0
    next_attempt_at: Optional[datetime] = None
    last_status: Optional[int] = None
    last_error: Optional[str] = None
    created_at: Optional[datetime] = None
    updated_at: Optional[datetime] = None
    attempts: List[DeliveryAttempt] = field(default_factory=list)
