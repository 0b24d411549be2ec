package web

import (
	"runtime/debug"
	"sync"
	"time"
)

// Returning memory after a burst of parked requests: requests that wait
// with Prefer: wait arrive together (a fleet of agents held by one policy)
// and are all in flight, decoded and written, before each is parked. Once
// parked each holds a few kilobytes, and nothing allocates, so no garbage
// collection runs to return what the arrival used, and the server kept
// several times the waiters' own memory (docs/benchmarks.md, "What still
// misses", its waiting agents). Once a burst of at least parkBurst
// requests has been parked and a second has passed without another, the
// memory is collected and returned to the system, once per burst.

// parkBurst is how many requests parked since the last return make a
// burst worth a collection.
const parkBurst = 1000

// parkSettle is how long parking must pause before the return.
const parkSettle = time.Second

type parkMemory struct {
	mu      sync.Mutex
	parked  int       // since the last return
	last    time.Time // the newest park
	pending bool      // a check is scheduled
	free    func()    // debug.FreeOSMemory; tests count calls
}

// noteParked records one parked request and schedules a check.
func (m *parkMemory) noteParked() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.parked++
	m.last = time.Now()
	if !m.pending && m.parked >= parkBurst {
		m.pending = true
		time.AfterFunc(parkSettle, m.check)
	}
}

func (m *parkMemory) check() {
	m.mu.Lock()
	if wait := parkSettle - time.Since(m.last); wait > 0 {
		time.AfterFunc(wait, m.check)
		m.mu.Unlock()
		return
	}
	m.pending, m.parked = false, 0
	free := m.free
	m.mu.Unlock()
	if free == nil {
		free = debug.FreeOSMemory
	}
	free()
}
