"""A refund agent against a fake payment provider that honours idempotency
keys and can be searched by them, as Stripe can.

It refunds three orders through Arbiter:
  1. one that goes through, then is asked again: answered from the ledger,
     refunded once;
  2. one whose provider answer is lost after the refund went out: the action
     times out, and the worker's lookup finds the refund (confirmed, no
     person needed);
  3. one whose request never reached the provider: the lookup finds nothing,
     and the worker retries with the original key (one refund).

Run it against `arbiter demo` (see sdk/python/README.md):
    ARBITER_URL=http://127.0.0.1:8080 ARBITER_API_KEY=ak_... python3 refund_agent.py
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from typing import Dict, Optional

import arbiter

TOOL = "payments.refund"


class FakePSP:
    """Refunds once per idempotency key; searchable by it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.refunds: Dict[str, str] = {}

    def refund(self, order_id: str, amount_cents: int, idempotency_key: str) -> str:
        with self._lock:
            if idempotency_key not in self.refunds:
                self.refunds[idempotency_key] = f"re_{len(self.refunds) + 1:04d}"
                print(f"  provider: refunded {amount_cents / 100:.2f} EUR for {order_id} "
                      f"as {self.refunds[idempotency_key]}")
            return self.refunds[idempotency_key]

    def find(self, idempotency_key: str) -> Optional[str]:
        with self._lock:
            return self.refunds.get(idempotency_key)


psp = FakePSP()
lose_answer = set()  # orders whose provider answer is lost (after the refund)
lose_request = set()  # orders whose request never reaches the provider


def do_refund(order_id: str, amount_cents: int, attempt: arbiter.Attempt) -> arbiter.Done:
    if order_id in lose_request:
        lose_request.discard(order_id)
        raise arbiter.Unknown("timed out connecting to the provider")  # did it arrive? we cannot tell
    ref = psp.refund(order_id, amount_cents, idempotency_key=attempt.key)  # the same key on every attempt
    if order_id in lose_answer:
        lose_answer.discard(order_id)
        raise arbiter.Unknown("the provider's answer was lost")
    return arbiter.Done({"refund_id": ref, "amount_cents": amount_cents}, external_ref=ref)


# The guarded refund: the key is the business identity, the params are the
# call's arguments, the lease is 2 s so that the demo's timeouts come fast.
@arbiter.guard(tool=TOOL, effect="keyed", timeout=2, key_ttl=86400,
               key=lambda order_id, **_: arbiter.key("refund", order_id))
def refund(order_id: str, amount_cents: int, attempt: arbiter.Attempt) -> arbiter.Done:
    return do_refund(order_id, amount_cents, attempt)


def lookup(q: arbiter.LookupRequest) -> arbiter.LookupResult:
    ref = psp.find(q.key)
    if ref is None:
        return arbiter.LookupResult("not_happened", evidence={"search": q.key, "refunds": []})
    return arbiter.LookupResult("happened", evidence={"search": q.key, "refunds": [ref]},
                                external_ref=ref, result={"refund_id": ref})


def retry(attempt: arbiter.Attempt) -> arbiter.Done:
    """The worker's handler: the action's stored params, the original key."""
    return do_refund(attempt.params["order_id"], attempt.params["amount_cents"], attempt)


def wait_for(client: arbiter.Client, key: str, *statuses: str) -> arbiter.Action:
    deadline = time.monotonic() + 30
    while True:
        a = client.action_by_key(key)
        if a.status in statuses or time.monotonic() > deadline:
            return a
        time.sleep(0.2)


def main() -> int:
    logging.basicConfig(level=logging.WARNING, format="  %(name)s: %(message)s")
    if not os.environ.get("ARBITER_API_KEY"):
        print("set ARBITER_URL and ARBITER_API_KEY (an agent key): see sdk/python/README.md", file=sys.stderr)
        return 2
    client = arbiter.default_client()
    run = sys.argv[1] if len(sys.argv) > 1 else time.strftime("%H%M%S")
    a, b, c = (f"order-{run}-{n}" for n in ("a", "b", "c"))

    print(f"1. refund {a}, then the same refund again")
    print("  ->", refund(a, 1999))
    print("  ->", refund(a, 1999), "(answered from the ledger; nothing ran)")

    print(f"2. refund {b}: the provider refunds, its answer is lost")
    lose_answer.add(b)
    try:
        refund(b, 4200)
    except arbiter.OutcomeUnknownError as e:
        print("  ->", e)
    print(f"3. refund {c}: the request never reaches the provider")
    lose_request.add(c)
    try:
        refund(c, 1250)
    except arbiter.OutcomeUnknownError as e:
        print("  ->", e)
    print("   (a retry now would be held for a person; the lease passes and the action times out)")
    for order in (b, c):
        wait_for(client, arbiter.key("refund", order), "timed_out")
    try:
        refund(b, 4200)
    except arbiter.HeldError as e:
        print("  ->", e)

    print("4. the worker looks the timed-out refunds up at the provider")
    worker = arbiter.Worker(client, agent="py-refund-worker", poll=0.2)
    worker.handle(TOOL, retry)
    worker.handle_lookup(TOOL, lookup)
    running = worker.start()
    try:
        done_b = wait_for(client, arbiter.key("refund", b), "confirmed")
        done_c = wait_for(client, arbiter.key("refund", c), "succeeded")
    finally:
        running.stop()
    print(f"  -> {b}: {done_b.status} with {done_b.external_ref} (found at the provider; no person needed)")
    print(f"  -> {c}: {done_c.status} in attempt {done_c.attempt} with {done_c.external_ref} (retried with its key)")
    print(f"refunds at the provider: {len(psp.refunds)} for 3 orders; see {client.action_url(done_b.id)}")
    return 0 if (done_b.status, done_c.status, len(psp.refunds)) == ("confirmed", "succeeded", 3) else 1


if __name__ == "__main__":
    sys.exit(main())
