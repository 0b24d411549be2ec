package services

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/gowebpki/jcs"
)

// Canonicalize returns the RFC 8785 canonical form of a JSON document: keys
// sorted, numbers in their shortest form, no insignificant whitespace. Two
// documents that mean the same have the same canonical bytes.
func Canonicalize(doc []byte) ([]byte, error) {
	out, err := jcs.Transform(doc)
	if err != nil {
		return nil, fmt.Errorf("canonical json: %w", err)
	}
	return out, nil
}

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
