// sdk/vectors.json: keys, backoff bounds and when a worker looks a
// timed-out attempt up, the behaviour every SDK shares (what each answer
// means is in answers.test.js, against the server).

import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { test } from "node:test";
import { Client, DEFAULT_BACKOFF, MAX_KEY_BYTES, backoffBound, backoffPause, key, lookupDue } from "@arbiter-ledger/arbiter";
import { client, fresh, memoryLogger, noServer, untilStatus, vectors } from "./helpers.js";

const v = vectors();

test("keys: every vector of sdk/vectors.json", () => {
  assert.equal(MAX_KEY_BYTES, v.keys.max_bytes);
  assert.ok(v.keys.cases.length >= 10, `only ${v.keys.cases.length} key vectors`);
  for (const c of v.keys.cases) {
    assert.equal(key(...c.parts), c.key, `key(${JSON.stringify(c.parts).slice(0, 80)})`);
  }
});

test("keys: never longer than the server accepts, and cut keys differ", () => {
  for (const part of ["x".repeat(1000), "é".repeat(400), "🎉".repeat(300), "\u0000".repeat(200)]) {
    const k = key("refund", part);
    assert.ok(Buffer.byteLength(k) <= MAX_KEY_BYTES, `${Buffer.byteLength(k)} bytes`);
    assert.ok(!k.includes("\uFFFD"), "cut inside a character");
  }
  assert.notEqual(key("x".repeat(300) + "a"), key("x".repeat(300) + "b"));
});

test("keys: the hash of a long key is SHA-256 of the whole, as Go's", () => {
  const whole = "refund:" + "9".repeat(300);
  const tail = "~" + createHash("sha256").update(whole).digest("hex").slice(0, 32);
  assert.ok(key("refund", "9".repeat(300)).endsWith(tail));
});

test("keys: characters Go's unicode.IsPrint refuses are percent-encoded", () => {
  assert.equal(key("a\u00ADb"), "a%C2%ADb"); // soft hyphen: a format character
  assert.equal(key("a\u2028b"), "a%E2%80%A8b"); // line separator
  assert.equal(key("a\u3000b"), "a%E3%80%80b"); // ideographic space
  assert.equal(key("ā·→€"), "ā·→€"); // letters, punctuation, symbols stay
  assert.equal(key("a\uD800b"), "a%ED%A0%80b"); // a lone surrogate is not UTF-8
});

test("backoff: the client's default has the shared bounds, and pauses stay within them", () => {
  assert.deepEqual(DEFAULT_BACKOFF, { firstMs: v.backoff.first_ms, largestMs: v.backoff.largest_ms });
  assert.deepEqual(new Client("http://127.0.0.1:1", "ak_x").backoff, DEFAULT_BACKOFF);
  for (const b of v.backoff.bounds) {
    assert.equal(backoffBound(DEFAULT_BACKOFF, b.n), b.max_ms, `bound of pause ${b.n}`);
    let most = 0;
    for (let i = 0; i < 2000; i++) {
      const p = backoffPause(DEFAULT_BACKOFF, b.n);
      assert.ok(p >= 0 && p <= b.max_ms, `pause(${b.n}) = ${p}, outside [0, ${b.max_ms}]`);
      most = Math.max(most, p);
    }
    assert.ok(most >= b.max_ms / 2, `pause(${b.n}) never above ${most}: the jitter does not span [0, ${b.max_ms}]`);
  }
});

test("lookup answers: the SDK's are the shared ones", async () => {
  const { ANSWERS } = await import("@arbiter-ledger/arbiter");
  assert.deepEqual([...ANSWERS], v.lookup_answers.values);
});

