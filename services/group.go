package services

import (
	"context"
	"sync"
	"time"

	"github.com/arbiter-ledger/arbiter/services/driver"
)

// Group commit: concurrent requests that each carry one entry are written
// together, so that they share a statement and a commit instead of paying
// one each. A request that arrives while no flush runs starts one at once,
// so a lone request waits for nobody; requests that arrive while one runs
// queue, and the next free flusher takes all of them (up to maxGroup) at
// once. Under load, the group grows by itself to what arrived during one
// write. Only a flush that has run longer than stuckAfter lets a request
// start another beside it (up to the group's flushers).

// maxGroup bounds the entries one flush writes.
const maxGroup = 256

// groupTimeout bounds one flush, which serves several requests and so runs
// on none of their contexts: a client that goes away does not cancel the
// write of the others.
const groupTimeout = 30 * time.Second

// stuckAfter is how long a flush may run before a request that arrives
// meanwhile starts another beside it. One flush at a time makes the biggest
// groups, and so the fewest statements and commits; a second one is for a
// flush held up (a lock another writer holds on a key it creates), so that
// it does not hold up every new intent behind it.
const stuckAfter = 10 * time.Millisecond

// groupItem is one request's entry waiting in a group.
type groupItem struct {
	p  Principal
	in *EntryInput
	// asked is the approver's answer, asked before the write (approval.go).
	asked *asked
	// pl and ch are the new action's first entry, decided by decideNew
	pl plan
	ch *driver.Change

	// Set by the flush.
	res      EntryResult
	written  bool // ch was written: res holds the answer
	err      error
	finished chan struct{}
}

// grouper queues items and runs flush on groups of them with at most
// flushers groups in flight.
type grouper struct {
	flushers int
	// stuck is how long a flush runs before another may start (stuckAfter).
	stuck time.Duration
	flush func(ctx context.Context, items []*groupItem)

	mu     sync.Mutex
	queue  []*groupItem
	active int
	// began is when the newest running flush began.
	began time.Time
}

// do queues it and returns once a flush has handled it.
func (g *grouper) do(it *groupItem) {
	it.finished = make(chan struct{})
	g.mu.Lock()
	g.queue = append(g.queue, it)
	start := g.active == 0 || (g.active < g.flushers && time.Since(g.began) > g.stuck)
	if start {
		g.active++
	}
	g.mu.Unlock()
	if start {
		go g.run()
	}
	<-it.finished
}

// run flushes queued groups until the queue is empty.
func (g *grouper) run() {
	for {
		g.mu.Lock()
		n := min(len(g.queue), maxGroup)
		if n == 0 {
			g.active--
			g.mu.Unlock()
			return
		}
		items := make([]*groupItem, n)
		copy(items, g.queue)
		g.queue = append(g.queue[:0], g.queue[n:]...)
		g.began = time.Now()
		g.mu.Unlock()

		ctx, cancel := context.WithTimeout(context.Background(), groupTimeout)
		g.flush(ctx, items)
		cancel()
		for _, it := range items {
			close(it.finished)
		}
	}
}
