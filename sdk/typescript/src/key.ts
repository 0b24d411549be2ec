import { sha256 } from "./sha256.js";

/** The longest key the server accepts, in UTF-8 bytes. */
export const MAX_KEY_BYTES = 255;

// Go's unicode.IsPrint: letters, marks, numbers, punctuation, symbols and
// the ASCII space. Every other character (controls, format characters,
// other spaces such as U+00A0) is percent-encoded.
const printable = /^[\p{L}\p{M}\p{N}\p{P}\p{S} ]$/u;

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/**
 * Derives an idempotency key from the business identity of an action:
 * what is done, and to what. `key("refund", "order-8812")` is
 * `"refund:order-8812"`.
 *
 * Derive the key from the thing acted on, never from the attempt, the run
 * or the clock: retries, restarts and a second run of the same job must
 * all arrive at the same key. Include everything that makes two actions
 * different (`key("email", "welcome", customerId)`).
 *
 * Parts are joined with ':'. So that different parts never give the same
 * key, a ':' inside a part is written %3A, a '%' is written %25, and
 * characters the server refuses in keys (non-printable ones, and lone
 * surrogates, which are not valid UTF-8) are percent-encoded byte by byte.
 * A key longer than the 255 bytes the server accepts is cut and ends with
 * '~' and a hash of the whole, so it is still unique. The same rules as the
 * Go and Python SDKs (sdk/vectors.json).
 */
export function key(...parts: string[]): string {
  const k = parts.map(escapePart).join(":");
  const bytes = encoder.encode(k); // k is ASCII-escaped where it was not valid UTF-8
  if (bytes.length <= MAX_KEY_BYTES) return k;
  const tail = "~" + hex(sha256(bytes).subarray(0, 16));
  let cut = MAX_KEY_BYTES - tail.length;
  while (cut > 0 && (bytes[cut]! & 0xc0) === 0x80) cut--; // not inside a character
  return decoder.decode(bytes.subarray(0, cut)) + tail;
}

function escapePart(part: string): string {
  let out = "";
  for (let i = 0; i < part.length; ) {
    const cp = part.codePointAt(i)!;
    const ch = String.fromCodePoint(cp);
    i += ch.length;
    if (cp >= 0xd800 && cp <= 0xdfff) {
      // A lone surrogate: the bytes Go would see for it (WTF-8), escaped.
      out += pct([0xe0 | (cp >> 12), 0x80 | ((cp >> 6) & 0x3f), 0x80 | (cp & 0x3f)]);
    } else if (ch === ":" || ch === "%" || !printable.test(ch)) {
      out += pct(encoder.encode(ch));
    } else {
      out += ch;
    }
  }
  return out;
}

function pct(bytes: ArrayLike<number>): string {
  let s = "";
  for (let i = 0; i < bytes.length; i++) s += "%" + bytes[i]!.toString(16).toUpperCase().padStart(2, "0");
  return s;
}

function hex(bytes: Uint8Array): string {
  let s = "";
  for (const b of bytes) s += b.toString(16).padStart(2, "0");
  return s;
}
