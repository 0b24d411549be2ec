package policies

import "time"

// SetTestBudget sets how long one Test of s may run in all.
func SetTestBudget(s *Service, d time.Duration) { s.testBudget = d }

// Slowdown is how much slower code runs in this test binary (the race
// detector), for tests that bound a time.
const Slowdown = slowdown

// SetLimitsClock gives s the clock its usage answers count windows on.
func SetLimitsClock(s *Limits, now func() time.Time) { s.now = now }

// SetFreezesClock gives the freeze and breaker services the clock they
// stamp and count with.
func SetFreezesClock(f *Freezes, b *Breakers, now func() time.Time) { f.now, b.now = now, now }
