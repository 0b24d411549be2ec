package client

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// heartbeats extend an attempt's lease while its function runs.
type heartbeats struct {
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
	lost   error
}

// heartbeat sends a heartbeat for attempt a about every third of the lease
// until stopped. When Arbiter answers that the attempt may not continue
// (lease_lost, stale_attempt) it stops and cancels the function's context
// with ErrLeaseLost. A beat that gets no answer is sent again soon, with
// backoff: the function keeps running through a short outage.
func (c *Client) heartbeat(ctx context.Context, spec *GuardSpec, a Attempt, cancelRun context.CancelCauseFunc) *heartbeats {
	lease := spec.lease()
	every := lease / 3
	e := spec.entry(TypeHeartbeat, a.Number)
	if spec.Timeout > 0 {
		e.Timeout = Ptr(lease.Seconds())
	}
	hctx, cancel := context.WithCancel(ctx)
	h := &heartbeats{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(h.done)
		next, fails := every, 0
		for {
			if sleep(hctx, next) != nil {
				return
			}
			// A beat may take up to two thirds of the lease: slow is still
			// in time, as long as it lands before the lease ends.
			began := time.Now()
			bctx, cancelBeat := context.WithTimeout(hctx, lease-every)
			_, err := c.Submit(bctx, e)
			cancelBeat()
			switch {
			case IsCode(err, "lease_lost"), IsCode(err, "stale_attempt"):
				h.lost = err
				cancelRun(fmt.Errorf("%w: %w", ErrLeaseLost, err))
				return
			case err != nil:
				// Try again soon rather than a whole third later: the lease
				// leaves room for a short outage, not for waiting it out.
				fails++
				next = min(c.backoff.pause(fails), every/2)
			default:
				fails = 0
				next = max(0, every-time.Since(began))
			}
		}
	}()
	return h
}

// stop ends the heartbeats, waits for a beat in flight, and returns the
// answer that lost the lease, if any. It may be called more than once.
func (h *heartbeats) stop() error {
	h.once.Do(func() {
		h.cancel()
		<-h.done
	})
	return h.lost
}
