// Freezes and breakers against the real server: the person on call
// freezes a tool with an operator key; a guarded call on a new key waits
// for approval with the freeze named (PendingApprovalError.frozenBy); a
// retry an operator asked for is answered frozen (FrozenError, Retry-After
// 5 s) and nothing runs; the guard asked to wait out the freeze
// (frozenWaitMs) runs once a person lifts it, and so does the key the
// freeze held. An admin manages breakers, and one trips into a freeze of
// its tool when too many of its actions fail.
//
// The tests share the namespace with every other test file, so each
// freezes only a tool of its own.

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { ArbiterError, FrozenError, NotDone, OutcomeUnknownError, PendingApprovalError, key } from "@arbiter-ledger/arbiter";
import { arbiterTool, modelAnswer, modelMessage } from "@arbiter-ledger/arbiter/ai-sdk";
import { client, fresh, noServer, poll, untilStatus } from "./helpers.js";

const agent = client("agent");
const operator = client("operator");
const reader = client("reader");
const admin = client("admin");
const namespace = process.env.ARBITER_NAMESPACE ?? "sdk";

/** A key of the tool whose attempt 1 timed out (outcome unknown) and that an operator asked to retry. */
async function retryRequested(tool, what) {
  const k = key(what, `order-${Math.random().toString(36).slice(2, 10)}`);
  const lost = await agent.guard({ key: k, tool }, () => {
    throw new Error("the provider timed out");
  }).catch((e) => e);
  assert.ok(lost instanceof OutcomeUnknownError, String(lost));
  const a = await untilStatus(agent, k, "timed_out");
  await operator.decide(a.id, { decision: "retry", reason: "the provider lost it", acknowledge_duplicate_risk: true });
  return { key: k, id: a.id };
}

