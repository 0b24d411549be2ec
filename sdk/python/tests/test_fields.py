"""The dataclasses of arbiter.types have web/openapi.json's fields: each
one the SDK reads or sends has exactly the properties of its schema, so a
column added to the API and forgotten here, or a field the API never sends,
fails. Python shows required-ness by a field without a default, which only
a required property may be, and null by a type that admits None, which
every property whose value may be null has."""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest

from arbiter import types as t

REPO = Path(__file__).resolve().parents[3]
OPENAPI: Dict[str, Any] = json.loads((REPO / "web" / "openapi.json").read_text(encoding="utf-8"))

# Each dataclass of the SDK and the schema it stands for.
PAIRS: List[Tuple[type, str]] = [
    (t.Action, "Action"),
    (t.LedgerEntry, "Entry"),
    (t.Entry, "EntryInput"),
    (t.EntryResult, "EntryResult"),
    (t.Actor, "Actor"),
    (t.Approval, "Approval"),
    (t.Reconciliation, "Reconciliation"),
    (t.LookupAnswer, "LookupAnswer"),
    (t.ErrorDetail, "ErrorDetail"),
    (t.Policy, "Policy"),
    (t.Limit, "Limit"),
    (t.LimitCharge, "LimitCharge"),
    (t.ApprovalLimit, "ApprovalLimit"),
    (t.LimitUsage, "LimitUsage"),
    (t.GroupUsage, "GroupUsage"),
    (t.AuditProof, "AuditProof"),
]


def nullable(prop: Dict[str, Any]) -> bool:
    """Whether a property's value may be null (no type at all is any JSON)."""
    typ = prop.get("type")
    if isinstance(typ, list):
        return "null" in typ
    if typ is not None:
        return bool(typ == "null")
    if "oneOf" in prop:
        return any(alt.get("type") == "null" for alt in prop["oneOf"])
    return "$ref" not in prop


def admits_none(hint: Any) -> bool:
    if hint is Any or hint is type(None):
        return True
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return any(admits_none(a) for a in typing.get_args(hint))
    return False


@pytest.mark.parametrize("cls,schema_name", PAIRS, ids=[p[1] for p in PAIRS])
def test_dataclass_has_the_schemas_fields(cls: type, schema_name: str) -> None:
    schema = OPENAPI["components"]["schemas"][schema_name]
    props: Dict[str, Any] = schema["properties"]
    required = set(schema.get("required", []))
    fields = {f.name: f for f in dataclasses.fields(cls)}
    assert {
        "missing in the SDK": [p for p in props if p not in fields],
        "missing in web/openapi.json": [f for f in fields if f not in props],
    } == {"missing in the SDK": [], "missing in web/openapi.json": []}, cls.__name__
    hints = typing.get_type_hints(cls)
    for name, f in fields.items():
        has_default = f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
        if not has_default:
            assert name in required, f"{cls.__name__}.{name} has no default, but {schema_name} does not require it"
        if nullable(props[name]):
            assert admits_none(hints[name]), (
                f"{cls.__name__}.{name} ({hints[name]}) cannot be None, but {schema_name}.{name} may be null"
            )
