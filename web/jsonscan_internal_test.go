package web

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
)

// splitByDecoding is splitEntries as it was written on encoding/json (a map
// of the top level, then an array of raw messages): the reference the byte
// walk is held to.
func splitByDecoding(body []byte) ([][]byte, bool, error) {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 || trimmed[0] != '{' || !json.Valid(trimmed) {
		return nil, false, services.Errorf(services.CodeInvalidJSON, "not an object")
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(trimmed, &top); err != nil {
		return nil, false, services.DescribeJSONError(err)
	}
	list, ok := top["entries"]
	if !ok {
		return [][]byte{trimmed}, false, nil
	}
	if len(top) > 1 {
		return nil, true, services.Errorf(services.CodeInvalid, "unknown field beside \"entries\"")
	}
	var items []json.RawMessage
	if err := json.Unmarshal(list, &items); err != nil {
		return nil, true, services.Errorf(services.CodeInvalid, "field \"entries\" must be an array of entry objects")
	}
	switch {
	case len(items) == 0:
		return nil, true, services.Errorf(services.CodeInvalid, "empty")
	case len(items) > services.MaxBatchEntries:
		return nil, true, services.Errorf(services.CodeTooManyEntries, "too many")
	}
	raws := make([][]byte, len(items))
	for i, it := range items {
		raws[i] = it
	}
	return raws, true, nil
}

// FuzzSplitEntries holds splitEntries' byte walk to the decoding it
// replaced: the same entries, byte for byte, the same batch flag, and the
// same error code, whatever the body.
func FuzzSplitEntries(f *testing.F) {
	for _, s := range []string{
		`{"key":"k","type":"intent"}`,
		`{"entries":[{"key":"a"},{"key":"b","params":{"entries":[1,"]"]}}]}`,
		` {"entries" : [ {"key":"a\"}"} , 1, "x", null, [2] ] } `,
		`{"entries":[]}`, `{"entries":null}`, `{"entries":{}}`, `{"entries":"x"}`,
		`{"entries":[1],"other":2}`, `{"entri\u0065s":[{"key":"a"}]}`, `{"entries":[1],"entries":[2,3]}`,
		`{"params":{"entries":[1]}}`, `{}`, `{"a":{"b":[{"c":"\\"}]}}`, `{"entries":[-1.5e3,true,false]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		raws, batch, err := splitEntries(body)
		want, wantBatch, wantErr := splitByDecoding(body)
		if wantErr != nil || err != nil {
			require.Error(t, err, "the decoding refused it: %v", wantErr)
			require.Error(t, wantErr, "the decoding took it")
			got, _ := services.AsError(err)
			exp, _ := services.AsError(wantErr)
			if exp.Code != services.CodeInvalidJSON {
				require.Equal(t, exp.Code, got.Code)
				require.Equal(t, wantBatch, batch)
			}
			return
		}
		require.Equal(t, wantBatch, batch)
		require.Len(t, raws, len(want))
		for i := range want {
			require.Equal(t, string(want[i]), string(raws[i]), "entry %d", i)
		}
	})
}
