package services

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/arbiter-ledger/arbiter/services/driver"
	"github.com/arbiter-ledger/arbiter/services/record"
)

// Ledger records agents' entries and operators' decisions and keeps the
// authoritative action per key. Every change it makes is decided by its
// rules table and written by commit (commit.go).
type Ledger struct {
	st  *Store
	now func() time.Time
	// rules and deadlines are the state machine (machine.go); tests may
	// give a ledger tables of its own.
	rules     ruleTable
	deadlines deadlineTable
	// alerted is called after a change that wrote webhook messages commits,
	// to wake the dispatcher without waiting for its next poll.
	alerted func()
	// group writes concurrent single entries together (group commit): new
	// intents where writers run side by side, every entry where there is a
	// single writer.
	group *groupCommit
	// singleWriter: the database takes one write transaction at a time.
	singleWriter bool
	// grouped observes the size of every group written.
	grouped func(entries int)
	// approver holds first intents its policies catch (nil: none).
	approver Approver
	limiter  Limiter
	freezer  Freezer
	// waiting are the requests waiting for a decision on an action.
	waiting waiters
	// known are keys recently created or read (batch.go).
	known knownKeys
	// parking holds the waits of AwaitDecisionFunc.
	parking parking
	// approvalDecided observes every approval decided, and how long it
	// waited.
	approvalDecided func(result string, waited time.Duration)
	// lookupAnswered and timeoutResolved observe reconciliation.
	lookupAnswered  func(answer record.Answer)
	timeoutResolved func(by string)
}

func (l *Ledger) observeGroup(n int) {
	if l.grouped != nil {
		l.grouped(n)
	}
}

// LedgerConfig is what a ledger is built with: the zero value holds no
// intent for approval and tells no one what it wrote. The On… observers
// must not block.
type LedgerConfig struct {
	// Approver holds first intents its policies catch (nil: none).
	Approver Approver
	// OnAlert runs after every committed change that wrote alerts, to wake
	// the dispatcher without waiting for its next poll.
	OnAlert func()
	// OnGroup observes how many entries each group commit wrote together.
	OnGroup func(entries int)
	// OnApprovalDecided observes each action held for approval when it is
	// approved or denied (rejected or expired), with the time since the
	// intent.
	OnApprovalDecided func(result string, waited time.Duration)
	// OnLookupAnswered observes every lookup answer recorded.
	OnLookupAnswered func(answer record.Answer)
	// OnTimeoutResolved observes every timed-out action that leaves
	// timed_out, and by what: "lookup" (a lookup's answer), "late_result"
	// (the agent's own late outcome) or "operator" (a person's decision).
	// The share resolved without a person is what lookups are for.
	OnTimeoutResolved func(by string)
	// Limiter finds the limits first intents are charged to (nil: none).
	Limiter Limiter
	// Freezer finds the active freezes that hold intents back (nil: none).
	Freezer Freezer
	// Now is the ledger's clock (nil: Now); tests move a clock of their own
	// instead of sleeping.
	Now func() time.Time
}

// NewLedger returns a ledger on st, built with cfg.
func NewLedger(st *Store, cfg LedgerConfig) *Ledger {
	c := st.drv.Concurrency()
	if cfg.Now == nil {
		cfg.Now = Now
	}
	l := &Ledger{st: st, now: cfg.Now, rules: rules, deadlines: deadlines, singleWriter: c.SingleWriter,
		approver: cfg.Approver, limiter: cfg.Limiter, freezer: cfg.Freezer, alerted: cfg.OnAlert, grouped: cfg.OnGroup, approvalDecided: cfg.OnApprovalDecided,
		lookupAnswered: cfg.OnLookupAnswered, timeoutResolved: cfg.OnTimeoutResolved}
	l.waiting.left = func(ctx context.Context, ids []string) ([]string, error) {
		return st.ex.ActionLeftStatus(ctx, ids, record.StatusAwaitingApproval)
	}
	l.group = newGroupCommit(l, c)
	return l
}

// maxRaces bounds how often one entry is decided again after losing a race.
const maxRaces = 50

// EntryResult answers one entry.
type EntryResult struct {
	Key        string           `json:"key"`
	Type       record.EntryType `json:"type"`
	Outcome    record.Outcome   `json:"outcome"`
	Attempt    *int             `json:"attempt"`
	LeaseUntil *time.Time       `json:"lease_until"`
	Action     *record.Action   `json:"action"`
	Error      *Error           `json:"error"`
	// Entry is what was appended to the timeline, if anything.
	Entry *record.Entry `json:"-"`
}

