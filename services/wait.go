package services

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/arbiter-ledger/arbiter/services/driver"
	"github.com/arbiter-ledger/arbiter/services/record"
)

// Waiting for a decision: an agent whose intent is held for approval may
// ask to wait (Prefer: wait=N) instead of polling. A waiter holds no
// database connection while it waits: it is woken at once by a change this
// process commits (a decision, an expiry), and by one poller per process,
// which reads every waited action in a few set queries each waitPoll, in
// case another replica decided.

// waitPoll is how often the poller reads the waited actions again; a
// decision taken on another replica reaches its waiters within about this
// time.
const waitPoll = 250 * time.Millisecond

// waitChunk is the most actions one poll query names: ten thousand waiters
// are ten queries, each holding a connection for a few milliseconds.
const waitChunk = 1000

// waiters wakes the waiters of an action when this process changes it, and
// runs the poller while anyone waits.
type waiters struct {
	mu sync.Mutex
	m  map[string][]chan struct{}
	// polling: the poller runs; it stops when nobody waits.
	polling bool
	// left reads which of ids are no longer awaiting approval (or gone).
	left func(ctx context.Context, ids []string) ([]string, error)
}

func (w *waiters) add(id string) chan struct{} {
	ch := make(chan struct{})
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.m == nil {
		w.m = map[string][]chan struct{}{}
	}
	w.m[id] = append(w.m[id], ch)
	if !w.polling && w.left != nil {
		w.polling = true
		go w.poll()
	}
	return ch
}

func (w *waiters) remove(id string, ch chan struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	list := w.m[id]
	for i, c := range list {
		if c == ch {
			list = append(list[:i], list[i+1:]...)
			break
		}
	}
	if len(list) == 0 {
		delete(w.m, id)
	} else {
		w.m[id] = list
	}
}

// wakeIDs wakes every waiter of the actions ids.
func (w *waiters) wakeIDs(ids []string) {
	if len(ids) == 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, id := range ids {
		for _, c := range w.m[id] {
			close(c)
		}
		delete(w.m, id)
	}
}

// decided lists the actions that written changes took out of
// awaiting_approval: their waiters are woken once the change commits.
func decided(chs []*driver.Change, written []bool) []string {
	var ids []string
	for i, ch := range chs {
		if written[i] && ch.Prev != nil && ch.Prev.Status == record.StatusAwaitingApproval &&
			ch.Next.Status != record.StatusAwaitingApproval {
			ids = append(ids, ch.Prev.ID)
		}
	}
	return ids
}

// poll reads the waited actions every waitPoll, waitChunk at a time, and
// wakes the waiters of those no longer awaiting approval. It returns when
// nobody waits. A failed read is tried again at the next tick: a waiter
// still ends at its own deadline.
func (w *waiters) poll() {
	t := time.NewTicker(waitPoll)
	defer t.Stop()
	var buf []string
	for range t.C {
		w.mu.Lock()
		if len(w.m) == 0 {
			w.polling = false
			w.mu.Unlock()
			return
		}
		buf = buf[:0]
		for id := range w.m {
			buf = append(buf, id)
		}
		w.mu.Unlock()
		for ids := buf; len(ids) > 0; {
			n := min(len(ids), waitChunk)
			ctx, cancel := context.WithTimeout(context.Background(), waitPoll*4)
			left, err := w.left(ctx, ids[:n])
			cancel()
			if err == nil {
				w.wakeIDs(left)
			}
			ids = ids[n:]
		}
	}
}

// AwaitDecision waits until the action with id is no longer awaiting
// approval, or ctx ends, and returns the action as it last read it. It
// returns at once if the action is not awaiting approval.
//
// A decision taken by this process wakes the waiter once it commits; one
// taken by another replica is seen by the poller within about waitPoll.
// Either way the waiter then reads its action once more. While it waits it
// reads nothing itself: the poller reads every waited action in a few set
// queries per tick, however many requests wait.
func (l *Ledger) AwaitDecision(ctx context.Context, p Principal, id string) (*record.Action, error) {
	if _, err := uuid.Parse(id); err != nil {
		return l.Action(ctx, p, id) // not found; the poller reads only well-formed ids
	}
	for {
		ch := l.waiting.add(id)
		a, err := l.Action(context.WithoutCancel(ctx), p, id)
		if err != nil || a.Status != record.StatusAwaitingApproval {
			l.waiting.remove(id, ch)
			return a, err
		}
		select {
		case <-ctx.Done():
			l.waiting.remove(id, ch)
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return a, nil
			}
			return a, ctx.Err()
		case <-ch:
		}
	}
}
