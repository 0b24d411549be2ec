package services

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/arbiter-ledger/arbiter/services/driver"
	"github.com/arbiter-ledger/arbiter/services/record"
)

// New intents charged to limits, where writers run side by side: they wait
// for a group as single entries do (groupCommit.limited), and each group is
// judged and written in one transaction. It takes the locks of every
// (limit, group) its intents are charged to in one order, reads their use
// once, judges the intents one after another in key order, each against
// the use so far plus what those before it in the group added, and writes
// the actions and their charges in one statement each. A hot group thus
// costs one lock, one read and one commit per flush, not per intent.
//
// Before that, a group whose rows this process keeps is judged from them
// and written in one statement that writes only if they are unchanged
// (driver.LimitUseKept): no transaction, and one round trip per flush.

// submitLimited records a new limited intent through a group.
func (g *groupCommit) submitLimited(ctx context.Context, it *groupItem) (EntryResult, error) {
	if it.asked.limitErr != nil {
		return EntryResult{}, it.asked.limitErr
	}
	g.limited.Do(it)
	switch {
	case it.err != nil:
		return EntryResult{}, it.err
	case it.written:
		return it.res, nil
	}
	return g.alone(ctx, it.p, it.in, it.asked) // the key exists, or came twice: decide on the stored action
}

// flushLimited writes a group of limited intents in one transaction.
func (g *groupCommit) flushLimited(items []*groupItem) {
	ctx, cancel := context.WithTimeout(context.Background(), groupTimeout)
	defer cancel()
	g.l.observeGroup(len(items))
	err := g.l.chargeNew(ctx, items)
	for _, it := range items {
		it.err = err
		if err != nil {
			it.written = false
		}
	}
}

// errKeysExisted means some keys of a group of limited intents existed
// after all: the transaction is rolled back and the group judged again
// without them, so that no intent is judged against a charge that was
// never written.
var errKeysExisted = errors.New("ledger: some keys of the group existed")

// errNotKept means a group of limited intents could not be judged from
// the groups' rows as this process keeps them (driver.LimitUseKept), or
// one had changed when it was written: nothing was written.
var errNotKept = errors.New("ledger: limit groups not kept")

// chargeTries bounds how often a group is judged again without the keys
// that turned out to exist.
const chargeTries = 3

// chargeNew judges and writes items, new limited intents, in one
// transaction; those it does not write (their keys existed, or came twice)
// are left unwritten for the caller to decide on the stored action.
func (l *Ledger) chargeNew(ctx context.Context, items []*groupItem) error {
	todo := make([]*groupItem, 0, len(items))
	seen := make(map[knownKey]bool, len(items))
	for _, it := range items {
		it.written = false
		if k := (knownKey{it.p.Namespace, it.in.Key}); !seen[k] {
			seen[k] = true
			todo = append(todo, it)
		}
	}
	slices.SortStableFunc(todo, func(a, b *groupItem) int {
		return cmp.Or(strings.Compare(a.p.Namespace, b.p.Namespace), strings.Compare(a.in.Key, b.in.Key))
	})
	// First from the groups' rows as this process keeps them, in one
	// statement; if it has not got them all, or one changed, under the
	// groups' locks in a transaction. That statement commits what it
	// wrote, so it is judged as a last try: a key that turned out to exist
	// is left to the caller, and the intents after it in its group were
	// judged with its charge (refused a little early, never let over max).
	u := &unit{ex: l.st.drv.Executor()}
	_, err := l.chargeGroup(ctx, u, todo, true)
	if !errors.Is(err, errNotKept) {
		if err == nil && u.alerted {
			l.wakeDispatcher()
		}
		return err
	}
	for try := 1; ; try++ {
		var lost []*groupItem
		err := l.inTxRetry(ctx, func(u *unit) error {
			var err error
			lost, err = l.chargeGroup(ctx, u, todo, try == chargeTries)
			return err
		})
		if !errors.Is(err, errKeysExisted) {
			return err
		}
		todo = slices.DeleteFunc(todo, func(it *groupItem) bool { return slices.Contains(lost, it) })
	}
}

// chargeGroup is one try of chargeNew. It reports the items whose keys
// existed; unless last, it then fails with errKeysExisted.
func (l *Ledger) chargeGroup(ctx context.Context, u *unit, items []*groupItem, last bool) ([]*groupItem, error) {
	now := l.now()
	type groupKey struct{ limit, group string }
	use := map[groupKey]float64{}
	var ps []driver.LimitUseParams
	for _, it := range items {
		it.written, it.ch = false, nil
		for _, m := range it.asked.limits {
			k := groupKey{m.ID, m.Group}
			if _, ok := use[k]; !ok {
				use[k] = 0
				ps = append(ps, m.useParams(now))
			}
		}
	}
	slices.SortFunc(ps, func(a, b driver.LimitUseParams) int {
		return cmp.Or(cmp.Compare(a.Lock, b.Lock), cmp.Compare(a.LimitID, b.LimitID), cmp.Compare(a.Group, b.Group))
	})
	var used []float64
	if u.tx {
		var err error
		if used, err = u.ex.LimitUse(ctx, ps); err != nil {
			return nil, DBError("ledger: read limit use", err)
		}
	} else if kept, ok := u.ex.LimitUseKept(ps); ok {
		used = kept
	} else {
		return nil, errNotKept
	}
	for i, p := range ps {
		use[groupKey{p.LimitID, p.Group}] = used[i]
	}
	var decided []*groupItem
	for _, it := range items {
		checks := make([]record.LimitCheck, len(it.asked.limits))
		for i, m := range it.asked.limits {
			checks[i] = m.check(use[groupKey{m.ID, m.Group}])
		}
		created, err := l.decideNewWith(ctx, it, now, checks)
		if err != nil {
			return nil, err
		}
		if !created {
			continue
		}
		it.ch.Charges = chargesOf(it.ch.Next, checks, now)
		decided = append(decided, it)
		for _, c := range it.ch.Charges {
			if c.Counts {
				use[groupKey{c.LimitID, c.Group}] += c.Amount
			}
		}
	}
	if len(decided) == 0 {
		return nil, nil
	}
	chs := make([]*driver.Change, len(decided))
	for i, it := range decided {
		chs[i] = it.ch
	}
	written, err := l.write(ctx, u, chs) // with their charges
	if errors.Is(err, driver.ErrKeptStale) {
		return nil, errNotKept
	}
	if err != nil {
		return nil, err
	}
	var lost []*groupItem
	for i, it := range decided {
		if !written[i] {
			lost = append(lost, it)
		}
	}
	if len(lost) > 0 && !last {
		return lost, errKeysExisted
	}
	// On the last try the intents after a lost one were judged with its
	// charge: they may be refused a little early, never let over max.
	l.known.mu.Lock()
	defer l.known.mu.Unlock()
	for i, it := range decided {
		if written[i] {
			it.res, it.written = answerWith(it.in, it.pl, it.ch), true
			l.known.addLocked(it.p.Namespace, it.in.Key)
		}
	}
	return lost, nil
}
