"""How one guarded side effect is carried out as the ledger decides: the
intent first, the function only on proceed, heartbeats while it runs, and
its outcome reported until it lands. Go's Client.Guard, in Python."""

from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Collection, Generic, Optional, Tuple, Type, TypeVar

from . import cancel
from .errors import (
    DEFAULT_FROZEN_RETRY,
    APIError,
    ArbiterError,
    CompensationRequestedError,
    DeniedError,
    FinishedError,
    FrozenError,
    HeldError,
    InProgressError,
    LeaseLostError,
    LimitExceededError,
    OutcomeUnknownError,
    PendingApprovalError,
    ReportError,
    ResultNotSavedError,
    UnreachableError,
    is_unavailable,
)
from .heartbeat import DEFAULT_LEASE, Heartbeats
from .outcomes import Classification, Classifier, classify_exception
from .types import (
    COMPENSATE,
    COMPENSATION_REQUESTED,
    CONFIRMED,
    FROZEN,
    HELD,
    OUTCOME_DENIED,
    OUTCOME_IN_PROGRESS,
    PENDING_APPROVAL,
    PROCEED,
    REPLAY,
    SUCCEEDED,
    Action,
    EffectOrDefault,
    Entry,
    EntryType,
    EntryResult,
)

if TYPE_CHECKING:
    from .client import Client

log = logging.getLogger("arbiter")

MAX_RESULT_BYTES = 64 << 10  # what the ledger keeps of a result or evidence
MAX_ERROR_BYTES = 8 << 10

__all__ = ["Attempt", "Done", "Outcome", "Spec", "run"]


@dataclass
class Attempt:
    """The attempt a guarded function runs as. Pass ``key`` to the
    downstream system as its idempotency key when it takes one: a retry of
    the action then reaches it with the same key."""

    action_id: str
    key: str
    tool: str
    number: int
    params: Any = None  # the action's params as the ledger stores them
    # Set from the heartbeat thread when Arbiter says this attempt may no
    # longer continue (its lease passed, an operator decided, a newer
    # attempt started). Check it before starting the effect.
    lease_lost: threading.Event = field(default_factory=threading.Event, repr=False)
    # What the body of ``with guard(...)`` records (see record).
    result: Any = None
    external_ref: Optional[str] = None

    def check(self) -> None:
        """Raises LeaseLostError if the attempt may no longer continue."""
        if self.lease_lost.is_set():
            raise LeaseLostError(f"arbiter: the lease of attempt {self.number} of {self.key!r} was lost")

    def record(self, result: Any = None, external_ref: Optional[str] = None) -> None:
        """In ``with guard(...)``: the result to save and the id of the effect
        downstream, reported as succeeded when the block ends."""
        self.result, self.external_ref = result, external_ref


R = TypeVar("R")


@dataclass
class Done(Generic[R]):
    """What a guarded function may return to name the effect's id in the
    downstream system (a refund id) besides its result. A decorated
    function that returns ``Done[R]`` is called as returning R."""

    result: R = None  # type: ignore[assignment]
    external_ref: Optional[str] = None


@dataclass
class Outcome:
    """What a guarded call came to. ``ran`` is true when the function ran in
    this call; false when the ledger answered from an earlier attempt (a
    replay) or the call compensated (``compensated``)."""

    key: str
    ran: bool = False
    compensated: bool = False
    attempt: int = 0
    action: Optional[Action] = None
    result: Any = None  # the function's result, or the saved one on a replay
    external_ref: Optional[str] = None


ExcTypes = Tuple[Type[BaseException], ...]


