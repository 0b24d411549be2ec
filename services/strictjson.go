package services

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"
)

// encoding/json matches field names case-insensitively and lets a repeated
// field silently win, so "KEY" or a second "key" would slip past the rule
// that unknown fields are rejected. CheckFields holds an object's top-level
// names to the exact json tags of the struct it is decoded into.

var fieldSets sync.Map // reflect.Type -> map[string]bool

// fieldNames returns the json names of a struct's fields.
func fieldNames(v any) map[string]bool {
	t := reflect.TypeOf(v)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if names, ok := fieldSets.Load(t); ok {
		return names.(map[string]bool)
	}
	names := map[string]bool{}
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			names[name] = true
		}
	}
	fieldSets.Store(t, names)
	return names
}

// CheckFields refuses a JSON object whose top-level names are not exactly
// the json names of v's fields, or that repeats a name. Objects that are not
// well-formed are left to the decoder to describe.
func CheckFields(raw []byte, v any) error {
	if !json.Valid(raw) {
		return nil
	}
	return checkNames(raw, fieldNames(v))
}

// checkNames is CheckFields on a text known to be well-formed JSON. It reads
// only the top level's names, without decoding anything.
func checkNames(raw []byte, allowed map[string]bool) error {
	i := 0
	for i < len(raw) && isSpace(raw[i]) {
		i++
	}
	if i == len(raw) || raw[i] != '{' {
		return nil
	}
	var seenBuf [16]string
	seen := seenBuf[:0]
	depth, wantName := 0, false
	for ; i < len(raw); i++ {
		switch raw[i] {
		case '{', '[':
			depth++
			wantName = depth == 1
		case '}', ']':
			depth--
			if depth == 0 {
				return nil
			}
		case ',':
			wantName = depth == 1
		case '"':
			start := i
			escaped := false
			for i++; raw[i] != '"'; i++ {
				if raw[i] == '\\' {
					escaped = true
					i++
				}
			}
			if !wantName {
				continue
			}
			wantName = false
			name := string(raw[start+1 : i])
			if escaped || !utf8.ValidString(name) {
				// Decoded as encoding/json would: escapes resolved,
				// invalid UTF-8 replaced.
				if err := json.Unmarshal(raw[start:i+1], &name); err != nil {
					return nil
				}
			}
			if !allowed[name] {
				return Errorf(CodeInvalid, "unknown field %q", name)
			}
			if slices.Contains(seen, name) {
				return Errorf(CodeInvalid, "field %q appears more than once", name)
			}
			seen = append(seen, name)
		}
	}
	return nil
}

// repeatedName returns a member name that some object of the well-formed
// JSON text raw repeats, at any depth (escapes resolved, as a decoder
// sees the name), and whether there is one. A document stored as sent
// must not have one: PostgreSQL's jsonb keeps the last of the repeats and
// SQLite the text, so the databases would answer different documents.
func repeatedName(raw []byte) (string, bool) {
	if bytes.Count(raw, []byte{':'}) < 2 {
		return "", false // fewer than two members in all
	}
	type frame struct {
		names      map[string]bool // nil for an array
		expectName bool
	}
	var stack []frame
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	for {
		tok, err := dec.Token()
		if err != nil {
			return "", false
		}
		var top *frame
		if len(stack) > 0 {
			top = &stack[len(stack)-1]
		}
		if name, ok := tok.(string); ok && top != nil && top.expectName {
			if top.names[name] {
				return name, true
			}
			top.names[name], top.expectName = true, false
			continue
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, frame{names: map[string]bool{}, expectName: true})
		case json.Delim('['):
			stack = append(stack, frame{})
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
			if len(stack) > 0 && stack[len(stack)-1].names != nil {
				stack[len(stack)-1].expectName = true
			}
		default: // a scalar value
			if top != nil && top.names != nil {
				top.expectName = true
			}
		}
	}
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// anyJSONFields returns the json names of v's fields that hold any JSON
// value (json.RawMessage or an interface), for which null is a value.
func anyJSONFields(v any) map[string]bool {
	t := reflect.TypeOf(v)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if names, ok := anyJSONSets.Load(t); ok {
		return names.(map[string]bool)
	}
	raw := reflect.TypeFor[json.RawMessage]()
	names := map[string]bool{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name != "" && name != "-" && (f.Type == raw || f.Type.Kind() == reflect.Interface) {
			names[name] = true
		}
	}
	anyJSONSets.Store(t, names)
	return names
}

var anyJSONSets sync.Map // reflect.Type -> map[string]bool

// CheckObject refuses a well-formed JSON text that is not an object, a null
// for a field that has a type of its own, and text that encoding/json would
// silently change or PostgreSQL cannot store (as entries are checked: a
// lone UTF-16 surrogate escape, an escaped NUL). encoding/json decodes null
// as "nothing given", so a body of null would be an empty request and
// {"enabled": null} a silent default; the caller leaves a field out instead.
// Texts that are not well-formed are left to the decoder to describe.
func CheckObject(raw []byte, v any) error {
	if !json.Valid(raw) {
		return nil
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return Errorf(CodeInvalid, "expected a JSON object, got %s", jsonKind(raw))
	}
	if err := checkJSONText(raw, "the body"); err != nil {
		return err
	}
	anyJSON := anyJSONFields(v)
	names := make([]string, 0, len(fields))
	for name, value := range fields {
		if string(value) == "null" && !anyJSON[name] {
			names = append(names, name)
		}
	}
	if len(names) > 0 {
		slices.Sort(names)
		return Errorf(CodeInvalid, "field %q must not be null: leave it out for the default", names[0])
	}
	return nil
}

// jsonKind names the kind of a well-formed JSON text by its first byte.
func jsonKind(raw []byte) string {
	for _, c := range raw {
		switch {
		case isSpace(c):
			continue
		case c == '[':
			return "array"
		case c == '"':
			return "string"
		case c == 't', c == 'f':
			return "bool"
		case c == 'n':
			return "null"
		}
		return "number"
	}
	return "nothing"
}

// DecodeStrict decodes one JSON object into v: its top-level names exactly
// v's (CheckFields), no null for a typed field and nothing but an object
// (CheckObject), no unknown field and nothing after it. Every failure is an
// *Error.
func DecodeStrict(raw []byte, v any) error {
	return decodeStrictWith(raw, v, DescribeJSONError)
}

// decodeStrictWith is DecodeStrict with describe turning a decoding error
// into an *Error; an *Error a field's own UnmarshalJSON returned is kept.
func decodeStrictWith(raw []byte, v any, describe func(error) *Error) error {
	if err := CheckFields(raw, v); err != nil {
		return err
	}
	if err := CheckObject(raw, v); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if e, ok := AsError(err); ok {
			return e
		}
		return describe(err)
	}
	if dec.More() {
		return Errorf(CodeInvalidJSON, "unexpected data after the JSON object")
	}
	return nil
}
