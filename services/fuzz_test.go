package services_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
)

// Fuzz targets; `make fuzz` runs each for a while, and `go test` replays the
// corpus in testdata/fuzz as regression tests.

// FuzzDecodeEntry: decoding never panics, every failure is an *Error the API
// maps to 400, and what decodes is a fixed point: encoding it and decoding
// again gives the same entry.
func FuzzDecodeEntry(f *testing.F) {
	f.Fuzz(func(t *testing.T, raw []byte) {
		in, err := services.DecodeEntry(raw)
		if err != nil {
			var e *services.Error
			require.True(t, errors.As(err, &e), "not a *services.Error: %T %v", err, err)
			require.Contains(t, []string{services.CodeInvalid, services.CodeInvalidJSON}, e.Code, "%v", err)
			require.NotEmpty(t, e.Message)
			return
		}
		again, err := services.DecodeEntry(encode(t, in))
		require.NoError(t, err, "a decoded entry must decode again: %s", encode(t, in))
		require.Equal(t, normalize(t, in), normalize(t, again))
	})
}

// encode writes an entry as a client would, without HTML escaping so that
// sizes do not change.
func encode(t *testing.T, in services.EntryInput) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	require.NoError(t, enc.Encode(in))
	return bytes.TrimSpace(buf.Bytes())
}

// normalize makes two decodings of the same entry comparable: raw JSON is
// compared by its canonical form and times by their instant.
func normalize(t *testing.T, in services.EntryInput) services.EntryInput {
	canon := func(raw json.RawMessage) json.RawMessage {
		if raw == nil {
			return nil
		}
		c, err := services.Canonicalize(raw)
		if err != nil {
			// Numbers beyond float64 have no canonical form; compare compacted.
			var b bytes.Buffer
			require.NoError(t, json.Compact(&b, raw))
			return b.Bytes()
		}
		return c
	}
	in.Params, in.Result = canon(in.Params), canon(in.Result)
	if in.OccurredAt != nil {
		u := in.OccurredAt.UTC()
		in.OccurredAt = &u
	}
	return in
}

// FuzzFingerprint: the fingerprint of params does not depend on key order,
// whitespace, string escapes or the spelling of numbers, and changes when a
// value changes.
func FuzzFingerprint(f *testing.F) {
	f.Fuzz(func(t *testing.T, doc []byte, seed uint64) {
		dec := json.NewDecoder(bytes.NewReader(doc))
		dec.UseNumber()
		var v map[string]any
		if dec.Decode(&v) != nil || v == nil {
			return
		}
		ref, err := services.Canonicalize(write(nil, v, nil))
		if err != nil {
			return // e.g. a number beyond float64, which the ledger refuses anyway
		}
		rng := rand.New(rand.NewPCG(seed, seed>>1|1))
		for range 3 {
			variant := write(nil, v, rng)
			got, err := services.Canonicalize(variant)
			require.NoError(t, err, "variant %s", variant)
			require.Equal(t, string(ref), string(got), "variant %s", variant)
			require.Equal(t, services.Fingerprint("tool", ref), services.Fingerprint("tool", got))
		}
		changed := write(nil, mutate(v, rng), nil)
		other, err := services.Canonicalize(changed)
		require.NoError(t, err, "%s", changed)
		require.NotEqual(t, services.Fingerprint("tool", ref), services.Fingerprint("tool", other), "%s vs %s", ref, changed)
		require.NotEqual(t, services.Fingerprint("tool", ref), services.Fingerprint("tool2", ref))
	})
}

// write serializes v. With rng it shuffles object keys, sprinkles
// whitespace, escapes string characters and respells numbers; without it,
// it writes compact JSON with keys in map order.
func write(b []byte, v any, rng *rand.Rand) []byte {
	ws := func(b []byte) []byte {
		if rng == nil {
			return b
		}
		for range rng.IntN(3) {
			b = append(b, " \t\n\r"[rng.IntN(4)])
		}
		return b
	}
	b = ws(b)
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		if rng != nil {
			rng.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
		}
		b = append(b, '{')
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = writeString(ws(b), k, rng)
			b = append(ws(b), ':')
			b = write(b, x[k], rng)
		}
		b = append(ws(b), '}')
	case []any:
		b = append(b, '[')
		for i, e := range x {
			if i > 0 {
				b = append(b, ',')
			}
			b = write(b, e, rng)
		}
		b = append(ws(b), ']')
	case string:
		b = writeString(b, x, rng)
	case json.Number:
		b = append(b, respell(x, rng)...)
	case bool:
		b = strconv.AppendBool(b, x)
	case nil:
		b = append(b, "null"...)
	}
	return ws(b)
}