@dataclass
class Spec:
    """The side effect a guarded call performs. See arbiter.guard."""

    key: str
    tool: str
    effect: EffectOrDefault = ""  # read_only, idempotent, keyed or unkeyed ("": the server's default)
    params: Any = None
    timeout: float = 0  # the lease of an attempt in seconds; 0: the server's 300
    reference: str = ""
    agent: str = ""
    run_id: str = ""
    wait: float = 0  # how long to wait for another attempt that holds the action
    key_ttl: float = 0  # how long the downstream honours the key
    compensate: Optional[Callable[[Attempt], Any]] = None
    require_approval: bool = False
    approval_wait: float = 0  # how long to wait for people's decision
    frozen_wait: float = 0  # how long to wait out a freeze that holds the tool (outcome frozen)
    retriable: ExcTypes = ()  # exception types recorded as retriable failures
    unknown: ExcTypes = ()  # exception types that leave the outcome unknown
    # HTTP statuses of the downstream that prove the effect did not happen
    # (read from the exception's status, status_code or code, or its
    # response's): recorded failed. Any other status is outcome_unknown.
    not_done_statuses: Collection[int] = ()
    # Replaces the rule of sdk/vectors.json "outcomes": the exception →
    # "failed", "failed_retriable" or "outcome_unknown" (see arbiter.outcomes).
    classify: Optional[Classifier] = None
    # Turns the function's result into the JSON the ledger saves (an SDK's
    # response object → a dict); the call returns what was saved, as a
    # replay does.
    serialize: Optional[Callable[[Any], Any]] = None

    def lease(self) -> float:
        return self.timeout if self.timeout > 0 else DEFAULT_LEASE

    def entry(self, type: EntryType, attempt: int = 0) -> Entry:
        return Entry(key=self.key, type=type, attempt=attempt or None, agent=self.agent or None,
                     run_id=self.run_id or None)

    def intent(self) -> Entry:
        e = self.entry("intent")
        e.tool = self.tool
        e.effect = self.effect or None  # the server refuses an unknown one
        e.timeout = self.timeout or None
        e.reference = self.reference or None
        e.require_approval = True if self.require_approval else None
        e.key_ttl = max(self.key_ttl, 1) if self.key_ttl > 0 else None
        try:
            json.dumps(self.params, allow_nan=False)
        except (TypeError, ValueError) as err:
            raise ArbiterError(f"arbiter: guard {self.key!r}: params are not JSON: {err}") from err
        e.params = self.params
        return e

    def heartbeat(self, attempt: int) -> Entry:
        e = self.entry("heartbeat", attempt)
        e.timeout = self.timeout or None
        return e


def run(client: Client, spec: Spec, fn: Callable[[Attempt], Any], answer: Optional[EntryResult] = None) -> Outcome:
    """Performs one side effect the safe way, as the ledger decides:

    - The intent first. If Arbiter cannot be reached then, fn does not run:
      UnreachableError (fail closed).
    - proceed: fn runs with the Attempt, with heartbeats every third of the
      lease from a background thread, and its outcome is reported for that
      attempt (succeeded with its result, or failed with its exception),
      retried with backoff and jitter while Arbiter is unavailable, up to
      the client's report budget.
    - replay: fn does not run; a succeeded or confirmed action returns its
      saved result, a failed, abandoned or compensated one raises
      FinishedError.
    - in_progress: asks again with backoff for up to spec.wait, then
      InProgressError. held: HeldError. pending_approval: waits on the
      server (Prefer: wait) up to spec.approval_wait, then
      PendingApprovalError (its ``frozen_by`` names the freezes that hold
      a new key of a frozen tool); denied: DeniedError (LimitExceededError
      when a limit across actions denied it). frozen: asks again after
      each Retry-After for up to spec.frozen_wait, then FrozenError.
      key_reused: KeyReusedError.
    - compensate: runs spec.compensate under the compensation's lease and
      reports compensated, or compensation_failed with its exception.

    An exception from fn is classified (sdk/vectors.json "outcomes", see
    arbiter.outcomes): one that proves the effect did not happen (NotDone,
    Retriable or one of spec.retriable, a refused connection, a status of
    spec.not_done_statuses) is recorded failed and raised again; any other
    (a timeout, a lost connection, Unknown, an exception of no known kind)
    is recorded outcome_unknown, the action is timed_out at once, and
    OutcomeUnknownError is raised: the next call for the key gets HeldError
    until a lookup or a person resolves it. spec.classify replaces the rule.
    After the lease was lost nothing is reported. A BaseException that is
    not an Exception (KeyboardInterrupt) stops the heartbeats and passes
    through, reporting nothing.

    ``answer`` is the ledger's answer to this call's intent when the caller
    already asked (ask), as a framework's approval check does: the intent
    is not sent again.
    """
    res = answer if answer is not None else ask(client, spec)
    if res.outcome == PROCEED:
        a = attempt_of(spec, res)
        hb = start_heartbeats(client, spec, a)
        try:
            value = fn(a)
        except Exception as exc:
            hb.stop()
            finish_failed(client, spec, a, exc)
            raise  # finish_failed raises; this keeps type checkers content
        finally:
            hb.stop()
        return finish_ok(client, spec, a, value)
    if res.outcome == COMPENSATE:
        return compensate(client, spec, res)
    return replayed(spec, res)


