"""Look before you resend: a timed-out attempt's outcome is unknown, and the
agent's own worker knows how to ask its downstream (find a refund by its
idempotency key, a message by its id). The worker asks before a person has
to, under a lookup lease, and reports the answer; the ledger confirms the
action, requests the retry its effect class makes safe, or leaves it to a
person with the answer shown."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable, List, Optional, Union, cast

from .execute import MAX_RESULT_BYTES, error_text
from .types import ANSWERS, HAPPENED, MAX_LOOKUPS, UNKNOWN, Action, Answer, Effect, Entry, LedgerEntry

__all__ = ["LookupRequest", "LookupResult", "LookupFunc"]

# The evidence of a lookup that could not ask the downstream starts so; the
# worker recognises it in the answer the action keeps (last_lookup.said),
# so any worker, after a restart too, knows the attempt is worth asking
# about again.
LOOKUP_ERROR_SAID = '{"lookup_error":'

# The lookup lease a worker asks for: the lookup's own timeout and time to
# report its answer, within the ledger's bound.
LEASE_MARGIN = 10.0
MAX_LOOKUP_LEASE = 3600.0


def lookup_lease(timeout: float) -> float:
    """The lookup lease for a lookup bounded by timeout seconds."""
    return min(timeout + LEASE_MARGIN, MAX_LOOKUP_LEASE)


@dataclass
class LookupRequest:
    """The timed-out attempt a lookup asks about. Search by what the attempt
    sent: ``key`` when the downstream took it as its idempotency key,
    ``reference``, ``params``, or one of ``external_refs``."""

    action_id: str
    key: str
    tool: str
    effect: Effect
    attempt: int  # the attempt whose outcome is unknown
    params: Any = None
    reference: str = ""
    # The downstream ids the ledger heard of for this action, oldest first
    # (from late or stale reports, lookups, operators' decisions).
    external_refs: List[str] = field(default_factory=list)
    created_at: Optional[datetime] = None  # nothing the action did downstream is older


@dataclass
class LookupResult:
    """What a lookup found: ``answer`` is happened (with the effect's
    ``external_ref`` and a ``result`` to save: the action is confirmed),
    not_happened (the downstream provably has no such effect: a keyed,
    idempotent or read-only action whose key is still honoured is retried
    with its key; any other waits for a person) or unknown (the downstream
    cannot tell, ever: a person decides). ``evidence`` is what the
    downstream said (any JSON, at most 64 KiB kept), shown to whoever
    decides."""

    answer: str
    evidence: Any = None
    external_ref: Optional[str] = None
    result: Any = None


# A lookup returns a LookupResult or just its answer. It raises when the
# downstream could not be asked now: the worker reports unknown with the
# error as evidence and asks again later, while the ledger grants lookups.
LookupFunc = Callable[[LookupRequest], Union[LookupResult, str]]


def lookup_due(a: Action, now: datetime, retry: float) -> bool:
    """Whether to look up the timed-out action now: not while another
    lookup's lease is live, not once the attempt's lookups are spent, and
    not again after an answer that asking again will not change. A lookup
    that failed is asked again after ``retry`` seconds, doubling with each
    lookup of the attempt."""
    rc = a.reconciliation
    if rc is None or rc.lookup_attempt != a.attempt:
        return True  # this attempt was never looked up
    if rc.lookup_until is not None and now < rc.lookup_until:
        return False
    if rc.lookups >= MAX_LOOKUPS:
        return False
    last = rc.last_lookup
    if last is None or last.attempt != a.attempt:
        return True  # a lookup whose worker never answered: its lease passed
    if not last.said.startswith(LOOKUP_ERROR_SAID):
        return False  # an answer of the downstream's own: a person decides
    wait: float = retry * 2 ** max(rc.lookups - 1, 0)
    return last.at is None or (now - last.at).total_seconds() >= wait


def ask_downstream(lookup: LookupFunc, q: LookupRequest, timeout: float) -> LookupResult:
    """Runs the lookup for at most timeout seconds (in a thread of its own,
    which is left behind if it overruns). A lookup that raises, overruns or
    answers something else is unknown, with the error as evidence."""
    box: List[Any] = []

    def call() -> None:
        try:
            box.append(lookup(q))
        except Exception as e:  # any failure to ask is "could not tell now"
            box.append(e)

    t = threading.Thread(target=call, name=f"arbiter-lookup {q.key}", daemon=True)
    t.start()
    t.join(timeout)
    if not box:
        return _failed(f"the lookup ran past its timeout of {timeout:g} s")
    got = box[0]
    if isinstance(got, Exception):
        return _failed(error_text(got))
    if isinstance(got, str):
        got = LookupResult(answer=got)
    if not isinstance(got, LookupResult) or got.answer not in ANSWERS:
        return _failed(f"the lookup answered {got!r}, which is none of {list(ANSWERS)}")
    return got


def _failed(why: str) -> LookupResult:
    return LookupResult(answer=UNKNOWN, evidence={"lookup_error": why})


def lookup_result_entry(e: Entry, r: LookupResult) -> Entry:
    """Fills the lookup_result entry e; evidence or a result the ledger
    would refuse is replaced by a string saying so, rather than losing the
    answer."""
    e.answer = cast(Answer, r.answer)  # one of ANSWERS: ask_downstream made sure
    e.evidence = _kept("evidence", r.evidence)
    if r.answer == HAPPENED:
        e.result = _kept("result", r.result)
        e.external_ref = r.external_ref or None
    return e


def _kept(what: str, v: Any) -> Any:
    if v is None:
        return None
    try:
        size = len(json.dumps(v, ensure_ascii=False, allow_nan=False).encode("utf-8"))
    except (TypeError, ValueError) as err:
        return f"the {what} was not JSON and was not kept: {err}"
    if size > MAX_RESULT_BYTES:
        return f"the {what} was {size} bytes, over the {MAX_RESULT_BYTES} the ledger keeps; it was not kept"
    return v


def external_refs(a: Action, entries: List[LedgerEntry]) -> List[str]:
    """The downstream ids the ledger heard of for the action, oldest first,
    each once."""
    refs: List[str] = []
    for e in entries:
        ref = e.payload.get("external_ref") if isinstance(e.payload, dict) else None
        if isinstance(ref, str) and ref and ref not in refs:
            refs.append(ref)
    if a.external_ref and a.external_ref not in refs:
        refs.append(a.external_ref)
    return refs


def now() -> datetime:
    return datetime.now(timezone.utc)
