package services

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/arbiter-ledger/arbiter/services/record"
)

// Limits of the wire contract.
const (
	MaxKeyBytes     = 255
	MaxToolChars    = 128
	MaxJSONBytes    = 64 << 10 // params and result, serialized
	MaxTextBytes    = 64 << 10 // error and message
	MaxLabelBytes   = 255      // agent, run_id, external_ref
	MaxReference    = 1024
	MaxBatchEntries = 500
	DefaultTimeout  = 300 * time.Second
	MaxTimeout      = 604800 * time.Second
	// A lookup's lease: 60 seconds unless the entry says, at most an hour.
	DefaultLookupTimeout = 60 * time.Second
	MaxLookupTimeout     = 3600 * time.Second
	// MaxKeyTTL bounds key_ttl: a year.
	MaxKeyTTL = 31536000 * time.Second
	// MaxAttempt is the largest attempt number the database stores.
	MaxAttempt = math.MaxInt32
)

// EntryInput is one ledger entry as an agent sends it. Pointers tell absent
// fields from zero values.
type EntryInput struct {
	Key         string           `json:"key"`
	Type        record.EntryType `json:"type"`
	Tool        *string          `json:"tool,omitempty"`
	Effect      *record.Effect   `json:"effect,omitempty"`
	Params      json.RawMessage  `json:"params,omitempty"`
	Timeout     *float64         `json:"timeout,omitempty"`
	Reference   *string          `json:"reference,omitempty"`
	Agent       *string          `json:"agent,omitempty"`
	RunID       *string          `json:"run_id,omitempty"`
	Attempt     *int             `json:"attempt,omitempty"`
	Result      json.RawMessage  `json:"result,omitempty"`
	ExternalRef *string          `json:"external_ref,omitempty"`
	Error       *string          `json:"error,omitempty"`
	Retriable   *bool            `json:"retriable,omitempty"`
	Message     *string          `json:"message,omitempty"`
	OccurredAt  *time.Time       `json:"occurred_at,omitempty"`
	// RequireApproval holds a first intent for one person's approval.
	RequireApproval *bool `json:"require_approval,omitempty"`
	// KeyTTL is how long the downstream honours the key, in seconds.
	KeyTTL *float64 `json:"key_ttl,omitempty"`
	// Answer and Evidence are what a lookup found.
	Answer   *record.Answer  `json:"answer,omitempty"`
	Evidence json.RawMessage `json:"evidence,omitempty"`
}

// DecodeEntry parses one entry strictly (unknown fields and trailing data are
// rejected) and validates it. Every failure is an *Error with code invalid.
func DecodeEntry(raw []byte) (EntryInput, error) {
	var in EntryInput
	if json.Valid(raw) {
		// The common case, in one pass of each: exact names, then values.
		if err := checkNames(raw, fieldNames(&in)); err != nil {
			return EntryInput{}, err
		}
		if err := json.Unmarshal(raw, &in); err != nil {
			return EntryInput{}, DescribeJSONError(err)
		}
		if err := checkEntryText(raw); err != nil {
			return EntryInput{}, err
		}
		return in, in.Validate()
	}
	// Not well-formed: the decoder finds and describes the problem, which
	// is either in the object or after it.
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return EntryInput{}, DescribeJSONError(err)
	}
	return EntryInput{}, Errorf(CodeInvalid, "unexpected data after the entry object")
}

// checkEntryText refuses text that encoding/json would silently change, or
// that PostgreSQL cannot store, naming the top-level field that holds it.
// Invalid UTF-8 and lone UTF-16 surrogate escapes both decode to U+FFFD, so
// two different keys would become the same action; an escaped NUL is refused
// by jsonb and text columns, and SQLite must not accept what PostgreSQL
// cannot.
func checkEntryText(raw []byte) error {
	return checkJSONText(raw, "the entry")
}

