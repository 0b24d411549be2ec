// What the guard does with each answer to an intent, case by case as
// sdk/vectors.json lists them, against the real server: the ledger's
// outcome and HTTP status, whether the function ran, and the typed error.

import assert from "node:assert/strict";
import http from "node:http";
import { describe, test } from "node:test";
import {
  ArbiterError,
  CompensationRequestedError,
  DeniedError,
  HeldError,
  InProgressError,
  KeyReusedError,
  NetworkError,
  PendingApprovalError,
  UnreachableError,
} from "@arbiter-ledger/arbiter";
import { client, closedPort, fresh, noServer, untilStatus, vectors } from "./helpers.js";

/** The error each SDK raises under its own spelling (vectors: answers.cases[].error). */
const errors = {
  in_progress: InProgressError,
  held: HeldError,
  pending_approval: PendingApprovalError,
  denied: DeniedError,
  key_reused: KeyReusedError,
  invalid: ArbiterError,
  api: ArbiterError,
  unreachable: UnreachableError,
  compensation_requested: CompensationRequestedError,
};

/** A client that remembers the status of every answer to POST /v1/entries. */
function recording(role = "agent", options = {}) {
  const statuses = [];
  const c = client(role, {
    ...options,
    fetch: async (url, init) => {
      const res = await fetch(url, init);
      if (String(url).endsWith("/v1/entries")) statuses.push(res.status);
      return res;
    },
  });
  return { c, statuses };
}

const agent = client("agent");
const operator = client("operator");

/** Runs the guard for a case's situation; resolves to { outcome, error, ran, statuses }. */
async function attempt(c, statuses, spec, extra = {}) {
  let ran = 0;
  statuses.length = 0;
  try {
    const outcome = await c.guard({ tool: "ts.answers", ...spec }, () => {
      ran++;
      return { result: { ok: true }, externalRef: "ext_1" };
    });
    return { outcome, ran, statuses: [...statuses], ...extra };
  } catch (error) {
    return { error, ran, statuses: [...statuses], ...extra };
  }
}

/** Sets up the situation of each case and runs the guard in it. */
const situations = {
  async proceed() {
    const { c, statuses } = recording();
    return attempt(c, statuses, { key: fresh().key });
  },
  async replay() {
    const { c, statuses } = recording();
    const k = fresh().key;
    await c.guard({ key: k, tool: "ts.answers" }, () => ({ result: { n: 1 } }));
    return attempt(c, statuses, { key: k });
  },
  async compensate(withCompensation = true) {
    const { c, statuses } = recording();
    const k = fresh().key;
    const done = await c.guard({ key: k, tool: "ts.answers" }, () => ({ result: { n: 1 } }));
    await operator.decide(done.action.id, { decision: "compensate", reason: "the customer cancelled" });
    let undone = 0;
    const spec = { key: k };
    if (withCompensation) spec.compensate = () => (undone++, { externalRef: "undo_1" });
    return { ...(await attempt(c, statuses, spec)), undone };
  },
  async in_progress() {
    const { c, statuses } = recording();
    const k = fresh().key;
    await agent.submit({ key: k, type: "intent", tool: "ts.answers", timeout: 60 });
    return attempt(c, statuses, { key: k });
  },
  async held() {
    const { c, statuses } = recording();
    const k = fresh().key;
    await agent.submit({ key: k, type: "intent", tool: "ts.answers", timeout: 1 });
    await untilStatus(agent, k, "timed_out");
    return attempt(c, statuses, { key: k });
  },
  async pending_approval() {
    const { c, statuses } = recording();
    return attempt(c, statuses, { key: fresh().key, requireApproval: true });
  },
  async denied() {
    const { c, statuses } = recording();
    const k = fresh().key;
    const first = await agent.submit({ key: k, type: "intent", tool: "ts.answers", require_approval: true });
    await operator.decide(first.action.id, { decision: "reject", reason: "too large" });
    return attempt(c, statuses, { key: k, requireApproval: true });
  },
  async key_reused() {
    const { c, statuses } = recording();
    const k = fresh().key;
    await c.guard({ key: k, tool: "ts.answers", params: { amount: 1 } }, () => {});
    return attempt(c, statuses, { key: k, params: { amount: 2 } });
  },
  async invalid() {
    const { c, statuses } = recording();
    return attempt(c, statuses, { key: fresh().key, tool: "" });
  },
  async forbidden() {
    const { c, statuses } = recording("reader");
    return attempt(c, statuses, { key: fresh().key });
  },
  async connection_refused() {
    const { c, statuses } = recording("agent", { url: `http://127.0.0.1:${await closedPort()}` });
    return attempt(c, statuses, { key: fresh().key });
  },
  async status_503() {
    // A proxy in front of Arbiter that says it is unavailable.
    const srv = http.createServer((_, res) => res.writeHead(503, { "Content-Type": "text/html" }).end("<h1>503</h1>"));
    await new Promise((r) => srv.listen(0, "127.0.0.1", r));
    try {
      const { c, statuses } = recording("agent", { url: `http://127.0.0.1:${srv.address().port}` });
      return await attempt(c, statuses, { key: fresh().key });
    } finally {
      srv.close();
    }
  },
  async status_401() {
    const { c, statuses } = recording("agent", { apiKey: "ak_unknown" });
    return attempt(c, statuses, { key: fresh().key });
  },
};

