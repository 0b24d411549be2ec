package services_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/arbiter-ledger/arbiter/services"
	"github.com/arbiter-ledger/arbiter/services/dbtest"
	"github.com/arbiter-ledger/arbiter/services/record"
)

// bigObject returns a JSON object of exactly n bytes.
func bigObject(n int) string {
	const frame = `{"x":""}`
	return `{"x":"` + strings.Repeat("a", n-len(frame)) + `"}`
}

func TestDecodeEntryAcceptsValidEntries(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		raw  string
		want func(t *testing.T, in services.EntryInput)
	}{
		{"minimal intent", `{"key":"k","type":"intent","tool":"t"}`, func(t *testing.T, in services.EntryInput) {
			require.Equal(t, "k", in.Key)
			require.Equal(t, record.TypeIntent, in.Type)
			require.Equal(t, "t", *in.Tool)
			require.Nil(t, in.Effect)
			require.Nil(t, in.Params)
			require.Nil(t, in.Timeout)
		}},
		{"intent with every field", `{"key":"refund:order-8812","type":"intent","tool":"payments.refund","effect":"keyed",
			"params":{"a":1},"timeout":604800,"reference":"order 8812","agent":"bot","run_id":"r1","occurred_at":"2026-11-30T10:00:00+02:00"}`,
			func(t *testing.T, in services.EntryInput) {
				require.Equal(t, record.EffectKeyed, *in.Effect)
				require.JSONEq(t, `{"a":1}`, string(in.Params))
				require.Equal(t, 604800.0, *in.Timeout)
				require.Equal(t, "order 8812", *in.Reference)
				require.Equal(t, "bot", *in.Agent)
				require.Equal(t, "r1", *in.RunID)
				require.Equal(t, "2026-11-30T08:00:00Z", in.OccurredAt.UTC().Format("2006-01-02T15:04:05Z07:00"))
			}},
		{"key of 255 bytes", fmt.Sprintf(`{"key":%q,"type":"intent","tool":"t"}`, strings.Repeat("k", 255)), func(t *testing.T, in services.EntryInput) {
			require.Len(t, in.Key, 255)
		}},
		{"key with spaces and non-ASCII letters", `{"key":"réfund: 注文 8812","type":"intent","tool":"t"}`, func(t *testing.T, in services.EntryInput) {
			require.Equal(t, "réfund: 注文 8812", in.Key)
		}},
		{"tool of 128 characters", fmt.Sprintf(`{"key":"k","type":"intent","tool":%q}`, strings.Repeat("é", 128)), nil},
		{"timeout 1", `{"key":"k","type":"intent","tool":"t","timeout":1}`, nil},
		{"fractional timeout", `{"key":"k","type":"heartbeat","attempt":1,"timeout":1.5}`, nil},
		{"params null", `{"key":"k","type":"intent","tool":"t","params":null}`, nil},
		{"params of exactly 64 KiB", `{"key":"k","type":"intent","tool":"t","params":` + bigObject(services.MaxJSONBytes) + `}`, nil},
		{"params with an escaped surrogate pair", `{"key":"k","type":"intent","tool":"t","params":{"e":"\ud83d\ude00","b":"\\u0000"}}`, nil},
		{"each effect", `{"key":"k","type":"intent","tool":"t","effect":"read_only"}`, nil},
		{"heartbeat", `{"key":"k","type":"heartbeat","attempt":2147483647}`, nil},
		{"succeeded with any JSON result", `{"key":"k","type":"succeeded","attempt":1,"result":[1,"two",null],"external_ref":"re_1"}`, nil},
		{"failed", `{"key":"k","type":"failed","attempt":1,"error":"boom","retriable":false}`, nil},
		{"compensated", `{"key":"k","type":"compensated","attempt":1,"external_ref":"rev_1"}`, nil},
		{"note with attempt", `{"key":"k","type":"note","attempt":3,"message":"hello\nworld"}`, nil},
		{"surrounding whitespace", " \n" + `{"key":"k","type":"note","message":"m"}` + "\n ", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			in, err := services.DecodeEntry([]byte(tc.raw))
			require.NoError(t, err)
			if tc.want != nil {
				tc.want(t, in)
			}
		})
	}
}