def ask(client: Client, spec: Spec) -> EntryResult:
    """Sends the intent until the answer is one to act on (proceed, replay,
    compensate), waiting where the spec allows; raises for the others."""
    intent = spec.intent()
    start = time.monotonic()
    n = 0
    while True:
        if n > 0 and cancel.stopped():
            raise cancel.Stopped(f"arbiter: guard {spec.key!r}: the call was cancelled while waiting")
        left = int(spec.approval_wait - (time.monotonic() - start))
        try:
            if n > 0 and left > 0:
                res = client.submit_wait(intent, left)
            else:
                res = client.submit(intent)
        except ArbiterError as err:
            if is_unavailable(err):
                raise UnreachableError(spec.key, err) from err
            raise
        a = res.action
        if a is None:
            raise ArbiterError(f"arbiter: guard {spec.key!r}: the answer to the intent ({res.outcome}) carries no action")
        if res.outcome in (PROCEED, REPLAY, COMPENSATE):
            return res
        if res.outcome == HELD:
            raise HeldError(a.id, spec.key, res.attempt or 0, client.action_url(a.id),
                            compensation=a.status == COMPENSATION_REQUESTED)
        if res.outcome == PENDING_APPROVAL:
            if int(spec.approval_wait - (time.monotonic() - start)) <= 0:
                failing = [f"{p.name}: {p.error}" for p in (a.approval.policies if a.approval else []) if p.error]
                raise PendingApprovalError(a.id, spec.key, client.action_url(a.id), time.monotonic() - start,
                                           failing, a.approval.frozen_by if a.approval else [])
            # Ask again, waiting on the server for the decision.
        elif res.outcome == OUTCOME_DENIED:
            raise denied_error(a, spec.key, client.action_url(a.id), res)
        elif res.outcome == FROZEN:
            frozen = frozen_error(a, spec.key, client.action_url(a.id), res, time.monotonic() - start)
            left = spec.frozen_wait - (time.monotonic() - start)
            if left <= 0:
                raise frozen
            # Nothing changed: ask again once the answer says to (a lift
            # takes effect everywhere within a second).
            cancel.sleep(min(frozen.retry_after, left))
        elif res.outcome == OUTCOME_IN_PROGRESS:
            waited = time.monotonic() - start
            if waited >= spec.wait:
                raise InProgressError(a.id, spec.key, res.attempt or 0, res.lease_until, waited)
            cancel.sleep(min(client.backoff.pause(n), spec.wait - waited))
        else:
            raise ArbiterError(f"arbiter: guard {spec.key!r}: unexpected outcome {res.outcome!r} for an intent")
        n += 1


def denied_error(a: Action, key: str, url: str, res: Optional[EntryResult] = None) -> DeniedError:
    """The error of a denied action: a LimitExceededError when a limit
    denied it (the answer to its intent, res, names the limits with their
    use: error.code limit_exceeded; read from the action alone, its charges
    that exceeded name them), else a DeniedError for its approval's
    rejection or expiry."""
    err = res.error if res is not None and res.error is not None and res.error.code == "limit_exceeded" else None
    if err is not None and err.limits:
        return LimitExceededError(a.id, key, url, err.limits, err.message)
    exceeded = [c for c in a.limits or [] if c.exceeded]
    if a.approval is None and (err is not None or exceeded):
        # No approval was asked: a limit denied it.
        named = [f"limit {json.dumps(c.name)} (version {c.version})"
                 + (f" in group {json.dumps(c.group)}" if c.group else "") for c in exceeded]
        detail = err.message if err is not None else f"it exceeded {' or '.join(named)}"
        return LimitExceededError(a.id, key, url, [], detail)
    rej = a.approval.rejection if a.approval is not None else None
    return DeniedError(a.id, key, url, expired=rej is None,
                       by=rej.by.name if rej else "", reason=rej.reason if rej else "")


