package services

import (
	"context"
	"errors"
	"sync"

	"github.com/arbiter-ledger/arbiter/services/driver"
	"github.com/arbiter-ledger/arbiter/services/record"
)

// Released is the intent of a request that waited for a decision on its
// action, to be answered again now that the action was decided.
type Released struct {
	P        Principal
	ActionID string
	Raw      []byte
}

// SubmitExistingMany answers released intents as SubmitExisting answers
// each, but together: a bulk decision wakes up to a thousand waiters at
// once, and each answer that starts an approved action's first attempt is
// a write. Their actions are read in one query and the changes written in
// one statement; an entry that is not a plain change of its stored action
// (not found where it belongs, a second entry for one action, a change that
// needs a transaction, or a lost race) is answered alone, as
// SubmitExisting would. With a single writer every entry is sent alone, side
// by side (those for one action in turn), and the writer's group commit
// puts them together. The error is returned only when the database fails;
// it then answers every entry.
func (l *Ledger) SubmitExistingMany(ctx context.Context, items []Released) ([]EntryResult, error) {
	out := make([]EntryResult, len(items))
	alone := func(i int) error {
		res, err := l.SubmitExisting(ctx, items[i].P, items[i].Raw)
		out[i] = res
		return err
	}
	if l.singleWriter {
		// The single writer already shares its transactions among the
		// entries sent side by side: send them so, those for one action
		// one after another, in the order given.
		byAction := map[string][]int{}
		var order []string
		for i, it := range items {
			if _, ok := byAction[it.ActionID]; !ok {
				order = append(order, it.ActionID)
			}
			byAction[it.ActionID] = append(byAction[it.ActionID], i)
		}
		errs := make([]error, len(items))
		var wg sync.WaitGroup
		for _, id := range order {
			wg.Go(func() {
				for _, i := range byAction[id] {
					errs[i] = alone(i)
				}
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return nil, err
		}
		return out, nil
	}
	if len(items) == 1 {
		if err := alone(0); err != nil {
			return nil, err
		}
		return out, nil
	}
	ins := make([]*EntryInput, len(items))
	ids := make([]string, 0, len(items))
	for i, it := range items {
		in, err := DecodeEntry(it.Raw)
		if err != nil || !it.P.CanWrite() {
			ids = append(ids, "") // answered alone below
			continue
		}
		ins[i] = &in
		ids = append(ids, it.ActionID)
	}
	var want []string
	for _, id := range ids {
		if id != "" {
			want = append(want, id)
		}
	}
	stored := map[string]*record.Action{}
	if len(want) > 0 {
		acts, err := l.st.ex.ActionList(ctx, &driver.ActionListParams{IDs: want, Limit: len(want)})
		if err != nil {
			return nil, DBError("ledger: read released actions", err)
		}
		for _, a := range acts {
			stored[a.ID] = a
		}
	}
	var (
		later []int // answered alone
		chs   []*driver.Change
		plans []plan
		which []int
		taken = map[string]bool{}
		now   = l.now()
	)
	for i, it := range items {
		in, act := ins[i], stored[ids[i]]
		if in == nil || act == nil || taken[act.ID] || in.Type != record.TypeIntent ||
			act.Namespace != it.P.Namespace || act.Key != in.Key {
			later = append(later, i)
			continue
		}
		actor := actorOf(it.P, in)
		pl := l.rules.transition(&step{now: now, ns: it.P.Namespace, act: act, in: in, actor: actor})
		if pl.record == nil {
			out[i] = EntryResult{Key: in.Key, Type: in.Type, Outcome: pl.outcome, Error: pl.err}.withAction(act).withLease(pl)
			continue
		}
		if pl.then != nil {
			later = append(later, i)
			continue
		}
		taken[act.ID] = true
		chs = append(chs, l.newChange(act, pl, actor, in, now))
		plans = append(plans, pl)
		which = append(which, i)
	}
	if len(chs) > 0 {
		u := l.single()
		written, err := l.write(ctx, u, chs)
		if err != nil {
			return nil, err
		}
		if u.alerted {
			l.wakeDispatcher()
		}
		for k, i := range which {
			if written[k] {
				out[i] = answerWith(ins[i], plans[k], chs[k])
			} else {
				later = append(later, i) // lost a race: decided again on the action as it is
			}
		}
	}
	for _, i := range later {
		if err := alone(i); err != nil {
			return nil, err
		}
	}
	return out, nil
}
