"""The Python agent of test_crosslang: it refunds under a guard at the
test's fake provider, with the action's key as the idempotency key, says
so on stdout, and waits to be killed before it can report."""

import sys
import time
import urllib.request

import arbiter

url, api_key, provider, tool, key = sys.argv[1:6]
client = arbiter.Client(url, api_key)


def refund(attempt: arbiter.Attempt) -> str:
    req = urllib.request.Request(f"{provider}/refunds", method="POST", headers={
        "Idempotency-Key": attempt.key, "X-Attempt": str(attempt.number), "X-Caller": "python"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        resp.read()
    print(f"effect {attempt.action_id} {attempt.number}", flush=True)  # the money moved
    time.sleep(60)  # killed here, between the effect and the report
    return "never reported"


client.run(arbiter.Spec(key=key, tool=tool, effect="keyed", timeout=1, agent="python-refund-agent",
                        params={"order": key, "amount_cents": 4200}), refund)
