package driver

import (
	"cmp"
	"context"
	"hash/fnv"
	"slices"
	"time"
)

// Each (limit, group) keeps its counted use in a row of its own
// (limit_groups), so that judging an intent reads one row instead of
// summing every charge of the group's window. Used is the sum of the
// group's counting charges charged after AgedTo. It changes:
//   - by a new charge that counts (ActionInsertMany adds it);
//   - by a change of an action's status that makes a charge start or stop
//     counting (LimitFlipsApply), if the charge is after AgedTo;
//   - by the window sliding: when the group is read for an intent (KeptUse),
//     the charges that left the window since AgedTo and still count are
//     taken off, and AgedTo moves to the window's start.
// Every one of these holds the group's lock (on PostgreSQL an advisory
// lock; SQLite has one writer), so they apply one at a time. A row that is
// missing, was kept for another window, or was not read for a whole window
// (its actions may have been pruned since) is summed again from the
// charges.

// GroupKey names one group of one limit.
type GroupKey struct{ LimitID, Group string }

// GroupState is a group's kept use as stored; Found is false for a group
// without a row yet.
type GroupState struct {
	Found  bool
	Used   float64
	AgedTo time.Time
	Window time.Duration
	// Left is what Groups found left the window: the counting charges
	// after AgedTo and at or before the since it was asked for.
	Left float64
	// Next is the earliest counting charge after the window's start as
	// Groups read it (zero: none), until which nothing of the group can
	// leave the window. Version is the row's, new on every write. Only
	// PostgreSQL reads them, for LimitUseKept.
	Next    time.Time
	Version int64
}

// GroupStore is the SQL KeptUse and ApplyFlips run, one driver's.
type GroupStore interface {
	// LockGroups takes the groups' locks, in the order given, until the
	// transaction ends.
	LockGroups(ctx context.Context, locks []int64) error
	// Groups reads the groups' rows, each with what left its window by
	// since[i] (Left); since is nil when only the rows are wanted.
	Groups(ctx context.Context, keys []GroupKey, since []time.Time) ([]GroupState, error)
	// SumCounting sums each group's charges that count now, charged after
	// since[i].
	SumCounting(ctx context.Context, keys []GroupKey, since []time.Time) ([]float64, error)
	// SaveGroups writes the groups' rows.
	SaveGroups(ctx context.Context, keys []GroupKey, states []GroupState) error
	// ChargesOf reads the charges of the actions.
	ChargesOf(ctx context.Context, actionIDs []string) ([]LimitCharge, error)
}

// GroupLock is the advisory lock of one group of one limit.
func GroupLock(limitID, group string) int64 {
	h := fnv.New64a()
	h.Write([]byte(limitID))
	h.Write([]byte{0})
	h.Write([]byte(group))
	return int64(h.Sum64())
}

// KeptUse is LimitUse over kept rows: it locks the groups of ps in their
// order, reads each row with what left its window since, sums again from
// the charges the groups that need it, and answers each group's use with
// the rows as they are now, for the caller to save (SaveGroups) now or
// with the charges it then writes.
func KeptUse(ctx context.Context, s GroupStore, ps []LimitUseParams) ([]float64, []GroupKey, []GroupState, error) {
	locks, keys, since := make([]int64, len(ps)), make([]GroupKey, len(ps)), make([]time.Time, len(ps))
	for i, p := range ps {
		locks[i], keys[i], since[i] = p.Lock, GroupKey{p.LimitID, p.Group}, p.Since
	}
	if err := s.LockGroups(ctx, locks); err != nil {
		return nil, nil, nil, err
	}
	states, err := s.Groups(ctx, keys, since)
	if err != nil {
		return nil, nil, nil, err
	}
	var full []int
	for i, p := range ps {
		st := &states[i]
		switch {
		case !st.Found || st.Window != p.Window || st.AgedTo.Before(p.Since.Add(-p.Window)):
			full = append(full, i)
		case p.Since.After(st.AgedTo):
			st.Used, st.AgedTo = st.Used-st.Left, p.Since
		}
		st.Left = 0
	}
	if len(full) > 0 {
		ks, fs := make([]GroupKey, len(full)), make([]time.Time, len(full))
		for k, i := range full {
			ks[k], fs[k] = keys[i], ps[i].Since
		}
		used, err := s.SumCounting(ctx, ks, fs)
		if err != nil {
			return nil, nil, nil, err
		}
		for k, i := range full {
			// Next unknown: as if a charge might leave the window at once.
			states[i] = GroupState{Found: true, Used: used[k], AgedTo: ps[i].Since, Window: ps[i].Window, Next: ps[i].Since}
		}
	}
	used := make([]float64, len(ps))
	for i := range ps {
		used[i] = max(0, states[i].Used) // never below nothing, whatever rounding did
	}
	return used, keys, states, nil
}

