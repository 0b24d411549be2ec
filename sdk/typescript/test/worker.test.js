// The worker against a real server: it looks timed-out attempts up at the
// downstream before a person decides, retries with the original key when
// the lookup proves nothing happened, carries out compensations, and
// reports compensation_failed when the undo throws.

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { Worker, retriable } from "@arbiter-ledger/arbiter";
import { client, fresh, memoryLogger, noServer, poll, untilStatus } from "./helpers.js";

const agent = client("agent");
const operator = client("operator");

/** A payment provider that honours idempotency keys, searchable by key. */
function provider() {
  const byKey = new Map();
  return {
    byKey,
    refund(k) {
      if (!byKey.has(k)) byKey.set(k, `re_${byKey.size + 1}`);
      return byKey.get(k);
    },
  };
}

/** An attempt that died without a report: an intent with a 1 s lease, and silence until it times out. */
async function timedOut(key, tool, effect = "keyed") {
  const res = await agent.submit({ key, type: "intent", tool, effect, timeout: 1, params: { order: key } });
  assert.equal(res.outcome, "proceed");
  await untilStatus(agent, key, "timed_out");
  return res.action.id;
}

/** Runs the worker's polls until the action for key is in one of the statuses. */
function workUntil(w, key, statuses) {
  return poll(
    async () => {
      await w.runOnce();
      const a = await agent.actionByKey(key);
      return statuses.includes(a.status) ? a : null;
    },
    { intervalMs: 100, what: `${key} to become ${statuses}` },
  );
}