// TestDecodeEntryRejectsBadInput: every bad entry is refused with its code
// and a message that names the field at fault.
func TestDecodeEntryRejectsBadInput(t *testing.T) {
	t.Parallel()
	const (
		inv = services.CodeInvalid
		syn = services.CodeInvalidJSON
	)
	intentWith := func(extra string) string { return `{"key":"k","type":"intent","tool":"t"` + extra + `}` }
	cases := []struct {
		name string
		raw  string
		code string
		says string // the message names this (the field at fault)
	}{
		// Not JSON, or not one object.
		{"empty body", ``, syn, "JSON"},
		{"truncated", `{"key":"k","type":`, syn, "JSON"},
		{"missing comma", `{"key":"k" "type":"note"}`, syn, "JSON"},
		{"single quotes", `{'key':'k'}`, syn, "JSON"},
		{"trailing data", `{"key":"k","type":"note","message":"m"} {}`, inv, "after the entry"},
		{"array", `[{"key":"k"}]`, inv, "object"},
		{"string", `"k"`, inv, "object"},

		// Unknown fields and wrong types.
		{"unknown field", `{"key":"k","type":"note","mesage":"m"}`, inv, `"mesage"`},
		{"key as number", `{"key":42,"type":"note","message":"m"}`, inv, `"key"`},
		{"type as bool", `{"key":"k","type":true}`, inv, `"type"`},
		{"attempt as string", `{"key":"k","type":"heartbeat","attempt":"1"}`, inv, `"attempt"`},
		{"attempt 1.5", `{"key":"k","type":"heartbeat","attempt":1.5}`, inv, `"attempt"`},
		{"attempt 1e400", `{"key":"k","type":"heartbeat","attempt":1e400}`, inv, `"attempt"`},
		{"timeout as string", intentWith(`,"timeout":"60"`), inv, `"timeout"`},
		{"retriable as string", `{"key":"k","type":"failed","attempt":1,"error":"e","retriable":"yes"}`, inv, `"retriable"`},
		{"tool as object", `{"key":"k","type":"intent","tool":{}}`, inv, `"tool"`},
		{"occurred_at not a time", `{"key":"k","type":"note","message":"m","occurred_at":"yesterday"}`, inv, `"occurred_at"`},
		{"occurred_at as number", `{"key":"k","type":"note","message":"m","occurred_at":1700000000}`, inv, `"occurred_at"`},

		// Keys.
		{"missing key", `{"type":"note","message":"m"}`, inv, `"key"`},
		{"empty key", `{"key":"","type":"note","message":"m"}`, inv, `"key"`},
		{"key of 256 bytes", fmt.Sprintf(`{"key":%q,"type":"note","message":"m"}`, strings.Repeat("k", 256)), inv, `"key"`},
		{"key of 256 bytes in 2-byte letters", fmt.Sprintf(`{"key":%q,"type":"note","message":"m"}`, strings.Repeat("é", 128)), inv, `"key"`},
		{"key with NUL", `{"key":"a\u0000b","type":"note","message":"m"}`, inv, `"key"`},
		{"key with newline", `{"key":"a\nb","type":"note","message":"m"}`, inv, `"key"`},
		{"key with tab", `{"key":"a\tb","type":"note","message":"m"}`, inv, `"key"`},
		{"key with DEL", `{"key":"a\u007fb","type":"note","message":"m"}`, inv, `"key"`},
		{"key with C1 control", `{"key":"a\u0085b","type":"note","message":"m"}`, inv, `"key"`},
		{"key with zero-width space", `{"key":"a\u200bb","type":"note","message":"m"}`, inv, `"key"`},
		{"key with invalid UTF-8", "{\"key\":\"a\xffb\",\"type\":\"note\",\"message\":\"m\"}", inv, `"key"`},
		{"key with a lone surrogate escape", `{"key":"a\ud800b","type":"note","message":"m"}`, inv, `"key"`},

		// Types and per-type required fields.
		{"missing type", `{"key":"k"}`, inv, `"type"`},
		{"unknown type", `{"key":"k","type":"intnt"}`, inv, `type "intnt"`},
		{"intent without tool", `{"key":"k","type":"intent"}`, inv, `"tool"`},
		{"intent with empty tool", `{"key":"k","type":"intent","tool":""}`, inv, `"tool"`},
		{"tool of 129 characters", fmt.Sprintf(`{"key":"k","type":"intent","tool":%q}`, strings.Repeat("t", 129)), inv, `"tool"`},
		{"tool with newline", `{"key":"k","type":"intent","tool":"a\nb"}`, inv, `"tool"`},
		{"heartbeat without attempt", `{"key":"k","type":"heartbeat"}`, inv, `"attempt"`},
		{"succeeded without attempt", `{"key":"k","type":"succeeded"}`, inv, `"attempt"`},
		{"failed without attempt", `{"key":"k","type":"failed","error":"e"}`, inv, `"attempt"`},
		{"compensated without attempt", `{"key":"k","type":"compensated"}`, inv, `"attempt"`},
		{"attempt 0", `{"key":"k","type":"succeeded","attempt":0}`, inv, `"attempt"`},
		{"attempt negative", `{"key":"k","type":"succeeded","attempt":-1}`, inv, `"attempt"`},
		{"attempt beyond 32 bits", `{"key":"k","type":"succeeded","attempt":2147483648}`, inv, `"attempt"`},
		{"note attempt 0", `{"key":"k","type":"note","attempt":0,"message":"m"}`, inv, `"attempt"`},
		{"failed without error", `{"key":"k","type":"failed","attempt":1}`, inv, `"error"`},
		{"failed with empty error", `{"key":"k","type":"failed","attempt":1,"error":""}`, inv, `"error"`},
		{"failed with NUL in error", `{"key":"k","type":"failed","attempt":1,"error":"a\u0000b"}`, inv, `"error"`},
		{"note without message", `{"key":"k","type":"note"}`, inv, `"message"`},
		{"note with empty message", `{"key":"k","type":"note","message":""}`, inv, `"message"`},
		{"note with NUL in message", `{"key":"k","type":"note","message":"\u0000"}`, inv, `"message"`},

		// Params, result and the lease.
		{"params over 64 KiB", intentWith(`,"params":` + bigObject(services.MaxJSONBytes+1)), inv, `"params"`},
		{"params an array", intentWith(`,"params":[1,2]`), inv, `"params"`},
		{"params a string", intentWith(`,"params":"a=1"`), inv, `"params"`},
		{"params a number", intentWith(`,"params":1`), inv, `"params"`},
		{"params with NUL", intentWith(`,"params":{"a":"x\u0000"}`), inv, `"params"`},
		{"params with NUL in a name", intentWith(`,"params":{"\u0000":1}`), inv, `"params"`},
		{"params with a lone surrogate", intentWith(`,"params":{"a":"\udc00"}`), inv, `"params"`},
		{"params with a high surrogate alone", intentWith(`,"params":{"a":"\ud800x"}`), inv, `"params"`},
		{"params with invalid UTF-8", intentWith(",\"params\":{\"a\":\"\xc3\x28\"}"), inv, `"params"`},
		{"result over 64 KiB", `{"key":"k","type":"succeeded","attempt":1,"result":` + bigObject(services.MaxJSONBytes+1) + `}`, inv, `"result"`},
		{"result with NUL", `{"key":"k","type":"succeeded","attempt":1,"result":"\u0000"}`, inv, `"result"`},
		{"timeout 0", intentWith(`,"timeout":0`), inv, `"timeout"`},
		{"timeout 604801", intentWith(`,"timeout":604801`), inv, `"timeout"`},
		{"timeout negative", intentWith(`,"timeout":-5`), inv, `"timeout"`},
		{"heartbeat timeout 0", `{"key":"k","type":"heartbeat","attempt":1,"timeout":0}`, inv, `"timeout"`},
		{"unknown effect", intentWith(`,"effect":"maybe"`), inv, `effect "maybe"`},
		{"empty effect", intentWith(`,"effect":""`), inv, `effect ""`},

		// Labels.
		{"agent with newline", `{"key":"k","type":"note","message":"m","agent":"a\nb"}`, inv, `"agent"`},
		{"agent of 256 bytes", fmt.Sprintf(`{"key":"k","type":"note","message":"m","agent":%q}`, strings.Repeat("a", 256)), inv, `"agent"`},
		{"run_id with NUL", `{"key":"k","type":"note","message":"m","run_id":"\u0000"}`, inv, `"run_id"`},
		{"reference over 1024 bytes", intentWith(fmt.Sprintf(`,"reference":%q`, strings.Repeat("r", 1025))), inv, `"reference"`},
		{"external_ref with control character", `{"key":"k","type":"succeeded","attempt":1,"external_ref":"a\u0007"}`, inv, `"external_ref"`},

		// Fields that do not apply to the type.
		{"attempt on intent", intentWith(`,"attempt":1`), inv, `"attempt"`},
		{"message on intent", intentWith(`,"message":"m"`), inv, `"message"`},
		{"result on intent", intentWith(`,"result":{}`), inv, `"result"`},
		{"params on heartbeat", `{"key":"k","type":"heartbeat","attempt":1,"params":{}}`, inv, `"params"`},
		{"tool on succeeded", `{"key":"k","type":"succeeded","attempt":1,"tool":"t"}`, inv, `"tool"`},
		{"timeout on succeeded", `{"key":"k","type":"succeeded","attempt":1,"timeout":5}`, inv, `"timeout"`},
		{"error on succeeded", `{"key":"k","type":"succeeded","attempt":1,"error":"e"}`, inv, `"error"`},
		{"retriable on succeeded", `{"key":"k","type":"succeeded","attempt":1,"retriable":true}`, inv, `"retriable"`},
		{"result on failed", `{"key":"k","type":"failed","attempt":1,"error":"e","result":{}}`, inv, `"result"`},
		{"external_ref on failed", `{"key":"k","type":"failed","attempt":1,"error":"e","external_ref":"x"}`, inv, `"external_ref"`},
		{"result on compensated", `{"key":"k","type":"compensated","attempt":1,"result":{}}`, inv, `"result"`},
		{"effect on note", `{"key":"k","type":"note","message":"m","effect":"keyed"}`, inv, `"effect"`},
		{"reference on note", `{"key":"k","type":"note","message":"m","reference":"r"}`, inv, `"reference"`},
		{"message on heartbeat", `{"key":"k","type":"heartbeat","attempt":1,"message":"m"}`, inv, `"message"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := services.DecodeEntry([]byte(tc.raw))
			e, ok := services.AsError(err)
			require.True(t, ok, "want an *Error, got %v", err)
			require.Equal(t, tc.code, e.Code, e.Message)
			require.Contains(t, e.Message, tc.says)
			require.ErrorIs(t, err, &services.Error{Code: tc.code})
		})
	}
}

// TestBadInputIsRejectedNotFailed sends entries that are well-formed JSON but
// that a database might refuse, among good entries of the same request: each
// bad one is answered rejected / invalid, the database never fails and the
// others are applied.
func TestBadInputIsRejectedNotFailed(t *testing.T) {
	t.Parallel()
	bad := []string{
		`{"key":"k","type":"succeeded","attempt":2147483648}`,
		`{"key":"k","type":"failed","attempt":1,"error":"nul \u0000 byte"}`,
		`{"key":"k","type":"note","message":"\u0000"}`,
		`{"key":"k","type":"succeeded","attempt":1,"result":{"a":"\u0000"}}`,
		`{"key":"k","type":"succeeded","attempt":1,"result":{"a":"\udfff"}}`,
		`{"key":"k2","type":"intent","tool":"t","params":{"a":"\u0000"}}`,
		`{"key":"k2","type":"intent","tool":"t","params":{"a":"\ud800"}}`,
		"{\"key\":\"k\xff\",\"type\":\"intent\",\"tool\":\"t\"}",
	}
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		f := newFixture(t, st, FixtureOpts{})
		raws := append([]string{intentK}, bad...)
		raws = append(raws, succeeded1)
		res := submitAll(t, f.l, f.agent, raws...)
		require.Equal(t, record.OutcomeProceed, res[0].Outcome)
		for i := range bad {
			r := res[i+1]
			require.Equal(t, record.OutcomeRejected, r.Outcome, "entry %s", bad[i])
			require.Equal(t, services.CodeInvalid, r.Error.Code, "entry %s: %s", bad[i], r.Error.Message)
		}
		require.Equal(t, record.OutcomeRecorded, res[len(res)-1].Outcome)
		require.Equal(t, []record.EntryType{"intent", "succeeded"}, entryTypes(f.entries(t, res[0].Action.ID)))
		_, err := f.l.ActionByKey(context.Background(), f.agent, "", "k2")
		require.ErrorIs(t, err, services.ErrNotFound)
	})
}

// TestInvalidUTF8KeysDoNotCollide: two keys that differ only in invalid bytes
// must not become the same action.
func TestInvalidUTF8KeysDoNotCollide(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, st *services.Store) {
		f := newFixture(t, st, FixtureOpts{})
		a := submit(t, f.l, f.agent, "{\"key\":\"order-\xff\",\"type\":\"intent\",\"tool\":\"t\"}")
		b := submit(t, f.l, f.agent, "{\"key\":\"order-\xfe\",\"type\":\"intent\",\"tool\":\"t\"}")
		for _, r := range []services.EntryResult{a, b} {
			require.Equal(t, record.OutcomeRejected, r.Outcome)
			require.Equal(t, services.CodeInvalid, r.Error.Code)
		}
		page, err := f.l.List(context.Background(), f.agent, services.ActionFilter{})
		require.NoError(t, err)
		require.Empty(t, page.Actions)
	})
}

func TestDecisionInputValidate(t *testing.T) {
	t.Parallel()
	ptr := func(n int) *int { return &n }
	str := func(s string) *string { return &s }
	long := strings.Repeat("a", services.MaxReasonBytes+1)
	bigResult := json.RawMessage(`"` + strings.Repeat("a", services.MaxJSONBytes) + `"`)
	cases := []struct {
		name  string
		d     services.DecisionInput
		field string // named in the message; "" when valid
	}{
		{"confirm", services.DecisionInput{Decision: "confirm", Reason: "r"}, ""},
		{"confirm with evidence", services.DecisionInput{Decision: "confirm", Reason: "r", ExternalRef: str("re_1"), Result: json.RawMessage(`{"a":1}`), ExpectedVersion: ptr(1)}, ""},
		{"retry acknowledged", services.DecisionInput{Decision: "retry", Reason: "r", AcknowledgeDuplicateRisk: true}, ""},
		{"reason at the limit", services.DecisionInput{Decision: "abandon", Reason: long[1:]}, ""},
		{"missing decision", services.DecisionInput{Reason: "r"}, "decision"},
		{"unknown decision", services.DecisionInput{Decision: "Confirm", Reason: "r"}, "Confirm"},
		{"missing reason", services.DecisionInput{Decision: "abandon"}, "reason"},
		{"blank reason", services.DecisionInput{Decision: "abandon", Reason: "   "}, "reason"},
		{"reason too long", services.DecisionInput{Decision: "abandon", Reason: long}, "reason"},
		{"reason not UTF-8", services.DecisionInput{Decision: "abandon", Reason: "bad \xff"}, "reason"},
		{"reason with NUL", services.DecisionInput{Decision: "abandon", Reason: "bad \x00 byte"}, "reason"},
		{"expected_version 0", services.DecisionInput{Decision: "abandon", Reason: "r", ExpectedVersion: ptr(0)}, "expected_version"},
		{"expected_version negative", services.DecisionInput{Decision: "abandon", Reason: "r", ExpectedVersion: ptr(-3)}, "expected_version"},
		{"result too large", services.DecisionInput{Decision: "confirm", Reason: "r", Result: bigResult}, "result"},
		{"result with NUL", services.DecisionInput{Decision: "confirm", Reason: "r", Result: json.RawMessage(`{"a":"\u0000"}`)}, "result"},
		{"result not JSON", services.DecisionInput{Decision: "confirm", Reason: "r", Result: json.RawMessage(`{"a":`)}, "result"},
		{"external_ref on retry", services.DecisionInput{Decision: "retry", Reason: "r", ExternalRef: str("x")}, "external_ref"},
		{"result on abandon", services.DecisionInput{Decision: "abandon", Reason: "r", Result: json.RawMessage(`1`)}, "result"},
		{"external_ref with control character", services.DecisionInput{Decision: "confirm", Reason: "r", ExternalRef: str("a\nb")}, "external_ref"},
		{"acknowledgement on confirm", services.DecisionInput{Decision: "confirm", Reason: "r", AcknowledgeDuplicateRisk: true}, "acknowledge_duplicate_risk"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.d.Validate()
			if tc.field == "" {
				require.NoError(t, err)
				return
			}
			e, ok := services.AsError(err)
			require.True(t, ok, "error %v", err)
			require.Equal(t, services.CodeInvalid, e.Code)
			require.Contains(t, e.Message, tc.field)
		})
	}
}

// TestDecodeEntryExactFieldNames: field names are matched exactly and only
// once, so a typo in case or a repeated field is refused, not guessed at.
func TestDecodeEntryExactFieldNames(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{
		`{"KEY":"k","type":"intent","tool":"t"}`,
		`{"key":"k","Type":"intent","tool":"t"}`,
		`{"key":"a","key":"b","type":"intent","tool":"t"}`,
	} {
		_, err := services.DecodeEntry([]byte(raw))
		e, ok := services.AsError(err)
		require.True(t, ok, raw)
		require.Equal(t, services.CodeInvalid, e.Code, raw)
	}
	_, err := services.DecodeEntry([]byte(`{"key":"k","type":"intent","tool":"t","params":{"KEY":1}}`))
	require.NoError(t, err, "names inside params are the agent's own")
}
