package views

import (
	"encoding/json"
	"strings"
	"testing"
)

// Finding 1 of the security review, the page side: JSON stored before the
// ledger limited its shape (or nested just under the limits) renders in
// bounded size; indenting 10,000 levels once made a 200 MB page.
func TestSecurityDeepJSONRendersBounded(t *testing.T) {
	deep := json.RawMessage(strings.Repeat("[", 10000) + strings.Repeat("]", 10000))
	out := jsonIndented(deep)
	if len(out) > 2*len(deep) {
		t.Fatalf("a %d-byte document nested 10,000 deep renders as %d bytes", len(deep), len(out))
	}
	if out != string(deep) {
		t.Fatalf("a document too deep to indent is shown compact")
	}
	// Just inside the depth that is indented, and wide: cut at the bound.
	level := strings.Repeat(`{"k":[`, 8)
	wide := json.RawMessage(level + strings.TrimSuffix(strings.Repeat(`"abcdefghijklmnopqrstuvwxyz",`, 20000), ",") + strings.Repeat("]}", 8))
	out = jsonIndented(wide)
	if len(out) > maxRenderedJSON+200 {
		t.Fatalf("rendered %d bytes; the bound is %d", len(out), maxRenderedJSON)
	}
	if !strings.HasSuffix(out, "more bytes not shown; read the whole document from the API") {
		t.Fatalf("a cut document says so: %q", out[len(out)-100:])
	}
	// Small documents are indented as before.
	if got := jsonIndented(json.RawMessage(`{"a":[1,{"b":"<x>"}]}`)); got != "{\n  \"a\": [\n    1,\n    {\n      \"b\": \"<x>\"\n    }\n  ]\n}" {
		t.Fatalf("indented: %q", got)
	}
}
