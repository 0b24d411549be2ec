// The client covers every route of the OpenAPI document the server
// serves, and each method works against the real server.

import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { describe, test } from "node:test";
import { ArbiterError, ROUTES } from "@arbiter-ledger/arbiter";
import { client, fresh, noServer } from "./helpers.js";

const agent = client("agent");
const operator = client("operator");
const reader = client("reader");
const admin = client("admin");

describe("client", { skip: noServer || false, concurrency: true }, () => {
  test("every operation of the server's OpenAPI document has a client method, and every method an operation", async () => {
    const doc = await agent.openapi();
    assert.match(doc.openapi, /^3\.1/);
    const served = new Set();
    for (const [path, ops] of Object.entries(doc.paths)) {
      for (const method of Object.keys(ops)) {
        if (["get", "post", "patch", "put", "delete"].includes(method)) served.add(`${method.toUpperCase()} ${path}`);
      }
    }
    const covered = new Set(Object.values(ROUTES).map((r) => `${r.method} ${r.path}`));
    assert.deepEqual([...served].filter((op) => !covered.has(op)), [], "operations without a client method");
    assert.deepEqual([...covered].filter((op) => !served.has(op)), [], "client methods without an operation");
  });

  test("entries, batches, actions, timelines and decisions", async () => {
    const { key, tool } = fresh();
    const other = fresh();
    const results = await agent.submitBatch([
      { key, type: "intent", tool, effect: "keyed", timeout: 60, reference: "order-1", params: { n: 1 } },
      { key, type: "succeeded", attempt: 1, result: { ok: 1 }, external_ref: "re_1" },
      { key: other.key, type: "intent", tool, params: { n: 2 } },
      { key, type: "heartbeat", attempt: 1 },
    ]);
    assert.deepEqual(results.map((r) => r.outcome), ["proceed", "recorded", "proceed", "rejected"]);
    assert.equal(results[3].error.code, "lease_lost", "a heartbeat after the outcome");

    const a = await agent.actionByKey(key);
    assert.equal(a.status, "succeeded");
    assert.equal(a.reference, "order-1");
    assert.deepEqual(await reader.action(a.id), a);
    const entries = await reader.entries(a.id);
    assert.deepEqual(entries.slice(0, 2).map((e) => e.type), ["intent", "succeeded"]);
    assert.equal(entries[0].actor.kind, "agent");

    // A list filtered by tool and status, a page at a time.
    const first = await reader.listActions({ tool, limit: 1 });
    assert.equal(first.actions.length, 1);
    assert.ok(first.next_cursor);
    const second = await reader.listActions({ tool, limit: 1, cursor: first.next_cursor });
    assert.equal(second.actions.length, 1);
    assert.notEqual(second.actions[0].id, first.actions[0].id);
    const inProgress = await reader.listActions({ tool, status: ["in_progress"], since: new Date(Date.now() - 60_000) });
    assert.deepEqual(inProgress.actions.map((x) => x.key), [other.key]);

    // A decision, and the version check that keeps two operators from both winning.
    const held = await agent.actionByKey(other.key);
    const decided = await operator.decide(held.id, { decision: "confirm", reason: "provider shows it", external_ref: "re_2", expected_version: held.version });
    assert.equal(decided.action.status, "confirmed");
    assert.equal(decided.entry.type, "decision");
    const late = await operator.decide(held.id, { decision: "abandon", reason: "x", expected_version: held.version }).catch((e) => e);
    assert.ok(late instanceof ArbiterError);
    assert.equal(late.status, 409);

    // Roles: an agent may not decide; a foreign id is 404.
    assert.equal((await agent.decide(held.id, { decision: "abandon", reason: "x" }).catch((e) => e)).status, 403);
    assert.equal((await reader.action(randomUUID()).catch((e) => e)).code, "not_found");
    const wait = await agent.submitWait({ key: fresh().key, type: "intent", tool }, 5);
    assert.equal(wait.outcome, "proceed", "Prefer: wait changes nothing for an intent that is not held");
  });

  test("bulk decisions: a dry run counts, an applied one decides each action", async () => {
    const { tool } = fresh();
    const keys = [fresh().key, fresh().key];
    for (const k of keys) await agent.submit({ key: k, type: "intent", tool, timeout: 60 });
    const filter = { tool, status: ["in_progress"] };
    const dry = await operator.decideMany({ filter, decision: "confirm", dry_run: true });
    assert.equal(dry.matched, 2);
    assert.equal(dry.allowed, 2);
    const tooMany = await operator.decideMany({ filter, decision: "confirm", reason: "seen at the provider", max_count: 1 }).catch((e) => e);
    assert.equal(tooMany.code, "too_many_matched");
    const done = await operator.decideMany({ filter, decision: "confirm", reason: "seen at the provider", max_count: 2 });
    assert.equal(done.applied, 2);
    assert.deepEqual(done.skipped, []);
    for (const k of keys) assert.equal((await agent.actionByKey(k)).status, "confirmed");
  });

  test("webhook endpoints and their deliveries", async () => {
    const created = await admin.createWebhook({ url: "http://127.0.0.1:9/hooks", event_types: ["action.timed_out", "webhook.test"], description: "ts sdk" });
    assert.match(created.secret, /^whsec_/);
    assert.ok((await admin.webhooks()).some((w) => w.id === created.id));
    assert.equal((await admin.webhook(created.id)).secret, undefined, "the secret is shown only on creation and rotation");
    const updated = await admin.updateWebhook(created.id, { description: "renamed", enabled: false });
    assert.equal(updated.description, "renamed");
    assert.equal(updated.enabled, false);
    const rotated = await admin.rotateWebhookSecret(created.id);
    assert.notEqual(rotated.secret, created.secret);
    await admin.updateWebhook(created.id, { enabled: true });
    const delivery = await admin.testWebhook(created.id);
    assert.equal(delivery.event_type, "webhook.test");
    const deliveries = await admin.webhookDeliveries(created.id, { limit: 10 });
    assert.ok(deliveries.some((d) => d.id === delivery.id));
    const again = await admin.redeliver(delivery.id);
    assert.equal(again.webhook_id, delivery.webhook_id);
    await admin.deleteWebhook(created.id);
    assert.equal((await admin.webhook(created.id).catch((e) => e)).code, "not_found");
    assert.equal((await agent.webhooks().catch((e) => e)).status, 403);
  });

  test("approval policies, their versions and a dry run", async () => {
    const { tool } = fresh();
    const p = await admin.createPolicy({ name: `ts ${tool}`, namespace: "sdk", tools: [tool], condition: "params.amount_cents > 100000", approvals_required: 2 });
    assert.equal(p.version, 1);
    assert.equal(p.mode, "enforce", "the default mode");
    assert.ok((await operator.policies({ namespace: "sdk" })).some((x) => x.id === p.id));
    assert.equal((await reader.policy(p.id)).condition, "params.amount_cents > 100000");
    const p2 = await admin.updatePolicy(p.id, { approvals_required: 1 });
    assert.equal(p2.version, 2);
    assert.equal(p2.mode, "enforce");
    assert.deepEqual((await admin.policyVersions(p.id)).map((v) => v.approvals_required), [2, 1]);

    const big = fresh().key;
    const res = await agent.submit({ key: big, type: "intent", tool, params: { amount_cents: 250000 } });
    assert.equal(res.outcome, "pending_approval");
    assert.deepEqual(res.action.approval.policies.map((x) => [x.id, x.version]), [[p.id, 2]]);
    const dry = await admin.testPolicy({ namespace: "sdk", tools: [tool], condition: "params.amount_cents > 100000" });
    assert.equal(dry.matched, 1);

    const bad = await admin.createPolicy({ name: "bad", namespace: "sdk", tools: [tool], condition: "params.amount_cents >" }).catch((e) => e);
    assert.equal(bad.code, "invalid_policy");
    await admin.deletePolicy(p.id);
    assert.equal((await admin.policy(p.id).catch((e) => e)).status, 404);
  });

  test("health, readiness, metrics and the OpenAPI document", async () => {
    await reader.health();
    await reader.ready();
    assert.match(await reader.metrics(), /^# (HELP|TYPE) /m);
    assert.ok((await reader.openapi()).paths["/v1/entries"]);
  });

  test("every method takes an AbortSignal", async () => {
    const reason = new Error("stop");
    await assert.rejects(reader.listActions({ signal: AbortSignal.abort(reason) }), (e) => e === reason);
    await assert.rejects(reader.health({ signal: AbortSignal.abort(reason) }), (e) => e === reason);
    await assert.rejects(agent.submit({ key: "k", type: "note", message: "m" }, { signal: AbortSignal.abort(reason) }), (e) => e === reason);
  });
});
