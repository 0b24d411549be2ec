"""The guard's classification of a guarded call's exception follows every
case of sdk/vectors.json "outcomes" (no server needed)."""

from __future__ import annotations

import json
import socket
import urllib.error
from pathlib import Path
from typing import Any, Dict

import pytest

import arbiter
from arbiter.outcomes import classify_exception

VECTORS = json.loads((Path(__file__).resolve().parents[2] / "vectors.json").read_text())


class HTTPStatusError(Exception):
    def __init__(self, status: int) -> None:
        super().__init__(f"HTTP {status}")
        self.status_code = status


def raised(case: Dict[str, Any]) -> BaseException:
    kind = case["raised"]
    if kind == "timeout":
        return TimeoutError("read timed out after 30 s")
    if kind == "connection_lost":
        return ConnectionResetError(104, "Connection reset by peer")
    if kind == "connection_refused":
        return urllib.error.URLError(ConnectionRefusedError(111, "Connection refused"))
    if kind == "not_done":
        return arbiter.NotDone("card declined", retriable=case["retriable"])
    if kind == "http_status":
        return HTTPStatusError(case["status"])
    return KeyError("oops")


@pytest.mark.parametrize("case", VECTORS["outcomes"]["cases"], ids=lambda c: json.dumps(c, sort_keys=True))
def test_outcome_vectors(case: Dict[str, Any]) -> None:
    classify = None
    if "classifier" in case:
        def classify(exc: BaseException) -> str:
            if case["classifier"] == "raises":
                raise RuntimeError("classifier bug")
            return str(case["classifier"])
    got = classify_exception(raised(case), classify=classify, not_done_statuses=case.get("tool_maps", ()))
    assert got.outcome == case["records"]
    if got.outcome == "failed":
        assert got.retriable == bool(case.get("retriable_recorded", case.get("retriable", False)))


@pytest.mark.parametrize("exc", [socket.timeout("timed out"), urllib.error.URLError(TimeoutError("timed out")),
                                 BrokenPipeError(32, "Broken pipe")])
def test_lost_or_timed_out_is_outcome_unknown_with_its_kind(exc: BaseException) -> None:
    got = classify_exception(exc)
    assert got.outcome == "outcome_unknown"
    assert got.error.startswith(("timeout", "connection lost"))


def test_timeout_error_text_names_the_kind() -> None:
    assert classify_exception(TimeoutError("read timed out after 30 s")).error == "timeout: read timed out after 30 s"
