"""Arbiter inside agent frameworks: a guarded tool for the OpenAI Agents
SDK (``arbiter.adapters.openai_agents``) and an agent middleware for
LangChain (``arbiter.adapters.langchain``). Each imports its framework only
when used, so ``import arbiter`` stays standard library only; install the
framework yourself (the versions tested are in sdk/python/README.md)."""

from __future__ import annotations

import importlib
from types import ModuleType

from ..errors import ArbiterError, DeniedError, FinishedError, HeldError, PendingApprovalError

__all__ = ["model_message"]


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


def model_message(err: ArbiterError) -> str:
    """What a guarded tool tells the model when the ledger did not let the
    call run, or its outcome is unknown: what happened and that calling
    again will not change it, so the model reports to its user instead of
    looping on the tool."""
    if isinstance(err, HeldError):
        head = "Not done now: an earlier attempt's outcome is unknown and a person decides."
    elif isinstance(err, PendingApprovalError):
        head = "Not done yet: this call waits for a person's approval."
    elif isinstance(err, DeniedError):
        head = "Refused: a person rejected this call, or its approval expired. It will not run."
    elif isinstance(err, FinishedError):
        head = "Not done: this action ended before without its effect, and it is not run again."
    else:
        head = "Not done:"
    return f"{head} {err}"
