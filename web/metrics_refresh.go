package web

import (
	"context"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"
)

// MetricsRefresh is how old the gauges /metrics reads from the database
// may be. They are one query each (a count of actions by status, the
// webhook queue), asked at most once per interval by one scrape while the
// others wait for its answer: a flood of scrapes costs the database
// nothing more. With several replicas every one reads the same database,
// so their numbers agree within the interval (counts kept in each process
// would each see only its own changes).
const MetricsRefresh = 5 * time.Second

// metricsReadTimeout bounds one reading of a gauge.
const metricsReadTimeout = 5 * time.Second

// refreshed is a value read by read, kept for every, and read again by one
// caller at a time once older.
type refreshed[T any] struct {
	read  func(ctx context.Context) (T, error)
	every time.Duration
	now   func() time.Time
	last  atomic.Pointer[reading[T]]
	group singleflight.Group
}

// reading is one answer of read (a failure too: a database that is down
// is not asked again by every scrape) and when it was asked.
type reading[T any] struct {
	at  time.Time
	v   T
	err error
}

func newRefreshed[T any](read func(ctx context.Context) (T, error)) *refreshed[T] {
	if read == nil {
		return nil
	}
	return &refreshed[T]{read: read, every: MetricsRefresh, now: time.Now}
}

// fresh returns the kept reading if it is younger than every.
func (r *refreshed[T]) fresh() *reading[T] {
	if last := r.last.Load(); last != nil && r.now().Sub(last.at) < r.every {
		return last
	}
	return nil
}

// get answers from the kept reading while it is fresh; otherwise one
// caller reads again and the callers meanwhile share its answer.
func (r *refreshed[T]) get() (T, error) {
	if last := r.fresh(); last != nil {
		return last.v, last.err
	}
	v, _, _ := r.group.Do("", func() (any, error) {
		if last := r.fresh(); last != nil {
			return last, nil // read by the flight that just ended
		}
		// Not the scrape's context: its answer serves the callers that
		// joined it, whichever of them leaves first.
		ctx, cancel := context.WithTimeout(context.Background(), metricsReadTimeout)
		defer cancel()
		at := r.now()
		v, err := r.read(ctx)
		got := &reading[T]{at: at, v: v, err: err}
		r.last.Store(got)
		return got, nil
	})
	got := v.(*reading[T])
	return got.v, got.err
}
