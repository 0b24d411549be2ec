package record

import (
	"encoding/json"
	"strconv"
	"time"
)

// Appending an action's JSON by hand: the answer to every entry carries
// its action, and encoding/json's reflection, with the validation and
// compaction of params and result it repeats on every call, was a tenth of
// the server's time on a 100-entry batch. The output is byte for byte what
// json.Marshal gives with HTML escaping (as echo's encoder does); anything
// outside the plain cases below is handed to encoding/json, and
// TestAppendJSONMatchesEncodingJSON and FuzzAppendJSONString hold the two
// together.

// AppendJSON appends a's JSON, as json.Marshal(a) writes it.
func (a *Action) AppendJSON(b []byte) []byte {
	b = append(b, `{"id":`...)
	b = AppendJSONString(b, a.ID)
	b = append(b, `,"namespace":`...)
	b = AppendJSONString(b, a.Namespace)
	b = append(b, `,"key":`...)
	b = AppendJSONString(b, a.Key)
	b = append(b, `,"tool":`...)
	b = AppendJSONString(b, a.Tool)
	b = append(b, `,"effect":`...)
	b = AppendJSONString(b, string(a.Effect))
	b = append(b, `,"status":`...)
	b = AppendJSONString(b, string(a.Status))
	b = append(b, `,"attempt":`...)
	b = strconv.AppendInt(b, int64(a.Attempt), 10)
	b = append(b, `,"version":`...)
	b = strconv.AppendInt(b, int64(a.Version), 10)
	b = append(b, `,"lease_until":`...)
	b = AppendJSONTime(b, a.LeaseUntil)
	b = append(b, `,"reference":`...)
	b = appendOptString(b, a.Reference)
	b = append(b, `,"agent":`...)
	b = appendOptString(b, a.Agent)
	b = append(b, `,"params":`...)
	b = AppendJSONRaw(b, a.Params)
	b = append(b, `,"result":`...)
	b = AppendJSONRaw(b, a.Result)
	b = append(b, `,"external_ref":`...)
	b = appendOptString(b, a.ExternalRef)
	b = append(b, `,"created_at":`...)
	b = AppendJSONTime(b, &a.CreatedAt)
	b = append(b, `,"updated_at":`...)
	b = AppendJSONTime(b, &a.UpdatedAt)
	b = append(b, `,"approval":`...)
	b = appendMarshaled(b, a.Approval, a.Approval == nil)
	b = append(b, `,"reconciliation":`...)
	b = appendMarshaled(b, a.Reconciliation, a.Reconciliation == nil)
	b = append(b, `,"limits":`...)
	b = appendMarshaled(b, a.Limits, a.Limits == nil)
	return append(b, '}')
}

// AppendJSONString appends s as a JSON string, escaped as encoding/json
// escapes it (HTML characters included).
func AppendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return appendMarshaled(b, s, false)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

func appendOptString(b []byte, s *string) []byte {
	if s == nil {
		return append(b, "null"...)
	}
	return AppendJSONString(b, *s)
}

// AppendJSONTime appends t as encoding/json does (RFC 3339 with
// nanoseconds), or null.
func AppendJSONTime(b []byte, t *time.Time) []byte {
	switch {
	case t == nil:
		return append(b, "null"...)
	case t.Year() < 0 || t.Year() > 9999:
		return appendMarshaled(b, t, false)
	}
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"')
}

// AppendJSONRaw appends JSON text as encoding/json writes a RawMessage:
// compacted and HTML-escaped; null when empty. Text that is already compact
// and has no character to escape is appended as it is.
func AppendJSONRaw(b []byte, raw json.RawMessage) []byte {
	if len(raw) == 0 {
		return append(b, "null"...)
	}
	for _, c := range raw {
		if c <= ' ' || c >= 0x7f || c == '<' || c == '>' || c == '&' {
			return appendMarshaled(b, raw, false)
		}
	}
	return append(b, raw...)
}

// appendMarshaled appends what encoding/json makes of v, or null.
func appendMarshaled(b []byte, v any, null bool) []byte {
	if null {
		return append(b, "null"...)
	}
	out, err := json.Marshal(v)
	if err != nil {
		// Only values encoding/json refuses get here (text in params that
		// is not JSON, which the ledger never stores).
		return append(b, "null"...)
	}
	return append(b, out...)
}
