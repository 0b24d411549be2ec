"""What a framework adapter tells the model instead of a tool's result: a copy
of sdk/vectors.json "model_messages" (tests/test_messages.py compares them).
{detail} is the error's own message (when empty the text ends before it, or
a placeholder inside the text goes with its ": ");
{action_url} the action's dashboard link, else "the Arbiter dashboard"."""

from __future__ import annotations

from typing import Dict, Optional

__all__ = ["MESSAGES", "model_message"]

MESSAGES: Dict[str, str] = {
    "pending_approval": (
        "Not done yet: this call is waiting for a person's approval. Do not call the tool again; tell the user it needs approval ({action_url}). {detail}"
    ),
    "denied": (
        "Refused: a person rejected this call, or its approval expired. It will not run. Do not call the tool again; tell the user it was refused. {detail}"
    ),
    "limit_exceeded": (
        "Refused: this call would go over a limit set on such actions (a budget or a rate), so it will not run. Do not call the tool again to get around it, not with other details either; tell the user a limit refused it and that a person can change the limit ({action_url}). {detail}"
    ),
    "frozen": (
        "Not done: a person has frozen such actions for now (a freeze: {detail}). Nothing ran. Do not call the tool again now and do not work around it; tell the user it is paused until a person lifts the freeze ({action_url})."
    ),
    "held": (
        "Not done: an earlier attempt's outcome is unknown and a person is checking it. Do not call the tool again; tell the user it is being checked ({action_url}). {detail}"
    ),
    "in_progress": (
        "Not done now: another attempt of this call is still running. Do not call the tool again; tell the user it is already under way. {detail}"
    ),
    "outcome_unknown": (
        "Unknown: the call was made but its outcome could not be seen (it may have taken effect). A person will check it. Do not call the tool again; tell the user it is being checked ({action_url}). {detail}"
    ),
    "finished": (
        "Not done: this action ended earlier without its effect, and it is not run again. Do not call the tool again; tell the user it did not happen. {detail}"
    ),
    "failed": (
        "Not done: the call failed and did not take effect. {detail}"
    ),
    "key_reused": (
        "Refused: an action with the same business identity but different details already exists. Do not call the tool again with other details; tell the user a person must look at it ({action_url}). {detail}"
    ),
    "confirmed_without_result": (
        "Done: a person confirmed that this call took effect; no result was recorded."
    ),
    "compensated": (
        "Undone: this call took effect earlier and was then reversed. Do not call the tool again; tell the user it was reversed."
    ),
}


def model_message(kind: str, detail: str = "", action_url: Optional[str] = None) -> str:
    """The text for ``kind`` with its placeholders filled in."""
    text = MESSAGES[kind].replace("{action_url}", action_url or "the Arbiter dashboard")
    if "{detail}" in text:
        if detail.strip():
            text = text.replace("{detail}", detail.strip()).rstrip()
        else:
            text = text.replace(": {detail}", "").replace("{detail}", "").rstrip()
    return text
