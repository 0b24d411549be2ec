"""The evidence log against the real server: the verifier key, the newest
checkpoint (its signature checked), an entry's inclusion proof and a
consistency proof (both checked as RFC 6962 says, with hashlib), a
namespace's bundle, the audit.checkpoint alert, and the errors."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import os
import threading
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest

import arbiter
from conftest import eventually

NS = os.environ.get("ARBITER_NAMESPACE", "sdk")
ORIGIN = "arbiter.local/log"  # ARBITER_LOG_ORIGIN's default: sdk/with-server sets none


# --- RFC 6962 / RFC 9162, written from the RFCs ---


def _node(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


def _leaf_hash(leaf: bytes) -> bytes:
    return hashlib.sha256(b"\x00" + leaf).digest()


def _tree_hash(leaf_hashes: List[bytes]) -> bytes:
    """MTH (RFC 6962 2.1) of the leaves whose hashes are given."""
    n = len(leaf_hashes)
    if n == 0:
        return hashlib.sha256(b"").digest()
    if n == 1:
        return leaf_hashes[0]
    k = 1
    while k * 2 < n:
        k *= 2
    return _node(_tree_hash(leaf_hashes[:k]), _tree_hash(leaf_hashes[k:]))


def _root_from_inclusion(index: int, size: int, leaf_hash: bytes, path: List[bytes]) -> Optional[bytes]:
    """The root hash an inclusion proof leads to (RFC 9162 2.1.3.2), or
    None when the proof does not fit the tree."""
    if not 0 <= index < size:
        return None
    fn, sn, r = index, size - 1, leaf_hash
    for p in path:
        if sn == 0:
            return None
        if fn & 1 or fn == sn:
            r = _node(p, r)
            while not fn & 1 and fn != 0:
                fn >>= 1
                sn >>= 1
        else:
            r = _node(r, p)
        fn >>= 1
        sn >>= 1
    return r if sn == 0 else None


def _consistent(first: int, second: int, proof: List[bytes], first_hash: bytes, second_hash: bytes) -> bool:
    """Verifies a consistency proof between two tree heads (RFC 9162
    2.1.4.2)."""
    if not 0 < first <= second:
        return False
    if first == second:
        return proof == [] and first_hash == second_hash
    if first & (first - 1) == 0:  # a power of two: the old tree is a node of the new
        proof = [first_hash] + proof
    if not proof:
        return False
    fn, sn = first - 1, second - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    fr = sr = proof[0]
    for c in proof[1:]:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            fr, sr = _node(c, fr), _node(c, sr)
            while not fn & 1 and fn != 0:
                fn >>= 1
                sn >>= 1
        else:
            sr = _node(sr, c)
        fn >>= 1
        sn >>= 1
    return sn == 0 and fr == first_hash and sr == second_hash


@dataclass
class Note:
    text: str  # what the signatures sign: the checkpoint's lines, each ending in "\n"
    origin: str
    size: int
    root: bytes
    signatures: List[str]  # the lines after the blank line, without "— "


def _note(note: str) -> Note:
    """Reads a C2SP signed note holding a tlog-checkpoint."""
    text, sep, sigs = note.partition("\n\n")
    assert sep and note.endswith("\n"), f"not a signed note: {note!r}"
    lines = text.split("\n")
    assert len(lines) >= 3, f"a checkpoint is origin, size and root hash: {text!r}"
    sig_lines = sigs.rstrip("\n").split("\n")
    assert sig_lines and all(s.startswith("\u2014 ") for s in sig_lines), f"signature lines: {sigs!r}"
    return Note(text + "\n", lines[0], int(lines[1]), base64.b64decode(lines[2], validate=True),
                [s[2:] for s in sig_lines])


def _b64s(hashes: List[str]) -> List[bytes]:
    out = [base64.b64decode(h, validate=True) for h in hashes]
    assert all(len(h) == 32 for h in out), "SHA-256 hashes"
    return out


# --- a receiver for the audit.checkpoint alert ---


class Receiver:
    def __init__(self) -> None:
        self.messages: List[Dict[str, Any]] = []
        lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with lock:
                    outer.messages.append(json.loads(body))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self._lock = lock
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/hook"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def of_type(self, t: str) -> List[Dict[str, Any]]:
        with self._lock:
            return [m for m in self.messages if m.get("type") == t]

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@dataclass
class Logged:
    entry: arbiter.LedgerEntry
    action_id: str
    note: str
    proof: arbiter.AuditProof
    receiver: Receiver


@pytest.fixture(scope="module")
def logged(url: str) -> Iterator[Logged]:
    """An intent recorded under a webhook subscribed to audit.checkpoint,
    once it is in a signed checkpoint, and its proof in that checkpoint."""
    admin = arbiter.Client(url, os.environ["ARBITER_ADMIN_KEY"], timeout=10)
    agent = arbiter.Client(url, os.environ["ARBITER_AGENT_KEY"], timeout=10)
    reader = arbiter.Client(url, os.environ["ARBITER_READER_KEY"], timeout=10)
    receiver = Receiver()
    hook = admin.create_webhook(receiver.url, ["audit.checkpoint", "audit.mismatch"], description="py audit")
    assert sorted(hook.event_types) == ["audit.checkpoint", "audit.mismatch"]
    try:
        uniq = uuid.uuid4().hex[:12]
        res = agent.submit(arbiter.Entry(key=arbiter.key("audit", uniq), type="intent", tool=f"t.audit.{uniq}",
                                         timeout=60))
        assert res.action is not None
        (entry,) = [e for e in reader.entries(res.action.id) if e.type == "intent"]

        def proved() -> Optional[Tuple[str, arbiter.AuditProof]]:
            # The entry joins the log within 2 s and a checkpoint covers it
            # within about 10 s more; until then the checkpoint, or the
            # entry's proof in it, is not found.
            try:
                note = reader.audit_checkpoint()
                return note, reader.audit_proof(entry.id, size=_note(note).size)
            except arbiter.APIError as e:
                if e.code == "not_found":
                    return None
                raise

        note, proof = eventually(proved, timeout=20, every=0.25, what="a checkpoint with the entry's proof")
        yield Logged(entry, res.action.id, note, proof, receiver)
    finally:
        admin.delete_webhook(hook.id)
        receiver.close()


def test_proof_leads_to_the_checkpoint(logged: Logged, reader: arbiter.Client, operator: arbiter.Client) -> None:
    note, proof = _note(logged.note), logged.proof
    assert isinstance(proof, arbiter.AuditProof)
    assert note.origin == ORIGIN
    assert (proof.tree_size, proof.checkpoint) == (note.size, logged.note), "against the checkpoint asked for"
    assert 0 <= proof.log_index < proof.tree_size
    assert isinstance(proof.inclusion, list) and all(isinstance(h, str) for h in proof.inclusion)
    root = _root_from_inclusion(proof.log_index, proof.tree_size, _b64s([proof.leaf_hash])[0],
                                _b64s(proof.inclusion))
    assert root == note.root, "the inclusion proof leads to the checkpoint's root hash"

    # Without a size: against the newest checkpoint, which still holds it.
    newest = operator.audit_proof(logged.entry.id)
    assert newest.log_index == proof.log_index and newest.leaf_hash == proof.leaf_hash
    assert newest.tree_size >= proof.tree_size
    assert _root_from_inclusion(newest.log_index, newest.tree_size, _b64s([newest.leaf_hash])[0],
                                _b64s(newest.inclusion)) == _note(newest.checkpoint).root

    # The timeline names the entry's leaf once it joined the log.
    (again,) = [e for e in reader.entries(logged.action_id) if e.id == logged.entry.id]
    assert again.log_index == proof.log_index


def test_checkpoint_is_signed_by_the_verifier_key(logged: Logged, url: str, reader: arbiter.Client) -> None:
    anyone = arbiter.Client(url, "", timeout=10)  # the key and the checkpoint are public
    key = anyone.audit_key()
    assert key == reader.audit_key() and key == key.strip()
    name, key_hash, key_b64 = key.split("+", 2)  # base64 may hold "+" too
    assert name == ORIGIN and len(key_hash) == 8
    raw = base64.b64decode(key_b64, validate=True)
    assert raw[0] == 1 and len(raw) == 33, "an Ed25519 verifier key: algorithm 1 and 32 bytes"
    # The key's hash is the first 4 bytes of SHA-256(name, "\n", key) (C2SP signed-note).
    assert hashlib.sha256(name.encode() + b"\n" + raw).digest()[:4].hex() == key_hash

    note_text = anyone.audit_checkpoint()
    note = _note(note_text)
    assert note.origin == ORIGIN and note.size >= logged.proof.tree_size
    ours = [s for s in note.signatures if s.split(" ", 1)[0] == name]
    assert len(ours) == 1, note.signatures
    sig = base64.b64decode(ours[0].split(" ", 1)[1], validate=True)
    assert sig[:4].hex() == key_hash and len(sig) == 4 + 64

    ed25519 = pytest.importorskip("cryptography.hazmat.primitives.asymmetric.ed25519")
    ed25519.Ed25519PublicKey.from_public_bytes(raw[1:]).verify(sig[4:], note.text.encode())  # raises if bad
    with pytest.raises(Exception):
        ed25519.Ed25519PublicKey.from_public_bytes(raw[1:]).verify(sig[4:], note.text.replace(
            f"\n{note.size}\n", f"\n{note.size + 1}\n").encode())


def test_bundle_proves_every_entry(logged: Logged, reader: arbiter.Client) -> None:
    bundle = reader.audit_export(NS)
    assert bundle.endswith("\n")
    lines = [json.loads(line) for line in bundle.splitlines()]
    head, rows = lines[0], lines[1:]
    assert set(head) >= {"checkpoint", "verifier_key"}
    assert head["verifier_key"].strip() == reader.audit_key()
    note = _note(head["checkpoint"])
    assert note.size >= logged.proof.tree_size

    leaf_hashes = []
    for row in rows:
        leaf = base64.b64decode(row["leaf"], validate=True)
        assert json.loads(leaf) == row["entry"], "entry is what its leaf decodes to"
        assert row["entry"]["namespace"] == NS
        lh = _leaf_hash(leaf)
        assert _root_from_inclusion(row["log_index"], note.size, lh, _b64s(row["inclusion"])) == note.root, row
        leaf_hashes.append(lh)
    indices = [row["log_index"] for row in rows]
    assert indices == sorted(indices), "in log order"

    (mine,) = [row for row in rows if row["entry"]["id"] == logged.entry.id]
    assert mine["log_index"] == logged.proof.log_index
    assert base64.b64encode(_leaf_hash(base64.b64decode(mine["leaf"]))).decode() == logged.proof.leaf_hash
    assert (mine["entry"]["seq"], mine["entry"]["type"]) == (logged.entry.seq, "intent")

    # sdk/with-server's keys write in this namespace only: the bundle holds
    # the whole log, so the tree's root can be computed from its leaves,
    # and the consistency proofs checked against roots of smaller trees.
    assert indices == list(range(note.size)), "every leaf of the log, in this namespace's bundle"
    assert _tree_hash(leaf_hashes) == note.root
    for first in sorted({1, 2, 3, logged.proof.log_index + 1, note.size // 2 or 1, note.size - 1 or 1, note.size}):
        if first > note.size:
            continue
        proof = reader.audit_consistency(first, note.size)
        assert isinstance(proof, list) and all(isinstance(h, str) for h in proof)
        assert _consistent(first, note.size, _b64s(proof), _tree_hash(leaf_hashes[:first]), note.root), first
    assert reader.audit_consistency(note.size, note.size) == []


def test_bundle_range(logged: Logged, operator: arbiter.Client) -> None:
    at = logged.entry.recorded_at
    later = operator.audit_export(NS, since=datetime.now(timezone.utc) + timedelta(hours=1))
    assert len(later.splitlines()) == 1, "nothing recorded after since: the first line alone"
    around = operator.audit_export(NS, since=at, until=at + timedelta(microseconds=1))
    rows = [json.loads(line) for line in around.splitlines()[1:]]
    assert logged.entry.id in [r["entry"]["id"] for r in rows], "since is inclusive"
    before = operator.audit_export(NS, until=at)
    assert logged.entry.id not in [json.loads(line)["entry"]["id"] for line in before.splitlines()[1:]], \
        "until is exclusive"


def test_checkpoint_alert(logged: Logged) -> None:
    # The checkpoint that covered the entry was signed after the webhook was
    # made: it is alerted, with the note as data.checkpoint and no action.
    def alerted() -> List[Dict[str, Any]]:
        return [m for m in logged.receiver.of_type("audit.checkpoint") if m["data"].get("checkpoint") == logged.note]

    (m,) = eventually(alerted, timeout=15, every=0.1, what="the audit.checkpoint alert of the entry's checkpoint")
    assert "action" not in m["data"] and "timestamp" in m
    assert logged.receiver.of_type("audit.mismatch") == []


def test_errors(logged: Logged, agent: arbiter.Client, reader: arbiter.Client) -> None:
    def code(f: Any, *args: Any, **kwargs: Any) -> Tuple[str, int]:
        with pytest.raises(arbiter.APIError) as e:
            f(*args, **kwargs)
        return e.value.code, e.value.status

    # An id that is no entry's, or no id at all: not found.
    assert code(reader.audit_proof, str(uuid.uuid4())) == ("not_found", 404)
    assert code(reader.audit_proof, "not-an-entry-id") == ("not_found", 404)
    assert code(reader.audit_proof, logged.entry.id, size=-1) == ("invalid", 400)
    assert code(reader.audit_proof, logged.entry.id, size=logged.proof.log_index) == ("not_found", 404), \
        "no checkpoint of a size that does not hold the entry"
    # Agent keys write entries; proofs and bundles are for readers,
    # operators and admins.
    assert code(agent.audit_proof, logged.entry.id) == ("forbidden", 403)
    assert code(agent.audit_consistency, 1, 1) == ("forbidden", 403)
    assert code(agent.audit_export, NS) == ("forbidden", 403)
    assert code(reader.audit_export, "not-" + NS) == ("forbidden", 403), "a reader of sdk only"
    assert code(reader.audit_consistency, 2, 1) == ("invalid", 400)
    assert code(reader.audit_consistency, 1, 1 << 40) == ("not_found", 404), "beyond the newest checkpoint"


def test_async_client(logged: Logged, url: str) -> None:
    async def main() -> Tuple[str, str, arbiter.AuditProof, List[str], str]:
        async with arbiter.AsyncClient(url, os.environ["ARBITER_READER_KEY"], timeout=10) as ac:
            return (await ac.audit_key(), await ac.audit_checkpoint(),
                    await ac.audit_proof(logged.entry.id, size=logged.proof.tree_size),
                    await ac.audit_consistency(1, logged.proof.tree_size),
                    await ac.audit_export(NS, since=logged.entry.recorded_at))

    key, note, proof, consistency, bundle = asyncio.run(main())
    assert key.startswith(ORIGIN + "+")
    assert _note(note).size >= logged.proof.tree_size
    assert proof == logged.proof
    assert isinstance(consistency, list)
    assert logged.entry.id in [json.loads(line)["entry"]["id"] for line in bundle.splitlines()[1:]]
