package policies

import "time"

// SetTestBudget sets how long one Test of s may run in all.
func SetTestBudget(s *Service, d time.Duration) { s.testBudget = d }