// checkJSONText is checkEntryText for any JSON object; whole names it when
// the problem is in no top-level field.
func checkJSONText(raw []byte, whole string) error {
	problem := textProblem(raw)
	if problem == "" {
		return nil
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(raw, &fields) == nil {
		names := make([]string, 0, len(fields))
		for name := range fields {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, name := range names {
			if p := textProblem(fields[name]); p != "" {
				return Errorf(CodeInvalid, "field %q must not contain %s", name, p)
			}
		}
	}
	return Errorf(CodeInvalid, "%s must not contain %s", whole, problem)
}

// textProblem describes what in a syntactically valid JSON text cannot be
// stored as it was sent, or returns "".
func textProblem(b []byte) string {
	if !utf8.Valid(b) {
		return "invalid UTF-8"
	}
	// Outside strings valid JSON has no backslash, so every one starts an
	// escape.
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' || i+1 >= len(b) {
			continue
		}
		i++
		if b[i] != 'u' || i+4 >= len(b) {
			continue
		}
		r := hex4(b[i+1 : i+5])
		i += 4
		switch {
		case r == 0:
			return `\u0000 (NUL)`
		case utf16.IsSurrogate(r):
			if r < 0xdc00 && i+6 < len(b) && b[i+1] == '\\' && b[i+2] == 'u' {
				if lo := hex4(b[i+3 : i+7]); lo >= 0xdc00 && lo <= 0xdfff {
					i += 6
					continue
				}
			}
			return "a lone UTF-16 surrogate escape"
		}
	}
	return ""
}

func hex4(b []byte) rune {
	n, err := strconv.ParseUint(string(b), 16, 32)
	if err != nil {
		return -1
	}
	return rune(n)
}

// checkJSONField checks a raw JSON field that is stored as it was sent.
func checkJSONField(name string, raw json.RawMessage) error {
	if raw == nil {
		return nil
	}
	if !json.Valid(raw) {
		return Errorf(CodeInvalid, "field %q must be valid JSON", name)
	}
	if p := textProblem(raw); p != "" {
		return Errorf(CodeInvalid, "field %q must not contain %s", name, p)
	}
	// The shape's bounds first: they cap the work of the walk for names.
	if err := checkJSONShape(name, raw); err != nil {
		return err
	}
	if dup, ok := repeatedName(raw); ok {
		return Errorf(CodeInvalid, "field %q repeats the name %q in one object; names must be unique", name, dup)
	}
	return nil
}

// checkText checks a free-text field that is stored in a JSON payload.
func checkText(name string, v string, max int) error {
	if len(v) > max || !utf8.ValidString(v) || strings.ContainsRune(v, 0) {
		return Errorf(CodeInvalid, "field %q must be valid UTF-8 of at most %d bytes, without NUL characters", name, max)
	}
	return nil
}

// DescribeJSONError turns an encoding/json error into an invalid error that
// names the field.
func DescribeJSONError(err error) *Error {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	var pe *time.ParseError
	switch {
	case errors.As(err, &te):
		field := te.Field
		if field == "" {
			return Errorf(CodeInvalid, "expected a JSON object, got %s", te.Value)
		}
		return Errorf(CodeInvalid, "field %q must be %s, got %s", field, jsonTypeName(te.Type.String()), te.Value)
	case errors.As(err, &se):
		return Errorf(CodeInvalidJSON, "malformed JSON at byte %d: %v", se.Offset, se)
	case errors.As(err, &pe):
		return Errorf(CodeInvalid, "field \"occurred_at\" must be an RFC 3339 time: %v", pe)
	case strings.HasPrefix(err.Error(), "Time.UnmarshalJSON"):
		// time.Time's own error does not say which field held it; occurred_at
		// is the only time an entry has.
		return Errorf(CodeInvalid, "field \"occurred_at\" must be an RFC 3339 time in a string")
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return Errorf(CodeInvalidJSON, "malformed JSON: unexpected end of input")
	}
	msg := err.Error()
	if rest, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		return Errorf(CodeInvalid, "unknown field %s", rest)
	}
	return Errorf(CodeInvalid, "%s", strings.TrimPrefix(msg, "json: "))
}

func jsonTypeName(goType string) string {
	switch {
	case goType == "string", goType == "*string":
		return "a string"
	case strings.Contains(goType, "int"):
		return "an integer"
	case strings.Contains(goType, "float"):
		return "a number"
	case strings.Contains(goType, "bool"):
		return "a boolean"
	case strings.Contains(goType, "Time"):
		return "an RFC 3339 time"
	}
	return "of type " + goType
}