def frozen_error(a: Action, key: str, url: str, res: EntryResult, waited: float = 0.0) -> FrozenError:
    """The error of a frozen answer: Arbiter's account of the freezes, and
    how long to wait before asking again (error.retry_after, which the
    client fills in from Retry-After; 5 s when neither says)."""
    err = res.error
    retry: float = DEFAULT_FROZEN_RETRY
    if err is not None and err.retry_after is not None and err.retry_after > 0:
        retry = err.retry_after
    return FrozenError(a.id, key, url, err.message if err is not None else "", retry, waited)


def attempt_of(spec: Spec, res: EntryResult) -> Attempt:
    a = res.action
    return Attempt(action_id=a.id if a else "", key=spec.key, tool=spec.tool, number=res.attempt or 0,
                   params=a.params if a else None)


def start_heartbeats(client: Client, spec: Spec, a: Attempt, on_lost: Optional[Callable[[], None]] = None) -> Heartbeats:
    return Heartbeats(client, spec.heartbeat(a.number), spec.lease(), a.lease_lost, on_lost)


def replayed(spec: Spec, res: EntryResult) -> Outcome:
    a = res.action
    assert a is not None
    out = Outcome(key=spec.key, attempt=res.attempt or 0, action=a, result=a.result, external_ref=a.external_ref)
    if a.status in (SUCCEEDED, CONFIRMED):
        return out
    raise FinishedError(a)


def finish_ok(client: Client, spec: Spec, a: Attempt, value: Any) -> Outcome:
    """Records the success of attempt a, even if the caller stopped waiting:
    the effect happened. The outcome's result is what the ledger saved (the
    JSON of the result, after spec.serialize), so that this call and every
    replay return the same. A result that cannot be saved (not JSON, too
    large) is left out of the record and raises ResultNotSavedError, once
    the success is recorded."""
    result, ref = (value.result, value.external_ref) if isinstance(value, Done) else (value, None)
    e = spec.entry("succeeded", a.number)
    saved, problem = _saved(spec, result)
    e.result = saved
    e.external_ref = ref or None
    stored = report(client, a, e)
    out = Outcome(key=spec.key, ran=True, attempt=a.number, action=stored.action, result=saved, external_ref=ref)
    if problem:
        raise ResultNotSavedError(spec.key, problem, out)
    return out


def finish_failed(client: Client, spec: Spec, a: Attempt, exc: Exception, compensation: bool = False) -> None:
    """Records what an exception of the function says about the effect
    (sdk/vectors.json "outcomes": see arbiter.outcomes), and raises: the
    function's exception once a failure that proves nothing happened is
    recorded; OutcomeUnknownError when the effect may have happened (the
    attempt is reported outcome_unknown, so the action is timed_out at once
    and goes to a lookup, then a person); ReportError when a failure could
    not be recorded. After a lost lease nothing is reported."""
    if a.lease_lost.is_set():
        # The attempt is no longer this caller's: as if the process died.
        raise OutcomeUnknownError(a.action_id, a.key, a.number, compensation=compensation) from exc
    c = classify_exception(exc, spec.classify, spec.not_done_statuses, spec.retriable, spec.unknown)
    text = _outcome_text(exc, c)
    if c.outcome == "outcome_unknown":
        if compensation:
            # The ledger has no outcome_unknown for a compensation: the
            # compensation's lease passes and a person decides; the note
            # tells them why.
            note = spec.entry("note", a.number)
            note.message = "compensation outcome unknown: " + text
            try:
                client.submit(note)
            except ArbiterError:
                pass
            raise OutcomeUnknownError(a.action_id, a.key, a.number, compensation=True) from exc
        e = spec.entry("outcome_unknown", a.number)
        e.error = text
        try:
            stored = report(client, a, e)
        except ArbiterError:
            # Not recorded: the lease passes, and the action times out all
            # the same.
            raise OutcomeUnknownError(a.action_id, a.key, a.number) from exc
        raise OutcomeUnknownError(a.action_id, a.key, a.number, reported=True, action=stored.action) from exc
    e = spec.entry("compensation_failed" if compensation else "failed", a.number)
    e.error = text
    e.retriable = c.retriable
    report(client, a, e)  # a ReportError here is raised with exc as its context
    raise exc


