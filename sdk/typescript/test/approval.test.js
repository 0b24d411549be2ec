// Approval before execution: the guard waits on the server (Prefer: wait)
// while an operator, with a key of their own, decides concurrently.

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { DeniedError, PendingApprovalError } from "@arbiter-ledger/arbiter";
import { client, fresh, noServer, untilStatus } from "./helpers.js";

const agent = client("agent");
const operator = client("operator");

/** An agent client that remembers the Prefer header sent and Preference-Applied answered. */
function waitingAgent() {
  const waits = [];
  const c = client("agent", {
    fetch: async (url, init) => {
      const res = await fetch(url, init);
      const prefer = init.headers?.Prefer;
      if (prefer) waits.push({ prefer, applied: res.headers.get("preference-applied"), status: res.status });
      return res;
    },
  });
  return { c, waits };
}

describe("approval", { skip: noServer || false, concurrency: true }, () => {
  test("granted while waiting: the operator approves and the waiting guard runs the function once", async () => {
    const { key, tool } = fresh();
    const { c, waits } = waitingAgent();
    let runs = 0;
    const guarded = c.guard(
      { key, tool, effect: "keyed", params: { amount_cents: 250_000 }, requireApproval: true, approvalWaitMs: 30_000 },
      (a) => {
        runs++;
        return { result: { attempt: a.number }, externalRef: "re_big" };
      },
    );
    const held = await untilStatus(operator, key, "awaiting_approval");
    assert.equal(held.attempt, 0);
    assert.equal(held.approval.required, 1);
    const decided = await operator.decide(held.id, { decision: "approve", reason: "checked with the customer" });
    assert.equal(decided.action.status, "approved");

    const out = await guarded;
    assert.equal(out.ran, true);
    assert.equal(out.attempt, 1);
    assert.equal(runs, 1);
    assert.equal(out.action.status, "succeeded");
    assert.ok(waits.length >= 1, "the guard waited on the server");
    assert.match(waits.at(-1).prefer, /^wait=\d+$/);
    assert.equal(waits.at(-1).applied, waits.at(-1).prefer);
    assert.equal(waits.at(-1).status, 201, "the waiting request was answered proceed");
    const a = await agent.action(held.id);
    assert.equal(a.approval.approvals.length, 1);
    assert.equal(a.approval.approvals[0].by.name, "sdk-operator@example.com");
  });

  test("denied while waiting: the guard throws DeniedError with who and why, and nothing runs", async () => {
    const { key, tool } = fresh();
    let runs = 0;
    const guarded = agent
      .guard({ key, tool, requireApproval: true, approvalWaitMs: 30_000 }, () => void runs++)
      .catch((e) => e);
    const held = await untilStatus(operator, key, "awaiting_approval");
    await operator.decide(held.id, { decision: "reject", reason: "over the customer's balance" });
    const err = await guarded;
    assert.ok(err instanceof DeniedError, String(err));
    assert.equal(err.expired, false);
    assert.equal(err.by, "sdk-operator@example.com");
    assert.equal(err.reason, "over the customer's balance");
    assert.equal(err.actionId, held.id);
    assert.equal(runs, 0);
    // Later calls are denied too, at once.
    assert.ok((await agent.guard({ key, tool }, () => void runs++).catch((e) => e)) instanceof DeniedError);
    assert.equal(runs, 0);
    assert.equal((await agent.action(held.id)).status, "denied");
  });

  test("nobody decides in time: PendingApprovalError, and a later call runs once approved", async () => {
    const { key, tool } = fresh();
    let runs = 0;
    const started = Date.now();
    const err = await agent
      .guard({ key, tool, requireApproval: true, approvalWaitMs: 1500 }, () => void runs++)
      .catch((e) => e);
    assert.ok(err instanceof PendingApprovalError, String(err));
    assert.ok(Date.now() - started >= 900, "it waited on the server first");
    assert.equal(runs, 0);
    await operator.decide(err.actionId, { decision: "approve" });
    const out = await agent.guard({ key, tool, requireApproval: true }, () => void runs++);
    assert.equal(out.ran, true);
    assert.equal(runs, 1);
  });
});
