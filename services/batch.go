package services

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/arbiter-ledger/arbiter/services/driver"
	"github.com/arbiter-ledger/arbiter/services/record"
)

// Group commit: concurrent requests that each carry one entry are written
// together, so that they share a statement and a commit instead of paying
// one each. A request that arrives while no flush runs starts one at once,
// so a lone request waits for nobody; requests that arrive while one runs
// queue, and the next free flusher takes all of them (up to its Max) at
// once. Under load, the group grows by itself to what arrived during one
// write. Only a flush that has run longer than Stuck lets a request start
// another beside it (up to Flushers).

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

// Batcher hands the items of concurrent callers to Flush in groups, as
// group commit does: the ledger's single entries (groupCommit) and the
// web's released waiters use it.
type Batcher[T any] struct {
	// Max bounds the items one flush takes.
	Max int
	// Flushers bounds the flushes in flight; below 1 is 1.
	Flushers int
	// Stuck is how long a flush runs before another may start beside it.
	Stuck time.Duration
	// Flush handles a group; the callers of Do wait for it, and read
	// what it left in their items.
	Flush func(items []T)

	mu     sync.Mutex
	queue  []batched[T]
	active int
	// began is when the newest running flush began.
	began time.Time
}

type batched[T any] struct {
	it   T
	done chan struct{}
}

// Do queues it and returns once a flush has handled it.
func (b *Batcher[T]) Do(it T) {
	done := make(chan struct{})
	b.mu.Lock()
	b.queue = append(b.queue, batched[T]{it, done})
	start := b.active == 0 || (b.active < b.Flushers && time.Since(b.began) > b.Stuck)
	if start {
		b.active++
	}
	b.mu.Unlock()
	if start {
		go b.run()
	}
	<-done
}

// run flushes queued groups until the queue is empty.
func (b *Batcher[T]) run() {
	for {
		b.mu.Lock()
		n := min(len(b.queue), b.Max)
		if n == 0 {
			b.active--
			b.mu.Unlock()
			return
		}
		group := make([]batched[T], n)
		copy(group, b.queue)
		b.queue = append(b.queue[:0], b.queue[n:]...)
		b.began = time.Now()
		b.mu.Unlock()

		items := make([]T, n)
		for i, q := range group {
			items[i] = q.it
		}
		b.Flush(items)
		for _, q := range group {
			close(q.done)
		}
	}
}

// groupCommit records the only entry of a request. With a single writer
// every entry joins the writer's next shared transaction. Where writers run
// side by side, an intent for a key not known to exist is decided as the
// key's first entry without a read and inserted with the others of its
// group; the insert tells whether the key was new. Every other entry, and
// an intent whose key existed after all, is decided on the stored action
// alone.
type groupCommit struct {
	l     *Ledger
	queue Batcher[*groupItem]
	// limited are new intents charged to limits: each group of them is
	// judged and written in one transaction under its groups' locks
	// (chargeNew).
	limited Batcher[*groupItem]
}

func newGroupCommit(l *Ledger, c driver.Concurrency) *groupCommit {
	g := &groupCommit{l: l}
	g.queue = Batcher[*groupItem]{Max: maxGroup, Flushers: c.Flushers, Stuck: stuckAfter, Flush: g.flush}
	g.limited = Batcher[*groupItem]{Max: maxGroup, Flushers: c.Flushers, Stuck: stuckAfter, Flush: g.flushLimited}
	return g
}

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
	res     EntryResult
	written bool // ch was written: res holds the answer
	err     error
}

// submit records one request's only entry.
func (g *groupCommit) submit(ctx context.Context, p Principal, in *EntryInput) (EntryResult, error) {
	it := &groupItem{p: p, in: in, asked: g.l.ask(ctx, p, in)}
	if !g.l.singleWriter {
		if in.Type == record.TypeIntent && it.asked.limited() && !g.l.known.has(p.Namespace, in.Key) {
			return g.submitLimited(ctx, it)
		}
		created := false
		if in.Type == record.TypeIntent && !g.l.known.has(p.Namespace, in.Key) {
			var err error
			if created, err = g.l.decideNew(ctx, it, g.l.now()); err != nil {
				return EntryResult{}, err
			}
		}
		if !created {
			return g.alone(ctx, p, in, it.asked)
		}
	}
	g.queue.Do(it)
	switch {
	case it.err != nil:
		return EntryResult{}, it.err
	case it.written:
		return it.res, nil
	}
	return g.alone(ctx, p, in, it.asked) // the key exists: decide on the stored action
}

