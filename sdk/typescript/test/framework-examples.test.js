// examples/ai-sdk-agent.ts and examples/openai-agents-agent.ts, compiled,
// run against the server with their mock models: a small refund runs at
// once; a large one waits for approval in Arbiter, which an operator gives
// here, and then runs once.

import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { key } from "@arbiter-ledger/arbiter";
import { client, noServer, untilStatus } from "./helpers.js";

const operator = client("operator");

function compiled(name) {
  return ["../examples/", "../build/examples/"].map((d) => fileURLToPath(new URL(d + name, import.meta.url))).find((p) => existsSync(p));
}

async function run(example, ...args) {
  const { stdout } = await promisify(execFile)(process.execPath, [example, ...args], {
    env: { ...process.env, ARBITER_API_KEY: process.env.ARBITER_AGENT_KEY },
    timeout: 60_000,
  });
  return stdout;
}

const order = () => `order-${Math.random().toString(36).slice(2, 10)}`;

for (const name of ["ai-sdk-agent.js", "openai-agents-agent.js"]) {
  const example = compiled(name);
  describe(`examples/${name.replace(/\.js$/, ".ts")}`, { skip: noServer || (example ? false : "the example is not compiled (npx tsc -p examples/tsconfig.json)"), concurrency: true }, () => {
    test("a small refund runs at once, under its key", async () => {
      const out = await run(example, "--order", order(), "--amount", "4200");
      assert.doesNotMatch(out, /awaiting approval/);
      assert.match(out, /^model: the refund tool said: .*re_1/m);
      assert.match(out, /^the action is succeeded; the provider made 1 refund\(s\)$/m);
    });

    test("a large refund waits for approval in Arbiter and runs once approved", async () => {
      const o = order();
      const running = run(example, "--order", o, "--amount", "25000", "--wait", "30");
      const held = await untilStatus(operator, key("refund", o), "awaiting_approval");
      await operator.decide(held.id, { decision: "approve", reason: "checked with the customer" });
      const out = await running;
      assert.match(out, /^awaiting approval in Arbiter: http.*\/actions\//m);
      assert.match(out, /^approved in Arbiter$/m);
      assert.match(out, /^model: the refund tool said: .*re_1/m);
      assert.match(out, /^the action is succeeded; the provider made 1 refund\(s\)$/m);
    });
  });
}