test("lookups: when a worker looks a timed-out attempt up, every case of sdk/vectors.json", async () => {
  const { MAX_LOOKUPS, Worker } = await import("@arbiter-ledger/arbiter");
  const l = v.lookups;
  assert.equal(MAX_LOOKUPS, l.max_lookups);
  const w = new Worker(new Client("http://127.0.0.1:1", "ak_x"));
  assert.equal(w.opts.lookupRetryMs, l.retry_after_s * 1000, "the pause before a failed lookup is asked again");
  assert.equal(w.opts.lookupTimeoutMs, l.default_timeout_s * 1000, "the default lookup timeout");
  assert.ok(l.due.length >= 8, `only ${l.due.length} cases`);
  const now = Date.now();
  const at = { now, long_ago: now - 3_600_000, future: now + 60_000 };
  const iso = (name) => {
    assert.ok(name in at, `unknown time ${name}`);
    return new Date(at[name]).toISOString();
  };
  for (const c of l.due) {
    const a = { status: "timed_out", attempt: Math.max(c.attempt ?? 1, 1), reconciliation: null };
    const r = c.reconciliation;
    if (r) {
      a.reconciliation = {
        key_expires_at: null,
        lookup_attempt: r.lookup_attempt,
        lookups: r.lookups,
        lookup_until: r.lookup_until ? iso(r.lookup_until) : null,
        last_lookup: r.last_lookup ? { ...r.last_lookup, at: iso(r.last_lookup.at) } : null,
        compensation_failures: 0,
        compensation_error: null,
        compensation_timed_out: false,
      };
    }
    assert.equal(lookupDue(a, now, w.opts.lookupRetryMs), c.due, c.case);
  }
  // The pause doubles with each lookup of the attempt: after the second
  // failed lookup, one retry_after_s is not enough, two are.
  const failedAgo = (s, lookups) => ({
    status: "timed_out",
    attempt: 1,
    reconciliation: {
      lookup_attempt: 1,
      lookups,
      lookup_until: null,
      last_lookup: { attempt: 1, answer: "unknown", said: `${l.failed_said_prefix}"down"}`, at: new Date(now - s * 1000).toISOString() },
    },
  });
  assert.equal(lookupDue(failedAgo(l.retry_after_s + 1, 2), now, w.opts.lookupRetryMs), false);
  assert.equal(lookupDue(failedAgo(2 * l.retry_after_s + 1, 2), now, w.opts.lookupRetryMs), true);
});

test("lookups: the lease a worker takes is the lookup's timeout plus the shared margin, at most an hour", async () => {
  const { LOOKUP_LEASE_MARGIN_MS, lookupLeaseS } = await import("@arbiter-ledger/arbiter");
  const l = v.lookups;
  assert.equal(LOOKUP_LEASE_MARGIN_MS, l.lease_margin_s * 1000);
  assert.equal(lookupLeaseS(l.default_timeout_s * 1000), l.default_timeout_s + l.lease_margin_s);
  assert.equal(lookupLeaseS(1000), 1 + l.lease_margin_s);
  assert.equal(lookupLeaseS(3_595_000), 3600);
});

test("lookups: a lookup that throws is reported unknown with the shared evidence, under the shared lease", { skip: noServer || false }, async () => {
  const { Worker, retriable } = await import("@arbiter-ledger/arbiter");
  const l = v.lookups;
  const agent = client("agent");
  const { key: k, tool } = fresh();
  await assert.rejects(
    agent.guard({ key: k, tool, effect: "keyed", timeoutMs: 1000 }, () => {
      throw retriable(new Error("never reported"));
    }),
  );
  // A failed retriable attempt is not timed out: start attempt 2 and let its lease pass.
  const second = await agent.submit({ key: k, type: "intent", tool, effect: "keyed", timeout: 1 });
  assert.equal(second.outcome, "proceed");
  await untilStatus(agent, k, "timed_out");
  const w = new Worker(agent, { logger: memoryLogger(), lookupTimeoutMs: 2000 }).handleLookup(tool, () => {
    throw new Error("provider search is down");
  });
  await w.runOnce();
  const a = await agent.actionByKey(k);
  assert.equal(a.status, "timed_out");
  const entries = await agent.entries(a.id);
  const take = entries.findLast((e) => e.type === "lookup");
  assert.equal(take.payload.timeout, 2 + l.lease_margin_s, "lookup lease: the timeout plus the margin");
  const said = entries.findLast((e) => e.type === "lookup_result");
  assert.equal(said.payload.answer, "unknown");
  assert.deepEqual(said.payload.evidence, { [l.failed_evidence_key]: "provider search is down" });
  assert.ok(a.reconciliation.last_lookup.said.startsWith(l.failed_said_prefix), a.reconciliation.last_lookup.said);
  assert.equal(lookupDue(a, Date.now(), w.opts.lookupRetryMs), false, "not again before retry_after_s");
});

