package services

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/arbiter-ledger/arbiter/services/jsontext"
)

// Canonicalize returns the canonical form of a JSON document
// (jsontext.Canonical: RFC 8785, with integers of 16 or more digits kept as
// written).
func Canonicalize(doc []byte) ([]byte, error) { return jsontext.Canonical(doc) }

// Fingerprint identifies an intent's parameters: SHA-256 over the tool name,
// a NUL byte and the canonical JSON of the params, hex encoded. canonicalParams
// must already be canonical.
func Fingerprint(tool string, canonicalParams []byte) string {
	h := sha256.New()
	h.Write([]byte(tool))
	h.Write([]byte{0})
	h.Write(canonicalParams)
	return hex.EncodeToString(h.Sum(nil))
}
