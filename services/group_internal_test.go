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
