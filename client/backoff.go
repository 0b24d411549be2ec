package client

import (
	"context"
	"math/rand/v2"
	"time"
)

// backoff is exponential backoff with full jitter: the n-th pause is drawn
// uniformly from [0, min(largest, first·2ⁿ)], so clients that failed
// together spread out instead of retrying in step.
type backoff struct {
	first, largest time.Duration
}

func (b backoff) pause(n int) time.Duration {
	bound := b.first
	for i := 0; i < n && bound < b.largest; i++ {
		bound *= 2
	}
	bound = min(bound, b.largest)
	if bound <= 0 {
		return 0
	}
	return rand.N(bound + 1)
}

// sleep waits d, or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}
