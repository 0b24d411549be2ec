"""The vocabulary of arbiter.types is web/openapi.json's: each group of
constants, and each Literal alias, spells exactly the values of the enum it
stands for, so a value added to the contract and forgotten here, or a
constant the contract does not have, fails. The OpenAPI document is read from the repository root, as
test_vectors reads sdk/vectors.json."""

from __future__ import annotations

import json
import typing
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest

from arbiter import types as t

REPO = Path(__file__).resolve().parents[3]
OPENAPI: Dict[str, Any] = json.loads((REPO / "web" / "openapi.json").read_text(encoding="utf-8"))


def enum(schema: str, *props: str) -> List[str]:
    node: Any = OPENAPI["components"]["schemas"][schema]
    for p in props:
        node = node["properties"][p]
    values = node.get("enum")
    assert values, f"web/openapi.json has no enum at {'.'.join((schema,) + props)}"
    return list(values)


# Each enum of the contract and the SDK's constants for it, in its order.
GROUPS: List[Tuple[str, Tuple[str, ...], Tuple[str, ...]]] = [
    ("Status", ("Status",), (t.IN_PROGRESS, t.SUCCEEDED, t.FAILED, t.TIMED_OUT, t.RETRY_REQUESTED,
                             t.CONFIRMED, t.COMPENSATION_REQUESTED, t.COMPENSATED, t.ABANDONED,
                             t.AWAITING_APPROVAL, t.APPROVED, t.DENIED)),
    ("Effect", ("Effect",), (t.READ_ONLY, t.IDEMPOTENT, t.KEYED, t.UNKEYED)),
    ("EntryResult.outcome", ("EntryResult", "outcome"),
     (t.PROCEED, t.REPLAY, t.OUTCOME_IN_PROGRESS, t.HELD, t.COMPENSATE, t.RECORDED, t.DUPLICATE, t.REJECTED,
      t.PENDING_APPROVAL, t.OUTCOME_DENIED, t.FROZEN)),
    ("LookupAnswer.answer", ("LookupAnswer", "answer"), (t.HAPPENED, t.NOT_HAPPENED, t.UNKNOWN)),
    ("LookupAnswer.answer (ANSWERS)", ("LookupAnswer", "answer"), t.ANSWERS),
    ("EntryInput.answer", ("EntryInput", "answer"), t.ANSWERS),
    ("DecisionInput.decision", ("DecisionInput", "decision"),
     (t.CONFIRM, t.RETRY, t.DECISION_COMPENSATE, t.MARK_COMPENSATED, t.ABANDON, t.APPROVE, t.REJECT, t.ACKNOWLEDGE)),
    ("WebhookDecision.decision", ("WebhookDecision", "decision"),
     (t.CONFIRM, t.RETRY, t.DECISION_COMPENSATE, t.MARK_COMPENSATED, t.ABANDON, t.APPROVE, t.REJECT, t.ACKNOWLEDGE)),
    ("Policy.mode", ("Policy", "mode"), (t.MODE_ENFORCE, t.MODE_SHADOW)),
    ("PolicyInput.mode", ("PolicyInput", "mode"), (t.MODE_ENFORCE, t.MODE_SHADOW)),
    ("Limit.mode", ("Limit", "mode"), (t.MODE_ENFORCE, t.MODE_SHADOW)),
    ("LimitInput.mode", ("LimitInput", "mode"), (t.MODE_ENFORCE, t.MODE_SHADOW)),
    ("Limit.over", ("Limit", "over"), (t.LIMIT_HOLD, t.LIMIT_DENY)),
    ("LimitInput.over", ("LimitInput", "over"), (t.LIMIT_HOLD, t.LIMIT_DENY)),
]


@pytest.mark.parametrize("name,where,ours", GROUPS, ids=[g[0] for g in GROUPS])
def test_constants_are_the_openapi_enum(name: str, where: Tuple[str, ...], ours: Tuple[str, ...]) -> None:
    theirs = enum(*where)
    assert {
        "missing in the SDK": [v for v in theirs if v not in ours],
        "missing in web/openapi.json": [v for v in ours if v not in theirs],
    } == {"missing in the SDK": [], "missing in web/openapi.json": []}, name
    assert list(ours) == theirs, f"{name}: same values, in the contract's order"


def test_every_constant_is_in_the_contract() -> None:
    """A constant added to arbiter.types belongs to one of the groups above,
    and so is checked against the contract."""
    grouped = {v for _, _, ours in GROUPS for v in ours}
    constants = {k: v for k, v in vars(t).items() if k.isupper() and isinstance(v, str)}
    assert constants, "arbiter.types has no string constants"
    assert {k: v for k, v in constants.items() if v not in grouped} == {}


# Each Literal alias of arbiter.types and the enum it spells, in its order.
ALIASES: List[Tuple[str, Tuple[str, ...]]] = [
    ("Status", ("Status",)),
    ("Effect", ("Effect",)),
    ("EntryType", ("EntryInput", "type")),
    ("LedgerEntryType", ("Entry", "type")),
    ("EntryOutcome", ("EntryResult", "outcome")),
    ("Answer", ("LookupAnswer", "answer")),
    ("Decision", ("DecisionInput", "decision")),
    ("ActorKind", ("Actor", "kind")),
    ("EventType", ("WebhookEventType",)),
    ("WebhookFormat", ("WebhookFormat",)),
    ("DeliveryState", ("WebhookDelivery", "state")),
    ("ErrorCode", ("ErrorDetail", "code")),
    ("Mode", ("Policy", "mode")),
    ("Mode", ("PolicyInput", "mode")),
    ("Mode", ("Limit", "mode")),
    ("Mode", ("LimitInput", "mode")),
    ("LimitOver", ("Limit", "over")),
    ("LimitOver", ("LimitInput", "over")),
]


def literal_aliases() -> Dict[str, Tuple[str, ...]]:
    return {k: typing.get_args(v) for k, v in vars(t).items() if typing.get_origin(v) is typing.Literal}


@pytest.mark.parametrize("alias,where", ALIASES, ids=[f"{a[0]} ({'.'.join(a[1])})" for a in ALIASES])
def test_literal_alias_is_the_openapi_enum(alias: str, where: Tuple[str, ...]) -> None:
    ours = literal_aliases()[alias]
    assert list(ours) == enum(*where), f"arbiter.types.{alias}: the values of web/openapi.json, in its order"


def test_every_literal_alias_is_in_the_contract() -> None:
    """A Literal alias added to arbiter.types is one of ALIASES, and so is
    checked against the contract."""
    assert set(literal_aliases()) - {a for a, _ in ALIASES} == set()


@pytest.mark.parametrize("alias,group", [("Status", "Status"), ("Effect", "Effect"),
                                         ("EntryOutcome", "EntryResult.outcome"), ("Answer", "LookupAnswer.answer"),
                                         ("Decision", "DecisionInput.decision"), ("Mode", "Limit.mode"),
                                         ("LimitOver", "Limit.over")])
def test_constants_spell_their_alias(alias: str, group: str) -> None:
    (ours,) = [c for name, _, c in GROUPS if name == group]
    assert ours == literal_aliases()[alias]
