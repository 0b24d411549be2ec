package mcpgateway

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/gowebpki/jcs"

	"github.com/arbiter-ledger/arbiter/client"
	"github.com/arbiter-ledger/arbiter/services/jsontext"
)

// A template is text with placeholders: "refund:{order_id}". A placeholder
// names an argument of the call, or a field inside one ("{customer.id}"),
// or a field of the call's structured result ("{result.refund_id}") where
// the result is known. "{{" and "}}" are literal braces.
type template struct {
	src   string
	parts []part
}

// part is literal text, or a placeholder when path is set.
type part struct {
	text string
	path []string
}

var pathSegment = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

func parseTemplate(s string) (*template, error) {
	t := &template{src: s}
	var lit strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '{' && i+1 < len(s) && s[i+1] == '{', c == '}' && i+1 < len(s) && s[i+1] == '}':
			lit.WriteByte(c)
			i++
		case c == '{':
			end := strings.IndexByte(s[i:], '}')
			if end < 0 {
				return nil, fmt.Errorf("template %q: the { at byte %d is not closed", s, i)
			}
			name := s[i+1 : i+end]
			path := strings.Split(name, ".")
			for _, seg := range path {
				if !pathSegment.MatchString(seg) {
					return nil, fmt.Errorf("template %q: {%s} is not an argument name (letters, digits, _ and -, dots between fields)", s, name)
				}
			}
			if path[0] == "result" && len(path) == 1 {
				return nil, fmt.Errorf("template %q: {result} needs a field: {result.id}", s)
			}
			if lit.Len() > 0 {
				t.parts = append(t.parts, part{text: lit.String()})
				lit.Reset()
			}
			t.parts = append(t.parts, part{path: path})
			i += end
		case c == '}':
			return nil, fmt.Errorf("template %q: the } at byte %d has no {; write }} for a brace", s, i)
		default:
			lit.WriteByte(c)
		}
	}
	if lit.Len() > 0 {
		t.parts = append(t.parts, part{text: lit.String()})
	}
	return t, nil
}

// usesResult reports whether a placeholder names the call's result.
func (t *template) usesResult() bool {
	for _, p := range t.parts {
		if len(p.path) > 0 && p.path[0] == "result" {
			return true
		}
	}
	return false
}

// arguments returns the top-level argument names the template uses.
func (t *template) arguments() []string {
	var names []string
	for _, p := range t.parts {
		if len(p.path) > 0 && p.path[0] != "result" {
			names = append(names, p.path[0])
		}
	}
	return names
}

// single reports whether the template is one placeholder and nothing else.
func (t *template) single() bool { return len(t.parts) == 1 && t.parts[0].path != nil }

// values are what placeholders are filled from: the call's arguments and,
// once known, its structured result. Numbers are json.Number, so they keep
// the digits the caller sent.
type values struct {
	args   map[string]any
	result any
}

// missingError names the field a call lacks.
type missingError struct{ path string }

func (e *missingError) Error() string {
	if strings.HasPrefix(e.path, "result.") {
		return fmt.Sprintf("the result has no field %q", strings.TrimPrefix(e.path, "result."))
	}
	return fmt.Sprintf("the argument %q is required (it is part of the call's key or mappings) and is missing", e.path)
}

// lookup returns the value at path, or a *missingError.
func (v values) lookup(path []string) (any, error) {
	var cur any = v.args
	segs := path
	if path[0] == "result" {
		cur, segs = v.result, path[1:]
	}
	for _, seg := range segs {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, &missingError{path: strings.Join(path, ".")}
		}
		cur, ok = m[seg]
		if !ok || cur == nil {
			return nil, &missingError{path: strings.Join(path, ".")}
		}
	}
	return cur, nil
}

// text renders a value: strings as they are, numbers as sent, anything
// else as canonical JSON.
func text(v any) (string, error) {
	switch v := v.(type) {
	case string:
		return v, nil
	case json.Number:
		return v.String(), nil
	case bool:
		return fmt.Sprint(v), nil
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	canon, err := jcs.Transform(raw)
	return string(canon), err
}

// render fills the placeholders; escape, if set, is applied to each value.
func (t *template) render(v values, escape func(string) string) (string, error) {
	var b strings.Builder
	for _, p := range t.parts {
		if p.path == nil {
			b.WriteString(p.text)
			continue
		}
		val, err := v.lookup(p.path)
		if err != nil {
			return "", err
		}
		s, err := text(val)
		if err != nil {
			return "", err
		}
		if escape != nil {
			s = escape(s)
		}
		b.WriteString(s)
	}
	return b.String(), nil
}

// value fills a template used as an argument: one placeholder copies the
// value as it is, anything else is rendered as text.
func (t *template) value(v values) (any, error) {
	if t.single() {
		return v.lookup(t.parts[0].path)
	}
	return t.render(v, nil)
}

// renderKey renders a key template. Each value is escaped as client.Key
// escapes a part, so that two different calls never give one key
// ("{a}:{b}" with a="x:y", b="z" versus a="x", b="y:z"), and a key longer
// than the ledger takes is cut and ends with a hash of the whole.
func (t *template) renderKey(v values) (string, error) {
	k, err := t.render(v, func(s string) string { return client.Key(s) })
	if err != nil {
		return "", err
	}
	return client.FitKey(k), nil
}

// defaultKey is the key of a tool without a key template: the ledger tool
// name and the SHA-256 of the canonical arguments, so that only an
// identical call is a repeat.
func defaultKey(tool string, rawArgs json.RawMessage) (string, error) {
	canon, err := jsontext.Canonical(rawArgs)
	if err != nil {
		return "", fmt.Errorf("the arguments are not valid JSON: %w", err)
	}
	sum := sha256.Sum256(canon)
	return client.Key(tool, hex.EncodeToString(sum[:])), nil
}

// decodeArgs decodes a call's arguments, keeping numbers as sent. Absent
// arguments are an empty object.
func decodeArgs(raw json.RawMessage) (json.RawMessage, map[string]any, error) {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		raw = json.RawMessage(`{}`)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var args map[string]any
	if err := dec.Decode(&args); err != nil {
		return nil, nil, fmt.Errorf("the arguments are not a JSON object: %w", err)
	}
	if args == nil {
		args = map[string]any{}
	}
	return raw, args, nil
}

// decodeJSON decodes a document keeping numbers as sent.
func decodeJSON(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	err := dec.Decode(&v)
	return v, err
}
