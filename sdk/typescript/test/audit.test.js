// The evidence log against the real server: the verifier key, the newest
// checkpoint, an entry's inclusion proof (checked here as RFC 6962 says), a
// consistency proof and a namespace's bundle.

import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { describe, test } from "node:test";
import { ArbiterError } from "@arbiter-ledger/arbiter";
import { client, fresh, noServer, poll } from "./helpers.js";

const agent = client("agent");
const operator = client("operator");

/** The root hash an RFC 6962 inclusion proof leads to (RFC 9162 2.1.3.2), or null when it does not fit the tree. */
function rootFromInclusion(index, size, leafHash, path) {
  const h = (...parts) => createHash("sha256").update(Buffer.concat(parts)).digest();
  let fn = index;
  let sn = size - 1;
  let r = leafHash;
  for (const p of path) {
    if (sn === 0) return null;
    if (fn & 1 || fn === sn) {
      r = h(Buffer.from([1]), p, r);
      if (!(fn & 1)) {
        while (!(fn & 1) && fn !== 0) {
          fn >>= 1;
          sn >>= 1;
        }
      }
    } else {
      r = h(Buffer.from([1]), r, p);
    }
    fn >>= 1;
    sn >>= 1;
  }
  return sn === 0 ? r : null;
}

const notFound = (e) => {
  if (e instanceof ArbiterError && e.code === "not_found") return null;
  throw e;
};

describe("evidence log", { skip: noServer || false }, () => {
  test("key, checkpoint, an entry's proof, consistency and the bundle", async () => {
    const { key, tool } = fresh("audit");
    const res = await agent.submit({ key, type: "intent", tool, timeout: 60 });
    const entry = (await operator.entries(res.action.id)).find((e) => e.type === "intent");
    assert.ok(entry);

    // The server signs a checkpoint within ~10 s of an entry; until then the
    // checkpoint, or the entry's proof in it, is not found.
    const { note, proof } = await poll(
      async () => {
        const note = await operator.auditCheckpoint().catch(notFound);
        if (note === null) return null;
        const proof = await operator.auditProof(entry.id, { size: Number(note.split("\n")[1]) }).catch(notFound);
        return proof && { note, proof };
      },
      { timeoutMs: 15_000, intervalMs: 250, what: "a checkpoint with the entry's proof" },
    );
    const lines = note.split("\n");
    assert.equal(lines[0], "arbiter.local/log");
    assert.ok(note.endsWith("\n"), "the signed note exactly as sent");
    assert.equal(proof.tree_size, Number(lines[1]));
    assert.equal(proof.checkpoint, note);
    assert.ok(proof.log_index >= 0 && proof.log_index < proof.tree_size);
    const root = rootFromInclusion(
      proof.log_index,
      proof.tree_size,
      Buffer.from(proof.leaf_hash, "base64"),
      proof.inclusion.map((x) => Buffer.from(x, "base64")),
    );
    assert.deepEqual(root, Buffer.from(lines[2], "base64"), "the inclusion proof leads to the checkpoint's root hash");
    // Without a size: against the newest checkpoint, which still holds it.
    assert.equal((await operator.auditProof(entry.id)).log_index, proof.log_index);

    // The timeline names the entry's leaf once it joined the log.
    const logged = (await operator.entries(res.action.id)).find((e) => e.id === entry.id);
    assert.equal(logged.log_index, proof.log_index);

    const verifier = await operator.auditKey();
    assert.ok(verifier.startsWith("arbiter.local/log+"), verifier);
    assert.equal(verifier, verifier.trim());
    assert.ok(Array.isArray(await operator.auditConsistency(1, proof.tree_size)));

    const bundle = await operator.auditExport(process.env.ARBITER_NAMESPACE ?? "sdk");
    const first = JSON.parse(bundle.split("\n", 1)[0]);
    assert.ok("checkpoint" in first && "verifier_key" in first, Object.keys(first).join(", "));
    assert.equal(first.verifier_key.trim(), verifier);
    const since = new Date(Date.now() + 3_600_000);
    const empty = await operator.auditExport(process.env.ARBITER_NAMESPACE ?? "sdk", { since });
    assert.equal(empty.trimEnd().split("\n").length, 1, "nothing recorded after since: the first line alone");

    // Agent keys write entries; proofs are for readers, operators and admins.
    const forbidden = await agent.auditProof(entry.id).catch((e) => e);
    assert.ok(forbidden instanceof ArbiterError);
    assert.equal(forbidden.status, 403);
    assert.equal(forbidden.code, "forbidden");
    const invalid = await operator.auditConsistency(2, 1).catch((e) => e);
    assert.equal(invalid.code, "invalid");
  });
});
