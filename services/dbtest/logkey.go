package dbtest

import (
	"path/filepath"
	"testing"

	"github.com/arbiter-ledger/arbiter/services/evidence"
)

// LogKey makes an evidence log signing key for t, in t's temporary
// directory, for servers built in tests.
func LogKey(t testing.TB) *evidence.Key {
	t.Helper()
	k, err := evidence.LoadOrCreateKey(filepath.Join(t.TempDir(), "log.key"), evidence.DefaultOrigin)
	if err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	return k
}