// Submit applies raw entries. Each one is decoded, validated and answered on
// its own: a rejected entry does not affect the others. Entries for one key
// are applied in the order sent. The error is returned only when the
// database fails.
//
// A batch is written in one transaction, so it costs one commit instead of
// one per entry; its answers are durable once it commits, and if the
// database fails midway none of it is. Within the transaction entries are
// applied in key order (stably), so concurrent batches lock actions in the
// same order and cannot deadlock.
func (l *Ledger) Submit(ctx context.Context, p Principal, raws [][]byte) ([]EntryResult, error) {
	if !p.CanWrite() {
		return nil, Errorf(CodeForbidden, "the %s role may not write entries; use an agent key", p.Role)
	}
	out := make([]EntryResult, len(raws))
	ins := make([]*EntryInput, len(raws))
	var valid []int
	for i, raw := range raws {
		in, err := DecodeEntry(raw)
		if err != nil {
			e, _ := AsError(err)
			out[i] = EntryResult{Key: in.Key, Type: in.Type, Outcome: record.OutcomeRejected, Error: e}
			continue
		}
		ins[i] = &in
		valid = append(valid, i)
	}
	switch len(valid) {
	case 0:
		return out, nil
	case 1:
		res, err := l.group.submit(ctx, p, ins[valid[0]])
		if err != nil {
			return nil, err
		}
		out[valid[0]] = res
		return out, nil
	}
	items := make([]*groupItem, len(valid))
	for k, i := range valid {
		items[k] = &groupItem{p: p, in: ins[i], asked: l.ask(ctx, p, ins[i])}
	}
	if err := l.inTxRetry(ctx, func(u *unit) error { return l.applyAll(ctx, u, items) }); err != nil {
		return nil, err
	}
	for k, i := range valid {
		out[i] = items[k].res
	}
	return out, nil
}

// applyAll decides and records entries in one unit. Intents that are the
// first entry sent for their key are decided first, together, as if their
// key were new, and written in one set; the others, and those whose key
// existed, are then decided one by one on the stored action. Entries are
// taken in (namespace, key) order, stably, so concurrent units lock actions
// in the same order and entries for one key are applied in the order sent.
func (l *Ledger) applyAll(ctx context.Context, u *unit, items []*groupItem) error {
	order := make([]int, len(items))
	for i := range order {
		order[i] = i
		items[i].written = false
	}
	slices.SortStableFunc(order, func(a, b int) int {
		x, y := items[a], items[b]
		return cmp.Or(strings.Compare(x.p.Namespace, y.p.Namespace), strings.Compare(x.in.Key, y.in.Key))
	})
	now := l.now()
	var fresh []*groupItem
	for k, i := range order {
		it := items[i]
		if it.in.Type != record.TypeIntent {
			continue
		}
		if k > 0 {
			if prev := items[order[k-1]]; prev.p.Namespace == it.p.Namespace && prev.in.Key == it.in.Key {
				continue
			}
		}
		if l.known.has(it.p.Namespace, it.in.Key) {
			continue // most likely a retry: decided on the stored action below
		}
		created, err := l.decideNew(ctx, it, now)
		if err != nil {
			return err
		}
		if created {
			fresh = append(fresh, it)
		}
	}
	if err := l.group.insert(ctx, u, fresh); err != nil {
		return err
	}
	for _, i := range order {
		it := items[i]
		if it.written {
			continue
		}
		res, err := l.apply(ctx, u, it.p, it.in, it.asked)
		if err != nil {
			return err
		}
		it.res, it.written = res, true
	}
	return nil
}

// decideNew decides it as the first entry of a key without reading the
// key: if that creates the action, it.ch holds the change and it reports
// true. Whether the key is new is learnt by writing.
func (l *Ledger) decideNew(ctx context.Context, it *groupItem, now time.Time) (bool, error) {
	if it.asked != nil && it.asked.limitErr != nil {
		return false, it.asked.limitErr
	}
	if it.asked.limited() {
		return false, nil // charged under its groups' locks, in a transaction (chargeNew, or apply)
	}
	return l.decideNewWith(ctx, it, now, nil)
}