func writeString(b []byte, s string, rng *rand.Rand) []byte {
	if rng == nil || rng.IntN(2) == 0 {
		enc, _ := json.Marshal(s)
		return append(b, enc...)
	}
	// Escape every character as \uXXXX (surrogate pairs beyond the BMP).
	b = append(b, '"')
	for _, r := range s {
		if r > 0xffff {
			r -= 0x10000
			b = appendEscape(b, 0xd800+(r>>10))
			b = appendEscape(b, 0xdc00+(r&0x3ff))
			continue
		}
		if r == utf8.RuneError {
			r = 0xfffd
		}
		b = appendEscape(b, r)
	}
	return append(b, '"')
}

func appendEscape(b []byte, r rune) []byte {
	const hex = "0123456789abcdef"
	return append(b, '\\', 'u', hex[r>>12&0xf], hex[r>>8&0xf], hex[r>>4&0xf], hex[r&0xf])
}

// respell writes a number in another notation with the same float64 value.
// An integer of 16 or more digits is kept as written: the canonical form
// keeps such integers exactly, so another spelling is another number.
func respell(n json.Number, rng *rand.Rand) string {
	f, err := n.Float64()
	digits := strings.TrimPrefix(n.String(), "-")
	if rng == nil || err != nil || math.IsInf(f, 0) || (len(digits) >= 16 && !strings.ContainsAny(digits, ".eE")) {
		return n.String()
	}
	switch rng.IntN(3) {
	case 0:
		return strconv.FormatFloat(f, 'e', -1, 64)
	case 1:
		return strconv.FormatFloat(f, 'E', 17, 64)
	}
	return n.String()
}

// mutate returns a copy of v with one value changed so that the documents
// differ whatever canonicalization does.
func mutate(v map[string]any, rng *rand.Rand) map[string]any {
	out := make(map[string]any, len(v)+1)
	keys := make([]string, 0, len(v))
	for k, x := range v {
		out[k] = x
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		out["added"] = true
		return out
	}
	slices.Sort(keys)
	k := keys[rng.IntN(len(keys))]
	switch x := v[k].(type) {
	case string:
		out[k] = x + "x"
	case bool:
		out[k] = !x
	case nil:
		out[k] = false
	case json.Number:
		out[k] = "n" + x.String()
	case []any:
		out[k] = append(slices.Clone(x), nil)
	case map[string]any:
		out[k] = mutate(x, rng)
	}
	return out
}

// FuzzCheckFields holds the ledger's name check, which scans bytes, to a
// reference built on encoding/json's tokenizer: for every input both refuse
// the same name for the same reason, or both accept.
func FuzzCheckFields(f *testing.F) {
	f.Add([]byte(`{"key":"k","type":"intent","params":{"key":1,"KEY":[{"x":"y"}]}}`))
	f.Add([]byte(`{"key":"k","k\u0065y":"again"}`))
	f.Add([]byte(`{"Key":"k"}`))
	f.Add([]byte(`[{"nope":1}]`))
	f.Add([]byte(`{"key":"a\"b","type":"note","message":"{\"x\":1,"}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		got := services.CheckFields(raw, &services.EntryInput{})
		want := referenceCheckFields(raw)
		if want == nil {
			require.NoError(t, got, "%q", raw)
			return
		}
		require.Error(t, got, "%q: the reference refused it: %v", raw, want)
		require.Equal(t, want.Error(), got.Error(), "%q", raw)
	})
}

// referenceCheckFields is CheckFields written with json.Decoder.Token.
func referenceCheckFields(raw []byte) error {
	allowed := map[string]bool{}
	typ := reflect.TypeFor[services.EntryInput]()
	for i := range typ.NumField() {
		name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
		allowed[name] = true
	}
	if !json.Valid(raw) {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil
		}
		name, _ := tok.(string)
		if !allowed[name] {
			return services.Errorf(services.CodeInvalid, "unknown field %q", name)
		}
		if seen[name] {
			return services.Errorf(services.CodeInvalid, "field %q appears more than once", name)
		}
		seen[name] = true
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return nil
		}
	}
	return nil
}
