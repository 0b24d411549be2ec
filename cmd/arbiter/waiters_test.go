//go:build unix

package main

import (
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRaiseFDLimit: the soft limit on open files is raised to the hard
// limit at start.
func TestRaiseFDLimit(t *testing.T) {
	var orig syscall.Rlimit
	require.NoError(t, syscall.Getrlimit(syscall.RLIMIT_NOFILE, &orig))
	t.Cleanup(func() { syscall.Setrlimit(syscall.RLIMIT_NOFILE, &orig) })
	low := orig
	low.Cur = min(orig.Max/2, 512)
	require.NoError(t, syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low))
	now, before, err := raiseFDLimit()
	require.NoError(t, err)
	require.EqualValues(t, low.Cur, before)
	require.EqualValues(t, orig.Max, now)
	var got syscall.Rlimit
	require.NoError(t, syscall.Getrlimit(syscall.RLIMIT_NOFILE, &got))
	require.Equal(t, got.Max, got.Cur)
}

// TestWaiterCap: the cap on waiters leaves headroom for ordinary requests.
func TestWaiterCap(t *testing.T) {
	require.Equal(t, 10000, waiterCap(10000, 1<<20))
	require.Equal(t, 19000, waiterCap(50000, 20000)) // 1,000 kept
	require.Equal(t, 512, waiterCap(10000, 1024))    // half kept
	require.Equal(t, 10000, waiterCap(10000, 0))     // unknown limit
}
