"""The examples run to their end against a real server: refund_agent.py
(one refund per order, a lost answer confirmed by the lookup, a lost
request retried with its key) and the adapters' examples inside their
frameworks (an approval in Arbiter that pauses and resumes an OpenAI
Agents run; a LangChain agent whose repeated refund is answered from the
ledger)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
EXAMPLE = EXAMPLES / "refund_agent.py"
frameworks = pytest.mark.skipif(sys.version_info < (3, 11), reason="the pinned agent frameworks need Python 3.11")


def test_refund_agent_example(url: str, uniq: str) -> None:
    env = dict(os.environ, ARBITER_URL=url, ARBITER_API_KEY=os.environ["ARBITER_AGENT_KEY"])
    out = subprocess.run([sys.executable, str(EXAMPLE), uniq], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "confirmed with re_0002" in out.stdout
    assert "succeeded in attempt 2 with re_0003" in out.stdout
    assert "refunds at the provider: 3 for 3 orders" in out.stdout


@frameworks
def test_openai_agents_example(url: str, uniq: str) -> None:
    env = dict(os.environ, ARBITER_URL=url, ARBITER_API_KEY=os.environ["ARBITER_AGENT_KEY"],
               ARBITER_OPERATOR_KEY=os.environ["ARBITER_OPERATOR_KEY"])
    out = subprocess.run([sys.executable, str(EXAMPLES / "openai_agents_refund.py"), f"order-{uniq}"], env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"paused: refund:order-{uniq} awaits approval in Arbiter: {url}/actions/" in out.stdout
    assert f"Refunded order-{uniq}, once.\nrefunds at the provider: 1\n" in out.stdout


@frameworks
def test_langchain_example(url: str, uniq: str) -> None:
    env = dict(os.environ, ARBITER_URL=url, ARBITER_API_KEY=os.environ["ARBITER_AGENT_KEY"])
    out = subprocess.run([sys.executable, str(EXAMPLES / "langchain_refund.py"), f"order-{uniq}"], env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.splitlines() == ["refund: re_0001", "order_status: delivered", "refund: re_0001",
                                       f"Refunded order-{uniq}, once.", "refunds at the provider: 1"]
