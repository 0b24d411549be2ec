"""Arbiter's Python SDK: record the intent of a side effect before it
happens, run it only when the ledger says so, and report what came of it.

    import arbiter

    @arbiter.guard(tool="payments.refund", effect="keyed",
                   key=lambda order_id, **_: arbiter.key("refund", order_id))
    def refund(attempt: arbiter.Attempt, order_id: str, amount: int) -> arbiter.Done[dict]:
        r = psp.refund(order_id, amount, idempotency_key=attempt.key)
        return arbiter.Done(r, external_ref=r["id"])

Standard library only. The same semantics as the Go SDK (client/), shared
through sdk/vectors.json.
"""

from .aio import AsyncClient
from .backoff import Backoff
from .client import MAX_APPROVAL_WAIT, Client
from .errors import (
    APIError,
    ArbiterError,
    Compensated,
    CompensationRequestedError,
    DeniedError,
    FinishedError,
    FrozenError,
    HeldError,
    InProgressError,
    KeyReusedError,
    LeaseLostError,
    LimitExceededError,
    NetworkError,
    OutcomeUnknownError,
    PendingApprovalError,
    Replayed,
    ReportError,
    ResultNotSavedError,
    Retriable,
    Unknown,
    UnreachableError,
    is_unavailable,
)
from .execute import Attempt, Done, Outcome, Spec
from .guard import Guard, configure, default_client, guard
from .key import MAX_KEY_BYTES, key
from .lookup import LookupRequest, LookupResult
from .outcomes import NotDone
from .types import (
    Action,
    ActionPage,
    Actor,
    Approval,
    ApprovalLimit,
    ApprovalPolicy,
    ApprovalVote,
    AuditProof,
    Breaker,
    BreakerState,
    BulkDecisionResult,
    BulkSkip,
    DecisionResult,
    Delivery,
    DeliveryAttempt,
    Entry,
    EntryPage,
    EntryResult,
    ErrorDetail,
    Freeze,
    FreezeRef,
    GroupUsage,
    LedgerEntry,
    Limit,
    LimitCharge,
    LimitUsage,
    LookupAnswer,
    Policy,
    PolicyTestResult,
    Reconciliation,
    Webhook,
)
from .worker import Worker

__version__ = "0.1.0"

__all__ = [
    "APIError", "Action", "ActionPage", "Actor", "Approval", "ApprovalLimit", "ApprovalPolicy", "ApprovalVote",
    "ArbiterError", "AsyncClient", "Attempt", "AuditProof", "Backoff", "Breaker", "BreakerState",
    "BulkDecisionResult", "BulkSkip", "Client", "Compensated", "CompensationRequestedError", "DecisionResult",
    "Delivery", "DeliveryAttempt", "DeniedError", "Done", "Entry", "EntryPage", "EntryResult", "ErrorDetail",
    "FinishedError", "Freeze", "FreezeRef", "FrozenError", "GroupUsage", "Guard", "HeldError", "InProgressError",
    "KeyReusedError", "LeaseLostError", "LedgerEntry", "Limit", "LimitCharge", "LimitExceededError", "LimitUsage",
    "LookupAnswer", "LookupRequest", "LookupResult", "MAX_APPROVAL_WAIT", "MAX_KEY_BYTES", "NetworkError",
    "NotDone", "Outcome", "OutcomeUnknownError", "PendingApprovalError", "Policy", "PolicyTestResult",
    "Reconciliation", "Replayed", "ReportError", "ResultNotSavedError", "Retriable", "Spec", "Unknown",
    "UnreachableError", "Webhook", "Worker", "configure", "default_client", "guard", "is_unavailable", "key",
]
