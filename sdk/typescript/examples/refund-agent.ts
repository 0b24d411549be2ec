// refund-agent refunds an order through a payment provider that honours
// idempotency keys, with Arbiter guarding the refund: the intent is
// recorded first, the action's key goes to the provider as its idempotency
// key, and the outcome is recorded after. The TypeScript twin of
// examples/refund-agent in the repository's root.
//
// With --crash the process "dies" between the refund and the report. The
// program then plays the restarted agent: the same job is held (the
// outcome is unknown, so nothing runs again blindly), and a worker looks
// before it resends: it searches the provider's refunds by the action's
// key, finds the refund, and the ledger confirms the action.
//
// With --crash-before the process dies before the provider got the
// request. The lookup finds nothing; the action is keyed, so the ledger
// retries it: the worker runs attempt 2 with the same key, and the customer
// is refunded once.
//
//   ARBITER_URL=http://127.0.0.1:8080 ARBITER_API_KEY=ak_… npm run example -- --crash

import { parseArgs } from "node:util";
import {
  Client,
  HeldError,
  OutcomeUnknownError,
  Worker,
  isUnavailable,
  key,
  type Attempt,
  type GuardSpec,
  type LookupFunc,
} from "@arbiter-ledger/arbiter";

const { values: flags } = parseArgs({
  options: {
    order: { type: "string", default: "order-8812" },
    amount: { type: "string", default: "4200" },
    crash: { type: "boolean", default: false },
    "crash-before": { type: "boolean", default: false },
    lease: { type: "string", default: "5" },
  },
});
const url = process.env.ARBITER_URL || "http://127.0.0.1:8080";
const apiKey = process.env.ARBITER_API_KEY;
if (!apiKey) {
  console.error("set ARBITER_API_KEY to an agent key: arbiter keys create --namespace payments --name refund-agent --role agent");
  process.exit(1);
}
const order = flags.order!;
const amountCents = Number(flags.amount);
const leaseMs = Number(flags.lease) * 1000;

/**
 * A fake payment provider that deduplicates by idempotency key, as Stripe
 * and Adyen do: a repeat of a key returns the first refund. Its refunds
 * can be searched by the key they were made with.
 */
const psp = {
  byKey: new Map<string, string>(),
  refund(idempotencyKey: string): string {
    if (!this.byKey.has(idempotencyKey)) this.byKey.set(idempotencyKey, `re_${this.byKey.size + 1}`);
    return this.byKey.get(idempotencyKey)!;
  },
};

// Short pauses between asks, so the restarted agent notices the held
// action soon after the lease passes.
const arbiter = new Client(url, apiKey, { backoff: { firstMs: 100, largestMs: 1000 } });

// The refund, as the first attempt and any retry run it.
async function refund(a: Attempt) {
  const id = psp.refund(a.key); // the action's key is the provider's idempotency key
  return { result: { refund_id: id, amount_cents: a.params["amount_cents"] }, externalRef: id };
}

const spec: GuardSpec = {
  key: key("refund", order), // the business identity, the same on every run
  tool: "payments.refund",
  effect: "keyed", // the provider deduplicates by key: a retry is safe
  params: { order, amount_cents: amountCents },
  timeoutMs: leaseMs,
  reference: order,
};

// How the worker finds out what a timed-out attempt did: search the
// provider's refunds by the key the attempt sent.
const lookup: LookupFunc = (q) => {
  const id = psp.byKey.get(q.key);
  if (!id) {
    console.log(`lookup: the provider has no refund for key ${q.key}`);
    return { answer: "not_happened", evidence: { idempotency_key: q.key, refunds: [] } };
  }
  console.log(`lookup: the provider has refund ${id} for key ${q.key}`);
  return { answer: "happened", externalRef: id, result: { refund_id: id }, evidence: { idempotency_key: q.key, refunds: [id] } };
};

if (flags.crash || flags["crash-before"]) {
  const process_ = new AbortController(); // the process's life: aborting it is dying
  const err = await arbiter
    .guard(
      spec,
      async (a, signal) => {
        if (flags["crash-before"]) {
          console.log(`attempt ${a.number}: the process dies before the provider gets the refund`);
        } else {
          const { externalRef } = await refund(a);
          console.log(`attempt ${a.number}: the provider refunded ${externalRef}; now the process dies before reporting it`);
        }
        process_.abort(new Error("the process died"));
        throw signal.reason;
      },
      { signal: process_.signal },
    )
    .catch((e: unknown) => e);
  if (!(err instanceof OutcomeUnknownError)) throw new Error(`the simulated crash: ${err}`);
  console.log(`restarting: the same job runs again (the action times out in ${leaseMs / 1000}s)`);
  spec.waitMs = leaseMs + 10_000; // for the lease to pass and the sweeper to notice
}

try {
  const res = await arbiter.guard(spec, refund);
  console.log(
    res.ran
      ? `refunded ${res.externalRef}, recorded as attempt ${res.attempt}`
      : `already refunded (${res.externalRef}): answered from the ledger, nothing ran`,
  );
  // A second run of the same job, as after a restart: the ledger answers.
  const again = await arbiter.guard(spec, refund);
  console.log(`the same job again: ${again.externalRef} from the ledger (ran: ${again.ran}); the provider created ${psp.byKey.size} refund(s)`);
} catch (err) {
  if (!(err instanceof HeldError)) throw err;
  console.log(`held: the outcome of attempt ${err.attempt} is unknown, so nothing runs again blindly; the worker looks it up at the provider`);
  console.log(`  (if the lookup cannot tell, an operator decides: ${err.url})`);
  await resolve(err.actionId);
}

/** Runs a worker, as the agent's process would, until the action is settled: by its lookup, or by an operator's decision it carries out. */
async function resolve(id: string) {
  const w = new Worker(arbiter).handle("payments.refund", refund).handleLookup("payments.refund", lookup);
  for (;;) {
    const a = await arbiter.action(id);
    if (!["timed_out", "retry_requested", "in_progress"].includes(a.status)) {
      console.log(`settled: the action is ${a.status} (attempt ${a.attempt}); the provider created ${psp.byKey.size} refund(s) for ${a.key}`);
      return;
    }
    await w.runOnce().catch((e: unknown) => {
      if (!isUnavailable(e)) throw e;
    });
    await new Promise((r) => setTimeout(r, 500));
  }
}