// ApplyFlips is LimitFlipsApply over a GroupStore.
func ApplyFlips(ctx context.Context, s GroupStore, fs []LimitFlip) error {
	ids := make([]string, len(fs))
	flip := make(map[string]LimitFlip, len(fs))
	for i, f := range fs {
		ids[i], flip[f.ActionID] = f.ActionID, f
	}
	cs, err := s.ChargesOf(ctx, ids)
	if err != nil {
		return err
	}
	type change struct {
		key   GroupKey
		delta float64
		at    time.Time
	}
	var changes []change
	index := map[GroupKey]int{}
	var keys []GroupKey
	for _, c := range cs {
		f := flip[c.ActionID]
		was, is := ChargeCounts(f.From, c.Held), ChargeCounts(f.To, c.Held)
		if was == is {
			continue
		}
		d := c.Amount
		if was {
			d = -d
		}
		k := GroupKey{c.LimitID, c.Group}
		if _, ok := index[k]; !ok {
			index[k] = len(keys)
			keys = append(keys, k)
		}
		changes = append(changes, change{k, d, c.ChargedAt})
	}
	if len(keys) == 0 {
		return nil
	}
	slices.SortFunc(keys, func(a, b GroupKey) int {
		return cmp.Or(cmp.Compare(GroupLock(a.LimitID, a.Group), GroupLock(b.LimitID, b.Group)),
			cmp.Compare(a.LimitID, b.LimitID), cmp.Compare(a.Group, b.Group))
	})
	locks := make([]int64, len(keys))
	for i, k := range keys {
		locks[i], index[k] = GroupLock(k.LimitID, k.Group), i
	}
	if err := s.LockGroups(ctx, locks); err != nil {
		return err
	}
	states, err := s.Groups(ctx, keys, nil)
	if err != nil {
		return err
	}
	touched := make([]bool, len(keys))
	for _, ch := range changes {
		i := index[ch.key]
		// A group without a row is summed from its charges when next
		// read; a charge at or before AgedTo has left what it keeps.
		if states[i].Found && ch.at.After(states[i].AgedTo) {
			states[i].Used += ch.delta
			touched[i] = true
		}
	}
	var ks []GroupKey
	var ss []GroupState
	for i, t := range touched {
		if t {
			ks, ss = append(ks, keys[i]), append(ss, states[i])
		}
	}
	if len(ks) == 0 {
		return nil
	}
	return s.SaveGroups(ctx, ks, ss)
}

// ChangeMayFlip reports whether ch updates an action that limits charged in
// a way that may make a charge start or stop counting.
func ChangeMayFlip(ch *Change) bool {
	return ch.Prev != nil && len(ch.Prev.Limits) > 0 && MayFlip(ch.Prev.Status, ch.Next.Status)
}

// Flips are the changes among chs that may change whether their actions'
// charges count: written, and ChangeMayFlip.
func Flips(chs []*Change, written []bool) []LimitFlip {
	var fs []LimitFlip
	for i, ch := range chs {
		if written[i] && ChangeMayFlip(ch) {
			fs = append(fs, LimitFlip{ActionID: ch.Next.ID, From: ch.Prev.Status, To: ch.Next.Status})
		}
	}
	return fs
}
