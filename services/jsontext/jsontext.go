// Package jsontext reads JSON texts without decoding them into values: the
// canonical form that fingerprints and keys are computed over, and the shape
// (depth, number of values) that the ledger limits. It is shared by the
// ledger and by agents of it (the MCP gateway), so both compute one
// canonical form.
package jsontext

import (
	"bytes"
	"fmt"
	"strconv"

	"github.com/gowebpki/jcs"
)

// Canonical returns the canonical form of a JSON document: RFC 8785
// (keys sorted, numbers in their shortest form, no insignificant
// whitespace), except that an integer written with 16 or more digits is
// kept exactly as written. RFC 8785 reads every number as an IEEE double,
// so 12345678901234567890 and 12345678901234567891 (an amount in minor
// units, an id) would have one canonical form and one fingerprint, and a
// changed amount would not be key_reused. Two documents that mean the same
// have the same canonical bytes; the same integer written with an exponent
// or a fraction (1.2e19) is a different document.
func Canonical(doc []byte) ([]byte, error) {
	protected, bigs := protectBigIntegers(doc)
	out, err := jcs.Transform(protected)
	if err != nil {
		return nil, fmt.Errorf("canonical json: %w", err)
	}
	for i, digits := range bigs {
		out = bytes.Replace(out, []byte(bigPlaceholder(i)), digits, 1)
	}
	return out, nil
}

// minExactDigits is where doubles stop holding every integer exactly
// (2^53 has 16 digits).
const minExactDigits = 16

// protectBigIntegers replaces each integer literal of minExactDigits or
// more digits outside strings by a placeholder string that no stored
// document can contain (it holds NUL, which entries refuse), and returns
// the literals in order. A document that holds an escaped NUL already is
// returned unchanged.
func protectBigIntegers(doc []byte) ([]byte, [][]byte) {
	if bytes.Contains(doc, []byte(`\u0000`)) {
		return doc, nil
	}
	var out []byte
	var bigs [][]byte
	last := 0
	for i := 0; i < len(doc); i++ {
		switch c := doc[i]; {
		case c == '"':
			for i++; i < len(doc) && doc[i] != '"'; i++ {
				if doc[i] == '\\' {
					i++
				}
			}
		case c == '-' || (c >= '0' && c <= '9'):
			start := i
			for i+1 < len(doc) && !endsScalar(doc[i+1]) {
				i++
			}
			tok := doc[start : i+1]
			digits := len(tok)
			if tok[0] == '-' {
				digits--
			}
			if digits < minExactDigits || bytes.ContainsAny(tok, ".eE") {
				continue
			}
			out = append(append(out, doc[last:start]...), bigPlaceholder(len(bigs))...)
			bigs = append(bigs, tok)
			last = i + 1
		}
	}
	if bigs == nil {
		return doc, nil
	}
	return append(out, doc[last:]...), bigs
}

// bigPlaceholder is the JSON string standing for the i-th big integer, as
// both the input and RFC 8785's output spell it.
func bigPlaceholder(i int) string {
	return `"\u0000` + strconv.Itoa(i) + `\u0000"`
}

// Shape measures a well-formed JSON text without decoding it: how deep
// its arrays and objects nest, and how many values it holds (every
// container, scalar and object key counts one).
func Shape(raw []byte) (depth, values int) {
	cur := 0
	for i := 0; i < len(raw); i++ {
		switch c := raw[i]; c {
		case '{', '[':
			cur++
			values++
			depth = max(depth, cur)
		case '}', ']':
			cur--
		case '"':
			values++
			for i++; i < len(raw) && raw[i] != '"'; i++ {
				if raw[i] == '\\' {
					i++
				}
			}
		case 't', 'f', 'n', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
			values++
			for i+1 < len(raw) && !endsScalar(raw[i+1]) {
				i++
			}
		}
	}
	return depth, values
}

func endsScalar(c byte) bool {
	switch c {
	case ',', ']', '}', ' ', '\t', '\n', '\r', ':':
		return true
	}
	return false
}
