// The evidence log against the real server: the verifier key, the newest
// checkpoint (its Ed25519 signature checked), an entry's inclusion proof and
// consistency proofs (both checked as RFC 6962 says), a namespace's bundle,
// the audit.checkpoint alert, and the errors.

import assert from "node:assert/strict";
import { createHash, createPublicKey, randomUUID, verify } from "node:crypto";
import http from "node:http";
import { after, before, describe, test } from "node:test";
import { ArbiterError, Client } from "@arbiter-ledger/arbiter";
import { client, fresh, noServer, poll } from "./helpers.js";

const NS = process.env.ARBITER_NAMESPACE ?? "sdk";
const ORIGIN = "arbiter.local/log"; // ARBITER_LOG_ORIGIN's default: sdk/with-server sets none

// RFC 6962 / RFC 9162, written from the RFCs.

const sha256 = (...parts) => createHash("sha256").update(Buffer.concat(parts)).digest();
const node = (l, r) => sha256(Buffer.from([1]), l, r);
const leafHash = (leaf) => sha256(Buffer.from([0]), leaf);

/** MTH (RFC 6962 2.1) of the leaves whose hashes are given. */
function treeHash(hs) {
  if (hs.length === 0) return sha256();
  if (hs.length === 1) return hs[0];
  let k = 1;
  while (k * 2 < hs.length) k *= 2;
  return node(treeHash(hs.slice(0, k)), treeHash(hs.slice(k)));
}

/** The root hash an inclusion proof leads to (RFC 9162 2.1.3.2), or null when it does not fit the tree. */
function rootFromInclusion(index, size, leaf, path) {
  if (index < 0 || index >= size) return null;
  let fn = index;
  let sn = size - 1;
  let r = leaf;
  for (const p of path) {
    if (sn === 0) return null;
    if (fn & 1 || fn === sn) {
      r = node(p, r);
      while (!(fn & 1) && fn !== 0) {
        fn >>= 1;
        sn >>= 1;
      }
    } else {
      r = node(r, p);
    }
    fn >>= 1;
    sn >>= 1;
  }
  return sn === 0 ? r : null;
}

/** Verifies a consistency proof between two tree heads (RFC 9162 2.1.4.2). */
function consistent(first, second, proof, firstHash, secondHash) {
  if (!(first > 0 && first <= second)) return false;
  if (first === second) return proof.length === 0 && firstHash.equals(secondHash);
  if ((first & (first - 1)) === 0) proof = [firstHash, ...proof];
  if (proof.length === 0) return false;
  let fn = first - 1;
  let sn = second - 1;
  while (fn & 1) {
    fn >>= 1;
    sn >>= 1;
  }
  let fr = proof[0];
  let sr = proof[0];
  for (const c of proof.slice(1)) {
    if (sn === 0) return false;
    if (fn & 1 || fn === sn) {
      fr = node(c, fr);
      sr = node(c, sr);
      while (!(fn & 1) && fn !== 0) {
        fn >>= 1;
        sn >>= 1;
      }
    } else {
      sr = node(sr, c);
    }
    fn >>= 1;
    sn >>= 1;
  }
  return sn === 0 && fr.equals(firstHash) && sr.equals(secondHash);
}

/** Base64 SHA-256 hashes, decoded. */
function hashes(list) {
  const out = list.map((h) => Buffer.from(h, "base64"));
  for (const h of out) assert.equal(h.length, 32, "SHA-256 hashes");
  return out;
}

/** Reads a C2SP signed note holding a tlog-checkpoint. */
function readNote(note) {
  const cut = note.indexOf("\n\n");
  assert.ok(cut > 0 && note.endsWith("\n"), `not a signed note: ${JSON.stringify(note)}`);
  const text = note.slice(0, cut + 1);
  const lines = text.slice(0, -1).split("\n");
  assert.ok(lines.length >= 3, "a checkpoint is origin, size and root hash");
  const signatures = note.slice(cut + 2).replace(/\n$/, "").split("\n");
  for (const s of signatures) assert.ok(s.startsWith("\u2014 "), s);
  return { text, origin: lines[0], size: Number(lines[1]), root: Buffer.from(lines[2], "base64"), signatures: signatures.map((s) => s.slice(2)) };
}

const notFound = (e) => {
  if (e instanceof ArbiterError && e.code === "not_found") return null;
  throw e;
};

/** Rejects with the ArbiterError p rejects with. */
async function failure(p) {
  const e = await p.then(
    () => assert.fail("expected an ArbiterError"),
    (e) => e,
  );
  assert.ok(e instanceof ArbiterError, String(e));
  return [e.code, e.status];
}

