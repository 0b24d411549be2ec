package web

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A Prefer: wait beyond MaxWait waits MaxWait, however large: a value
// past int64 (or past what a time.Duration holds in seconds) overflowed to
// no wait at all.
func TestPreferWaitClampsHugeValues(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		header string
		wait   time.Duration
		ok     bool
	}{
		{"wait=5", 5 * time.Second, true},
		{"respond-async, wait=0", 0, true},
		{"wait=61", MaxWait, true},
		{"wait=9300000000", MaxWait, true},
		{"wait=999999999999999999999", MaxWait, true},
		{`wait="999999999999999999999999999999999999"`, MaxWait, true},
		{"wait=-1", 0, false},
		{"wait=1e3", 0, false},
		{"wait=", 0, false},
		{"wait=+5", 0, false},
	} {
		wait, ok := preferWait([]string{c.header})
		require.Equal(t, c.ok, ok, c.header)
		require.Equal(t, c.wait, wait, c.header)
	}
}
