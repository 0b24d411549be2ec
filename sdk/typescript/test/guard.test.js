// The guard against a real server: nothing runs twice, the same key with
// other params is refused, a call that died mid-way is held, a report
// that first fails on the network lands later, heartbeats keep a long call
// alive, and nothing runs when Arbiter cannot be reached.

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { describe, test } from "node:test";
import {
  FinishedError,
  HeldError,
  InProgressError,
  KeyReusedError,
  OutcomeUnknownError,
  UnreachableError,
  LeaseLostError,
  NetworkError,
  NotDone,
  retriable,
  unknown,
} from "@arbiter-ledger/arbiter";
import { Proxy, client, closedPort, fresh, noServer, poll, untilStatus, vectors } from "./helpers.js";

const agent = client("agent");

describe("guard", { skip: noServer || false, concurrency: true }, () => {
  test("replay: a second run of the same job is answered from the ledger and nothing runs twice", async () => {
    const { key, tool } = fresh();
    let runs = 0;
    const refund = (a) => {
      runs++;
      assert.equal(a.key, key);
      assert.deepEqual(a.params, { order: "8812", amount_cents: 4200 });
      return { result: { refund_id: "re_1" }, externalRef: "re_1" };
    };
    const spec = { key, tool, effect: "keyed", params: { order: "8812", amount_cents: 4200 } };
    const first = await agent.guard(spec, refund);
    assert.equal(first.ran, true);
    assert.equal(first.attempt, 1);
    assert.equal(first.action.status, "succeeded");
    const again = await Promise.all([agent.guard(spec, refund), agent.guard(spec, refund)]);
    for (const out of again) {
      assert.equal(out.ran, false);
      assert.deepEqual(out.result, { refund_id: "re_1" });
      assert.equal(out.externalRef, "re_1");
    }
    assert.equal(runs, 1);
    const entries = await agent.entries(first.action.id);
    assert.deepEqual(entries.map((e) => e.type), ["intent", "succeeded"], "replays write nothing");
  });

  test("key reuse: the same key with other params is refused and the stored action is untouched", async () => {
    const { key, tool } = fresh();
    await agent.guard({ key, tool, params: { amount_cents: 4200 } }, () => ({ result: 1 }));
    let ran = false;
    const err = await agent.guard({ key, tool, params: { amount_cents: 9900 } }, () => void (ran = true)).catch((e) => e);
    assert.ok(err instanceof KeyReusedError, String(err));
    assert.equal(err.code, "key_reused");
    assert.equal(err.status, 422);
    assert.equal(ran, false);
    const a = await agent.actionByKey(key);
    assert.equal(a.status, "succeeded");
    assert.deepEqual(a.params, { amount_cents: 4200 });
    assert.ok((await agent.entries(a.id)).some((e) => e.type === "key_reused"));
  });

  test("held: a child agent killed between the effect and the report leaves the action held, and nothing runs again", async () => {
    const { key, tool } = fresh("email");
    const fixture = fileURLToPath(new URL("./fixtures/crash-agent.js", import.meta.url));
    const child = spawn(process.execPath, [fixture, key, tool], { stdio: ["ignore", "pipe", "inherit"] });
    const exited = new Promise((r) => child.on("exit", (code, sig) => r(sig ?? code)));
    let out = "";
    child.stdout.on("data", (d) => (out += d));
    await poll(() => out.includes("effect 1\n") || child.exitCode !== null, { what: "the child's effect" });
    assert.equal(out, "effect 1\n");
    child.kill("SIGKILL");
    assert.equal(await exited, "SIGKILL");

    let ran = 0;
    const err = await agent
      .guard({ key, tool, effect: "unkeyed", params: { order: key }, waitMs: 15_000 }, () => void ran++)
      .catch((e) => e);
    assert.ok(err instanceof HeldError, String(err));
    assert.equal(err.attempt, 1);
    assert.equal(err.compensation, false);
    assert.match(err.url, /\/actions\/[0-9a-f-]+$/);
    assert.equal(ran, 0, "the restarted agent must not send the email again");
    // Held as soon as the lease passed; the sweeper records timed_out soon after.
    const a = await untilStatus(agent, key, "timed_out");
    assert.equal(a.id, err.actionId);
    const types = (await agent.entries(a.id)).map((e) => e.type);
    assert.deepEqual(types.slice(0, 2), ["intent", "timed_out"]);
    assert.ok(!types.includes("succeeded") && !types.includes("failed"));
  });

  test("a report that fails on the network is retried with backoff until it lands", async () => {
    const proxy = await Proxy.start();
    try {
      const c = client("agent", { url: proxy.url, backoff: { firstMs: 50, largestMs: 300 }, reportBudgetMs: 30_000 });
      // Back up once the reports have failed twice.
      proxy.onDrop((n) => n >= 2 && proxy.up());
      const { key, tool } = fresh();
      const out = await c.guard({ key, tool, effect: "keyed" }, () => {
        proxy.down(); // the network breaks after the effect, before the report
        return { result: { refund_id: "re_9" }, externalRef: "re_9" };
      });
      assert.ok(proxy.dropped >= 2, `the report was tried ${proxy.dropped} times while down`);
      assert.equal(out.ran, true);
      assert.equal(out.action.status, "succeeded");
      const a = await agent.actionByKey(key);
      assert.equal(a.status, "succeeded");
      assert.deepEqual(a.result, { refund_id: "re_9" });
      assert.equal(a.external_ref, "re_9");
      const types = (await agent.entries(a.id)).map((e) => e.type);
      assert.deepEqual(types, ["intent", "succeeded"], "the report landed once");
    } finally {
      await proxy.close();
    }
  });

  test("heartbeats at a third of the lease keep a call longer than its lease alive", async () => {
    const { key, tool } = fresh();
    const leaseMs = 1500;
    const started = Date.now();
    const out = await agent.guard({ key, tool, timeoutMs: leaseMs }, async (a, signal) => {
      // Run until four heartbeats are in the ledger: longer than the lease.
      await poll(async () => (await agent.entries(a.actionId)).filter((e) => e.type === "heartbeat").length >= 4, {
        what: "four heartbeats",
      });
      assert.equal(signal.aborted, false);
      return { result: "done" };
    });
    const took = Date.now() - started;
    assert.ok(took > leaseMs + 300, `ran ${took}ms, not past the lease`);
    const beats = (await agent.entries(out.action.id)).filter((e) => e.type === "heartbeat").map((e) => Date.parse(e.recorded_at));
    const every = leaseMs * vectors().heartbeat.fraction_of_lease;
    const gap = (beats.at(-1) - beats[0]) / (beats.length - 1);
    assert.ok(gap > every * 0.6 && gap < every * 1.6, `heartbeats every ${gap}ms, want about ${every}ms`);
    assert.equal(out.action.status, "succeeded");
    const types = (await agent.entries(out.action.id)).map((e) => e.type);
    assert.ok(!types.includes("timed_out"), `timed out although alive: ${types}`);
    assert.ok(!types.includes("late_result"), types.join());
  });

  test("a lost lease aborts the function's signal with LeaseLostError, and the outcome is left unknown", async () => {
    const { key, tool } = fresh();
    const proxy = await Proxy.start();
    try {
      const c = client("agent", { url: proxy.url, backoff: { firstMs: 50, largestMs: 100 } });
      let reason;
      const err = await c
        .guard({ key, tool, timeoutMs: 1000 }, async (a, signal) => {
          proxy.down(); // the heartbeats cannot land: the lease passes
          await untilStatus(agent, key, "timed_out");
          proxy.up(); // the next heartbeat hears lease_lost
          await new Promise((resolve) => signal.addEventListener("abort", resolve));
          reason = signal.reason;
          throw signal.reason;
        })
        .catch((e) => e);
      assert.ok(reason instanceof LeaseLostError, String(reason));
      assert.ok(err instanceof OutcomeUnknownError, String(err));
      const types = (await agent.entries((await agent.actionByKey(key)).id)).map((e) => e.type);
      assert.ok(types.includes("lease_lost"), types.join());
      assert.ok(!types.includes("failed"), "an interrupted attempt reports nothing");
    } finally {
      await proxy.close();
    }
  });

  test("failures: NotDone is final, retriable() and NotDone({ retriable }) let the next intent try again", async () => {
    const { key, tool } = fresh();
    const boom = new Error("card declined");
    assert.equal(await agent.guard({ key, tool }, () => Promise.reject(retriable(boom))).catch((e) => e.cause), boom);
    let a = await agent.actionByKey(key);
    assert.equal(a.status, "failed");
    const second = await agent.guard({ key, tool }, () => ({ result: 2 }));
    assert.equal(second.attempt, 2);
    assert.equal(second.ran, true);

    const r = fresh();
    await agent.guard({ key: r.key, tool: r.tool }, () => { throw new NotDone("insufficient funds", { retriable: true }); }).catch(() => undefined);
    assert.equal((await agent.actionByKey(r.key)).status, "failed");
    assert.equal((await agent.guard({ key: r.key, tool: r.tool }, () => ({ result: 3 }))).attempt, 2);

    const f = fresh();
    const declined = new NotDone("card declined");
    assert.equal(await agent.guard({ key: f.key, tool: f.tool }, () => { throw declined; }).catch((e) => e), declined);
    let ran = false;
    await assert.rejects(agent.guard({ key: f.key, tool: f.tool }, () => void (ran = true)), /already ended failed/);
    assert.equal(ran, false);

    const s = fresh();
    const refused = Object.assign(new Error("422 Unprocessable Entity"), { status: 422 });
    await agent.guard({ key: s.key, tool: s.tool, notDoneStatuses: [400, 422] }, () => { throw refused; }).catch(() => undefined);
    assert.equal((await agent.actionByKey(s.key)).status, "failed", "a status the tool maps as not done is failed");
  });

  for (const [what, thrown, recorded] of [
    ["a plain error", () => new Error("something broke"), /^something broke$/],
    ["a fetch TimeoutError", () => new DOMException("The operation was aborted due to timeout", "TimeoutError"), /^timeout: The operation was aborted due to timeout$/],
    ["a connection reset after sending", () => new TypeError("fetch failed", { cause: Object.assign(new Error("read ECONNRESET"), { code: "ECONNRESET" }) }), /^connection lost: fetch failed$/],
    ["unknown()", () => unknown(new Error("provider timed out")), /^provider timed out$/],
  ]) {
    test(`failures: ${what} leaves the outcome unknown, never failed, and the next call is not answered FinishedError`, async () => {
      const u = fresh();
      const err = await agent.guard({ key: u.key, tool: u.tool, timeoutMs: 60_000 }, () => { throw thrown(); }).catch((e) => e);
      assert.ok(err instanceof OutcomeUnknownError, String(err));
      const a = await agent.actionByKey(u.key);
      assert.notEqual(a.status, "failed");
      const entries = await agent.entries(a.id);
      const types = entries.map((e) => e.type);
      let ran = false;
      const next = await agent.guard({ key: u.key, tool: u.tool }, () => void (ran = true)).catch((e) => e);
      assert.equal(ran, false);
      assert.ok(!(next instanceof FinishedError), String(next));
      // Recorded outcome_unknown: timed out at once, a lookup or a person decides.
      assert.deepEqual(types, ["intent", "outcome_unknown"]);
      assert.equal(a.status, "timed_out");
      assert.match(entries[1].payload.error, recorded, JSON.stringify(entries[1]));
      assert.ok(next instanceof HeldError, String(next));
    });
  }

  test("fail closed: when Arbiter cannot be reached the function does not run", async () => {
    const { key, tool } = fresh();
    let ran = 0;
    const down = client("agent", { url: `http://127.0.0.1:${await closedPort()}` });
    const err = await down.guard({ key, tool }, () => void ran++).catch((e) => e);
    assert.ok(err instanceof UnreachableError, String(err));
    assert.ok(err.cause instanceof NetworkError);
    assert.match(err.message, /the action was not started/);

    const proxy = await Proxy.start();
    try {
      proxy.down();
      const c = client("agent", { url: proxy.url });
      assert.ok((await c.guard({ key, tool }, () => void ran++).catch((e) => e)) instanceof UnreachableError);
    } finally {
      await proxy.close();
    }
    assert.equal(ran, 0);
    await assert.rejects(agent.actionByKey(key), (e) => e.code === "not_found");
  });

  test("an AbortSignal gives up: before the intent nothing is written, and while waiting it rejects with the reason", async () => {
    const { key, tool } = fresh();
    let ran = 0;
    const reason = new Error("the user went away");
    await assert.rejects(agent.guard({ key, tool }, () => void ran++, { signal: AbortSignal.abort(reason) }), (e) => e === reason);
    await assert.rejects(agent.actionByKey(key), (e) => e.code === "not_found");

    const ctl = new AbortController();
    const waiting = agent.guard({ key, tool, requireApproval: true, approvalWaitMs: 30_000 }, () => void ran++, { signal: ctl.signal });
    await untilStatus(agent, key, "awaiting_approval");
    ctl.abort(reason);
    await assert.rejects(waiting, (e) => e === reason);
    assert.equal(ran, 0);
  });
});
