"""Across languages: a Python agent's refund times out (its process is
killed between the effect and the report), an operator decides retry over
the API, and a Go worker (sdk/crosslang/refundworker, on the Go SDK's
Worker.Handle) carries out the retry with the original key, at a fake
provider both can reach."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Dict, Iterator, List, Tuple

import pytest

import arbiter
from conftest import wait_status

REPO = Path(__file__).resolve().parents[3]


class Provider(BaseHTTPRequestHandler):
    """A payment provider that honours idempotency keys (a request with a
    key it has seen returns that refund) and keeps every request it got:
    (key, attempt, caller)."""

    lock = threading.Lock()
    calls: List[Tuple[str, int, str]] = []
    refunds: Dict[str, str] = {}

    def do_POST(self) -> None:
        key = self.headers["Idempotency-Key"]
        with self.lock:
            self.calls.append((key, int(self.headers["X-Attempt"]), self.headers["X-Caller"]))
            ref = self.refunds.setdefault(key, f"re_{len(self.refunds) + 1}")
        body = json.dumps({"id": ref}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def provider() -> Iterator[Tuple[str, Any]]:
    handler = type("Handler", (Provider,), {"calls": [], "refunds": {}})
    srv = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}", handler
    srv.shutdown()
    srv.server_close()


@pytest.fixture(scope="session")
def go_worker(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The Go worker, built from the repository with the Go SDK."""
    go = shutil.which("go")
    if go is None:
        pytest.fail("the cross-language test needs the go command to build sdk/crosslang/refundworker")
    out = tmp_path_factory.mktemp("go") / "refundworker"
    subprocess.run([go, "build", "-o", str(out), "./sdk/crosslang/refundworker"], cwd=REPO, check=True)
    return str(out)


def test_a_python_agents_timed_out_refund_is_retried_by_a_go_worker_with_its_key(
        url: str, agent: arbiter.Client, operator: arbiter.Client, uniq: str, provider: Tuple[str, Any],
        go_worker: str) -> None:
    provider_url, seen = provider
    tool, k = f"payments.refund.{uniq}", arbiter.key("refund", "order", uniq)
    agent_key = os.environ["ARBITER_AGENT_KEY"]

    # The Python agent refunds, and is killed before it can report.
    proc = subprocess.Popen([sys.executable, str(Path(__file__).with_name("crosslang_agent.py")), url, agent_key,
                             provider_url, tool, k], stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        assert line.startswith("effect "), f"the agent did not reach its effect: {line!r}"
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
    a = wait_status(agent, k, "timed_out")
    assert a.attempt == 1

    # An operator decides retry over the API: the provider honours the key.
    operator.decide(a.id, "retry", "the provider's answer was lost; the key makes a resend safe",
                    expected_version=a.version)

    # The Go worker runs the retry with the original key and params.
    env = dict(os.environ, ARBITER_API_KEY=agent_key)
    done = subprocess.run([go_worker, "-tool", tool, "-key", k, "-provider", provider_url, "-within", "60s"],
                          env=env, capture_output=True, text=True, timeout=90)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["succeeded", "2", "re_1"]

    # Each attempt reached the provider exactly once, both with the
    # original key, so the provider refunded once.
    assert seen.calls == [(k, 1, "python"), (k, 2, "go")]
    assert seen.refunds == {k: "re_1"}
    final = agent.action_by_key(k)
    assert (final.id, final.status, final.attempt, final.key, final.external_ref, final.result) == (
        a.id, "succeeded", 2, k, "re_1", {"refund_id": "re_1"})
    assert final.params == {"order": k, "amount_cents": 4200}
    # The timeline: the Python agent's attempt 1, the sweeper, the
    # operator, then the Go worker's attempt 2 under the same key.
    assert [(e.type, e.attempt, e.actor.name) for e in agent.entries(a.id)] == [
        ("intent", 1, "python-refund-agent"), ("timed_out", 1, "sweeper"), ("decision", 1, "sdk-operator@example.com"),
        ("intent", 2, "go-refund-worker"), ("succeeded", 2, "go-refund-worker")]
