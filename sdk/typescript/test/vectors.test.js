// sdk/vectors.json: keys and backoff bounds, the behaviour every SDK
// shares (what each answer means is in answers.test.js, against the server).

import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { test } from "node:test";
import { Client, DEFAULT_BACKOFF, MAX_KEY_BYTES, backoffBound, backoffPause, key } from "@arbiter-ledger/arbiter";
import { vectors } from "./helpers.js";

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
