package client_test

import (
	"go/build"
	"testing"
)

// TestSDKImportsOnlyTheStandardLibrary: an agent that imports the SDK pulls
// in nothing but the standard library and the shared vocabulary (package
// record, itself standard library only).
func TestSDKImportsOnlyTheStandardLibrary(t *testing.T) {
	allowed := map[string]bool{
		"github.com/arbiter-ledger/arbiter/client":          true,
		"github.com/arbiter-ledger/arbiter/services/record": true,
	}
	seen := map[string]bool{}
	var walk func(path, dir string)
	walk = func(path, dir string) {
		if seen[path] {
			return
		}
		seen[path] = true
		pkg, err := build.Default.Import(path, dir, 0)
		if err != nil {
			t.Fatalf("import %s: %v", path, err)
		}
		if pkg.Goroot {
			return
		}
		if !allowed[path] {
			t.Errorf("the SDK depends on %s", path)
			return
		}
		for _, imp := range pkg.Imports {
			walk(imp, pkg.Dir)
		}
	}
	walk("github.com/arbiter-ledger/arbiter/client", ".")
	if !seen["github.com/arbiter-ledger/arbiter/services/record"] {
		t.Error("the SDK does not decode payloads with the shared record types")
	}
}
