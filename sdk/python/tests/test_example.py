"""examples/refund_agent.py runs to its end against a real server: one
refund per order, a lost answer confirmed by the lookup, a lost request
retried with its key."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "refund_agent.py"


def test_refund_agent_example(url: str, uniq: str) -> None:
    env = dict(os.environ, ARBITER_URL=url, ARBITER_API_KEY=os.environ["ARBITER_AGENT_KEY"])
    out = subprocess.run([sys.executable, str(EXAMPLE), uniq], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "confirmed with re_0002" in out.stdout
    assert "succeeded in attempt 2 with re_0003" in out.stdout
    assert "refunds at the provider: 3 for 3 orders" in out.stdout
