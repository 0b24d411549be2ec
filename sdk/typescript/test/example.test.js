// examples/refund-agent.ts, compiled, runs its three stories against the
// server: a refund answered from the ledger the second time, a crash after
// the refund that a lookup confirms, and a crash before it that a lookup
// turns into one retry with the same key.

import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { noServer } from "./helpers.js";

const candidates = ["../examples/refund-agent.js", "../build/examples/refund-agent.js"].map((p) => fileURLToPath(new URL(p, import.meta.url)));
const example = candidates.find((p) => existsSync(p));

async function run(...args) {
  const { stdout } = await promisify(execFile)(process.execPath, [example, ...args], {
    env: { ...process.env, ARBITER_API_KEY: process.env.ARBITER_AGENT_KEY },
    timeout: 60_000,
  });
  return stdout;
}

const order = () => `order-${Math.random().toString(36).slice(2, 10)}`;

// One story at a time: each run's worker handles every timed-out
// payments.refund of the namespace, with a provider of its own.
describe("examples/refund-agent", { skip: noServer || (example ? false : "the example is not compiled (npm run example)") }, () => {
  test("refunds once; the same job again is answered from the ledger", async () => {
    const out = await run("--order", order());
    assert.match(out, /^refunded re_1, recorded as attempt 1$/m);
    assert.match(out, /^the same job again: re_1 from the ledger \(ran: false\); the provider created 1 refund\(s\)$/m);
  });

  test("--crash: held, the worker's lookup finds the refund and the action is confirmed", async () => {
    const out = await run("--order", order(), "--crash", "--lease", "1");
    assert.match(out, /the provider refunded re_1; now the process dies/);
    assert.match(out, /^held: the outcome of attempt 1 is unknown/m);
    assert.match(out, /^settled: the action is confirmed \(attempt 1\); the provider created 1 refund\(s\)/m);
  });

  test("--crash-before: the lookup finds nothing and the worker retries with the same key, one refund", async () => {
    const out = await run("--order", order(), "--crash-before", "--lease", "1");
    assert.match(out, /lookup: the provider has no refund for key refund:order-/);
    assert.match(out, /^settled: the action is succeeded \(attempt 2\); the provider created 1 refund\(s\)/m);
  });
});
