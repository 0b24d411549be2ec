package client_test

import (
	"encoding/json"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/arbiter-ledger/arbiter/client"
	"github.com/arbiter-ledger/arbiter/services/record"
)

// schemaProp is what the test reads of one property of web/openapi.json.
type schemaProp struct {
	Type  any               `json:"type"`
	Ref   string            `json:"$ref"`
	OneOf []json.RawMessage `json:"oneOf"`
}

// nullable reports whether the property's value may be null: its type
// names null, one of its alternatives is null, or it says nothing of its
// type (any JSON, as an action's result).
func (p schemaProp) nullable() bool {
	switch t := p.Type.(type) {
	case []any:
		return slices.Contains(t, any("null"))
	case string:
		return t == "null"
	}
	for _, o := range p.OneOf {
		var alt schemaProp
		if json.Unmarshal(o, &alt) == nil && alt.nullable() && alt.Type != nil {
			return true
		}
	}
	return p.Ref == "" && len(p.OneOf) == 0
}

// TestTypesHaveTheSchemasFields: each type the SDK reads or sends has
// exactly the properties of its schema in web/openapi.json, so a column
// added to the API and forgotten here (or a field the API never sends)
// fails. Go shows required-ness by omitempty and null by a type that can
// be nil: a required property has no omitempty, an optional one has it,
// a nullable one can be nil, and a required pointer is nullable.
func TestTypesHaveTheSchemasFields(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../web/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Required   []string              `json:"required"`
				Properties map[string]schemaProp `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	for schema, typ := range map[string]reflect.Type{
		"Action":         reflect.TypeFor[client.Action](),
		"Entry":          reflect.TypeFor[client.LedgerEntry](),
		"EntryInput":     reflect.TypeFor[client.Entry](),
		"EntryResult":    reflect.TypeFor[client.Result](),
		"Approval":       reflect.TypeFor[client.Approval](),
		"Actor":          reflect.TypeFor[client.Actor](),
		"Reconciliation": reflect.TypeFor[record.Reconciliation](),
		"LookupAnswer":   reflect.TypeFor[record.LookupAnswer](),
		"Limit":          reflect.TypeFor[client.Limit](),
		"LimitInput":     reflect.TypeFor[client.LimitInput](),
		"LimitUsage":     reflect.TypeFor[client.LimitUsage](),
		"LimitCharge":    reflect.TypeFor[client.LimitCharge](),
		"ApprovalLimit":  reflect.TypeFor[client.ApprovalLimit](),
		"GroupUsage":     reflect.TypeFor[client.GroupUsage](),
		"ErrorDetail":    reflect.TypeFor[client.Error](),
	} {
		s, ok := doc.Components.Schemas[schema]
		if !ok {
			t.Errorf("web/openapi.json has no schema %s", schema)
			continue
		}
		seen := map[string]bool{}
		for i := range typ.NumField() {
			f := typ.Field(i)
			name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" || !f.IsExported() {
				continue
			}
			seen[name] = true
			p, ok := s.Properties[name]
			if !ok {
				t.Errorf("%s.%s (json %q) is not a property of %s in web/openapi.json", typ, f.Name, name, schema)
				continue
			}
			required := slices.Contains(s.Required, name)
			omitempty := slices.Contains(strings.Split(opts, ","), "omitempty")
			nilable := slices.Contains([]reflect.Kind{reflect.Pointer, reflect.Slice, reflect.Map, reflect.Interface}, f.Type.Kind())
			switch {
			case required && omitempty:
				t.Errorf("%s.%s is omitempty, but %s requires %q", typ, f.Name, schema, name)
			case !required && !omitempty:
				t.Errorf("%s.%s is not omitempty, but %q is optional in %s", typ, f.Name, name, schema)
			case p.nullable() && !nilable:
				t.Errorf("%s.%s cannot be nil, but %s.%s may be null", typ, f.Name, schema, name)
			case required && f.Type.Kind() == reflect.Pointer && !p.nullable():
				t.Errorf("%s.%s is a pointer, but %s.%s is required and never null", typ, f.Name, schema, name)
			}
		}
		for name := range s.Properties {
			if !seen[name] {
				t.Errorf("%s has no field for %s.%s of web/openapi.json", typ, schema, name)
			}
		}
	}
}
