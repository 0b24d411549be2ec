package record

import (
	"encoding/json"
	"math/rand/v2"
	"testing"
	"time"
)

// weirdStrings are strings encoding/json escapes, or not, in every way it
// has: quotes, backslashes, control characters, HTML characters, U+2028 and
// U+2029, invalid UTF-8, and plain text.
var weirdStrings = []string{
	"", "refund:order-8812", `say "hi"`, `back\slash`, "tab\there", "nl\n", "\x00\x01\x1f\x7f",
	"<script>&amp;</script>", "caf\u00e9 \u65e5\u672c", "line\u2028sep\u2029", "bad\xffutf8\xc3", "\b\f\r",
	"emoji \U0001F600", "x",
}

func pick[T any](r *rand.Rand, v []T) T { return v[r.IntN(len(v))] }

func optString(r *rand.Rand) *string {
	if r.IntN(3) == 0 {
		return nil
	}
	s := pick(r, weirdStrings)
	return &s
}

func randomTime(r *rand.Rand) time.Time {
	t := time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC).Add(time.Duration(r.Int64N(int64(400 * 24 * time.Hour))))
	switch r.IntN(4) {
	case 0:
		return t.Truncate(time.Second)
	case 1:
		return t.Truncate(time.Millisecond)
	case 2:
		return t.In(time.FixedZone("x", 3600*5+1800))
	}
	return t.Truncate(time.Microsecond)
}

var raws = []string{"", `{"amount":1200,"currency":"EUR"}`, `{"note": "with spaces"}`, "{\n \"a\": [1, 2]\n}",
	`{"html":"<b>&</b>"}`, `["caf\u00e9"]`, `null`, `{"line":"\u2028"}`, `1.5e3`, `{"deep":{"x":[true,false,null]}}`}

// TestAppendJSONMatchesEncodingJSON: an action appended by hand is byte for
// byte what json.Marshal writes, over random actions of every shape.
func TestAppendJSONMatchesEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 5000 {
		a := &Action{
			ID: pick(r, weirdStrings), Namespace: pick(r, weirdStrings), Key: pick(r, weirdStrings), Tool: pick(r, weirdStrings),
			Effect: Effect(pick(r, weirdStrings)), Status: Status(pick(r, weirdStrings)),
			Attempt: r.IntN(1 << 20), Version: r.IntN(100) - 1, Reference: optString(r), Agent: optString(r),
			ExternalRef: optString(r), CreatedAt: randomTime(r), UpdatedAt: randomTime(r),
		}
		if raw := pick(r, raws); raw != "" {
			a.Params = json.RawMessage(raw)
		}
		if raw := pick(r, raws); raw != "" {
			a.Result = json.RawMessage(raw)
		}
		if r.IntN(2) == 0 {
			lease := randomTime(r)
			a.LeaseUntil = &lease
		}
		if r.IntN(4) == 0 {
			a.Approval = &Approval{Required: 2, ExpiresAt: randomTime(r), Approvals: []Vote{}, Policies: []PolicyRef{}}
		}
		if r.IntN(4) == 0 {
			at := randomTime(r)
			a.Reconciliation = &Reconciliation{KeyExpiresAt: &at, LookupAttempt: 1}
		}
		want, err := json.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		if got := a.AppendJSON(nil); string(got) != string(want) {
			t.Fatalf("action %d:\n got %s\nwant %s", i, got, want)
		}
	}
}

// FuzzAppendJSONString holds AppendJSONString to json.Marshal for any
// string.
func FuzzAppendJSONString(f *testing.F) {
	for _, s := range weirdStrings {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := AppendJSONString(nil, s); string(got) != string(want) {
			t.Fatalf("got %s, want %s", got, want)
		}
	})
}