describe("freezes", { skip: noServer || false, concurrency: true }, () => {
  test("an operator freezes a tool: a new key waits with frozenBy, a retry throws FrozenError, frozenWaitMs runs once a person lifts it", async () => {
    const { tool } = fresh();
    const lost = await retryRequested(tool, "refund");

    // Who may freeze, and what a freeze needs.
    for (const c of [reader, agent]) {
      const forbidden = await c.startFreeze({ namespace, tools: [tool], reason: "incident" }).catch((e) => e);
      assert.ok(forbidden instanceof ArbiterError, String(forbidden));
      assert.equal(forbidden.status, 403);
    }
    const noReason = await operator.startFreeze({ namespace, tools: [tool] }).catch((e) => e);
    assert.equal(noReason.status, 400);
    assert.equal(noReason.code, "invalid");

    const f = await operator.startFreeze({ namespace, tools: [tool], reason: "provider incident" });
    assert.equal(f.namespace, namespace);
    assert.deepEqual(f.tools, [tool]);
    assert.equal(f.reason, "provider incident");
    assert.equal(f.by.kind, "operator");
    assert.equal(f.breaker_id, null);
    assert.ok(!Number.isNaN(Date.parse(f.started_at)));
    assert.equal(f.lifted_at, null);
    assert.equal(f.lifted_by, null);
    assert.equal(f.lift_reason, null);
    // Read back, it is the same freeze, with how it was started (by.via).
    const read = await reader.freeze(f.id);
    assert.deepEqual(read, f);
    assert.match(read.by.via, /^api_key:/);
    const active = await reader.freezes({ namespace, active: true });
    assert.ok(active.some((x) => x.id === f.id), "an active freeze is listed as active");
    assert.ok(active.every((x) => x.lifted_at === null));
    assert.ok((await operator.freezes()).some((x) => x.id === f.id));

    // A new key of the frozen tool waits for approval, with the freeze named.
    let runs = 0;
    const count = () => {
      runs++;
      return { result: { refunded: true } };
    };
    const held = { key: key("refund", `order-${f.id.slice(0, 8)}`), tool };
    const pending = await agent.guard(held, count).catch((e) => e);
    assert.ok(pending instanceof PendingApprovalError, String(pending));
    assert.deepEqual(pending.frozenBy, [{ id: f.id, reason: "provider incident" }]);
    assert.equal(pending.message, `arbiter: action ${JSON.stringify(held.key)} awaits approval; nothing was run (${pending.url}); frozen by ${f.id}: provider incident`);
    const heldAction = await agent.action(pending.actionId);
    assert.equal(heldAction.status, "awaiting_approval");
    assert.deepEqual(heldAction.approval.frozen_by, [{ id: f.id, reason: "provider incident" }]);
    assert.equal(heldAction.approval.required, 0, "only the freeze holds it");
    assert.equal(
      modelAnswer(pending, agent),
      modelMessage("frozen", `freeze ${f.id} ("provider incident") holds this tool`, pending.url),
      "the model hears the call is frozen, not that it waits for someone's approval",
    );

    // The retry the operator asked for is answered frozen: nothing runs, nothing changes.
    const raw = await agent.submit({ key: lost.key, type: "intent", tool });
    assert.equal(raw.outcome, "frozen");
    assert.equal(raw.error.code, "frozen");
    assert.equal(raw.error.retry_after, 5);
    assert.equal(raw.action.status, "retry_requested");
    const frozen = await agent.guard({ key: lost.key, tool }, count).catch((e) => e);
    assert.ok(frozen instanceof FrozenError, String(frozen));
    assert.equal(frozen.retryAfter, 5);
    assert.equal(frozen.actionId, lost.id);
    assert.equal(frozen.key, lost.key);
    assert.equal(frozen.url, agent.actionUrl(lost.id));
    assert.match(frozen.detail, new RegExp(f.id));
    assert.match(frozen.detail, /provider incident/);
    assert.equal(frozen.message, `arbiter: action ${JSON.stringify(lost.key)} is frozen: ${frozen.detail} (${frozen.url})`);
    assert.equal(modelAnswer(frozen, agent), modelMessage("frozen", frozen.detail, frozen.url));
    assert.match(modelAnswer(frozen, agent), /^Not done: a person has frozen such actions for now \(a freeze: freeze /);
    assert.equal(runs, 0, "nothing ran while frozen");
    assert.equal((await agent.action(lost.id)).status, "retry_requested", "nothing changed");

    // Waiting out the freeze: a person lifts it meanwhile, and the retry runs.
    const started = Date.now();
    const timer = setTimeout(() => void operator.liftFreeze(f.id, "provider is back").catch(() => undefined), 300);
    try {
      const out = await agent.guard({ key: lost.key, tool, frozenWaitMs: 30_000 }, count);
      assert.equal(out.ran, true);
      assert.equal(out.attempt, 2);
      assert.equal(runs, 1);
      assert.ok(Date.now() - started >= 4_000, "it asked again after the Retry-After, not before");
    } finally {
      clearTimeout(timer);
    }

    // Lifted: the key it held was approved, and runs; the lift is recorded.
    const after = await agent.guard(held, count);
    assert.equal(after.ran, true, "the key the freeze held runs once it is lifted");
    assert.equal(runs, 2);
    const unfrozen = (await reader.entries(pending.actionId)).filter((e) => e.type === "unfrozen");
    assert.equal(unfrozen.length, 1);
    assert.equal(unfrozen[0].actor.kind, "system");
    const lifted = await reader.freeze(f.id);
    assert.ok(!Number.isNaN(Date.parse(lifted.lifted_at)));
    assert.equal(lifted.lift_reason, "provider is back");
    assert.equal(lifted.lifted_by.kind, "operator");
    assert.ok(!(await reader.freezes({ namespace, active: true })).some((x) => x.id === f.id), "no longer active");
    const twice = await operator.liftFreeze(f.id, "again").catch((e) => e);
    assert.ok(twice instanceof ArbiterError, String(twice));
    assert.equal(twice.status, 409);
    assert.equal(twice.code, "conflict");
  });

  test("FrozenError's retryAfter comes from error.retry_after, else the Retry-After header, else 5 s; frozenWaitMs gives up with it", async () => {
    const { tool } = fresh();
    const lost = await retryRequested(tool, "email");
    const f = await admin.startFreeze({ namespace, tools: [tool], reason: "mail storm" });
    try {
      /** A client whose answers to entries lose error.retry_after, and say Retry-After: header (none when null). */
      const rewriting = (header) =>
        client("agent", {
          fetch: async (url, init) => {
            const res = await fetch(url, init);
            if (!String(url).endsWith("/v1/entries")) return res;
            const body = JSON.parse(await res.text());
            if (body.error) delete body.error.retry_after;
            const headers = new Headers(res.headers);
            headers.delete("content-length");
            if (header === null) headers.delete("retry-after");
            else headers.set("Retry-After", header);
            return new Response(JSON.stringify(body), { status: res.status, headers });
          },
        });
      const fromHeader = await rewriting("2").guard({ key: lost.key, tool }, () => assert.fail("nothing runs")).catch((e) => e);
      assert.ok(fromHeader instanceof FrozenError, String(fromHeader));
      assert.equal(fromHeader.retryAfter, 2, "from the Retry-After header");
      const none = await rewriting(null).guard({ key: lost.key, tool }, () => assert.fail("nothing runs")).catch((e) => e);
      assert.equal(none.retryAfter, 5, "the default");

      // Asked to wait 1.5 s, with Retry-After 2 s: one more ask at the end of the wait, then the error.
      const started = Date.now();
      const waited = await rewriting("2").guard({ key: lost.key, tool, frozenWaitMs: 1_500 }, () => assert.fail("nothing runs")).catch((e) => e);
      assert.ok(waited instanceof FrozenError, String(waited));
      assert.ok(Date.now() - started >= 1_400, "it waited");
      assert.ok(waited.waitedMs >= 1_400);
    } finally {
      await admin.liftFreeze(f.id, "done");
    }
  });
});

describe("freezes in an adapter", { skip: noServer || false, concurrency: true }, () => {
  test("an AI SDK tool of a frozen tool runs nothing and tells the model the frozen message, naming the freeze; after the lift it runs", async () => {
    const { tool } = fresh("payout");
    const f = await operator.startFreeze({ namespace, tools: [tool], reason: "payouts look wrong" });
    let runs = 0;
    const t = arbiterTool(agent, {
      tool,
      key: (input) => key("payout", input.id),
      execute: (input) => {
        runs++;
        return { paid: input.id };
      },
    });
    const input = { id: `p-${f.id.slice(0, 8)}` };
    try {
      const said = await t.execute(input);
      const a = await agent.actionByKey(key("payout", input.id));
      assert.equal(said, modelMessage("frozen", `freeze ${f.id} ("payouts look wrong") holds this tool`, agent.actionUrl(a.id)));
      assert.equal(runs, 0);
    } finally {
      await operator.liftFreeze(f.id, "checked");
    }
    assert.deepEqual(await t.execute(input), { paid: input.id }, "once lifted, the held call runs");
    assert.equal(runs, 1);
  });
});

describe("breakers", { skip: noServer || false, concurrency: true }, () => {
  test("an admin creates, reads, lists, changes and deletes a breaker; bad numbers are invalid_breaker", async () => {
    const { tool } = fresh("mail");
    const name = `ts mailer ${tool}`;
    const bad = await admin.createBreaker({ name, namespace, tools: [tool], max_unknown_ratio: 1.5 }).catch((e) => e);
    assert.ok(bad instanceof ArbiterError, String(bad));
    assert.equal(bad.status, 400);
    assert.equal(bad.code, "invalid_breaker");
    const noRatio = await admin.createBreaker({ name, namespace, tools: [tool] }).catch((e) => e);
    assert.equal(noRatio.code, "invalid_breaker", "a breaker needs a ratio");
    const badWindow = await admin.createBreaker({ name, namespace, tools: [tool], max_failure_ratio: 0.5, window: 86401 }).catch((e) => e);
    assert.equal(badWindow.code, "invalid_breaker");
    const byOperator = await operator.createBreaker({ name, namespace, tools: [tool], max_unknown_ratio: 0.3 }).catch((e) => e);
    assert.equal(byOperator.status, 403, "breakers are the admin's");

    const b = await admin.createBreaker({ name, namespace, tools: [tool], max_unknown_ratio: 0.3, min_actions: 5 });
    assert.equal(b.name, name);
    assert.equal(b.namespace, namespace);
    assert.deepEqual(b.tools, [tool]);
    assert.equal(b.window, 300, "the default");
    assert.equal(b.min_actions, 5);
    assert.equal(b.max_unknown_ratio, 0.3);
    assert.equal(b.max_failure_ratio, null);
    assert.equal(b.enabled, true);
    assert.equal(b.version, 1);

    const changed = await admin.updateBreaker(b.id, { window: 600 });
    assert.equal(changed.version, 2);
    assert.equal(changed.window, 600);
    assert.equal(changed.max_unknown_ratio, 0.3, "the fields not sent stay");
    const tooHigh = await admin.updateBreaker(b.id, { max_failure_ratio: 1.5 }).catch((e) => e);
    assert.equal(tooHigh.code, "invalid_breaker");

    const got = await admin.breaker(b.id);
    assert.equal(got.version, 2);
    assert.equal(got.state.actions, 0);
    assert.equal(got.state.timed_out, 0);
    assert.equal(got.state.failed, 0);
    assert.equal(got.state.freeze, null);
    assert.ok(!Number.isNaN(Date.parse(got.state.since)));
    const listed = (await admin.breakers({ namespace })).find((x) => x.id === b.id);
    assert.ok(listed, "listed in its namespace");
    assert.ok(listed.state, "with what it counts");
    assert.deepEqual((await admin.breakerVersions(b.id)).map((v) => [v.version, v.window, v.state]), [[1, 300, undefined], [2, 600, undefined]]);

    assert.equal(await admin.deleteBreaker(b.id), undefined);
    const gone = await admin.breaker(b.id).catch((e) => e);
    assert.equal(gone.status, 404);
    assert.equal(gone.code, "not_found");
    assert.ok(!(await admin.breakers({ namespace })).some((x) => x.id === b.id));
  });

  test("a breaker trips into a freeze of its tool when too many of its actions fail; a person lifts it", async () => {
    const { tool } = fresh("charge");
    const b = await admin.createBreaker({ name: `ts flaky ${tool}`, namespace, tools: [tool], max_failure_ratio: 0.4, min_actions: 2, window: 60 });
    try {
      for (let i = 0; i < 2; i++) {
        const err = await agent
          .guard({ key: key("charge", `${tool}-${i}`), tool }, () => {
            throw new NotDone("card declined");
          })
          .catch((e) => e);
        assert.ok(err instanceof NotDone, String(err));
      }
      const tripped = await poll(async () => (await admin.breaker(b.id)).state.freeze, { what: "the breaker to trip" });
      assert.equal(tripped.breaker_id, b.id);
      assert.deepEqual(tripped.by, { kind: "system", name: `breaker:${b.name}` });
      assert.deepEqual(tripped.tools, [tool]);
      assert.match(tripped.reason, /2 of 2/);

      const pending = await agent.guard({ key: key("charge", `${tool}-new`), tool }, () => assert.fail("nothing runs")).catch((e) => e);
      assert.ok(pending instanceof PendingApprovalError, String(pending));
      assert.deepEqual(pending.frozenBy, [{ id: tripped.id, reason: tripped.reason }]);

      const lifted = await operator.liftFreeze(tripped.id, "the provider fixed it");
      assert.equal(lifted.lift_reason, "the provider fixed it");
      assert.equal((await admin.breaker(b.id)).state.freeze, null, "it does not trip again on what it counted before the lift");
    } finally {
      await admin.deleteBreaker(b.id);
    }
  });
});
