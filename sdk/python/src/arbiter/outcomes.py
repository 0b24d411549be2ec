"""How a guard reports an exception raised by the guarded call (sdk/vectors.json
"outcomes"): only an error that proves the effect did not happen is
``failed``; timeouts, lost connections and anything the SDK cannot classify
are ``outcome_unknown``, so the action goes to a lookup and then a person.

A tool may change the rule with ``not_done_statuses=`` (HTTP statuses its
API answers only when nothing was done, read from an exception's
``status``, ``status_code`` or ``code`` attribute, or its ``response``'s)
or replace it with ``classify=``, a callable taking the exception and
returning ``"failed"``, ``"failed_retriable"`` or ``"outcome_unknown"``;
a classifier that raises, or returns anything else, counts as
``"outcome_unknown"``.
"""

from __future__ import annotations

import asyncio
import http.client
import socket
import urllib.error
from dataclasses import dataclass
from typing import Callable, Collection, Literal, Optional, Tuple, Type

from .errors import Retriable, Unknown

__all__ = ["NotDone", "Classification", "Classifier", "classify_exception"]

Kind = Literal["failed", "failed_retriable", "outcome_unknown"]
Classifier = Callable[[BaseException], str]


class NotDone(Exception):
    """Raise it from a guarded function when the effect certainly did not
    happen (the API refused the request): the failure is recorded as
    ``failed``, with ``retriable`` saying whether a later call may try
    again."""

    def __init__(self, message: str = "", retriable: bool = False) -> None:
        super().__init__(message)
        self.retriable = retriable


@dataclass(frozen=True)
class Classification:
    """What a guard records for an exception: ``outcome`` is ``"failed"`` or
    ``"outcome_unknown"``; ``error`` the entry's error text."""

    outcome: str
    retriable: bool
    error: str


_TIMEOUTS = (TimeoutError, socket.timeout, asyncio.TimeoutError)
_LOST = (ConnectionResetError, BrokenPipeError, ConnectionAbortedError, http.client.RemoteDisconnected,
         http.client.IncompleteRead)


def _unwrap(exc: BaseException) -> BaseException:
    if isinstance(exc, urllib.error.URLError) and isinstance(exc.reason, BaseException):
        return exc.reason
    return exc


def _status(exc: BaseException) -> Optional[int]:
    for holder in (exc, getattr(exc, "response", None)):
        if holder is None:
            continue
        for name in ("status", "status_code", "code"):
            v = getattr(holder, name, None)
            if isinstance(v, int) and not isinstance(v, bool) and 100 <= v <= 599:
                return v
    return None


def _message(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


def default_kind(exc: BaseException, not_done_statuses: Collection[int] = (),
                 retriable: Tuple[Type[BaseException], ...] = (),
                 unknown: Tuple[Type[BaseException], ...] = ()) -> Kind:
    """The rule of sdk/vectors.json "outcomes" without a tool's classifier:
    arbiter.Unknown (or one of the tool's ``unknown`` types) may have
    happened; NotDone says itself; arbiter.Retriable (or one of the tool's
    ``retriable`` types) did not happen and may be tried again."""
    if isinstance(exc, Unknown) or (unknown and isinstance(exc, unknown)):
        return "outcome_unknown"
    if isinstance(exc, NotDone):
        return "failed_retriable" if exc.retriable else "failed"
    if isinstance(exc, Retriable) or (retriable and isinstance(exc, retriable)):
        return "failed_retriable"
    inner = _unwrap(exc)
    if isinstance(inner, ConnectionRefusedError):
        return "failed_retriable"
    if isinstance(inner, _TIMEOUTS + _LOST):
        return "outcome_unknown"
    status = _status(exc)
    if status is not None and status in not_done_statuses:
        return "failed"
    return "outcome_unknown"


def classify_exception(exc: BaseException, classify: Optional[Classifier] = None,
                       not_done_statuses: Collection[int] = (),
                       retriable: Tuple[Type[BaseException], ...] = (),
                       unknown: Tuple[Type[BaseException], ...] = ()) -> Classification:
    """What to record for ``exc``: the tool's ``classify`` if given, else the
    default rule with the tool's ``not_done_statuses``, ``retriable`` and
    ``unknown`` exception types."""
    kind: str
    if classify is not None:
        try:
            kind = classify(exc)
        except Exception:
            kind = "outcome_unknown"
        if kind not in ("failed", "failed_retriable", "outcome_unknown"):
            kind = "outcome_unknown"
    else:
        kind = default_kind(exc, not_done_statuses, retriable, unknown)
    inner = _unwrap(exc)
    text = _message(exc)
    if isinstance(inner, _TIMEOUTS):
        text = f"timeout: {_message(inner)}" if str(inner) else "timeout"
    elif isinstance(inner, _LOST):
        text = f"connection lost: {_message(inner)}"
    if kind == "outcome_unknown":
        return Classification("outcome_unknown", False, text)
    return Classification("failed", kind == "failed_retriable", text)
