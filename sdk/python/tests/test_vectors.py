"""sdk/vectors.json: the behaviour the Go, Python and TypeScript SDKs share
(keys, backoff bounds, heartbeat pace, what each answer to an intent
means)."""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from datetime import datetime, timedelta, timezone
from typing import Any, Dict, Iterator, Tuple

import pytest

import arbiter
from arbiter.heartbeat import FRACTION_OF_LEASE
from arbiter.lookup import LOOKUP_ERROR_SAID, ask_downstream, lookup_due, lookup_lease
from arbiter.types import ANSWERS, MAX_LOOKUPS, TIMED_OUT, LookupAnswer, Reconciliation

REPO = Path(__file__).resolve().parents[3]
VECTORS = json.loads((REPO / "sdk" / "vectors.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("case", VECTORS["keys"]["cases"], ids=lambda c: repr(c["parts"])[:40])
def test_keys(case: Dict[str, Any]) -> None:
    got = arbiter.key(*case["parts"])
    assert got == case["key"]
    assert len(got.encode("utf-8")) <= VECTORS["keys"]["max_bytes"] == arbiter.MAX_KEY_BYTES


def test_backoff_bounds() -> None:
    b = VECTORS["backoff"]
    default = arbiter.Client("http://127.0.0.1:1", "ak_x").backoff
    assert (default.first, default.largest) == (b["first_ms"] / 1000, b["largest_ms"] / 1000)
    for case in b["bounds"]:
        bound = case["max_ms"] / 1000
        assert default.bound(case["n"]) == pytest.approx(bound)
        draws = [default.pause(case["n"]) for _ in range(2000)]
        assert all(0 <= d <= bound for d in draws), f"pause({case['n']}) outside [0, {bound}]"
        # Full jitter: the draws span the range, not just its top.
        assert max(draws) >= bound / 2 and min(draws) <= bound / 2


def test_heartbeat_and_lookup_answers() -> None:
    assert FRACTION_OF_LEASE == pytest.approx(VECTORS["heartbeat"]["fraction_of_lease"])
    assert list(ANSWERS) == VECTORS["lookup_answers"]["values"]


LOOKUPS = VECTORS["lookups"]


def test_lookup_budget_pause_lease_and_failure_evidence() -> None:
    w = arbiter.Worker(arbiter.Client("http://127.0.0.1:1", "ak_x"))
    assert MAX_LOOKUPS == LOOKUPS["max_lookups"]
    assert w.lookup_timeout == LOOKUPS["default_timeout_s"]
    assert w.lookup_retry == LOOKUPS["retry_after_s"]
    assert lookup_lease(w.lookup_timeout) == LOOKUPS["default_timeout_s"] + LOOKUPS["lease_margin_s"]
    assert lookup_lease(5000) == 3600
    assert LOOKUP_ERROR_SAID == LOOKUPS["failed_said_prefix"]
    q = arbiter.LookupRequest(action_id="a", key="k", tool="t", effect="keyed", attempt=1)

    def raises(_: arbiter.LookupRequest) -> arbiter.LookupResult:
        raise ConnectionRefusedError("connection refused")

    def overruns(_: arbiter.LookupRequest) -> str:
        threading.Event().wait(1)
        return "happened"

    for lookup in (raises, overruns):
        got = ask_downstream(lookup, q, 0.2)
        assert got.answer == "unknown"
        assert list(got.evidence) == [LOOKUPS["failed_evidence_key"]]
        # What the ledger keeps of that evidence (compact JSON) starts as the
        # vectors say, so any worker recognises a failed lookup.
        said = json.dumps(got.evidence, separators=(",", ":"))
        assert said.startswith(LOOKUPS["failed_said_prefix"])


def reconciliation(**given: Any) -> Reconciliation:
    """A Reconciliation with every field the wire carries: the vector's
    values, nothing or zero for the others."""
    blank: Dict[str, Any] = dict(key_expires_at=None, lookup_attempt=0, lookups=0, lookup_until=None, last_lookup=None,
                                 compensation_failures=0, compensation_error=None, compensation_retriable=False,
                                 compensation_timed_out=False)
    return Reconciliation(**{**blank, **given})


@pytest.mark.parametrize("case", LOOKUPS["due"], ids=lambda c: c["case"])
def test_lookup_due(case: Dict[str, Any]) -> None:
    now = datetime.now(timezone.utc)
    at = {"now": now, "long_ago": now - timedelta(hours=1), "future": now + timedelta(minutes=1)}
    a = arbiter.Action(id="a", namespace="sdk", key="k", tool="t", effect="keyed", status=TIMED_OUT,
                       attempt=max(case.get("attempt", 1), 1), version=3, lease_until=None, reference=None,
                       agent=None, params={}, result=None, external_ref=None, created_at=now, updated_at=now,
                       approval=None, reconciliation=None)
    r = case["reconciliation"]
    if r is not None:
        a.reconciliation = reconciliation(lookup_attempt=r["lookup_attempt"], lookups=r["lookups"],
                                          lookup_until=at[r["lookup_until"]] if "lookup_until" in r else None)
        if "last_lookup" in r:
            last = r["last_lookup"]
            a.reconciliation.last_lookup = LookupAnswer(attempt=last["attempt"], answer=last["answer"],
                                                        said=last["said"], at=at[last["at"]],
                                                        by=arbiter.Actor(kind="agent", name="worker"),
                                                        external_ref=None)
    assert lookup_due(a, now, float(LOOKUPS["retry_after_s"])) is case["due"]


@pytest.mark.parametrize("case", VECTORS["compensations"]["due"], ids=lambda c: c["case"])
def test_compensation_due(case: Dict[str, Any]) -> None:
    from arbiter.worker import compensation_due
    r = case["reconciliation"]
    rc = None if r is None else reconciliation(**r)
    assert compensation_due(rc) is case["due"]


ERRORS = {
    "in_progress": arbiter.InProgressError,
    "held": arbiter.HeldError,
    "pending_approval": arbiter.PendingApprovalError,
    "denied": arbiter.DeniedError,
    "key_reused": arbiter.KeyReusedError,
    "invalid": arbiter.APIError,
    "api": arbiter.APIError,
    "unreachable": arbiter.UnreachableError,
}


class Canned(BaseHTTPRequestHandler):
    """Answers every intent with the vector's status and body, and any
    other entry (the reports a compensation sends) with recorded. It stands
    in for the server only to put each row of the table through the SDK;
    the behaviour itself is tested against a real server elsewhere."""

    answer: Tuple[int, bytes] = (500, b"")
    seen: list = []
    entries: list = []

    def do_POST(self) -> None:
        entry = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.seen.append(entry["type"])
        self.entries.append(entry)
        status, body = self.answer if entry["type"] == "intent" else (200, json.dumps(
            {"key": entry["key"], "type": entry["type"], "outcome": "recorded", "attempt": 1,
             "lease_until": None, "action": None, "error": None}).encode())
        self.send_response(status)
        self.send_header("Content-Type", "application/json" if body.startswith(b"{") else "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def canned() -> Iterator[Any]:
    handler = type("Handler", (Canned,), {"seen": [], "entries": []})
    srv = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield srv, handler
    srv.shutdown()
    srv.server_close()


def _answer(case: Dict[str, Any]) -> Tuple[int, bytes]:
    if case.get("transport") == "status_503":
        return 503, b"<html>503 Service Unavailable</html>"
    if case.get("transport") == "status_401":
        return 401, json.dumps({"error": {"code": "unauthorized", "message": "unknown API key"}}).encode()
    status = {"replay": "succeeded", "compensate": "compensation_requested", "held": "timed_out",
              "pending_approval": "awaiting_approval", "denied": "denied"}.get(case["outcome"], "in_progress")
    action = {"id": "01a00000-0000-7000-8000-000000000001", "namespace": "sdk", "key": "k", "tool": "t",
              "effect": "keyed", "status": status, "attempt": 1, "version": 2, "lease_until": None,
              "reference": None, "agent": None, "params": {}, "result": {"saved": True}, "external_ref": "re_1",
              "created_at": "2026-11-30T10:00:00Z", "updated_at": "2026-11-30T10:00:00.123456789Z",
              "approval": None, "reconciliation": None}
    error = None
    if case["outcome"] == "rejected":
        action, error = None, {"code": case["code"], "message": "canned"}
    if case["outcome"] == "denied":
        action["approval"] = {"required": 1, "approvals": [], "expires_at": "2026-12-01T10:00:00Z",
                              "escalate_at": None, "policies": [],
                              "rejection": {"by": {"kind": "operator", "name": "ann"}, "at": "2026-11-30T10:01:00Z",
                                            "reason": "no"}}
    body = {"key": "k", "type": "intent", "outcome": case["outcome"], "attempt": 1,
            "lease_until": "2026-11-30T10:05:00Z", "action": action, "error": error}
    return case["status"], json.dumps(body).encode()


@pytest.mark.parametrize("case", VECTORS["answers"]["cases"],
                         ids=lambda c: c.get("outcome", c.get("transport", "")) + ":" + c.get("code", ""))
def test_answers(case: Dict[str, Any], canned: Any) -> None:
    srv, handler = canned
    url = f"http://127.0.0.1:{srv.server_address[1]}"
    if case.get("transport") == "connection_refused":
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}"
        s.close()
    else:
        handler.answer = _answer(case)
    client = arbiter.Client(url, "ak_x", report_budget=1)
    ran: list = []

    def fn(_: arbiter.Attempt) -> str:
        ran.append(True)
        return "ran"

    spec = arbiter.Spec(key="k", tool="t", effect="keyed")
    if case["does"] == "run":
        assert client.run(spec, fn).ran and ran == [True]
        assert handler.seen == ["intent", "succeeded"]
    elif case["does"] == "return_saved":
        out = client.run(spec, fn)
        assert (out.ran, out.result, ran) == (False, {"saved": True}, [])
    elif case["does"] == "compensate":
        spec.compensate = lambda a: "undone"
        out = client.run(spec, fn)
        assert (out.compensated, out.external_ref, ran) == (True, "undone", [])
        assert handler.seen == ["intent", "compensated"]
        spec.compensate = None
        assert case["without_compensation"] == "compensation_requested"
        with pytest.raises(arbiter.CompensationRequestedError):
            client.run(spec, fn)
        assert handler.seen[-1] == "compensation_failed"
    else:
        with pytest.raises(ERRORS[case["error"]]) as e:
            client.run(spec, fn)
        assert ran == []
        if "code" in case:
            assert e.value.code == case["code"] and e.value.status == case["status"]
        if case["error"] == "api":
            assert not isinstance(e.value, (arbiter.KeyReusedError, arbiter.UnreachableError))


OUTCOMES = VECTORS["outcomes"]


@pytest.mark.parametrize("case", OUTCOMES["cases"], ids=lambda c: json.dumps(c, sort_keys=True))
def test_outcomes_through_the_guard(case: Dict[str, Any], canned: Any) -> None:
    """Each row of "outcomes", raised inside a guarded call: the entry the
    guard sends is what the row records, and the call raises the
    function's exception (failed) or OutcomeUnknownError (outcome_unknown)."""
    from test_outcomes import raised

    srv, handler = canned
    handler.answer = _answer({"outcome": "proceed", "status": 201})
    client = arbiter.Client(f"http://127.0.0.1:{srv.server_address[1]}", "ak_x", report_budget=1)
    classify = None
    if "classifier" in case:
        def classify(exc: BaseException) -> str:
            if case["classifier"] == "raises":
                raise RuntimeError("classifier bug")
            return str(case["classifier"])
    spec = arbiter.Spec(key="k", tool="t", classify=classify, not_done_statuses=case.get("tool_maps", ()))
    exc = raised(case)

    def fn(_: arbiter.Attempt) -> None:
        raise exc

    with pytest.raises(BaseException) as got:
        client.run(spec, fn)
    sent = handler.entries[-1]
    assert handler.seen == ["intent", case["records"]]
    assert sent["attempt"] == 1 and sent["error"]
    if case["records"] == "failed":
        assert got.value is exc
        assert sent.get("retriable", False) == bool(case.get("retriable_recorded", case.get("retriable", False)))
    else:
        assert isinstance(got.value, arbiter.OutcomeUnknownError) and got.value.__cause__ is exc
        assert "retriable" not in sent
    if case["raised"] == "timeout":
        assert sent["error"].startswith("timeout: ")
    assert OUTCOMES["default"] == "outcome_unknown"