// decideNewWith is decideNew for an intent judged against its limits'
// checks (none: it matches no limit).
func (l *Ledger) decideNewWith(ctx context.Context, it *groupItem, now time.Time, checks []record.LimitCheck) (bool, error) {
	actor := actorOf(it.p, it.in)
	req, err := l.requestAt(ctx, it.asked, it.p, it.in, now)
	if err != nil {
		return false, err
	}
	frozen, err := l.frozenFor(ctx, it.p.Namespace, it.in)
	if err != nil {
		return false, err
	}
	pl := l.rules.transition(&step{now: now, ns: it.p.Namespace, in: it.in, actor: actor, approval: req, limits: checks,
		frozen: frozen})
	if pl.next == nil || pl.record == nil {
		return false, nil
	}
	it.pl, it.ch = pl, l.newChange(nil, pl, actor, it.in, now)
	return true, nil
}

// SubmitExisting answers one entry for a key whose action exists, as Submit
// would, without first trying to create the action: a request that waited
// for a decision (Prefer: wait) submits its intent again this way. Where
// writers run side by side it is decided on the stored action in its own
// statement; with a single writer it joins the writer's next transaction.
func (l *Ledger) SubmitExisting(ctx context.Context, p Principal, raw []byte) (EntryResult, error) {
	if !p.CanWrite() || l.singleWriter {
		res, err := l.Submit(ctx, p, [][]byte{raw})
		if err != nil {
			return EntryResult{}, err
		}
		return res[0], nil
	}
	in, err := DecodeEntry(raw)
	if err != nil {
		e, _ := AsError(err)
		return EntryResult{Key: in.Key, Type: in.Type, Outcome: record.OutcomeRejected, Error: e}, nil
	}
	return l.group.alone(ctx, p, &in, nil) // a new key is asked about on the bare executor, outside any transaction
}

// answerWith answers an entry whose change ch was written as plan pl said.
func answerWith(in *EntryInput, pl plan, ch *driver.Change) EntryResult {
	e := ch.Entry
	res := EntryResult{Key: in.Key, Type: in.Type, Outcome: pl.outcome, Error: pl.err, Entry: &e}
	return res.withAction(ch.Next.Clone()).withLease(pl)
}

// withLease answers with the lease the plan granted, when it is not the
// action's own (a lookup's).
func (r EntryResult) withLease(pl plan) EntryResult {
	if pl.lease != nil {
		t := *pl.lease
		r.LeaseUntil = &t
	}
	return r
}

func actorOf(p Principal, in *EntryInput) record.Actor {
	actor := record.Actor{Kind: record.ActorAgent, Name: p.Name}
	if in.Agent != nil && *in.Agent != "" {
		actor.Name = *in.Agent
	}
	return actor
}

