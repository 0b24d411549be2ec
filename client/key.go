package client

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// maxKeyBytes is the longest key the server accepts.
const maxKeyBytes = 255

// Key derives an idempotency key from the business identity of an action:
// what is done, and to what. Key("refund", "order-8812") is
// "refund:order-8812".
//
// Derive the key from the thing acted on, never from the attempt, the run
// or the clock: retries, restarts and a second run for the same job must
// all arrive at the same key, so that they collapse into one action.
// Include everything that makes two actions different (Key("email",
// "welcome", customerID), not Key("email", customerID), if a customer gets
// several kinds of email).
//
// Parts are joined with ':'. So that different parts never give the same
// key (Key("a:b", "c") versus Key("a", "b:c")), a ':' inside a part is
// written %3A, a '%' is written %25, and characters the server refuses in
// keys (control and other non-printable characters, invalid UTF-8) are
// percent-encoded too. A key that would be longer than the 255 bytes the
// server accepts is cut and ends with '~' and a hash of the whole, so it is
// still unique.
func Key(parts ...string) string {
	var b strings.Builder
	for i, p := range parts {
		if i > 0 {
			b.WriteByte(':')
		}
		escapeKeyPart(&b, p)
	}
	return FitKey(b.String())
}

// FitKey returns k if it is at most the 255 bytes the server accepts, else
// k cut at a UTF-8 boundary and ended with '~' and a hash of the whole, so
// that it is still unique. Key applies it; use it for keys built another
// way (from a template).
func FitKey(k string) string {
	if len(k) <= maxKeyBytes {
		return k
	}
	sum := sha256.Sum256([]byte(k))
	tail := "~" + hex.EncodeToString(sum[:16])
	cut := maxKeyBytes - len(tail)
	for cut > 0 && !utf8.RuneStart(k[cut]) {
		cut--
	}
	return k[:cut] + tail
}

func escapeKeyPart(b *strings.Builder, p string) {
	for i := 0; i < len(p); {
		r, size := utf8.DecodeRuneInString(p[i:])
		switch {
		case r == utf8.RuneError && size == 1, r == ':', r == '%', !unicode.IsPrint(r):
			for _, c := range []byte(p[i : i+size]) {
				fmt.Fprintf(b, "%%%02X", c)
			}
		default:
			b.WriteString(p[i : i+size])
		}
		i += size
	}
}
