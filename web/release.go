package web

import (
	"context"
	"sync"

	"github.com/arbiter-ledger/arbiter/services"
)

// releaseChunk is the most released intents answered in one set.
const releaseChunk = 1000

// releaser answers the intents of parked requests once their actions are
// decided. A bulk decision wakes up to a thousand waiters at once, and
// each answer that starts an approved action's first attempt is a write:
// one by one they were two statements each, queued for the connection
// pool. The releaser takes every intent woken meanwhile and answers them
// together (Ledger.SubmitExistingMany: one read, one write), while the
// previous set is written.
type releaser struct {
	ledger entrySubmitter
	mu     sync.Mutex
	queue  []*release
	busy   bool
}

// release is one woken intent and where its answer goes.
type release struct {
	item services.Released
	res  chan releaseResult
}

type releaseResult struct {
	r   services.EntryResult
	err error
}

// submit answers raw for p, whose action id was decided, with the other
// intents released meanwhile.
func (rl *releaser) submit(p services.Principal, id string, raw []byte) (services.EntryResult, error) {
	rel := &release{item: services.Released{P: p, ActionID: id, Raw: raw}, res: make(chan releaseResult, 1)}
	rl.mu.Lock()
	rl.queue = append(rl.queue, rel)
	start := !rl.busy
	rl.busy = true
	rl.mu.Unlock()
	if start {
		go rl.flush()
	}
	got := <-rel.res
	return got.r, got.err
}

// flush answers what is queued, a set at a time, until nothing is.
func (rl *releaser) flush() {
	for {
		rl.mu.Lock()
		n := min(len(rl.queue), releaseChunk)
		if n == 0 {
			rl.busy = false
			rl.mu.Unlock()
			return
		}
		rels := rl.queue[:n:n]
		rl.queue = rl.queue[n:]
		rl.mu.Unlock()
		items := make([]services.Released, n)
		for i, rel := range rels {
			items[i] = rel.item
		}
		results, err := rl.ledger.SubmitExistingMany(context.Background(), items)
		for i, rel := range rels {
			if err != nil {
				rel.res <- releaseResult{err: err}
			} else {
				rel.res <- releaseResult{r: results[i]}
			}
		}
	}
}
