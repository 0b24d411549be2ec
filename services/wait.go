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
	m  map[string][]*watch
	// polling: the poller runs; it stops when nobody waits.
	polling bool
	// left reads which of ids are no longer awaiting approval (or gone).
	left func(ctx context.Context, ids []string) ([]string, error)
}

// watch is one waiter's wake-up: fire is called once, without the lock
// held, and must not block. It gets the action as this process's change
// left it, or nil when the poller saw it change.
type watch struct{ fire func(*record.Action) }

func (w *waiters) add(id string, fire func(*record.Action)) *watch {
	wt := &watch{fire: fire}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.m == nil {
		w.m = map[string][]*watch{}
	}
	w.m[id] = append(w.m[id], wt)
	if !w.polling && w.left != nil {
		w.polling = true
		go w.poll()
	}
	return wt
}

func (w *waiters) remove(id string, wt *watch) {
	w.mu.Lock()
	defer w.mu.Unlock()
	list := w.m[id]
	for i, c := range list {
		if c == wt {
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

// wakeIDs wakes every waiter of the actions ids (the poller).
func (w *waiters) wakeIDs(ids []string) {
	if len(ids) == 0 {
		return
	}
	var fire []*watch
	w.mu.Lock()
	for _, id := range ids {
		fire = append(fire, w.m[id]...)
		delete(w.m, id)
	}
	w.mu.Unlock()
	for _, wt := range fire {
		wt.fire(nil)
	}
}

// wake wakes every waiter of the actions as this process's committed
// changes left them.
func (w *waiters) wake(actions []*record.Action) {
	if len(actions) == 0 {
		return
	}
	type woken struct {
		wt *watch
		a  *record.Action
	}
	var fire []woken
	w.mu.Lock()
	for _, a := range actions {
		for _, wt := range w.m[a.ID] {
			fire = append(fire, woken{wt, a})
		}
		delete(w.m, a.ID)
	}
	w.mu.Unlock()
	for _, f := range fire {
		f.wt.fire(f.a)
	}
}

// decided lists the actions that written changes took out of
// awaiting_approval, as they left them: their waiters are woken once the
// change commits.
func decided(chs []*driver.Change, written []bool) []*record.Action {
	var out []*record.Action
	for i, ch := range chs {
		if written[i] && ch.Prev != nil && ch.Prev.Status == record.StatusAwaitingApproval &&
			ch.Next.Status != record.StatusAwaitingApproval {
			out = append(out, ch.Next)
		}
	}
	return out
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
		ch := make(chan struct{})
		wt := l.waiting.add(id, func(*record.Action) { close(ch) })
		a, err := l.Action(context.WithoutCancel(ctx), p, id)
		if err != nil || a.Status != record.StatusAwaitingApproval {
			l.waiting.remove(id, wt)
			return a, err
		}
		select {
		case <-ctx.Done():
			l.waiting.remove(id, wt)
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return a, nil
			}
			return a, ctx.Err()
		case <-ch:
		}
	}
}

// AwaitDecisionFunc is AwaitDecision without a goroutine of the caller's
// held while it waits: it returns at once, and done is called once, in a
// goroutine of its own, with the action when it is no longer awaiting
// approval, or with the action as last read (nil if none was) when wait
// passes or EndWaits ends every wait. Between the reads nothing runs for the
// waiter but a timer and its place among the poller's ids, so a process can
// hold many thousands of them.
//
// The returned stop ends the wait without calling done (the waiting client
// hung up): its place among the poller's ids and its timer are dropped at
// once. It does nothing once done was called.
func (l *Ledger) AwaitDecisionFunc(p Principal, id string, wait time.Duration, done func(*record.Action, error)) (stop func()) {
	pk := &parked{l: l, p: p, id: id, done: done}
	l.parking.Lock()
	if l.parking.ended {
		l.parking.Unlock()
		go done(nil, nil)
		return func() {}
	}
	if l.parking.set == nil {
		l.parking.set = map[*parked]struct{}{}
	}
	l.parking.set[pk] = struct{}{}
	l.parking.wg.Add(1)
	l.parking.Unlock()
	pk.mu.Lock()
	pk.timer = time.AfterFunc(wait, func() { pk.finish(nil, nil, true) })
	pk.mu.Unlock()
	go pk.check(nil)
	return pk.stop
}

// EndWaits answers every wait of AwaitDecisionFunc now, as if its time had
// passed, and any begun later at once; it returns when their done functions
// returned, or ctx ended. A server calls it when it shuts down: the agents
// get their answer (still pending approval) instead of a closed connection.
func (l *Ledger) EndWaits(ctx context.Context) error {
	l.parking.Lock()
	l.parking.ended = true
	list := make([]*parked, 0, len(l.parking.set))
	for pk := range l.parking.set {
		list = append(list, pk)
	}
	l.parking.Unlock()
	for _, pk := range list {
		go pk.finish(nil, nil, true)
	}
	finished := make(chan struct{})
	go func() {
		l.parking.wg.Wait()
		close(finished)
	}()
	select {
	case <-finished:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// parking holds the waits of AwaitDecisionFunc.
type parking struct {
	sync.Mutex
	set   map[*parked]struct{}
	ended bool
	wg    sync.WaitGroup
}

// parked is one wait of AwaitDecisionFunc.
type parked struct {
	l    *Ledger
	p    Principal
	id   string
	done func(*record.Action, error)

	mu    sync.Mutex
	timer *time.Timer
	wt    *watch         // the current wake-up
	last  *record.Action // as last read
	ended bool
}

// check registers the next wake-up and reads the action: done when it is
// no longer awaiting approval. A wake-up from this process's own change
// brings the action as the change left it (woken), which needs no read.
func (pk *parked) check(woken *record.Action) {
	if woken != nil && woken.Status != record.StatusAwaitingApproval {
		pk.finish(woken, nil, false)
		return
	}
	wt := pk.l.waiting.add(pk.id, func(a *record.Action) { go pk.check(a) })
	pk.mu.Lock()
	if pk.ended {
		pk.mu.Unlock()
		pk.l.waiting.remove(pk.id, wt)
		return
	}
	pk.wt = wt
	pk.mu.Unlock()
	a, err := pk.l.Action(context.Background(), pk.p, pk.id)
	if err != nil || a.Status != record.StatusAwaitingApproval {
		pk.finish(a, err, false)
		return
	}
	pk.mu.Lock()
	pk.last = a
	pk.mu.Unlock()
}

// stop ends the wait without an answer.
func (pk *parked) stop() { pk.end(nil, nil, false, true) }

// finish ends the wait once: with a and err, or when timedOut with the
// action as last read.
func (pk *parked) finish(a *record.Action, err error, timedOut bool) { pk.end(a, err, timedOut, false) }

func (pk *parked) end(a *record.Action, err error, timedOut, silent bool) {
	pk.mu.Lock()
	if pk.ended {
		pk.mu.Unlock()
		return
	}
	pk.ended = true
	wt := pk.wt
	if timedOut {
		a, err = pk.last, nil
	}
	if pk.timer != nil {
		pk.timer.Stop()
	}
	pk.mu.Unlock()
	if wt != nil {
		pk.l.waiting.remove(pk.id, wt)
	}
	pk.l.parking.Lock()
	delete(pk.l.parking.set, pk)
	pk.l.parking.Unlock()
	defer pk.l.parking.wg.Done()
	if !silent {
		pk.done(a, err)
	}
}
