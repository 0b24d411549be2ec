package services

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/arbiter-ledger/arbiter/services/driver"
	"github.com/arbiter-ledger/arbiter/services/record"
)

// Waiting for a decision: an agent whose intent is held for approval may
// ask to wait (Prefer: wait=N) instead of polling. A waiter holds no
// database connection while it waits: it is woken at once by a change this
// process commits (a decision, an expiry), and reads the action again every
// waitPoll in case another replica decided.

// waitPoll is how often a waiter reads its action again; a decision taken
// on another replica reaches it within this time.
const waitPoll = 250 * time.Millisecond

// waiters wakes the waiters of an action when this process changes it.
type waiters struct {
	mu sync.Mutex
	m  map[string][]chan struct{}
}

func (w *waiters) add(id string) chan struct{} {
	ch := make(chan struct{})
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.m == nil {
		w.m = map[string][]chan struct{}{}
	}
	w.m[id] = append(w.m[id], ch)
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

// wake wakes every waiter of the actions changes wrote.
func (w *waiters) wake(chs []*driver.Change, written []bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.m) == 0 {
		return
	}
	for i, ch := range chs {
		if !written[i] || ch.Prev == nil {
			continue
		}
		for _, c := range w.m[ch.Prev.ID] {
			close(c)
		}
		delete(w.m, ch.Prev.ID)
	}
}

// AwaitDecision waits until the action with id is no longer awaiting
// approval, or ctx ends, and returns the action as it last read it. It
// returns at once if the action is not awaiting approval.
//
// A decision taken by this process wakes the waiter at once; one taken by
// another replica is seen at the next read, about every waitPoll. Each
// pause is drawn from [waitPoll/2, 3·waitPoll/2], so requests that began
// waiting together do not read in step (200 of them used to take the
// connection pool's 32 connections at once every 250 ms).
func (l *Ledger) AwaitDecision(ctx context.Context, p Principal, id string) (*record.Action, error) {
	t := time.NewTimer(jitteredPoll())
	defer t.Stop()
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
		case <-t.C:
			l.waiting.remove(id, ch)
			t.Reset(jitteredPoll())
		}
	}
}

// jitteredPoll is one pause between reads of a waiter.
func jitteredPoll() time.Duration {
	return waitPoll/2 + rand.N(waitPoll)
}