// apply decides and records one valid entry, deciding again whenever another
// writer changed the action first. a is the approver's answer, asked
// before the write, for an intent whose key turns out to be new.
func (l *Ledger) apply(ctx context.Context, u *unit, p Principal, in *EntryInput, a *asked) (EntryResult, error) {
	actor := actorOf(p, in)
	frozen, err := l.frozenFor(ctx, p.Namespace, in)
	if err != nil {
		return EntryResult{}, err
	}
	for range maxRaces {
		act, err := u.ex.ActionGetByKey(ctx, p.Namespace, in.Key)
		if errors.Is(err, driver.ErrNotFound) {
			act, err = nil, nil
		}
		if err != nil {
			return EntryResult{}, DBError(fmt.Sprintf("ledger: read action %q", in.Key), err)
		}
		if act != nil {
			l.known.add(p.Namespace, in.Key)
		}
		now := l.now()
		var pl plan
		// A resent outcome is a duplicate whatever happened since. While
		// the action is in progress none can have been recorded, so the
		// hot path skips the look-up.
		dup := false
		if act != nil && act.Status != record.StatusInProgress {
			if dup, err = l.alreadyRecorded(ctx, u, act, in); err != nil {
				return EntryResult{}, err
			}
		}
		var req *record.ApprovalRequest
		var checks []record.LimitCheck
		if act == nil {
			if req, err = l.requestAt(ctx, a, p, in, now); err != nil {
				return EntryResult{}, err
			}
			matches, err := l.limitsFor(ctx, a, p, in)
			if err != nil {
				return EntryResult{}, err
			}
			if len(matches) > 0 {
				if !u.tx {
					return EntryResult{}, errNeedsTx
				}
				if checks, err = l.checkLimits(ctx, u, matches, now); err != nil {
					return EntryResult{}, err
				}
			}
		}
		if dup {
			pl = plan{outcome: record.OutcomeDuplicate}
		} else {
			pl = l.rules.transition(&step{now: now, ns: p.Namespace, act: act, in: in, actor: actor, approval: req,
				limits: checks, frozen: frozen})
		}
		res := EntryResult{Key: in.Key, Type: in.Type, Outcome: pl.outcome, Error: pl.err}
		if pl.record == nil {
			return res.withAction(act).withLease(pl), nil
		}
		if pl.then != nil && !u.tx {
			return EntryResult{}, errNeedsTx
		}
		ch := l.newChange(act, pl, actor, in, now)
		if len(checks) > 0 && act == nil {
			ch.Charges = chargesOf(ch.Next, checks, now)
		}
		written, err := l.write(ctx, u, []*driver.Change{ch})
		if err != nil {
			return EntryResult{}, err
		}
		if !written[0] {
			continue // lost a race: read again and decide again
		}
		res = answerWith(in, pl, ch)
		if act == nil {
			l.known.add(p.Namespace, in.Key)
		}
		if pl.then != nil {
			then := pl.then(&ch.Entry)
			ch2 := l.newChange(ch.Next, then, systemActor, nil, now)
			written, err := l.write(ctx, u, []*driver.Change{ch2})
			if err != nil {
				return EntryResult{}, err
			}
			if !written[0] { // the first change holds the row's lock until the commit
				return EntryResult{}, fmt.Errorf("ledger: action %s changed inside its own transaction", act.ID)
			}
			res = res.withAction(ch2.Next.Clone())
		}
		return res, nil
	}
	return EntryResult{}, Errorf(CodeConflict, "key %q is changing too fast to record this entry; retry it", in.Key)
}

func (r EntryResult) withAction(a *record.Action) EntryResult {
	r.Action = a
	if a != nil {
		n := a.Attempt
		r.Attempt = &n
		r.LeaseUntil = a.LeaseUntil
	}
	return r
}

// alreadyRecorded reports whether the same outcome for the same attempt is
// already in the timeline, so a resent report is a duplicate rather than an
// invalid transition even after the action moved on.
func (l *Ledger) alreadyRecorded(ctx context.Context, u *unit, a *record.Action, in *EntryInput) (bool, error) {
	if in.Attempt == nil || *in.Attempt != a.Attempt {
		return false, nil
	}
	switch in.Type {
	case record.TypeSucceeded, record.TypeFailed, record.TypeOutcomeUnknown, record.TypeCompensated:
	default:
		return false, nil
	}
	found, err := u.ex.EntryOutcomeExists(ctx, &driver.EntryOutcomeExistsParams{ActionID: a.ID, Attempt: a.Attempt, Type: in.Type})
	if err != nil {
		return false, DBError("ledger: look for a recorded outcome", err)
	}
	return found, nil
}

// Decide applies an operator's decision to the action with the given id.
// Exactly one of two concurrent decisions wins: the loser gets
// version_conflict, whether or not it named the version it saw. Approvals
// are the exception: they count distinct people, so an approval that did
// not name a version and lost a race to another decision is decided again
// on the action as it is now (counted, refused as already given, or not
// allowed any more).
func (l *Ledger) Decide(ctx context.Context, p Principal, actionID string, d DecisionInput) (*record.Action, *record.Entry, error) {
	if !p.CanDecide() {
		return nil, nil, Errorf(CodeForbidden, "the %s role may not take decisions; use an operator key", p.Role)
	}
	if err := d.Validate(); err != nil {
		return nil, nil, err
	}
	if err := mayApprove(p, d); err != nil {
		return nil, nil, err
	}
	retry := d.Decision == record.DecisionApprove && d.ExpectedVersion == nil
	for range maxRaces {
		act, err := l.Action(ctx, p, actionID)
		if err != nil {
			return nil, nil, err
		}
		if !p.DecidesIn(act.Namespace) {
			// A person who is only a viewer here.
			return nil, nil, Errorf(CodeForbidden, "you may see but not decide in namespace %q", act.Namespace)
		}
		if d.ExpectedVersion != nil && *d.ExpectedVersion != act.Version {
			return nil, nil, versionConflict(act, *d.ExpectedVersion)
		}
		if err := l.markReview(ctx, act); err != nil {
			return nil, nil, err
		}
		stored, entry, err := l.decideOn(ctx, p, act, d)
		if errors.Is(err, errLostRace) {
			if retry {
				continue
			}
			cur, rerr := l.Action(ctx, p, actionID)
			if rerr != nil {
				return nil, nil, rerr
			}
			return nil, nil, versionConflict(cur, act.Version)
		}
		return stored, entry, err
	}
	return nil, nil, Errorf(CodeConflict, "action %s is changing too fast to record this decision; retry it", actionID)
}

