package services

import (
	"sync"
	"testing"
	"time"
)

// blockingGroup is a Batcher whose first flush waits until release is
// closed; it records every group it flushed.
func blockingGroup(stuck time.Duration) (g *Batcher[*groupItem], release chan struct{}, flushed func() [][]*groupItem) {
	release = make(chan struct{})
	var mu sync.Mutex
	var groups [][]*groupItem
	first := true
	g = &Batcher[*groupItem]{Max: maxGroup, Flushers: 2, Stuck: stuck, Flush: func(items []*groupItem) {
		mu.Lock()
		wait := first
		first = false
		groups = append(groups, items)
		mu.Unlock()
		if wait {
			<-release
		}
	}}
	return g, release, func() [][]*groupItem {
		mu.Lock()
		defer mu.Unlock()
		return append([][]*groupItem(nil), groups...)
	}
}

func doAsync(g *Batcher[*groupItem]) chan struct{} {
	done := make(chan struct{})
	go func() {
		g.Do(&groupItem{})
		close(done)
	}()
	return done
}

// TestGroupWaitsForARunningFlush: while one flush runs, and has not run for
// long, requests queue behind it and are written together by the next.
func TestGroupWaitsForARunningFlush(t *testing.T) {
	g, release, flushed := blockingGroup(time.Hour)
	first := doAsync(g)
	for len(flushed()) == 0 {
		time.Sleep(time.Millisecond)
	}
	second, third := doAsync(g), doAsync(g)
	for {
		g.mu.Lock()
		n := len(g.queue)
		g.mu.Unlock()
		if n == 2 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if n := len(flushed()); n != 1 {
		t.Fatalf("%d flushes started while the first ran; want it alone", n)
	}
	close(release)
	<-first
	<-second
	<-third
	if groups := flushed(); len(groups) != 2 || len(groups[1]) != 2 {
		t.Fatalf("flushed %d groups; want the two queued requests in one group after the first", len(groups))
	}
}

// TestGroupStartsAnotherBesideAHeldUpFlush: a request that arrives after a
// flush has run longer than stuck is written beside it, not behind it.
func TestGroupStartsAnotherBesideAHeldUpFlush(t *testing.T) {
	g, release, flushed := blockingGroup(5 * time.Millisecond)
	defer close(release)
	first := doAsync(g)
	for len(flushed()) == 0 {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond)
	select {
	case <-doAsync(g):
	case <-time.After(10 * time.Second):
		t.Fatal("a request waited behind a held-up flush")
	}
	select {
	case <-first:
		t.Fatal("the held-up flush ended early")
	default:
	}
}

// TestBatcherOneFlusherNeverStartsASecond: with one flusher (the web's
// releaser), requests wait behind a held-up flush however long it runs.
func TestBatcherOneFlusherNeverStartsASecond(t *testing.T) {
	g, release, flushed := blockingGroup(time.Millisecond)
	g.Flushers = 1
	first := doAsync(g)
	for len(flushed()) == 0 {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond)
	second := doAsync(g)
	time.Sleep(50 * time.Millisecond)
	if n := len(flushed()); n != 1 {
		t.Fatalf("%d flushes started with one flusher; want the first alone", n)
	}
	close(release)
	<-first
	<-second
	if n := len(flushed()); n != 2 {
		t.Fatalf("%d flushes; want the queued request flushed after the first", n)
	}
}

// TestBatcherMaxBoundsAGroup: a flush takes at most Max queued items; the
// rest go to the next.
func TestBatcherMaxBoundsAGroup(t *testing.T) {
	g, release, flushed := blockingGroup(time.Hour)
	g.Max = 2
	first := doAsync(g)
	for len(flushed()) == 0 {
		time.Sleep(time.Millisecond)
	}
	var queued []chan struct{}
	for range 5 {
		queued = append(queued, doAsync(g))
	}
	for {
		g.mu.Lock()
		n := len(g.queue)
		g.mu.Unlock()
		if n == 5 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	close(release)
	<-first
	for _, done := range queued {
		<-done
	}
	groups := flushed()
	sizes := make([]int, len(groups))
	for i, items := range groups {
		sizes[i] = len(items)
	}
	if len(groups) != 4 || sizes[1] != 2 || sizes[2] != 2 || sizes[3] != 1 {
		t.Fatalf("flushed groups of %v; want 1, 2, 2, 1", sizes)
	}
}
