package services

import (
	"cmp"
	"context"
	"time"

	"github.com/arbiter-ledger/arbiter/services/driver"
)

// SeedRequest describes a synthetic ledger for benchmarks and query-plan
// tests: Actions actions in namespace "seed" (finished ones, spread over
// tools and agents), of which TimedOut are timed out, and one action with
// LongTimeline entries.
type SeedRequest struct {
	Actions      int
	TimedOut     int
	LongTimeline int
	// Progress, when set, is told the actions written so far.
	Progress func(actions int)
}

// seedPart is how many actions one statement of Seed writes.
const seedPart = 50_000

// SeedResult names what Seed made.
type SeedResult struct {
	Namespace    string
	LongActionID string
	Took         time.Duration
}

// Seed fills the database with synthetic actions in bulk, with set-based SQL
// in the driver rather than through the ledger, so that a million actions
// take seconds. It is for benchmarks and tests only: it writes no alerts.
func (s *Store) Seed(ctx context.Context, r SeedRequest) (SeedResult, error) {
	start := time.Now()
	if r.Actions < 1 || r.TimedOut < 0 || r.TimedOut > r.Actions || r.LongTimeline < 0 {
		return SeedResult{}, Errorf(CodeInvalid, "seed: need 1 or more actions and at most that many timed out")
	}
	const ns = "seed"
	if err := s.wdb.WithContext(ctx).Exec(`INSERT INTO namespaces (name, created_at) VALUES (?, ?)
		ON CONFLICT (name) DO NOTHING`, ns, Now()).Error; err != nil {
		return SeedResult{}, DBError("seed: create namespace", err)
	}
	now := Now()
	var long string
	for from := 1; from <= r.Actions; from += seedPart {
		n := min(seedPart, r.Actions-from+1)
		id, err := s.drv.Seed(ctx, &driver.SeedParams{Namespace: ns, From: from, Actions: n, TimedOut: r.TimedOut,
			Last: from+n > r.Actions, LongTimeline: r.LongTimeline, Now: now})
		if err != nil {
			return SeedResult{}, DBError("seed", err)
		}
		long = cmp.Or(long, id)
		if r.Progress != nil {
			r.Progress(from + n - 1)
		}
	}
	return SeedResult{Namespace: ns, LongActionID: long, Took: time.Since(start)}, nil
}