// decideOn applies a decision to the action as read; errLostRace if it
// changed since.
func (l *Ledger) decideOn(ctx context.Context, p Principal, act *record.Action, d DecisionInput) (*record.Action, *record.Entry, error) {
	r, ok := l.rules[event(d.Decision)][act.Status]
	if !ok {
		return nil, nil, Errorf(CodeInvalidTransition, "cannot %s an action that is %s; allowed now: %s",
			d.Decision, act.Status, ListOrNone(l.rules.allowedDecisions(act, l.now())))
	}
	now := l.now()
	actor, identity := decider(p)
	pl := r(&step{now: now, ns: act.Namespace, act: act, dec: &d, actor: actor, identity: identity})
	if pl.err != nil && pl.record == nil {
		return nil, nil, pl.err
	}
	// A refused decision may still record what time decided (an expired
	// approval), by the system (plan.actor).
	ch := l.newChange(act, pl, actor, nil, now)
	u := l.single()
	written, err := l.write(ctx, u, []*driver.Change{ch})
	if err != nil {
		return nil, nil, err
	}
	if !written[0] {
		return nil, nil, errLostRace
	}
	if u.alerted {
		l.wakeDispatcher()
	}
	if pl.err != nil {
		return nil, nil, pl.err
	}
	e := ch.Entry
	return ch.Next.Clone(), &e, nil
}

func versionConflict(cur *record.Action, seen int) *Error {
	return Errorf(CodeVersionConflict, "the action changed since version %d: it is now %s at version %d, attempt %d",
		seen, cur.Status, cur.Version, cur.Attempt)
}

// ListOrNone joins xs with commas, or says "none".
func ListOrNone[T ~string](xs []T) string {
	if len(xs) == 0 {
		return "none"
	}
	s := string(xs[0])
	for _, x := range xs[1:] {
		s += ", " + string(x)
	}
	return s
}

// UTCPtr returns *t in UTC at the microsecond the databases keep, or nil.
func UTCPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC().Truncate(time.Microsecond)
	return &u
}

// AppendJSON appends r's JSON, as json.Marshal(r) writes it, with the
// action appended by hand (record.Action.AppendJSON): the answer to every
// entry is one.
func (r *EntryResult) AppendJSON(b []byte) []byte {
	b = append(b, `{"key":`...)
	b = record.AppendJSONString(b, r.Key)
	b = append(b, `,"type":`...)
	b = record.AppendJSONString(b, string(r.Type))
	b = append(b, `,"outcome":`...)
	b = record.AppendJSONString(b, string(r.Outcome))
	b = append(b, `,"attempt":`...)
	if r.Attempt == nil {
		b = append(b, "null"...)
	} else {
		b = strconv.AppendInt(b, int64(*r.Attempt), 10)
	}
	b = append(b, `,"lease_until":`...)
	b = record.AppendJSONTime(b, r.LeaseUntil)
	b = append(b, `,"action":`...)
	if r.Action == nil {
		b = append(b, "null"...)
	} else {
		b = r.Action.AppendJSON(b)
	}
	b = append(b, `,"error":`...)
	if r.Error == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, `{"code":`...)
		b = record.AppendJSONString(b, r.Error.Code)
		b = append(b, `,"message":`...)
		b = record.AppendJSONString(b, r.Error.Message)
		if r.Error.Limits != nil {
			lb, _ := json.Marshal(r.Error.Limits)
			b = append(append(b, `,"limits":`...), lb...)
		}
		if r.Error.RetryAfter > 0 {
			b = strconv.AppendInt(append(b, `,"retry_after":`...), int64(r.Error.RetryAfter), 10)
		}
		b = append(b, '}')
	}
	return append(b, '}')
}
