"""Arbiter inside agent frameworks: a guarded tool for the OpenAI Agents
SDK (``arbiter.adapters.openai_agents``) and an agent middleware for
LangChain (``arbiter.adapters.langchain``). Each imports its framework only
when used, so ``import arbiter`` stays standard library only; install the
framework yourself (the versions tested are in sdk/python/README.md)."""

from __future__ import annotations

import importlib
import json
from types import ModuleType

from typing import TYPE_CHECKING, Optional

from ..errors import (
    ArbiterError,
    DeniedError,
    FinishedError,
    FrozenError,
    HeldError,
    InProgressError,
    KeyReusedError,
    LimitExceededError,
    OutcomeUnknownError,
    PendingApprovalError,
    ReportError,
    UnreachableError,
)
from ..messages import model_message

if TYPE_CHECKING:
    from ..client import Client

__all__ = ["model_answer", "model_message"]


def framework(module: str, install: str) -> ModuleType:
    """Imports an adapter's framework when the adapter is used, saying
    what to install when it is missing."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name != module.split(".")[0]:
            raise
        raise ModuleNotFoundError(f"arbiter: this adapter needs {install} (pip install {install})",
                                  name=e.name) from e


def model_answer(err: BaseException, client: Optional[Client] = None) -> Optional[str]:
    """What a guarded tool tells the model (sdk/vectors.json
    "model_messages", the same texts as the TypeScript adapters) when the
    ledger did not let the call run now, or its outcome is unknown: what
    happened and what to tell the user, never an invitation to call again.
    The error's own message is the detail; ``client`` gives the action's
    link where the error has none. None for an error that is not the
    guard's (or one it caused)."""
    e = _answer_in(err)
    if e is None:
        return None

    def url(action_id: str) -> Optional[str]:
        return client.action_url(action_id) if client is not None and action_id else None

    detail = str(e)
    if isinstance(e, PendingApprovalError) and e.frozen_by:
        # A new key of a frozen tool: it runs once the freeze is lifted.
        return model_message("frozen", freeze_reasons(e), e.url)
    if isinstance(e, PendingApprovalError):
        return model_message("pending_approval", detail, e.url)
    if isinstance(e, FrozenError):
        return model_message("frozen", e.detail, e.url)
    if isinstance(e, LimitExceededError):  # a DeniedError that asked nobody: a limit refused it
        return model_message("limit_exceeded", detail, e.url)
    if isinstance(e, DeniedError):
        return model_message("denied", detail, e.url)
    if isinstance(e, HeldError):
        return model_message("held", detail, e.url)
    if isinstance(e, InProgressError):
        return model_message("in_progress", detail, url(e.action_id))
    if isinstance(e, (OutcomeUnknownError, ReportError)):
        return model_message("outcome_unknown", detail, url(e.action_id))
    if isinstance(e, FinishedError):
        return model_message("finished", detail, url(e.action.id))
    if isinstance(e, KeyReusedError):
        a = e.result.action if e.result is not None else None
        return model_message("key_reused", detail, url(a.id) if a is not None else None)
    if isinstance(e, UnreachableError):
        return model_message("failed", detail)
    return detail


def freeze_reasons(e: PendingApprovalError) -> str:
    """The freezes that hold a pending action, as Arbiter names them in a
    frozen answer: freeze ID ("reason"), …"""
    return ", ".join(f"freeze {f.id} ({json.dumps(f.reason, ensure_ascii=False)})" for f in e.frozen_by)


def _answer_in(err: BaseException) -> Optional[ArbiterError]:
    """The guard's answer in err or what caused it (a framework may wrap it)."""
    seen = 0
    e: Optional[BaseException] = err
    while e is not None and seen < 8:
        if isinstance(e, ArbiterError):
            return e
        e = e.__cause__
        seen += 1
    return None