test("compensations: when a worker runs a requested compensation, every case of sdk/vectors.json", async () => {
  const { compensationDue } = await import("@arbiter-ledger/arbiter");
  assert.ok(v.compensations.due.length >= 4, `only ${v.compensations.due.length} cases`);
  for (const c of v.compensations.due) {
    const rc = c.reconciliation && {
      key_expires_at: null, lookup_attempt: 0, lookups: 0, lookup_until: null, last_lookup: null, compensation_error: null,
      ...c.reconciliation,
    };
    assert.equal(compensationDue(rc), c.due, c.case);
  }
});

test("model messages: what the adapters tell the model are sdk/vectors.json's, word for word", async () => {
  const { MODEL_MESSAGES, modelMessage } = await import("@arbiter-ledger/arbiter/openai-agents");
  const ai = await import("@arbiter-ledger/arbiter/ai-sdk");
  assert.deepEqual({ ...MODEL_MESSAGES }, vectors().model_messages.messages);
  assert.equal(ai.MODEL_MESSAGES, MODEL_MESSAGES);
  assert.equal(modelMessage("failed"), "Not done: the call failed and did not take effect.", "no detail: the text ends at the sentence before it");
  assert.equal(
    modelMessage("held", "arbiter: held", "http://x/actions/1"),
    "Not done: an earlier attempt's outcome is unknown and a person is checking it. Do not call the tool again; tell the user it is being checked (http://x/actions/1). arbiter: held",
  );
  assert.match(modelMessage("held"), /\(the Arbiter dashboard\)\.$/);
});

test("outcomes: what a guard records for what the guarded call raised, every case of sdk/vectors.json", async () => {
  const { NotDone, classifyError, classifyWith, errorKind, retriable } = await import("@arbiter-ledger/arbiter");
  const o = v.outcomes;
  assert.equal(o.default, "outcome_unknown");
  // Each kind as TypeScript raises it; several errors a kind, all of them classified the same.
  const raised = {
    timeout: () => [
      new DOMException("The operation was aborted due to timeout", "TimeoutError"),
      new DOMException("This operation was aborted", "AbortError"),
      new TypeError("fetch failed", { cause: Object.assign(new Error("Headers Timeout Error"), { code: "UND_ERR_HEADERS_TIMEOUT" }) }),
      new TypeError("fetch failed", { cause: Object.assign(new Error("Body Timeout Error"), { code: "UND_ERR_BODY_TIMEOUT" }) }),
    ],
    connection_lost: () => [
      new TypeError("fetch failed", { cause: Object.assign(new Error("read ECONNRESET"), { code: "ECONNRESET" }) }),
      new TypeError("fetch failed", { cause: Object.assign(new Error("write EPIPE"), { code: "EPIPE" }) }),
      new TypeError("fetch failed", { cause: Object.assign(new Error("other side closed"), { code: "UND_ERR_SOCKET" }) }),
    ],
    connection_refused: () => [new TypeError("fetch failed", { cause: Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:1"), { code: "ECONNREFUSED" }) })],
    not_done: (c) => (c.retriable ? [new NotDone("declined", { retriable: true }), retriable(new Error("declined"))] : [new NotDone("declined")]),
    http_status: (c) => [
      Object.assign(new Error(`HTTP ${c.status}`), { status: c.status }),
      Object.assign(new Error(`HTTP ${c.status}`), { statusCode: c.status }),
      Object.assign(new Error(`HTTP ${c.status}`), { response: { status: c.status } }),
    ],
    other: () => [new Error("a bug in the tool"), new RangeError("out of range"), "a string thrown", { weird: true }],
  };
  const classifiers = {
    failed: () => "failed",
    failed_retriable: () => "failed_retriable",
    raises: () => {
      throw new Error("the classifier broke");
    },
  };
  for (const c of o.cases) {
    const errors = raised[c.raised](c);
    assert.ok(errors.length > 0, c.raised);
    for (const err of errors) {
      const got = c.classifier ? classifyWith(err, classifiers[c.classifier], c.tool_maps) : classifyError(err, c.tool_maps ?? []);
      const want = c.records === "failed" ? (c.retriable_recorded || (c.raised === "connection_refused" && c.retriable) ? "failed_retriable" : "failed") : c.records;
      assert.equal(got, want, `${JSON.stringify(c)}: ${String(err?.message ?? err)}`);
      if (!c.classifier && c.raised !== "not_done") assert.equal(errorKind(err), c.raised, String(err?.message ?? err));
    }
  }
});
