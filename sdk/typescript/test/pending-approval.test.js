// The pending-approval error names a policy's run-time error
// (approval.policies[i].error): the action is held because a condition
// could not be evaluated, and the caller (and the model) should hear why.
// A stub answers the intent as the server does for such an action, so
// the test holds on any server; the real one is in approval.test.js.

import assert from "node:assert/strict";
import http from "node:http";
import { test } from "node:test";
import { Client, PendingApprovalError } from "@arbiter-ledger/arbiter";
import { arbiterTool } from "@arbiter-ledger/arbiter/openai-agents";

function action(policies) {
  return {
    id: "01a0-held",
    key: "refund:order-1",
    namespace: "shop",
    tool: "payments.refund",
    status: "awaiting_approval",
    attempt: 0,
    params: {},
    approval: { required: 1, approvals: [], expires_at: "2099-01-01T00:00:00Z", escalate_at: null, policies, rejection: null },
  };
}

async function stub(policies) {
  const server = http.createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      res.writeHead(202, { "content-type": "application/json" });
      res.end(JSON.stringify({ outcome: "pending_approval", action: action(policies) }));
    });
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  return { url: `http://127.0.0.1:${server.address().port}`, close: () => new Promise((r) => server.close(r)) };
}

test("pending approval: the error names each policy whose condition failed at run time, and the model hears it", async () => {
  const s = await stub([
    { id: "p1", name: "big refunds", version: 1, error: "no such key: amount" },
    { id: "p2", name: "all refunds", version: 3, error: null },
  ]);
  try {
    const c = new Client(s.url, "ak_test");
    const err = await c.guard({ key: "refund:order-1", tool: "payments.refund" }, () => assert.fail("nothing runs")).catch((e) => e);
    assert.ok(err instanceof PendingApprovalError, String(err));
    assert.deepEqual(err.policyErrors, ["big refunds: no such key: amount"]);
    assert.match(err.message, /awaits approval; nothing was run .*; held because a policy's condition failed: big refunds: no such key: amount$/);

    const t = arbiterTool(c, { tool: "payments.refund", key: () => "refund:order-1", execute: () => assert.fail("nothing runs") });
    const told = await t.execute({});
    assert.match(told, /^Not done yet: this call is waiting for a person's approval\. .*big refunds: no such key: amount$/);
  } finally {
    await s.close();
  }
});

test("pending approval: no policy error, no mention of one", async () => {
  const s = await stub([{ id: "p2", name: "all refunds", version: 3 }]);
  try {
    const err = await new Client(s.url, "ak_test").guard({ key: "refund:order-1", tool: "payments.refund" }, () => assert.fail("nothing runs")).catch((e) => e);
    assert.ok(err instanceof PendingApprovalError, String(err));
    assert.deepEqual(err.policyErrors, []);
    assert.doesNotMatch(err.message, /condition failed/);
  } finally {
    await s.close();
  }
});