// allowed lists, per type, the optional fields besides key, type, agent,
// run_id and occurred_at.
var allowedFields = map[record.EntryType][]string{
	record.TypeIntent:             {"tool", "effect", "params", "timeout", "reference", "require_approval", "key_ttl"},
	record.TypeHeartbeat:          {"attempt", "timeout"},
	record.TypeSucceeded:          {"attempt", "result", "external_ref"},
	record.TypeFailed:             {"attempt", "error", "retriable"},
	record.TypeOutcomeUnknown:     {"attempt", "error"},
	record.TypeCompensated:        {"attempt", "external_ref"},
	record.TypeNote:               {"attempt", "message"},
	record.TypeLookup:             {"attempt", "timeout"},
	record.TypeLookupResult:       {"attempt", "answer", "evidence", "external_ref", "result"},
	record.TypeCompensationFailed: {"attempt", "error", "retriable"},
}

// Validate checks the rules of SPEC's entry table ("Agent wire contract",
// POST /v1/entries).
func (in *EntryInput) Validate() error {
	if err := ValidateKey(in.Key); err != nil {
		return err
	}
	allowed, ok := allowedFields[in.Type]
	if !ok {
		if in.Type == "" {
			return Errorf(CodeInvalid, "field \"type\" is required: one of %s", ListOrNone(record.AgentEntryTypes))
		}
		return Errorf(CodeInvalid, "unknown type %q: use one of %s", in.Type, ListOrNone(record.AgentEntryTypes))
	}
	// Every optional field, in the order in which the first one that does
	// not apply is named.
	present := [...]struct {
		name string
		set  bool
	}{
		{"tool", in.Tool != nil}, {"effect", in.Effect != nil}, {"params", in.Params != nil},
		{"timeout", in.Timeout != nil}, {"reference", in.Reference != nil},
		{"require_approval", in.RequireApproval != nil}, {"key_ttl", in.KeyTTL != nil},
		{"attempt", in.Attempt != nil}, {"answer", in.Answer != nil}, {"evidence", in.Evidence != nil},
		{"result", in.Result != nil}, {"external_ref", in.ExternalRef != nil}, {"error", in.Error != nil},
		{"retriable", in.Retriable != nil}, {"message", in.Message != nil},
	}
	for _, f := range present {
		if f.set && !slices.Contains(allowed, f.name) {
			return Errorf(CodeInvalid, "field %q does not apply to %s entries", f.name, in.Type)
		}
	}
	if err := checkLabel("agent", in.Agent, MaxLabelBytes); err != nil {
		return err
	}
	if err := checkLabel("run_id", in.RunID, MaxLabelBytes); err != nil {
		return err
	}
	if err := checkLabel("external_ref", in.ExternalRef, MaxLabelBytes); err != nil {
		return err
	}
	if err := checkLabel("reference", in.Reference, MaxReference); err != nil {
		return err
	}
	if in.Timeout != nil {
		t, max := *in.Timeout, MaxTimeout
		if in.Type == record.TypeLookup {
			max = MaxLookupTimeout
		}
		if t < 1 || t > max.Seconds() {
			return Errorf(CodeInvalid, "field \"timeout\" must be between 1 and %d seconds for %s entries, got %v", int(max.Seconds()), in.Type, t)
		}
	}
	if in.KeyTTL != nil {
		if t := *in.KeyTTL; t < 1 || t > MaxKeyTTL.Seconds() {
			return Errorf(CodeInvalid, "field \"key_ttl\" must be between 1 and %d seconds, got %v", int(MaxKeyTTL.Seconds()), t)
		}
	}
	if in.Type != record.TypeIntent && in.Type != record.TypeNote {
		if in.Attempt == nil {
			return Errorf(CodeInvalid, "field \"attempt\" is required for %s entries", in.Type)
		}
	}
	if in.Attempt != nil && (*in.Attempt < 1 || *in.Attempt > MaxAttempt) {
		return Errorf(CodeInvalid, "field \"attempt\" must be between 1 and %d, got %d", MaxAttempt, *in.Attempt)
	}
	switch in.Type {
	case record.TypeIntent:
		if in.Tool == nil || *in.Tool == "" {
			return Errorf(CodeInvalid, "field \"tool\" is required for intent entries")
		}
		if n := utf8.RuneCountInString(*in.Tool); n > MaxToolChars || !Printable(*in.Tool) {
			return Errorf(CodeInvalid, "field \"tool\" must be 1 to 128 printable characters")
		}
		if in.Effect != nil {
			switch *in.Effect {
			case record.EffectReadOnly, record.EffectIdempotent, record.EffectKeyed, record.EffectUnkeyed:
			default:
				return Errorf(CodeInvalid, "unknown effect %q: use read_only, idempotent, keyed or unkeyed", *in.Effect)
			}
		}
		if in.Params != nil && !bytes.Equal(bytes.TrimSpace(in.Params), []byte("null")) {
			if len(in.Params) > MaxJSONBytes {
				return Errorf(CodeInvalid, "field \"params\" is %d bytes; the limit is %d", len(in.Params), MaxJSONBytes)
			}
			if t := bytes.TrimSpace(in.Params); len(t) == 0 || t[0] != '{' {
				return Errorf(CodeInvalid, "field \"params\" must be a JSON object")
			}
			if err := checkJSONField("params", in.Params); err != nil {
				return err
			}
		}
	case record.TypeSucceeded:
		if len(in.Result) > MaxJSONBytes {
			return Errorf(CodeInvalid, "field \"result\" is %d bytes; the limit is %d", len(in.Result), MaxJSONBytes)
		}
		if err := checkJSONField("result", in.Result); err != nil {
			return err
		}
	case record.TypeLookupResult:
		if in.Answer == nil {
			return Errorf(CodeInvalid, "field \"answer\" is required for lookup_result entries: one of %s", ListOrNone(record.Answers))
		}
		if !in.Answer.Valid() {
			return Errorf(CodeInvalid, "unknown answer %q: use one of %s", *in.Answer, ListOrNone(record.Answers))
		}
		for _, f := range []struct {
			name string
			raw  json.RawMessage
		}{{"evidence", in.Evidence}, {"result", in.Result}} {
			name, raw := f.name, f.raw
			if len(raw) > MaxJSONBytes {
				return Errorf(CodeInvalid, "field %q is %d bytes; the limit is %d", name, len(raw), MaxJSONBytes)
			}
			if err := checkJSONField(name, raw); err != nil {
				return err
			}
		}
	case record.TypeFailed, record.TypeOutcomeUnknown, record.TypeCompensationFailed:
		if in.Error == nil || *in.Error == "" {
			return Errorf(CodeInvalid, "field \"error\" is required for %s entries", in.Type)
		}
		if err := checkText("error", *in.Error, MaxTextBytes); err != nil {
			return err
		}
	case record.TypeNote:
		if in.Message == nil || *in.Message == "" {
			return Errorf(CodeInvalid, "field \"message\" is required for note entries")
		}
		if err := checkText("message", *in.Message, MaxTextBytes); err != nil {
			return err
		}
	}
	return nil
}

