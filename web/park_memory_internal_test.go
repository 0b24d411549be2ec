package web

import (
	"sync/atomic"
	"testing"
	"time"
)

// TestParkMemoryReturnsOncePerBurst: memory is returned once after a burst
// of parked requests has settled, and not for the few that follow it.
func TestParkMemoryReturnsOncePerBurst(t *testing.T) {
	var calls atomic.Int32
	m := &parkMemory{free: func() { calls.Add(1) }}
	for range parkBurst - 1 {
		m.noteParked()
	}
	time.Sleep(parkSettle + 200*time.Millisecond)
	if n := calls.Load(); n != 0 {
		t.Fatalf("returned %d times before a burst was parked", n)
	}
	m.noteParked()
	deadline := time.Now().Add(10 * time.Second)
	for calls.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("returned %d times after a burst; want once", n)
	}
	for range 10 {
		m.noteParked()
	}
	time.Sleep(parkSettle + 500*time.Millisecond)
	if n := calls.Load(); n != 1 {
		t.Fatalf("returned %d times; the requests after the burst are not one", n)
	}
}
