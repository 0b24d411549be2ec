package services

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"sync"
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
	allowed := fieldNames(v)
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil
	}
	seen := make(map[string]bool, 8)
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil
		}
		name, _ := tok.(string)
		if !allowed[name] {
			return Errorf(CodeInvalid, "unknown field %q", name)
		}
		if seen[name] {
			return Errorf(CodeInvalid, "field %q appears more than once", name)
		}
		seen[name] = true
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return nil
		}
	}
	return nil
}
