package web

import (
	"context"

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
// previous set is written: the ledger's group commit (services.Batcher)
// with one flush at a time.
type releaser struct {
	ledger entrySubmitter
	batch  services.Batcher[*release]
}

func newReleaser(ledger entrySubmitter) *releaser {
	rl := &releaser{ledger: ledger}
	rl.batch = services.Batcher[*release]{Max: releaseChunk, Flushers: 1, Flush: rl.flush}
	return rl
}

// release is one woken intent and, once its set is answered, its answer.
type release struct {
	item services.Released
	res  services.EntryResult
	err  error
}

// submit answers raw for p, whose action id was decided, with the other
// intents released meanwhile.
func (rl *releaser) submit(p services.Principal, id string, raw []byte) (services.EntryResult, error) {
	rel := &release{item: services.Released{P: p, ActionID: id, Raw: raw}}
	rl.batch.Do(rel)
	return rel.res, rel.err
}

// flush answers one set of released intents.
func (rl *releaser) flush(rels []*release) {
	items := make([]services.Released, len(rels))
	for i, rel := range rels {
		items[i] = rel.item
	}
	results, err := rl.ledger.SubmitExistingMany(context.Background(), items)
	for i, rel := range rels {
		if err != nil {
			rel.err = err
		} else {
			rel.res = results[i]
		}
	}
}