function situationOf(c) {
  if (c.transport) return c.transport;
  if (c.outcome === "rejected") return c.code;
  return c.outcome;
}

describe("answers: what each answer to an intent means (sdk/vectors.json)", { skip: noServer || false, concurrency: true }, () => {
  for (const c of vectors().answers.cases) {
    const name = situationOf(c);
    test(`${name} → ${c.does}${c.error ? " " + c.error : ""}`, async () => {
      const setup = situations[name];
      assert.ok(setup, `no situation for the vector ${JSON.stringify(c)}: teach this test how to bring it about`);
      const got = await setup();
      if (c.status) assert.equal(got.statuses[0], c.status, "the HTTP status of the first answer to the intent");
      switch (c.does) {
        case "run":
          assert.equal(got.error, undefined);
          assert.equal(got.ran, 1);
          assert.equal(got.outcome.ran, true);
          assert.deepEqual(got.outcome.result, { ok: true });
          assert.equal(got.outcome.action.status, "succeeded");
          break;
        case "return_saved":
          assert.equal(got.error, undefined);
          assert.equal(got.ran, 0, "a replay runs nothing");
          assert.equal(got.outcome.ran, false);
          assert.deepEqual(got.outcome.result, { n: 1 });
          break;
        case "compensate": {
          assert.equal(got.error, undefined);
          assert.equal(got.ran, 0);
          assert.equal(got.undone, 1);
          assert.equal(got.outcome.compensated, true);
          assert.equal(got.outcome.action.status, "compensated");
          const without = await situations.compensate(false);
          assert.ok(without.error instanceof errors[c.without_compensation], String(without.error));
          assert.equal(without.ran, 0);
          break;
        }
        case "error": {
          const want = errors[c.error];
          assert.ok(want, `no error class for ${c.error}`);
          assert.ok(got.error instanceof want, `want ${want.name}, got ${got.error?.stack ?? JSON.stringify(got.outcome)}`);
          assert.equal(got.ran, 0, "nothing runs on an error answer");
          if (c.code) assert.equal(got.error.code, c.code);
          if (c.error === "api" && c.transport) assert.equal(got.error.status, Number(c.transport.replace("status_", "")));
          if (c.error === "api") assert.ok(!(got.error instanceof UnreachableError));
          if (c.transport === "connection_refused") assert.ok(got.error.cause instanceof NetworkError);
          if (c.transport === "status_503") assert.equal(got.error.cause.status, 503);
          break;
        }
        default:
          assert.fail(`unknown 'does' ${c.does} in the vectors`);
      }
    });
  }
});