def _outcome_text(exc: BaseException, c: Classification) -> str:
    """The entry's error: the classification's text for timeouts and lost
    connections ("timeout: …"), else the exception with its type."""
    if c.error.startswith(("timeout", "connection lost")):
        return _clean(c.error)
    return error_text(exc)


def compensate(client: Client, spec: Spec, res: EntryResult) -> Outcome:
    """Undoes the effect at an operator's request, under the compensation's
    lease, and records what came of it."""
    a = attempt_of(spec, res)
    if spec.compensate is None:
        # Release the lease at once: another process that can undo it, or a
        # person, takes over, and nobody waits for a lease to pass.
        e = spec.entry("compensation_failed", a.number)
        e.error = f"this caller of guard has no compensate function for {spec.tool}"
        e.retriable = True
        report(client, a, e)
        raise CompensationRequestedError(a.action_id, a.key, client.action_url(a.action_id))
    hb = start_heartbeats(client, spec, a)
    try:
        ref = spec.compensate(a)
    except Exception as exc:
        hb.stop()
        finish_failed(client, spec, a, exc, compensation=True)
        raise
    finally:
        hb.stop()
    return finish_compensated(client, spec, a, ref)


def finish_compensated(client: Client, spec: Spec, a: Attempt, ref: Any) -> Outcome:
    e = spec.entry("compensated", a.number)
    e.external_ref = str(ref) if ref else None
    stored = report(client, a, e)
    return Outcome(key=spec.key, compensated=True, attempt=a.number, action=stored.action, external_ref=e.external_ref)


def report(client: Client, a: Attempt, e: Entry) -> EntryResult:
    """Records an outcome, retrying with backoff and jitter while Arbiter is
    unavailable, within the client's report budget. The entry names its
    attempt, so a report that landed before its answer was lost comes back
    duplicate, which counts as done. When the await it runs for is
    cancelled (arbiter.cancel) it stops retrying: ReportError, as past the
    budget, since the ledger has not recorded it."""
    deadline = time.monotonic() + client.report_budget
    n = 0
    while True:
        try:
            return client.submit(e)
        except ArbiterError as err:
            if not retryable(err):
                raise
            pause = client.backoff.pause(n)
            if time.monotonic() + pause > deadline:
                raise ReportError(a.action_id, a.key, a.number, e.type, err) from err
            log.info("arbiter: %s for attempt %d of %r not recorded yet (%s); again in %.2f s",
                     e.type, a.number, a.key, err, pause)
            if cancel.sleep(pause):
                raise ReportError(a.action_id, a.key, a.number, e.type, err) from err
            n += 1


def retryable(err: ArbiterError) -> bool:
    """Whether sending the same entry again may succeed."""
    return is_unavailable(err) or (isinstance(err, APIError) and err.code in ("conflict", "internal"))


def error_text(exc: BaseException) -> str:
    """The exception as the ledger accepts it: non-empty, without NUL, short
    enough to store."""
    msg = str(exc)
    return _clean(f"{type(exc).__name__}: {msg}" if msg.strip() else f"{type(exc).__name__} with an empty message")


def _clean(text: str) -> str:
    text = text.replace("\x00", "")
    raw = text.encode("utf-8", "replace")
    if len(raw) > MAX_ERROR_BYTES:
        text = raw[:MAX_ERROR_BYTES].decode("utf-8", "ignore") + "…"
    return text


def _saved(spec: Spec, result: Any) -> Tuple[Any, str]:
    """What the ledger saves of result (after spec.serialize), as the ledger
    will answer it (a JSON round trip), or None and why it cannot be saved:
    the success is still recorded, since that the effect happened matters
    more than its details."""
    if spec.serialize is not None and result is not None:
        try:
            result = spec.serialize(result)
        except Exception as err:  # the effect happened: record it all the same
            return None, f"serialize raised {type(err).__name__}: {err}"
    if result is None:
        return None, ""
    try:
        text = json.dumps(result, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as err:
        how = "" if spec.serialize is not None else (
            "; pass serialize= to the guard (say, serialize=lambda r: r.to_dict()), or return arbiter.Done(json_value)")
        return None, f"the result ({type(result).__name__}) is not JSON: {err}{how}"
    size = len(text.encode("utf-8"))
    if size > MAX_RESULT_BYTES:
        return None, f"the result is {size} bytes, over the {MAX_RESULT_BYTES} the ledger keeps"
    return json.loads(text), ""
