"""An agent process for test_network: it performs its effect under a
guard, says so on stdout, and waits to be killed before it can report."""

import sys
import time

import arbiter

url, api_key, key = sys.argv[1:4]
client = arbiter.Client(url, api_key)


def refund(attempt: arbiter.Attempt) -> str:
    print(f"effect {attempt.action_id} {attempt.number}", flush=True)  # the money moved
    time.sleep(60)  # killed here, between the effect and the report
    return "never reported"


client.run(arbiter.Spec(key=key, tool="payments.refund", effect="unkeyed", timeout=1), refund)