describe("worker", { skip: noServer || false, concurrency: true }, () => {
  test("lookup: happened → the timed-out action is confirmed with the downstream's evidence", async () => {
    const { key, tool } = fresh();
    const psp = provider();
    const id = await timedOut(key, tool);
    const refundId = psp.refund(key); // the effect happened before the worker died
    const asked = [];
    const logger = memoryLogger();
    const w = new Worker(agent, { logger, pollMs: 50 })
      .handle(tool, () => assert.fail("nothing may run again"))
      .handleLookup(tool, (q, signal) => {
        asked.push(q);
        assert.equal(signal.aborted, false);
        const found = psp.byKey.get(q.key);
        return found
          ? { answer: "happened", externalRef: found, result: { refund_id: found }, evidence: { refunds: [found] } }
          : { answer: "not_happened", evidence: { refunds: [] } };
      });
    const a = await workUntil(w, key, ["confirmed"]);
    assert.equal(asked.length, 1);
    assert.equal(asked[0].actionId, id);
    assert.equal(asked[0].attempt, 1);
    assert.equal(asked[0].effect, "keyed");
    assert.deepEqual(asked[0].params, { order: key });
    assert.equal(a.external_ref, refundId);
    assert.deepEqual(a.result, { refund_id: refundId });
    assert.equal(a.reconciliation.last_lookup.answer, "happened");
    const types = (await agent.entries(id)).map((e) => e.type);
    assert.deepEqual(types, ["intent", "timed_out", "lookup", "lookup_result", "reconciled"]);
    assert.ok(logger.lines.some((l) => l.message.includes("reported the lookup's answer")));
  });

  test("lookup: not_happened on a keyed action → retried with the original key, exactly one effect", async () => {
    const { key, tool } = fresh();
    const psp = provider();
    const id = await timedOut(key, tool); // died before the provider got the request
    const runs = [];
    const w = new Worker(agent, { logger: memoryLogger(), pollMs: 50 })
      .handle(tool, (a) => {
        runs.push({ key: a.key, number: a.number, params: a.params });
        const refundId = psp.refund(a.key);
        return { result: { refund_id: refundId }, externalRef: refundId };
      })
      .handleLookup(tool, (q) =>
        psp.byKey.has(q.key) ? { answer: "happened", externalRef: psp.byKey.get(q.key) } : { answer: "not_happened" },
      );
    const a = await workUntil(w, key, ["succeeded"]);
    assert.deepEqual(runs, [{ key, number: 2, params: { order: key } }]);
    assert.equal(psp.byKey.size, 1, "exactly one refund");
    assert.equal(a.attempt, 2);
    assert.equal(a.external_ref, "re_1");
    assert.equal(a.id, id);
    // Later polls find nothing to do.
    assert.equal(await w.runOnce(), 0);
    assert.equal(psp.byKey.size, 1);
  });

  test("lookup: a lookup that throws is reported unknown with the error, and asked again later", async () => {
    const { key, tool } = fresh();
    const id = await timedOut(key, tool);
    let asks = 0;
    const w = new Worker(agent, { logger: memoryLogger(), lookupRetryMs: 200 }).handleLookup(tool, () => {
      asks++;
      if (asks === 1) throw new Error("provider search is down");
      return { answer: "happened", externalRef: "re_late" };
    });
    await poll(async () => (await w.runOnce(), asks >= 1), { what: "the first lookup" });
    let a = await agent.action(id);
    assert.equal(a.status, "timed_out");
    assert.equal(a.reconciliation.last_lookup.answer, "unknown");
    assert.match(a.reconciliation.last_lookup.said, /provider search is down/);
    a = await workUntil(w, key, ["confirmed"]);
    assert.equal(asks, 2);
    assert.equal(a.external_ref, "re_late");
  });

  test("compensation: the worker undoes what an operator asked to compensate", async () => {
    const { key, tool } = fresh();
    const done = await agent.guard({ key, tool, effect: "keyed" }, () => ({ externalRef: "re_1" }));
    await operator.decide(done.action.id, { decision: "compensate", reason: "refunded twice by mistake" });
    const undone = [];
    const w = new Worker(agent, { logger: memoryLogger() }).handle(
      tool,
      () => assert.fail("nothing may run"),
      (a) => {
        undone.push(a.number);
        return { externalRef: "rev_1" };
      },
    );
    const a = await workUntil(w, key, ["compensated"]);
    assert.deepEqual(undone, [1]);
    const types = (await agent.entries(a.id)).map((e) => e.type);
    assert.deepEqual(types, ["intent", "succeeded", "decision", "intent", "compensated"]);
  });

  test("compensation_failed: a compensation that throws a retriable error is reported, the lease released, and the next try undoes it", async () => {
    const { key, tool } = fresh();
    const done = await agent.guard({ key, tool }, () => ({ externalRef: "re_1" }));
    await operator.decide(done.action.id, { decision: "compensate", reason: "wrong customer" });
    let tries = 0;
    const w = new Worker(agent, { logger: memoryLogger(), pollMs: 10 }).handle(tool, undefined, () => {
      tries++;
      if (tries === 1) throw retriable(new Error("the provider refused the reversal"));
      return { externalRef: "rev_2" };
    });
    await poll(async () => (await w.runOnce(), tries >= 1), { what: "the first compensation" });
    let a = await agent.action(done.action.id);
    assert.equal(a.status, "compensation_requested");
    assert.equal(a.lease_until, null, "the failure released the compensation lease");
    assert.equal(a.reconciliation.compensation_failures, 1);
    assert.equal(a.reconciliation.compensation_error, "the provider refused the reversal");
    const failed = (await agent.entries(a.id)).find((e) => e.type === "compensation_failed");
    assert.equal(failed.attempt, 1);

    assert.equal(a.reconciliation.compensation_retriable, true);
    a = await workUntil(w, key, ["compensated"]);
    assert.equal(tries, 2);
  });

  test("compensation_failed: a compensation that fails for good is left to a person", async () => {
    const { key, tool } = fresh();
    const done = await agent.guard({ key, tool }, () => ({ externalRef: "re_1" }));
    await operator.decide(done.action.id, { decision: "compensate", reason: "wrong customer" });
    let tries = 0;
    const w = new Worker(agent, { logger: memoryLogger(), pollMs: 10 }).handle(tool, undefined, () => {
      tries++;
      throw new Error("the reversal window closed");
    });
    await poll(async () => (await w.runOnce(), tries >= 1), { what: "the first compensation" });
    const a = await agent.action(done.action.id);
    assert.equal(a.reconciliation.compensation_retriable, false);
    for (let i = 0; i < 5; i++) await w.runOnce();
    assert.equal(tries, 1, "a final failure is not tried again by workers");
    assert.equal((await agent.action(done.action.id)).status, "compensation_requested");
  });

  test("compensation through the guard: compensate throws → compensation_failed; none given → CompensationRequestedError", async () => {
    const { key, tool } = fresh();
    const done = await agent.guard({ key, tool }, () => ({}));
    await operator.decide(done.action.id, { decision: "compensate", reason: "cancelled" });
    const refused = new Error("reversal window closed");
    const err = await agent
      .guard({ key, tool, compensate: () => { throw refused; } }, () => assert.fail("nothing may run"))
      .catch((e) => e);
    assert.equal(err, refused);
    const { CompensationRequestedError } = await import("@arbiter-ledger/arbiter");
    const none = await agent.guard({ key, tool }, () => assert.fail("nothing may run")).catch((e) => e);
    assert.ok(none instanceof CompensationRequestedError, String(none));
    const a = await agent.action(done.action.id);
    assert.equal(a.status, "compensation_requested");
    assert.equal(a.reconciliation.compensation_failures, 2);
  });

  test("retry: run() carries out an operator's retry with the original key and params, then stops with its signal", async () => {
    const { key, tool } = fresh("email");
    const id = await timedOut(key, tool, "unkeyed");
    await operator.decide(id, { decision: "retry", reason: "provider log shows nothing", acknowledge_duplicate_risk: true });
    const sent = [];
    const ctl = new AbortController();
    const w = new Worker(agent, { logger: memoryLogger(), pollMs: 50 }).handle(tool, (a) => {
      sent.push([a.key, a.number, a.params]);
      return { externalRef: "msg_2" };
    });
    const running = w.run({ signal: ctl.signal });
    const a = await untilStatus(agent, key, "succeeded");
    ctl.abort();
    await running;
    assert.deepEqual(sent, [[key, 2, { order: key }]]);
    assert.equal(a.attempt, 2);
    // The retry ran under the lease the first intent asked for.
    const intents = (await agent.entries(id)).filter((e) => e.type === "intent");
    assert.deepEqual(intents.map((e) => e.payload.timeout), [1, 1]);
  });
});
