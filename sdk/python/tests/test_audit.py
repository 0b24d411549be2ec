"""The evidence log against the real server: the verifier key, the newest
checkpoint, an entry's inclusion proof (checked here as RFC 6962 says), a
consistency proof and a namespace's bundle."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import os
from datetime import datetime, timedelta, timezone
from typing import List, Optional, Tuple

import pytest

import arbiter
from conftest import eventually


def _root_from_inclusion(index: int, size: int, leaf_hash: bytes, path: List[bytes]) -> Optional[bytes]:
    """The root hash an RFC 6962 inclusion proof leads to (RFC 9162
    2.1.3.2), or None when the proof does not fit the tree."""
    fn, sn, r = index, size - 1, leaf_hash
    for p in path:
        if sn == 0:
            return None
        if fn & 1 or fn == sn:
            r = hashlib.sha256(b"\x01" + p + r).digest()
            if not fn & 1:
                while not fn & 1 and fn != 0:
                    fn >>= 1
                    sn >>= 1
        else:
            r = hashlib.sha256(b"\x01" + r + p).digest()
        fn >>= 1
        sn >>= 1
    return r if sn == 0 else None


def test_audit_round_trip(agent: arbiter.Client, operator: arbiter.Client, uniq: str) -> None:
    res = agent.submit(arbiter.Entry(key=arbiter.key("audit", uniq), type="intent", tool=f"t.audit.{uniq}",
                                     timeout=60))
    assert res.action is not None
    (entry,) = [e for e in operator.entries(res.action.id) if e.type == "intent"]

    def proved() -> Optional[Tuple[str, arbiter.AuditProof]]:
        # The server signs a checkpoint within ~10 s of an entry; until then
        # the checkpoint, or the entry's proof in it, is not found.
        try:
            note = operator.audit_checkpoint()
            size = int(note.split("\n")[1])
            return note, operator.audit_proof(entry.id, size=size)
        except arbiter.APIError as e:
            if e.code == "not_found":
                return None
            raise

    note, proof = eventually(proved, timeout=15, every=0.25, what="a checkpoint with the entry's proof")
    lines = note.split("\n")
    assert lines[0] == "arbiter.local/log"
    assert note.endswith("\n"), "the signed note exactly as sent"
    assert proof.tree_size == int(lines[1])
    assert proof.checkpoint == note
    assert 0 <= proof.log_index < proof.tree_size
    assert isinstance(proof, arbiter.AuditProof) and all(isinstance(h, str) for h in proof.inclusion)
    root = _root_from_inclusion(proof.log_index, proof.tree_size, base64.b64decode(proof.leaf_hash),
                                [base64.b64decode(h) for h in proof.inclusion])
    assert root == base64.b64decode(lines[2]), "the inclusion proof leads to the checkpoint's root hash"
    # Without a size: against the newest checkpoint, which still holds it.
    assert operator.audit_proof(entry.id).log_index == proof.log_index

    # The timeline names the entry's leaf once it joined the log.
    (logged,) = [e for e in operator.entries(res.action.id) if e.id == entry.id]
    assert logged.log_index == proof.log_index

    key = operator.audit_key()
    assert key.startswith("arbiter.local/log+") and key == key.strip()
    assert isinstance(operator.audit_consistency(1, proof.tree_size), list)

    namespace = os.environ.get("ARBITER_NAMESPACE", "sdk")
    bundle = operator.audit_export(namespace)
    first = json.loads(bundle.split("\n", 1)[0])
    assert "checkpoint" in first and "verifier_key" in first
    assert first["verifier_key"].strip() == key
    later = operator.audit_export(namespace, since=datetime.now(timezone.utc) + timedelta(hours=1))
    assert len(later.rstrip("\n").split("\n")) == 1, "nothing recorded after since: the first line alone"

    # Agent keys write entries; proofs are for readers, operators and admins.
    with pytest.raises(arbiter.APIError) as e:
        agent.audit_proof(entry.id)
    assert (e.value.code, e.value.status) == ("forbidden", 403)
    with pytest.raises(arbiter.APIError) as e:
        operator.audit_consistency(2, 1)
    assert (e.value.code, e.value.status) == ("invalid", 400)

    async def from_async() -> Tuple[str, arbiter.AuditProof]:
        async with arbiter.AsyncClient(operator.base_url, operator.api_key, timeout=10) as ac:
            return await ac.audit_key(), await ac.audit_proof(entry.id, size=proof.tree_size)

    akey, aproof = asyncio.run(from_async())
    assert (akey, aproof) == (key, proof)
