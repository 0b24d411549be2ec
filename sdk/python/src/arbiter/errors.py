"""What can go wrong talking to Arbiter, and what a guarded call can come to
besides running: one exception class per answer the caller must handle."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, List, Optional

if TYPE_CHECKING:
    from .execute import Outcome
    from .types import Action, ApprovalLimit, EntryResult, FreezeRef

__all__ = [
    "ArbiterError",
    "APIError",
    "NetworkError",
    "UnreachableError",
    "HeldError",
    "InProgressError",
    "KeyReusedError",
    "PendingApprovalError",
    "DeniedError",
    "LimitExceededError",
    "FrozenError",
    "FinishedError",
    "OutcomeUnknownError",
    "ReportError",
    "ResultNotSavedError",
    "CompensationRequestedError",
    "LeaseLostError",
    "Retriable",
    "Unknown",
    "Replayed",
    "Compensated",
    "is_unavailable",
]


class ArbiterError(Exception):
    """The base of every error this package raises."""


class APIError(ArbiterError):
    """An answer from Arbiter that is not a success: a non-2xx status, or a
    rejected entry. ``code`` is stable and lower_snake_case (``key_reused``,
    ``lease_lost``, ``not_found``, …): match on it, not on ``message``.
    ``status`` is the HTTP status, 0 for an entry rejected inside a batch."""

    def __init__(self, code: str, message: str, status: int = 0) -> None:
        self.code = code
        self.message = message
        self.status = status
        # For a rejected entry: the ledger's answer (its action, if any, is
        # the stored one).
        self.result: Optional[EntryResult] = None
        where = f" (HTTP {status})" if status else ""
        super().__init__(f"arbiter: {code}: {message}{where}")


class KeyReusedError(APIError):
    """The key is already used by an action with another tool or other
    params (422 ``key_reused``). The stored action is untouched; mint a key
    for the new action, or send the original params."""


class NetworkError(ArbiterError):
    """A request that got no answer: Arbiter could not be reached, the
    connection broke, or the request ran out of time."""

    def __init__(self, method: str, path: str, cause: BaseException) -> None:
        self.method = method
        self.path = path
        self.cause = cause
        super().__init__(f"arbiter: {method} {path}: no answer: {cause}")


def is_unavailable(err: BaseException) -> bool:
    """Whether err means Arbiter could not be asked: a network failure, or
    an answer saying it is unavailable (503, or 502 and 504 from a proxy in
    front of it). Such requests are safe to send again later: every entry is
    idempotent by its key and attempt."""
    if isinstance(err, (NetworkError, UnreachableError)):
        return True
    if isinstance(err, APIError):
        return err.status in (502, 503, 504) or err.code == "unavailable"
    return False


def answer_error(status: int, body: bytes) -> APIError:
    """Reads the error body {"error": {"code", "message"}} of a non-2xx
    answer. An answer that is not Arbiter's (a proxy's HTML page) still
    becomes an APIError, with the status and an excerpt of the body."""
    try:
        detail = json.loads(body)["error"]
        if isinstance(detail, dict) and detail.get("code"):
            return api_error(str(detail["code"]), str(detail.get("message", "")), status)
    except (ValueError, KeyError, TypeError):
        pass
    code = "unavailable" if status in (502, 503, 504) else "unexpected_answer"
    msg = body.decode("utf-8", "replace").strip()
    if len(msg) > 200:
        msg = msg[:200] + "…"
    return APIError(code, msg or f"HTTP {status}", status)


def api_error(code: str, message: str, status: int) -> APIError:
    if code == "key_reused":
        return KeyReusedError(code, message, status)
    return APIError(code, message, status)


class UnreachableError(ArbiterError):
    """The intent could not be recorded, so the function did not run (fail
    closed). It is safe to call again later with the same key: if the lost
    intent did land, the ledger answers in_progress while its lease lasts
    and held after. ``cause`` is the NetworkError or 5xx APIError."""

    def __init__(self, key: str, cause: BaseException) -> None:
        self.key = key
        self.cause = cause
        super().__init__(f"arbiter unreachable: the action was not started (key {key!r}): {cause}")


class HeldError(ArbiterError):
    """The action's outcome is unknown (an attempt's lease passed without a
    report) and a person must decide before anything runs again: confirm,
    retry, compensate or abandon. ``url`` is its page on the dashboard.
    ``compensation`` is true when it is a compensation whose outcome is
    unknown."""

    def __init__(self, action_id: str, key: str, attempt: int, url: str, compensation: bool = False) -> None:
        self.action_id, self.key, self.attempt, self.url = action_id, key, attempt, url
        self.compensation = compensation
        what = "whether the compensation of attempt" if compensation else "the outcome of attempt"
        tail = " undid the effect" if compensation else ""
        super().__init__(
            f"arbiter: action {action_id} (key {key!r}) is held: {what} {attempt}{tail} is unknown "
            f"and an operator must decide; see {url}"
        )


class InProgressError(ArbiterError):
    """Another attempt held a live lease for the whole of the guard's
    ``wait``. Nothing ran."""

    def __init__(self, action_id: str, key: str, attempt: int, lease_until: Any, waited: float) -> None:
        self.action_id, self.key, self.attempt = action_id, key, attempt
        self.lease_until, self.waited = lease_until, waited
        super().__init__(
            f"arbiter: action {action_id} (key {key!r}) is in progress in attempt {attempt} "
            f"(lease until {lease_until}); waited {waited:.3f} s"
        )


class PendingApprovalError(ArbiterError):
    """The action waits for people's approval: nothing ran. Call again with
    the same key later; the function runs once the action is approved.
    ``frozen_by`` are the active freezes that hold it (Approval.frozen_by:
    a new key of a frozen tool waits until each is lifted, and its people
    approved it if its policies or limits ask them), named in the message.
    ``policy_errors`` are the run-time errors of the policies that hold it
    (``approval.policies[i].error``, as "NAME: ERROR"): a condition that
    failed (a missing param, a type error) holds the intent all the same,
    and the message says so."""

    def __init__(self, action_id: str, key: str, url: str, waited: float,
                 policy_errors: Optional[List[str]] = None, frozen_by: Optional[List[FreezeRef]] = None) -> None:
        self.action_id, self.key, self.url, self.waited = action_id, key, url, waited
        self.policy_errors: List[str] = list(policy_errors or [])
        self.frozen_by: List[FreezeRef] = list(frozen_by or [])
        why = ""
        if self.frozen_by:
            why += "; held by " + ", ".join(f"freeze {f.id} ({f.reason!r})" for f in self.frozen_by)
        if self.policy_errors:
            why += f"; held because a policy's condition failed: {'; '.join(self.policy_errors)}"
        super().__init__(f"arbiter: action {key!r} awaits approval; nothing was run ({url}){why}")


class DeniedError(ArbiterError):
    """The action was denied: its approval was rejected (``by``,
    ``reason``) or expired (``expired``), or a limit across actions denied
    it (then it is a LimitExceededError, and ``limits`` names them): nothing
    ran and nothing may run under this key."""

    def __init__(self, action_id: str, key: str, url: str, expired: bool, by: str = "", reason: str = "") -> None:
        self.action_id, self.key, self.url = action_id, key, url
        self.expired, self.by, self.reason = expired, by, reason
        self.limits: List[ApprovalLimit] = []
        if expired:
            msg = f"arbiter: action {key!r} was denied: its approval expired; nothing was run ({url})"
        else:
            msg = f"arbiter: action {key!r} was rejected by {by} ({reason!r}); nothing was run ({url})"
        super().__init__(msg)


class LimitExceededError(DeniedError):
    """A limit across actions denied the action: its group's counted use
    plus this intent's amount was over the limit's max. ``limits`` are the
    limits that denied it, each with its group's use when the first intent
    came, the intent's amount and the max (the answer's error.limits; empty
    when only the action was read, whose ``limits`` still name them);
    ``detail`` is Arbiter's account of it. It is a DeniedError too, so code
    that handles denials handles it: nothing ran and nothing may run under
    this key."""

    def __init__(self, action_id: str, key: str, url: str, limits: List[ApprovalLimit], detail: str) -> None:
        self.action_id, self.key, self.url = action_id, key, url
        self.expired, self.by, self.reason = False, "", ""
        self.limits = list(limits)
        self.detail = detail
        ArbiterError.__init__(self, f"arbiter: action {key!r} was denied by a limit: {detail}; nothing was run ({url})")


DEFAULT_FROZEN_RETRY = 5  # seconds before asking again about a frozen action, when the answer does not say


class FrozenError(ArbiterError):
    """A freeze holds the action's tool back (outcome frozen): nothing ran
    and nothing changed. It came to an intent that would otherwise have run
    or compensated an action that exists (a retry an operator asked for, an
    approved action's first run, a compensation); a new key of a frozen
    tool waits for approval instead (PendingApprovalError with
    ``frozen_by``). Ask again after ``retry_after`` seconds (the answer's
    error.retry_after or Retry-After header, default 5): the guard does,
    for up to its ``frozen_wait``. The freeze ends when a person lifts it.
    ``detail`` is Arbiter's account, naming the freezes and their reasons;
    ``waited`` how long the guard waited it out."""

    def __init__(self, action_id: str, key: str, url: str, detail: str,
                 retry_after: float = DEFAULT_FROZEN_RETRY, waited: float = 0.0) -> None:
        self.action_id, self.key, self.url = action_id, key, url
        self.detail, self.retry_after, self.waited = detail, retry_after, waited
        super().__init__(f"arbiter: action {key!r} is frozen: {detail or 'a freeze holds its tool'} ({url})")


class FinishedError(ArbiterError):
    """The action ended before without its effect in place (failed,
    abandoned or compensated); the ledger replays that ending and nothing
    runs again. Mint a new key for a new action."""

    def __init__(self, action: Action) -> None:
        self.action = action
        super().__init__(
            f"arbiter: action {action.id} (key {action.key!r}) already ended {action.status}; it is not run again"
        )


class OutcomeUnknownError(ArbiterError):
    """The effect may or may not have happened: the function raised an
    exception that does not prove it did not (a timeout, a lost connection,
    Unknown, an exception of no known kind: sdk/vectors.json "outcomes"),
    or raised after its attempt lost its lease, or was interrupted (a
    cancelled task). When ``reported``, the guard recorded outcome_unknown:
    the action (``action``, as the ledger answered) is timed_out, a lookup
    or a person finds out what happened, and the next call for the key
    gets HeldError. Otherwise (the lease was lost, the report could not be
    made, or it was a compensation) nothing was reported: the lease passes
    and a person decides. The function's exception is ``__cause__``."""

    def __init__(self, action_id: str, key: str, attempt: int, compensation: bool = False,
                 reported: bool = False, action: Optional[Action] = None) -> None:
        self.action_id, self.key, self.attempt, self.compensation = action_id, key, attempt, compensation
        self.reported, self.action = reported, action
        what = "the compensation of attempt" if compensation else "attempt"
        how = ("it was reported outcome_unknown, and a person will check it" if reported
               else "nothing was reported, and a person decides once its lease passes")
        super().__init__(
            f"arbiter: {what} {attempt} of action {action_id} (key {key!r}) ended without a known outcome; {how}"
        )


class ResultNotSavedError(ArbiterError, TypeError):
    """The guarded function's result could not be saved (it is not JSON, or
    it is over the 64 KiB the ledger keeps). The success was recorded
    without it, since the effect happened; pass ``serialize=`` to the guard
    (or return ``arbiter.Done(json_value)``) so that replays can return it.
    ``outcome`` is what the call came to."""

    def __init__(self, key: str, why: str, outcome: Outcome) -> None:
        self.key, self.why, self.outcome = key, why, outcome
        super().__init__(f"arbiter: guard {key!r}: the effect happened and was recorded succeeded, but {why}")


class ReportError(ArbiterError):
    """The outcome could not be recorded within the report budget. The
    effect happened (or failed) but the ledger does not know: the action
    will time out and an operator decides."""

    def __init__(self, action_id: str, key: str, attempt: int, type: str, cause: BaseException) -> None:
        self.action_id, self.key, self.attempt, self.type, self.cause = action_id, key, attempt, type, cause
        super().__init__(
            f"arbiter: could not record {type} for attempt {attempt} of action {action_id} (key {key!r}): {cause}"
        )


class CompensationRequestedError(ArbiterError):
    """An operator asked to undo the action and this guard has no
    ``compensate`` function. The compensation's lease was released at once
    (compensation_failed) so that a worker that can undo it takes over."""

    def __init__(self, action_id: str, key: str, url: str) -> None:
        self.action_id, self.key, self.url = action_id, key, url
        super().__init__(
            f"arbiter: an operator asked to compensate action {action_id} (key {key!r}) and no compensate "
            f"function was given; see {url}"
        )


class LeaseLostError(ArbiterError):
    """Raised by Attempt.check() when Arbiter said the attempt may no longer
    continue: its lease passed, an operator decided, or a newer attempt
    started. Stop, and do not start the effect if it has not started."""


class Retriable(Exception):
    """Raise it (``raise arbiter.Retriable("card declined") from e``) from a
    guarded function when the effect certainly did not happen and a later
    call may try again: the failure is recorded with retriable true, and
    the next intent for the key gets a new attempt."""


class Unknown(Exception):
    """Raise it from a guarded function when the effect may have happened
    (a timeout, a lost answer), whatever the tool's classification would
    say: the attempt is reported outcome_unknown, the action is timed_out
    at once, and a lookup, then a person, finds out. Recording "failed"
    instead would claim nothing happened. (An exception of no known kind
    is treated so too.)"""


class Replayed(Exception):
    """Raised on entering ``with guard(...)`` when the action finished
    before: the body does not run. ``outcome.result`` is the saved result.
    (A decorated function returns the saved result instead.) Not an error:
    it is how a context manager skips its body."""

    def __init__(self, outcome: Outcome) -> None:
        self.outcome = outcome
        self.result = outcome.result
        super().__init__(f"arbiter: action {outcome.key!r} finished before; replayed its result, nothing ran")


class Compensated(Exception):
    """Raised by a guarded call that, at an operator's request, undid the
    action's effect with its ``compensate`` function instead of running.
    ``outcome`` says how (``external_ref`` of the undoing)."""

    def __init__(self, outcome: Outcome) -> None:
        self.outcome = outcome
        super().__init__(f"arbiter: action {outcome.key!r} was compensated at an operator's request; nothing ran")