// ValidateKey checks an idempotency key: 1–255 bytes of printable UTF-8.
func ValidateKey(key string) error {
	switch {
	case key == "":
		return Errorf(CodeInvalid, "field \"key\" is required and must not be empty")
	case len(key) > MaxKeyBytes:
		return Errorf(CodeInvalid, "field \"key\" is %d bytes; the limit is %d", len(key), MaxKeyBytes)
	case !utf8.ValidString(key):
		return Errorf(CodeInvalid, "field \"key\" must be valid UTF-8")
	case !Printable(key):
		return Errorf(CodeInvalid, "field \"key\" must not contain control or non-printable characters")
	}
	return nil
}

func checkLabel(name string, v *string, max int) error {
	if v == nil {
		return nil
	}
	if len(*v) > max || !utf8.ValidString(*v) || !Printable(*v) {
		return Errorf(CodeInvalid, "field %q must be at most %d bytes of printable UTF-8", name, max)
	}
	return nil
}

// Printable reports whether every rune of s is printable.
func Printable(s string) bool {
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}

// timeout returns the lease the entry asks for.
func (in *EntryInput) timeout() time.Duration {
	if in.Timeout == nil {
		if in.Type == record.TypeLookup {
			return DefaultLookupTimeout
		}
		return DefaultTimeout
	}
	return time.Duration(*in.Timeout * float64(time.Second))
}

func (in *EntryInput) String() string { return fmt.Sprintf("%s %q", in.Type, in.Key) }
