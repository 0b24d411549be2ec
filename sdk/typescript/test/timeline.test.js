// Timelines a page at a time: entriesPage follows next_cursor, allEntries
// iterates over every page, entries reads them all.

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { ArbiterError } from "@arbiter-ledger/arbiter";
import { client, fresh, noServer } from "./helpers.js";

const agent = client("agent");
const reader = client("reader");

describe("timeline pages", { skip: noServer || false }, () => {
  test("entriesPage, allEntries and entries read a timeline oldest first, a page at a time", async () => {
    const { key, tool } = fresh("timeline");
    await agent.submit({ key, type: "intent", tool });
    const notes = Array.from({ length: 120 }, (_, i) => ({ key, type: "note", message: `note ${i}` }));
    await agent.submitBatch(notes);
    const a = await agent.actionByKey(key);

    const first = await reader.entriesPage(a.id, { limit: 100 });
    assert.equal(first.entries.length, 100);
    assert.equal(first.entries[0].seq, 1);
    assert.ok(first.next_cursor);
    const second = await reader.entriesPage(a.id, { limit: 100, cursor: first.next_cursor });
    assert.deepEqual(second.entries.map((e) => e.seq), Array.from({ length: 21 }, (_, i) => 101 + i));
    assert.equal(second.next_cursor, null);

    const whole = await reader.entriesPage(a.id);
    assert.equal(whole.entries.length, 121, "the default page is 1,000");
    assert.equal(whole.next_cursor, null);

    const all = await reader.entries(a.id);
    assert.deepEqual(all.map((e) => e.seq), Array.from({ length: 121 }, (_, i) => i + 1));
    const seqs = [];
    for await (const e of reader.allEntries(a.id, { limit: 7 })) seqs.push(e.seq);
    assert.deepEqual(seqs, Array.from({ length: 121 }, (_, i) => i + 1), "every entry once across 18 pages");
    const some = [];
    for await (const e of reader.allEntries(a.id, { limit: 7, cursor: first.next_cursor })) {
      some.push(e.seq);
      if (some.length === 10) break;
    }
    assert.deepEqual(some, Array.from({ length: 10 }, (_, i) => 101 + i));

    for (const bad of [{ limit: 1001 }, { limit: 0 }, { cursor: "not-ours" }]) {
      const err = await reader.entriesPage(a.id, bad).catch((e) => e);
      assert.ok(err instanceof ArbiterError, JSON.stringify(bad));
      assert.equal(err.status, 400);
      assert.equal(err.code, "invalid");
    }
  });
});