// flush writes a group: with a single writer, every entry in one
// transaction (applyAll); otherwise the new actions decideNew decided, in
// one insert.
func (g *groupCommit) flush(items []*groupItem) {
	ctx, cancel := context.WithTimeout(context.Background(), groupTimeout)
	defer cancel()
	g.l.observeGroup(len(items))
	var err error
	if g.l.singleWriter {
		err = g.l.inTx(ctx, func(u *unit) error { return g.l.applyAll(ctx, u, items) })
	} else {
		u := g.l.single()
		if err = g.insert(ctx, u, items); err == nil && u.alerted {
			g.l.wakeDispatcher()
		}
	}
	for _, it := range items {
		it.err = err
		if err != nil {
			it.written = false
		}
	}
}

// insert writes the new actions of items in one set and answers those
// written; the others' keys existed, and they are decided again on the
// stored action.
func (g *groupCommit) insert(ctx context.Context, u *unit, items []*groupItem) error {
	if len(items) == 0 {
		return nil
	}
	chs := make([]*driver.Change, len(items))
	for i, it := range items {
		chs[i] = it.ch
	}
	written, err := g.l.write(ctx, u, chs)
	if err != nil {
		return err
	}
	g.l.known.mu.Lock()
	defer g.l.known.mu.Unlock()
	for i, it := range items {
		if written[i] {
			it.res, it.written = answerWith(it.in, it.pl, it.ch), true
			g.l.known.addLocked(it.p.Namespace, it.in.Key)
		}
	}
	return nil
}

// alone decides and records one entry in its own statement or
// transaction.
func (g *groupCommit) alone(ctx context.Context, p Principal, in *EntryInput, a *asked) (EntryResult, error) {
	l := g.l
	u := l.single()
	res, err := l.apply(ctx, u, p, in, a)
	if errors.Is(err, errNeedsTx) {
		err = l.inTx(ctx, func(u *unit) error {
			var err error
			res, err = l.apply(ctx, u, p, in, a)
			return err
		})
		return res, err
	}
	if err == nil && u.alerted {
		l.wakeDispatcher()
	}
	return res, err
}

// Keys known to exist: an intent does not know whether its key is new, and
// a new one is cheapest written first (groupCommit) while one whose key
// exists is answered from the stored action. An intent for a key this
// process has just created or read is most likely a retry (a replay, or an
// agent asking again while the first attempt runs), so it goes straight to
// the read, instead of waiting for a group's commit to learn that its key
// exists. The set only chooses the route: an entry whose key has gone since
// (retention) is created by the read path as well.
//
// The set is bounded: two generations of knownKeysGeneration keys each;
// when the newer fills, the older is dropped.

const knownKeysGeneration = 1 << 15

type knownKeys struct {
	mu       sync.Mutex
	cur, old map[knownKey]struct{}
}

type knownKey struct{ namespace, key string }

// has reports whether the key was seen recently.
func (k *knownKeys) has(namespace, key string) bool {
	s := knownKey{namespace, key}
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, ok := k.cur[s]; ok {
		return true
	}
	_, ok := k.old[s]
	return ok
}

// add notes that a key exists.
func (k *knownKeys) add(namespace, key string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.addLocked(namespace, key)
}

func (k *knownKeys) addLocked(namespace, key string) {
	if k.cur == nil || len(k.cur) >= knownKeysGeneration {
		k.old, k.cur = k.cur, make(map[knownKey]struct{}, 1024)
	}
	k.cur[knownKey{namespace, key}] = struct{}{}
}
