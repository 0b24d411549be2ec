#!/usr/bin/env python3
"""A bundle verifier written from SPEC "Evidence: a ledger that proves
itself" alone, with nothing of Arbiter's code: the C2SP signed note and
checkpoint formats, Ed25519 (the `cryptography` package, pinned in
requirements.txt beside this file) and RFC 6962's hashes.

Usage: verify_bundle.py BUNDLE VERIFIER_KEY
Exit 0 when the checkpoint is signed by the key and every line's leaf is
in its tree; 1 naming the first bad line."""

from __future__ import annotations

import base64
import hashlib
import json
import sys

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey


class Bad(Exception):
    pass


def parse_key(vkey: str) -> tuple[str, bytes, Ed25519PublicKey]:
    name, key_hash, b64 = vkey.split("+", 2)
    raw = base64.b64decode(b64)
    if len(raw) != 33 or raw[0] != 1:
        raise Bad("the verifier key is not an Ed25519 key")
    want = hashlib.sha256(name.encode() + b"\n" + raw).digest()[:4]
    if want.hex() != key_hash:
        raise Bad("the verifier key's hash does not match its name and key")
    return name, want, Ed25519PublicKey.from_public_bytes(raw[1:])


def open_checkpoint(note: str, vkey: str) -> tuple[int, bytes]:
    name, key_hash, pub = parse_key(vkey)
    text, sep, sigs = note.partition("\n\n")
    if not sep:
        raise Bad("the checkpoint is not a signed note")
    text += "\n"
    signed = False
    for line in sigs.splitlines():
        if not line.startswith("\u2014 "):
            raise Bad("malformed signature line")
        who, sig_b64 = line[2:].split(" ")
        sig = base64.b64decode(sig_b64)
        if who != name or sig[:4] != key_hash:
            continue
        try:
            pub.verify(sig[4:], text.encode())
            signed = True
        except InvalidSignature:
            raise Bad("the checkpoint's signature is wrong")
    if not signed:
        raise Bad("the checkpoint is not signed by the verifier key")
    lines = text.split("\n")
    if lines[0] != name:
        raise Bad("the checkpoint is of another log")
    return int(lines[1]), base64.b64decode(lines[2])


def node(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


def included(index: int, size: int, leaf_hash: bytes, path: list[bytes], root: bytes) -> bool:
    """RFC 9162, 2.1.3.2: verifying an inclusion proof."""
    if index >= size:
        return False
    fn, sn, r = index, size - 1, leaf_hash
    for p in path:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            r = node(p, r)
            if not fn & 1:
                while fn and not fn & 1:
                    fn >>= 1
                    sn >>= 1
        else:
            r = node(r, p)
        fn >>= 1
        sn >>= 1
    return sn == 0 and r == root


def verify(path: str, vkey: str) -> int:
    with open(path, encoding="utf-8") as f:
        lines = [line for line in f.read().split("\n") if line.strip()]
    head = json.loads(lines[0])
    try:
        size, root = open_checkpoint(head["checkpoint"], vkey)
    except (Bad, ValueError, KeyError) as e:
        print(f"line 1 (the checkpoint): {e}")
        return 1
    for n, raw in enumerate(lines[1:], start=2):
        line = json.loads(raw)
        entry = line.get("entry") or {}
        where = f"line {n} (log index {line.get('log_index')}, key {entry.get('key')!r}, seq {entry.get('seq')})"
        leaf = base64.b64decode(line["leaf"])
        if json.loads(leaf) != entry:
            print(f"{where}: the entry is not what the leaf decodes to")
            return 1
        leaf_hash = hashlib.sha256(b"\x00" + leaf).digest()
        proof = [base64.b64decode(h) for h in line["inclusion"]]
        if not included(line["log_index"], size, leaf_hash, proof, root):
            print(f"{where}: not in the checkpoint's tree")
            return 1
    print(f"ok: {len(lines) - 1} entries in the tree of size {size}")
    return 0


if __name__ == "__main__":
    sys.exit(verify(sys.argv[1], sys.argv[2]))
