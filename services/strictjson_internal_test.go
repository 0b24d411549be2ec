package services

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/gowebpki/jcs"
	"github.com/stretchr/testify/require"
)

// FuzzRepeatedName holds repeatedName to RFC 8785's parser (the one the
// fingerprints use), which refuses a repeated name at any depth: whatever
// the document, both find a repeat or neither does.
func FuzzRepeatedName(f *testing.F) {
	for _, s := range []string{
		`{"a":1,"a":2}`, `{"a":1,"\u0061":2}`, `{"":1,"":2}`, `{"":1,"a":2}`, `{"x":[{"id":1,"id":1}]}`,
		`{"a":{"a":{"a":1}},"b":[{"a":1},{"a":2}]}`, `[{"a":1},{"a":1}]`, `{"a":"\"a\":1,\"a\""}`,
		`{"a":[],"a":{}}`, `{"b":{"c":1},"d":[1,{"c":2,"e":3}],"c":4}`, `1`, `"a:b:c"`, `{"entr\u0069es":1,"entries":2}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if !json.Valid(raw) {
			return
		}
		name, got := repeatedName(raw)
		_, err := jcs.Transform(raw)
		switch {
		case err != nil && strings.Contains(err.Error(), "Duplicate key"):
			require.True(t, got, "%s repeats a name", raw)
		case err == nil:
			require.False(t, got, "%s repeats no name, yet %q", raw, name)
		}
	})
}