describe("evidence log", { skip: noServer || false }, () => {
  const agent = client("agent");
  const operator = client("operator");
  const reader = client("reader");
  const admin = client("admin");
  const received = [];
  let receiver;
  let hook;
  let entry;
  let actionId;
  let note;
  let proof;

  // An intent recorded under a webhook subscribed to audit.checkpoint, once
  // it is in a signed checkpoint, and its proof in that checkpoint.
  before(async () => {
    receiver = http.createServer((req, res) => {
      const chunks = [];
      req.on("data", (c) => chunks.push(c));
      req.on("end", () => {
        received.push(JSON.parse(Buffer.concat(chunks).toString("utf8")));
        res.writeHead(204).end();
      });
    });
    await new Promise((r) => receiver.listen(0, "127.0.0.1", r));
    hook = await admin.createWebhook({
      url: `http://127.0.0.1:${receiver.address().port}/hook`,
      event_types: ["audit.checkpoint", "audit.mismatch"],
      description: "ts audit",
    });
    assert.deepEqual([...hook.event_types].sort(), ["audit.checkpoint", "audit.mismatch"]);

    const { key, tool } = fresh("audit");
    const res = await agent.submit({ key, type: "intent", tool, timeout: 60 });
    actionId = res.action.id;
    entry = (await reader.entries(actionId)).find((e) => e.type === "intent");
    assert.ok(entry);
    // The entry joins the log within 2 s and a checkpoint covers it within
    // about 10 s more; until then the checkpoint, or the entry's proof in
    // it, is not found.
    ({ note, proof } = await poll(
      async () => {
        const n = await reader.auditCheckpoint().catch(notFound);
        if (n === null) return null;
        const p = await reader.auditProof(entry.id, { size: readNote(n).size }).catch(notFound);
        return p && { note: n, proof: p };
      },
      { timeoutMs: 20_000, intervalMs: 250, what: "a checkpoint with the entry's proof" },
    ));
  });

  after(async () => {
    if (hook) await admin.deleteWebhook(hook.id);
    if (receiver) await new Promise((r) => receiver.close(r));
  });

  test("the proof leads to the checkpoint's root hash", async () => {
    const cp = readNote(note);
    assert.equal(cp.origin, ORIGIN);
    assert.equal(proof.tree_size, cp.size);
    assert.equal(proof.checkpoint, note, "against the checkpoint asked for");
    assert.ok(proof.log_index >= 0 && proof.log_index < proof.tree_size);
    assert.ok(Array.isArray(proof.inclusion));
    const root = rootFromInclusion(proof.log_index, proof.tree_size, hashes([proof.leaf_hash])[0], hashes(proof.inclusion));
    assert.ok(root && root.equals(cp.root), "the inclusion proof leads to the checkpoint's root hash");

    // Without a size: against the newest checkpoint, which still holds it.
    const newest = await operator.auditProof(entry.id);
    assert.equal(newest.log_index, proof.log_index);
    assert.equal(newest.leaf_hash, proof.leaf_hash);
    assert.ok(newest.tree_size >= proof.tree_size);
    const newestRoot = rootFromInclusion(newest.log_index, newest.tree_size, hashes([newest.leaf_hash])[0], hashes(newest.inclusion));
    assert.ok(newestRoot && newestRoot.equals(readNote(newest.checkpoint).root));

    // The timeline names the entry's leaf once it joined the log.
    const again = (await reader.entries(actionId)).find((e) => e.id === entry.id);
    assert.equal(again.log_index, proof.log_index);
  });

  test("the checkpoint is signed by the verifier key", async () => {
    const anyone = new Client(process.env.ARBITER_URL, "", { timeoutMs: 10_000 }); // the key and the checkpoint are public
    const key = await anyone.auditKey();
    assert.equal(key, await reader.auditKey());
    assert.equal(key, key.trim());
    // origin+hash+base64, and base64 may hold "+" too.
    const [, name, keyHash, keyB64] = /^([^+]+)\+([0-9a-f]{8})\+(.+)$/.exec(key) ?? assert.fail(key);
    assert.equal(name, ORIGIN);
    const raw = Buffer.from(keyB64, "base64");
    assert.equal(raw.length, 33);
    assert.equal(raw[0], 1, "an Ed25519 verifier key");
    // The key's hash is the first 4 bytes of SHA-256(name, "\n", key) (C2SP signed-note).
    assert.equal(sha256(Buffer.from(`${name}\n`), raw).subarray(0, 4).toString("hex"), keyHash);

    const cp = readNote(await anyone.auditCheckpoint());
    assert.equal(cp.origin, ORIGIN);
    assert.ok(cp.size >= proof.tree_size);
    const ours = cp.signatures.filter((s) => s.split(" ")[0] === name);
    assert.equal(ours.length, 1, cp.signatures.join("\n"));
    const sig = Buffer.from(ours[0].split(" ")[1], "base64");
    assert.equal(sig.length, 4 + 64);
    assert.equal(sig.subarray(0, 4).toString("hex"), keyHash);
    const pub = createPublicKey({ key: { kty: "OKP", crv: "Ed25519", x: raw.subarray(1).toString("base64url") }, format: "jwk" });
    assert.ok(verify(null, Buffer.from(cp.text), pub, sig.subarray(4)), "the signature checks");
    const forged = cp.text.replace(`\n${cp.size}\n`, `\n${cp.size + 1}\n`);
    assert.ok(!verify(null, Buffer.from(forged), pub, sig.subarray(4)), "and only for this text");
  });

  test("the bundle proves every entry of the namespace", async () => {
    const bundle = await reader.auditExport(NS);
    assert.ok(bundle.endsWith("\n"));
    const [head, ...rows] = bundle.trimEnd().split("\n").map((l) => JSON.parse(l));
    assert.ok("checkpoint" in head && "verifier_key" in head, Object.keys(head).join(", "));
    assert.equal(head.verifier_key.trim(), await reader.auditKey());
    const cp = readNote(head.checkpoint);
    assert.ok(cp.size >= proof.tree_size);

    const leafHashes = [];
    for (const row of rows) {
      const leaf = Buffer.from(row.leaf, "base64");
      assert.deepEqual(JSON.parse(leaf.toString("utf8")), row.entry, "entry is what its leaf decodes to");
      assert.equal(row.entry.namespace, NS);
      const lh = leafHash(leaf);
      const root = rootFromInclusion(row.log_index, cp.size, lh, hashes(row.inclusion));
      assert.ok(root && root.equals(cp.root), `line of log index ${row.log_index}`);
      leafHashes.push(lh);
    }
    const mine = rows.filter((r) => r.entry.id === entry.id);
    assert.equal(mine.length, 1);
    assert.equal(mine[0].log_index, proof.log_index);
    assert.equal(leafHash(Buffer.from(mine[0].leaf, "base64")).toString("base64"), proof.leaf_hash);
    assert.equal(mine[0].entry.seq, entry.seq);

    // sdk/with-server's keys write in this namespace only: the bundle holds
    // the whole log, in log order, so the tree's root can be computed from
    // its leaves and the consistency proofs checked against smaller trees.
    assert.deepEqual(rows.map((r) => r.log_index), [...Array(cp.size).keys()], "every leaf of the log, in order");
    assert.ok(treeHash(leafHashes).equals(cp.root));
    const sizes = new Set([1, 2, 3, proof.log_index + 1, Math.max(1, cp.size >> 1), Math.max(1, cp.size - 1), cp.size]);
    for (const first of [...sizes].filter((s) => s <= cp.size)) {
      const c = await reader.auditConsistency(first, cp.size);
      assert.ok(Array.isArray(c));
      assert.ok(consistent(first, cp.size, hashes(c), treeHash(leafHashes.slice(0, first)), cp.root), `from ${first}`);
    }
    assert.deepEqual(await reader.auditConsistency(cp.size, cp.size), []);
  });

  test("the bundle's range: since inclusive, until exclusive", async () => {
    const ids = (b) => b.trimEnd().split("\n").slice(1).map((l) => JSON.parse(l).entry.id);
    const later = await operator.auditExport(NS, { since: new Date(Date.now() + 3_600_000) });
    assert.equal(later.trimEnd().split("\n").length, 1, "nothing recorded after since: the first line alone");
    const at = Date.parse(entry.recorded_at); // milliseconds: at <= recorded_at < at + 1
    assert.ok(ids(await operator.auditExport(NS, { since: new Date(at), until: new Date(at + 1) })).includes(entry.id));
    assert.ok(ids(await operator.auditExport(NS, { since: entry.recorded_at })).includes(entry.id));
    assert.ok(!ids(await operator.auditExport(NS, { until: new Date(at) })).includes(entry.id));
  });

  test("each new checkpoint is alerted as audit.checkpoint", async () => {
    // The checkpoint that covered the entry was signed after the webhook was
    // made: it is alerted, with the note as data.checkpoint and no action.
    const m = await poll(() => received.find((x) => x.type === "audit.checkpoint" && x.data?.checkpoint === note), {
      timeoutMs: 15_000,
      intervalMs: 100,
      what: "the audit.checkpoint alert of the entry's checkpoint",
    });
    assert.equal(m.data.action, undefined);
    assert.ok(m.timestamp);
    assert.deepEqual(received.filter((x) => x.type === "audit.mismatch"), []);
  });

  test("errors", async () => {
    // An id that is no entry's, or no id at all: not found.
    assert.deepEqual(await failure(reader.auditProof(randomUUID())), ["not_found", 404]);
    assert.deepEqual(await failure(reader.auditProof("not-an-entry-id")), ["not_found", 404]);
    assert.deepEqual(await failure(reader.auditProof(entry.id, { size: -1 })), ["invalid", 400]);
    assert.deepEqual(await failure(reader.auditProof(entry.id, { size: proof.log_index })), ["not_found", 404]);
    // Agent keys write entries; proofs and bundles are for readers,
    // operators and admins.
    assert.deepEqual(await failure(agent.auditProof(entry.id)), ["forbidden", 403]);
    assert.deepEqual(await failure(agent.auditConsistency(1, 1)), ["forbidden", 403]);
    assert.deepEqual(await failure(agent.auditExport(NS)), ["forbidden", 403]);
    assert.deepEqual(await failure(reader.auditExport(`not-${NS}`)), ["forbidden", 403], "a reader of sdk only");
    assert.deepEqual(await failure(reader.auditConsistency(2, 1)), ["invalid", 400]);
    assert.deepEqual(await failure(reader.auditConsistency(1, 2 ** 40)), ["not_found", 404], "beyond the newest checkpoint");
  });
});
