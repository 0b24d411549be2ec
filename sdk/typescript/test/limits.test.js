// Limits across actions against the real server: an admin key manages a
// limit (create, read, list, change, versions, usage, delete), and the
// guard meets what a limit does to a first intent over its max: deny
// (LimitExceededError, a DeniedError, naming the limit and its use; the
// function does not run), hold (the
// approval lists the limit) and shadow (it runs, and the charge says it
// exceeded).

import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { describe, test } from "node:test";
import { ArbiterError, DeniedError, LimitExceededError, PendingApprovalError, key } from "@arbiter-ledger/arbiter";
import { ToolGuard, modelAnswer } from "@arbiter-ledger/arbiter/ai-sdk";
import { client, fresh, noServer } from "./helpers.js";

const agent = client("agent");
const operator = client("operator");
const reader = client("reader");
const admin = client("admin");
const namespace = process.env.ARBITER_NAMESPACE ?? "sdk";

describe("limits", { skip: noServer || false, concurrency: true }, () => {
  test("an admin creates, reads, lists and changes a deny limit; over it the guard throws DeniedError and runs nothing; usage, versions, delete", async () => {
    // The tests share the namespace and run in parallel, and other tests
    // (the examples) refund with payments.refund: this limit applies only
    // to this test's run.
    const run = randomUUID();
    const name = `ts refunds per customer ${run.slice(0, 8)}`;
    const created = await admin.createLimit({
      name,
      namespace,
      tools: ["payments.refund"],
      condition: `run_id == "${run}"`,
      amount: "params.amount",
      group_by: "params.customer",
      window: 3600,
      max: 100,
      over: "deny",
    });
    assert.equal(created.version, 1);
    assert.equal(created.namespace, namespace);
    assert.deepEqual(created.tools, ["payments.refund"]);
    assert.equal(created.amount, "params.amount");
    assert.equal(created.group_by, "params.customer");
    assert.equal(created.window, 3600);
    assert.equal(created.max, 100);
    assert.equal(created.over, "deny");
    assert.equal(created.mode, "enforce", "the default mode");
    assert.equal(created.approvals_required, 1, "the default");
    assert.equal(created.enabled, true);

    assert.deepEqual(await reader.limit(created.id), created);
    assert.ok((await admin.limits({ namespace })).some((l) => l.id === created.id));
    assert.ok((await operator.limits()).some((l) => l.id === created.id), "an operator sees its namespace's limits");
    const forbidden = await agent.limits().catch((e) => e);
    assert.ok(forbidden instanceof ArbiterError);
    assert.equal(forbidden.status, 403);

    const changed = await admin.updateLimit(created.id, { max: 150 });
    assert.equal(changed.version, 2);
    assert.equal(changed.max, 150);
    assert.equal(changed.over, "deny", "the fields not sent stay");
    assert.deepEqual((await admin.limitVersions(created.id)).map((v) => [v.version, v.max]), [[1, 100], [2, 150]]);

    const refund = (customer, amount) => {
      let runs = 0;
      const k = key("refund", `order-${randomUUID().slice(0, 8)}`);
      const call = () =>
        agent
          .guard({ key: k, tool: "payments.refund", runId: run, params: { customer, amount } }, () => {
            runs++;
            return { result: { refunded: amount } };
          })
          .catch((e) => e);
      return { key: k, call, runs: () => runs };
    };

    // Within the cap: it runs, and its action carries the charge.
    const first = refund("cus_a", 100);
    const ok = await first.call();
    assert.equal(ok.ran, true, String(ok));
    assert.deepEqual(ok.action.limits, [{ id: created.id, name, version: 2, group: "cus_a", amount: 100, exceeded: false }]);

    // Over it: denied, nothing runs, and the error names the limit.
    const over = refund("cus_a", 60);
    const err = await over.call();
    assert.ok(err instanceof LimitExceededError, String(err));
    assert.ok(err instanceof DeniedError, "a limit's denial is a denial");
    assert.equal(over.runs(), 0, "the function is not called");
    assert.deepEqual(err.limits, [{ id: created.id, name, version: 2, group: "cus_a", used: 100, amount: 60, max: 150 }]);
    assert.equal(err.expired, false);
    assert.equal(err.by, "");
    assert.equal(err.key, over.key);
    assert.equal(err.url, agent.actionUrl(err.actionId));
    assert.equal(err.message, `arbiter: action ${JSON.stringify(over.key)} was denied by a limit: ${err.detail}; nothing was run (${err.url})`);
    assert.match(err.detail, new RegExp(`${JSON.stringify(name)} \\(version 2\\) allows 150 in group "cus_a"; 100 is used and this intent adds 60`));
    assert.match(modelAnswer(err, agent), /^Refused: this call would go over a limit set on such actions .*allows 150 in group/);
    assert.doesNotMatch(modelAnswer(err, agent), /a person rejected/);
    const denied = await agent.action(err.actionId);
    assert.equal(denied.status, "denied");
    assert.equal(denied.approval, null);

    // An adapter's tool for the same call asks for no approval (nobody's was
    // asked), and what it tells the framework names the limit.
    const g = new ToolGuard(agent, { tool: "payments.refund", key: () => over.key, runId: run, execute: () => assert.fail("nothing runs") });
    assert.equal(await g.needsApproval({ customer: "cus_a", amount: 60 }), false);
    const decision = await g.decision({ customer: "cus_a", amount: 60 });
    assert.equal(decision.state, "denied");
    assert.match(decision.reason, new RegExp(`^Refused: this call would go over a limit .*it exceeded limit ${JSON.stringify(name)} \\(version 2\\) in group "cus_a"`),
      "read from the action alone, the reason names the limit");

    // The same key again is denied again, by the same limit, at once.
    const again = await over.call();
    assert.ok(again instanceof LimitExceededError, String(again));
    assert.deepEqual(again.limits, err.limits, "with the same use");
    assert.match(again.detail, /^a limit denied this action when its first intent came: /);
    assert.equal(over.runs(), 0);

    // Another customer has a budget of its own.
    const other = await refund("cus_b", 60).call();
    assert.equal(other.ran, true, String(other));

    // Usage: the denied action does not count.
    const usage = await reader.limitUsage(created.id);
    assert.equal(usage.window, 3600);
    assert.equal(usage.max, 150);
    assert.deepEqual(usage.groups.map((g) => [g.group, g.used, g.actions]), [["cus_a", 100, 1], ["cus_b", 60, 1]]);
    assert.ok(!Number.isNaN(Date.parse(usage.groups[0].oldest_at)));
    const one = await reader.limitUsage(created.id, { group: "cus_b" });
    assert.deepEqual(one.groups.map((g) => [g.group, g.used, g.actions]), [["cus_b", 60, 1]]);

    // Deleted: it no longer applies, and its versions stay readable.
    assert.equal(await admin.deleteLimit(created.id), undefined);
    const gone = await admin.limit(created.id).catch((e) => e);
    assert.equal(gone.status, 404);
    assert.equal(gone.code, "not_found");
    assert.deepEqual((await reader.limitVersions(created.id)).map((v) => v.version), [1, 2]);
    const after = await refund("cus_a", 60).call();
    assert.equal(after.ran, true, String(after));
    assert.equal(after.action.limits, null, "no limit matched");
  });

  test("a hold limit holds the intent for approval, its approval lists the limit, and approved it runs once", async () => {
    const { key: k, tool } = fresh();
    const l = await admin.createLimit({ name: `ts freeze ${tool}`, namespace, tools: [tool], window: 60, max: 0 });
    assert.equal(l.over, "hold", "the default");
    assert.equal(l.amount, "");
    assert.equal(l.group_by, "");
    const res = await agent.submit({ key: k, type: "intent", tool });
    assert.equal(res.outcome, "pending_approval");
    assert.equal(res.action.status, "awaiting_approval");
    assert.deepEqual(res.action.approval.limits, [{ id: l.id, name: l.name, version: 1, group: "", used: 0, amount: 1, max: 0 }]);
    assert.deepEqual(res.action.approval.policies, []);
    assert.equal(res.action.approval.required, 1);
    assert.deepEqual(res.action.limits, [{ id: l.id, name: l.name, version: 1, group: "", amount: 1, exceeded: true }]);
    let runs = 0;
    const err = await agent.guard({ key: k, tool }, () => void runs++).catch((e) => e);
    assert.ok(err instanceof PendingApprovalError, String(err));
    assert.equal(err.actionId, res.action.id);
    assert.equal(runs, 0);
    await operator.decide(res.action.id, { decision: "approve", reason: "one over the cap is fine" });
    const out = await agent.guard({ key: k, tool }, () => void runs++);
    assert.equal(out.ran, true);
    assert.equal(runs, 1);
    await admin.deleteLimit(l.id);
  });

  test("a held action read back keeps approval.limits", async () => {
    const { key: k, tool } = fresh();
    const l = await admin.createLimit({ name: `ts freeze ${tool}`, namespace, tools: [tool], window: 60, max: 0 });
    try {
      const res = await agent.submit({ key: k, type: "intent", tool });
      assert.equal(res.outcome, "pending_approval");
      assert.deepEqual((await agent.action(res.action.id)).approval.limits, res.action.approval.limits);
    } finally {
      await admin.deleteLimit(l.id);
    }
  });

  test("a shadow limit holds and denies nothing: the call runs, and its charge says it exceeded", async () => {
    const { key: k, tool } = fresh();
    const l = await admin.createLimit({ name: `ts shadow ${tool}`, namespace, tools: [tool], window: 60, max: 0, over: "deny", mode: "shadow" });
    assert.equal(l.mode, "shadow");
    const out = await agent.guard({ key: k, tool }, () => ({ result: 1 }));
    assert.equal(out.ran, true);
    assert.deepEqual(out.action.limits, [{ id: l.id, name: l.name, version: 1, group: "", amount: 1, exceeded: true }]);
    const usage = await reader.limitUsage(l.id);
    assert.deepEqual(usage.groups.map((g) => [g.group, g.used, g.actions]), [["", 1, 1]], "a shadow limit's charges count in its usage");
    await admin.deleteLimit(l.id);
  });

  test("the answer to a denied intent names the limits that denied it; a shadow limit that exceeded too is not among the LimitExceededError's", async () => {
    const { key: k, tool } = fresh();
    const deny = await admin.createLimit({ name: `ts deny ${tool}`, namespace, tools: [tool], window: 60, max: 0, over: "deny" });
    const shadow = await admin.createLimit({ name: `ts shadow ${tool}`, namespace, tools: [tool], window: 60, max: 0, over: "deny", mode: "shadow" });
    try {
      const res = await agent.submit({ key: k, type: "intent", tool });
      assert.equal(res.outcome, "denied");
      assert.equal(res.error.code, "limit_exceeded");
      assert.deepEqual(res.error.limits, [{ id: deny.id, name: deny.name, version: 1, group: "", used: 0, amount: 1, max: 0 }]);
      assert.deepEqual(res.action.limits.map((l) => [l.id, l.exceeded]).sort(), [[deny.id, true], [shadow.id, true]].sort());
      let runs = 0;
      const err = await agent.guard({ key: k, tool }, () => void runs++).catch((e) => e);
      assert.ok(err instanceof LimitExceededError, String(err));
      assert.deepEqual(err.limits, [{ id: deny.id, name: deny.name, version: 1, group: "", used: 0, amount: 1, max: 0 }]);
      assert.doesNotMatch(err.message, /ts shadow/);
      assert.equal(runs, 0);
    } finally {
      await admin.deleteLimit(deny.id);
      await admin.deleteLimit(shadow.id);
    }
  });

  test("CEL that does not compile is invalid_limit; only admins write limits", async () => {
    const { tool } = fresh();
    const bad = await admin.createLimit({ name: "bad", namespace, tools: [tool], window: 60, max: 1, amount: "params.amount +" }).catch((e) => e);
    assert.ok(bad instanceof ArbiterError, String(bad));
    assert.equal(bad.status, 400);
    assert.equal(bad.code, "invalid_limit");
    const notString = await admin.createLimit({ name: "bad", namespace, tools: [tool], window: 60, max: 1, group_by: "1 + 1" }).catch((e) => e);
    assert.equal(notString.code, "invalid_limit", "group_by must be a string");
    const byOperator = await operator.createLimit({ name: "op", namespace, tools: [tool], window: 60, max: 1 }).catch((e) => e);
    assert.equal(byOperator.status, 403);
  });
});
