"""Idempotency keys minted from the business identity of an action."""

from __future__ import annotations

import hashlib
import unicodedata
from typing import Union

MAX_KEY_BYTES = 255  # the longest key the server accepts


def key(*parts: Union[str, bytes]) -> str:
    """Derives an idempotency key from what is done, and to what:
    ``key("refund", "order-8812")`` is ``"refund:order-8812"``.

    Derive the key from the thing acted on, never from the attempt, the run
    or the clock: retries, restarts and a second run of the same job must
    all arrive at the same key, so that they collapse into one action.

    Parts are joined with ':'. So that different parts never give the same
    key (``key("a:b", "c")`` versus ``key("a", "b:c")``), a ':' inside a part
    is written %3A, a '%' is written %25, and characters the server refuses
    (control and other non-printable characters, invalid UTF-8) are
    percent-encoded too. A key longer than the 255 bytes the server accepts
    is cut and ends with '~' and a hash of the whole, so it stays unique.
    The rules are shared with the Go and TypeScript SDKs (sdk/vectors.json).
    """
    k = ":".join(_escape(p) for p in parts).encode("utf-8")
    if len(k) <= MAX_KEY_BYTES:
        return k.decode("utf-8")
    tail = b"~" + hashlib.sha256(k).hexdigest()[:32].encode("ascii")
    cut = MAX_KEY_BYTES - len(tail)
    while cut > 0 and 0x80 <= k[cut] <= 0xBF:  # not at the start of a character
        cut -= 1
    return (k[:cut] + tail).decode("utf-8")


def _escape(part: Union[str, bytes]) -> str:
    if isinstance(part, bytes):
        part = part.decode("utf-8", "surrogateescape")
    out = []
    for ch in part:
        if ch in ":%" or not _printable(ch):
            raw = ch.encode("utf-8", "surrogateescape" if "\udc80" <= ch <= "\udcff" else "surrogatepass")
            out.append("".join(f"%{b:02X}" for b in raw))
        else:
            out.append(ch)
    return "".join(out)


def _printable(ch: str) -> bool:
    # Go's unicode.IsPrint: letters, marks, numbers, punctuation, symbols
    # and the ASCII space, and nothing else (no other spaces, no controls).
    return ch == " " or unicodedata.category(ch)[0] in "LMNPS"
