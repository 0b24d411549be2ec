package services

import (
	"context"
	"sync"
	"time"

	"github.com/arbiter-ledger/arbiter/services/driver"
)

// Group commit: concurrent requests that each carry one entry are written
// together, so that they share a statement and a commit instead of paying
// one each. A request that arrives while fewer than the group's flushers are
// busy starts a flush at once, so a lone request waits for nobody; requests
// that arrive while every flusher is busy queue, and the next free flusher
// takes all of them (up to maxGroup) at once. Under load, the group grows by
// itself to what arrived during one write.

// maxGroup bounds the entries one flush writes.
const maxGroup = 256

// groupTimeout bounds one flush, which serves several requests and so runs
// on none of their contexts: a client that goes away does not cancel the
// write of the others.
const groupTimeout = 30 * time.Second

// groupItem is one request's entry waiting in a group.
type groupItem struct {
	p  Principal
	in *EntryInput
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
	flush    func(ctx context.Context, items []*groupItem)

	mu     sync.Mutex
	queue  []*groupItem
	active int
}

// do queues it and returns once a flush has handled it.
func (g *grouper) do(it *groupItem) {
	it.finished = make(chan struct{})
	g.mu.Lock()
	g.queue = append(g.queue, it)
	start := g.active < g.flushers
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
		g.mu.Unlock()

		ctx, cancel := context.WithTimeout(context.Background(), groupTimeout)
		g.flush(ctx, items)
		cancel()
		for _, it := range items {
			close(it.finished)
		}
	}
}
