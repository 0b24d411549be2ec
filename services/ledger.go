package services

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Ledger records agents' entries and operators' decisions and keeps the
// authoritative action per key.
type Ledger struct {
	st  *Store
	now func() time.Time
	// alerted is called after a change that wrote webhook messages commits,
	// to wake the dispatcher without waiting for its next poll.
	alerted func()
	// group writes concurrent single entries together (group commit): new
	// intents on PostgreSQL, every entry on SQLite.
	group *grouper
	// grouped observes the size of every group written.
	grouped func(entries int)
}

// OnAlert registers fn to run after every committed change that wrote
// alerts. fn must not block.
func (l *Ledger) OnAlert(fn func()) { l.alerted = fn }

// OnGroup registers fn to observe how many entries each group commit
// wrote together. fn must not block.
func (l *Ledger) OnGroup(fn func(entries int)) { l.grouped = fn }

func (l *Ledger) observeGroup(n int) {
	if l.grouped != nil {
		l.grouped(n)
	}
}

// NewLedger returns a ledger on st.
func NewLedger(st *Store) *Ledger {
	l := &Ledger{st: st, now: utcNow}
	if st.Dialect == Postgres {
		// Each flusher is one statement in flight. Fewer flushers make
		// bigger groups: on 2 cores with 16 agents, 1 flusher reached
		// 1.05x the pgbench limit, 2 reached 0.95x, 4 0.84x and 8 0.62x.
		// Two, so that a statement waiting on a lock (another writer
		// creating the same key) does not hold up every new intent.
		l.group = &grouper{flushers: 2, flush: l.flushIntentsPostgres}
	} else {
		// SQLite has one writer: one transaction at a time.
		l.group = &grouper{flushers: 1, flush: l.flushSQLite}
	}
	return l
}

// maxRaces bounds how often one entry is decided again after losing a race.
const maxRaces = 50

// EntryResult answers one entry.
type EntryResult struct {
	Key        string     `json:"key"`
	Type       string     `json:"type"`
	Outcome    string     `json:"outcome"`
	Attempt    *int       `json:"attempt"`
	LeaseUntil *time.Time `json:"lease_until"`
	Action     *Action    `json:"action"`
	Error      *Error     `json:"error"`
	// Entry is what was appended to the timeline, if anything.
	Entry *Entry `json:"-"`
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
			out[i] = EntryResult{Key: in.Key, Type: in.Type, Outcome: OutcomeRejected, Error: e}
			continue
		}
		ins[i] = &in
		valid = append(valid, i)
	}
	switch len(valid) {
	case 0:
		return out, nil
	case 1:
		res, err := l.submitOne(ctx, p, ins[valid[0]])
		if err != nil {
			return nil, err
		}
		out[valid[0]] = res
		return out, nil
	}
	items := make([]*groupItem, len(valid))
	for k, i := range valid {
		items[k] = &groupItem{p: p, in: ins[i]}
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
// first entry sent for their key are written first, together, as if their
// key were new; the others, and those whose key existed, are then decided
// one by one on the stored action. Entries are taken in (namespace, key)
// order, stably, so concurrent units lock actions in the same order and
// entries for one key are applied in the order sent.
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
	var idx []int
	var chs []*change
	for k, i := range order {
		it := items[i]
		if it.in.Type != TypeIntent {
			continue
		}
		if k > 0 {
			if prev := items[order[k-1]]; prev.p.Namespace == it.p.Namespace && prev.in.Key == it.in.Key {
				continue
			}
		}
		if ch := newAction(it.p, it.in, now); ch != nil {
			idx, chs = append(idx, i), append(chs, ch)
		}
	}
	if len(chs) > 0 {
		written, err := l.insertIntents(ctx, u.w, chs)
		if err != nil {
			return err
		}
		for k, i := range idx {
			if written[k] {
				items[i].res, items[i].written = created(items[i].in, chs[k]), true
			}
		}
	}
	for _, i := range order {
		it := items[i]
		if it.written {
			continue
		}
		res, err := l.apply(ctx, u, it.p, it.in)
		if err != nil {
			return err
		}
		it.res, it.written = res, true
	}
	return nil
}

// submitOne records a request's only entry through the group commit: on
// PostgreSQL a new intent is written first and the stored action read only
// if its key exists already; on SQLite every entry joins the writer's next
// transaction.
func (l *Ledger) submitOne(ctx context.Context, p Principal, in *EntryInput) (EntryResult, error) {
	it := &groupItem{p: p, in: in}
	if l.st.Dialect == Postgres {
		if in.Type != TypeIntent {
			return l.applyAlone(ctx, p, in)
		}
		if it.ch = newAction(p, in, l.now()); it.ch == nil {
			return l.applyAlone(ctx, p, in)
		}
	}
	l.group.do(it)
	switch {
	case it.err != nil:
		return EntryResult{}, it.err
	case it.written:
		return it.res, nil
	}
	return l.applyAlone(ctx, p, in) // the key exists: decide on the stored action
}

// applyAlone decides and records one entry in its own statement or
// transaction.
func (l *Ledger) applyAlone(ctx context.Context, p Principal, in *EntryInput) (EntryResult, error) {
	u := l.single()
	res, err := l.apply(ctx, u, p, in)
	if err == nil && u.alerted {
		l.wakeDispatcher()
	}
	return res, err
}

// flushIntentsPostgres writes a group of new intents in one statement.
func (l *Ledger) flushIntentsPostgres(ctx context.Context, items []*groupItem) {
	l.observeGroup(len(items))
	chs := make([]*change, len(items))
	for i, it := range items {
		chs[i] = it.ch
	}
	written, err := l.insertIntents(ctx, l.st.wsq, chs)
	for i, it := range items {
		switch {
		case err != nil:
			it.err = err
		case written[i]:
			it.res, it.written = created(it.in, it.ch), true
		}
	}
}

// flushSQLite writes a group of entries in one transaction on the writer
// connection, so they share one commit.
func (l *Ledger) flushSQLite(ctx context.Context, items []*groupItem) {
	l.observeGroup(len(items))
	err := l.inTx(ctx, func(u *unit) error { return l.applyAll(ctx, u, items) })
	for _, it := range items {
		it.err = err
		if err != nil {
			it.written = false
		}
	}
}

// newAction is the change that creates the action for an intent if its key
// is new, or nil if the intent would be refused anyway.
func newAction(p Principal, in *EntryInput, now time.Time) *change {
	actor := actorOf(p, in)
	pl := firstEntry(p.Namespace, in, actor.Name, now)
	if pl.record == nil {
		return nil
	}
	return newChange(nil, pl, actor, in, now)
}

// created answers an intent whose action ch created.
func created(in *EntryInput, ch *change) EntryResult {
	act := ch.next.clone()
	act.Version, act.entrySeq = 1, 1
	e := ch.entry
	e.Seq = 1
	res := EntryResult{Key: in.Key, Type: in.Type, Outcome: OutcomeProceed, Entry: &e}
	return res.withAction(act)
}

func actorOf(p Principal, in *EntryInput) Actor {
	actor := Actor{Kind: "agent", Name: p.Name}
	if in.Agent != nil && *in.Agent != "" {
		actor.Name = *in.Agent
	}
	return actor
}

func newChange(prev *Action, pl plan, actor Actor, in *EntryInput, now time.Time) *change {
	return &change{prev: prev, next: pl.next, events: pl.events, entry: Entry{
		ID: newID(), Type: pl.record.typ, Actor: actor, Attempt: pl.record.attempt,
		Payload: marshalPayload(pl.record.payload), OccurredAt: utcPtr(in.OccurredAt), RecordedAt: now,
	}}
}

// inTx runs fn in one write transaction and wakes the dispatcher after the
// commit if fn wrote alerts.
func (l *Ledger) inTx(ctx context.Context, fn func(*unit) error) error {
	tx, err := l.st.wsq.BeginTx(ctx, nil)
	if err != nil {
		return dbError("ledger: begin", err)
	}
	u := &unit{r: tx, w: tx, inTx: true}
	if err := fn(u); err != nil {
		tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return dbError("ledger: commit", err)
	}
	if u.alerted {
		l.wakeDispatcher()
	}
	return nil
}

// inTxRetry is inTx, run again when PostgreSQL aborted the transaction to
// break a deadlock. Batches lock actions in key order, but the new actions
// of a batch are created first, in one statement, so two batches that each
// create a key the other then updates can still wait on each other.
func (l *Ledger) inTxRetry(ctx context.Context, fn func(*unit) error) error {
	for try := 1; ; try++ {
		err := l.inTx(ctx, fn)
		if try == 3 || !deadlocked(err) {
			return err
		}
	}
}

// apply decides and records one valid entry, deciding again whenever another
// writer changed the action first.
func (l *Ledger) apply(ctx context.Context, u *unit, p Principal, in *EntryInput) (EntryResult, error) {
	actor := actorOf(p, in)
	for range maxRaces {
		act, err := l.actionByKey(ctx, u.r, p.Namespace, in.Key)
		if err != nil && !errors.Is(err, ErrNotFound) {
			return EntryResult{}, err
		}
		now := l.now()
		var pl plan
		if act == nil {
			pl = firstEntry(p.Namespace, in, actor.Name, now)
		} else {
			// A resent outcome is a duplicate whatever happened since. While
			// the action is in progress none can have been recorded, so the
			// hot path skips the look-up.
			dup := false
			if act.Status != StatusInProgress {
				if dup, err = l.alreadyRecorded(ctx, u.r, act, in); err != nil {
					return EntryResult{}, err
				}
			}
			if dup {
				pl = plan{outcome: OutcomeDuplicate}
			} else {
				pl = transition(&step{now: now, act: act, in: in, actor: actor})
			}
		}
		res := EntryResult{Key: in.Key, Type: in.Type, Outcome: pl.outcome, Error: pl.err, Action: act}
		if pl.record == nil {
			return res.withAction(act), nil
		}
		stored, entry, err := l.commitIn(ctx, u, newChange(act, pl, actor, in, now))
		if errors.Is(err, errLostRace) {
			continue
		}
		if err != nil {
			return EntryResult{}, err
		}
		res.Entry = entry
		return res.withAction(stored), nil
	}
	return EntryResult{}, Errorf(CodeConflict, "key %q is changing too fast to record this entry; retry it", in.Key)
}

func (r EntryResult) withAction(a *Action) EntryResult {
	r.Action = a
	if a != nil {
		n := a.Attempt
		r.Attempt = &n
		r.LeaseUntil = a.LeaseUntil
	}
	return r
}

// firstEntry decides an entry for a key that has no action yet.
func firstEntry(ns string, in *EntryInput, agent string, now time.Time) plan {
	if in.Type != TypeIntent {
		return plan{outcome: OutcomeRejected, err: Errorf(CodeNotFound,
			"no action has key %q in namespace %q: record an intent first", in.Key, ns)}
	}
	fp, params, err := intentFingerprint(in)
	if err != nil {
		return plan{outcome: OutcomeRejected, err: err.(*Error)}
	}
	effect := EffectUnkeyed
	if in.Effect != nil {
		effect = *in.Effect
	}
	lease := now.Add(in.timeout())
	one := 1
	a := &Action{
		ID: newID(), Namespace: ns, Key: in.Key, Tool: *in.Tool, Effect: effect,
		Status: StatusInProgress, Attempt: 1, Version: 1, LeaseUntil: &lease,
		Reference: in.Reference, Agent: &agent, Params: params,
		CreatedAt: now, UpdatedAt: now, runID: in.RunID, fingerprint: fp,
	}
	return plan{outcome: OutcomeProceed, next: a,
		record: &recordSpec{typ: TypeIntent, attempt: &one, payload: intentPayload(in)}}
}

// alreadyRecorded reports whether the same outcome for the same attempt is
// already in the timeline, so a resent report is a duplicate rather than an
// invalid transition even after the action moved on.
func (l *Ledger) alreadyRecorded(ctx context.Context, db dbtx, a *Action, in *EntryInput) (bool, error) {
	if in.Attempt == nil || *in.Attempt != a.Attempt {
		return false, nil
	}
	switch in.Type {
	case TypeSucceeded, TypeFailed, TypeCompensated:
	default:
		return false, nil
	}
	q := `SELECT count(*) FROM entries WHERE action_id = $1 AND attempt = $2 AND (type = $3 OR (type = 'late_result' AND payload->>'type' = $3))`
	if l.st.Dialect == SQLite {
		q = `SELECT count(*) FROM entries WHERE action_id = ? AND attempt = ? AND (type = ?3 OR (type = 'late_result' AND json_extract(payload, '$.type') = ?3))`
	}
	var n int
	if err := db.QueryRowContext(ctx, q, a.ID, a.Attempt, in.Type).Scan(&n); err != nil {
		return false, dbError("ledger: look for a recorded outcome", err)
	}
	return n > 0, nil
}

// Decide applies an operator's decision to the action with the given id.
// Exactly one of two concurrent decisions wins: the loser gets
// version_conflict, whether or not it named the version it saw.
func (l *Ledger) Decide(ctx context.Context, p Principal, actionID string, d DecisionInput) (*Action, *Entry, error) {
	if !p.CanDecide() {
		return nil, nil, Errorf(CodeForbidden, "the %s role may not take decisions; use an operator key", p.Role)
	}
	if err := d.Validate(); err != nil {
		return nil, nil, err
	}
	act, err := l.Action(ctx, p, actionID)
	if err != nil {
		return nil, nil, err
	}
	if d.ExpectedVersion != nil && *d.ExpectedVersion != act.Version {
		return nil, nil, versionConflict(act, *d.ExpectedVersion)
	}
	r, ok := rules[event(d.Decision)][act.Status]
	if !ok {
		return nil, nil, Errorf(CodeInvalidTransition, "cannot %s an action that is %s; allowed now: %s",
			d.Decision, act.Status, listOrNone(AllowedDecisions(act.Status)))
	}
	now := l.now()
	actor := Actor{Kind: "operator", Name: p.Name}
	pl := r(&step{now: now, act: act, dec: &d, actor: actor})
	if pl.err != nil {
		return nil, nil, pl.err
	}
	ch := &change{prev: act, next: pl.next, events: pl.events, entry: Entry{
		ID: newID(), Type: pl.record.typ, Actor: actor, Attempt: pl.record.attempt,
		Payload: marshalPayload(pl.record.payload), RecordedAt: now,
	}}
	stored, entry, err := l.commit(ctx, ch)
	if errors.Is(err, errLostRace) {
		cur, rerr := l.Action(ctx, p, actionID)
		if rerr != nil {
			return nil, nil, rerr
		}
		return nil, nil, versionConflict(cur, act.Version)
	}
	if err != nil {
		return nil, nil, err
	}
	return stored, entry, nil
}

func versionConflict(cur *Action, seen int) *Error {
	return Errorf(CodeVersionConflict, "the action changed since version %d: it is now %s at version %d, attempt %d",
		seen, cur.Status, cur.Version, cur.Attempt)
}

func listOrNone(xs []string) string {
	if len(xs) == 0 {
		return "none"
	}
	s := xs[0]
	for _, x := range xs[1:] {
		s += ", " + x
	}
	return s
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC().Truncate(time.Microsecond)
	return &u
}

// actionColumns is the column list scanAction reads.
const actionColumns = `id, namespace, key, tool, effect, status, attempt, version, lease_until,
	reference, agent, run_id, fingerprint, params, result, external_ref, retriable, entry_seq,
	created_at, updated_at`

type scanner interface{ Scan(dest ...any) error }

func scanAction(row scanner) (*Action, error) {
	var a Action
	var lease sql.NullTime
	var params, result []byte
	err := row.Scan(&a.ID, &a.Namespace, &a.Key, &a.Tool, &a.Effect, &a.Status, &a.Attempt, &a.Version,
		&lease, &a.Reference, &a.Agent, &a.runID, &a.fingerprint, &params, &result, &a.ExternalRef,
		&a.retriable, &a.entrySeq, &a.CreatedAt, &a.UpdatedAt)
	if err != nil {
		return nil, err
	}
	if lease.Valid {
		t := lease.Time.UTC()
		a.LeaseUntil = &t
	}
	a.CreatedAt, a.UpdatedAt = a.CreatedAt.UTC(), a.UpdatedAt.UTC()
	a.Params = params
	a.Result = nullIfEmpty(result)
	return &a, nil
}

// actionByKey reads the action for (ns, key), or ErrNotFound.
func (l *Ledger) actionByKey(ctx context.Context, db dbtx, ns, key string) (*Action, error) {
	q := `SELECT ` + actionColumns + ` FROM actions WHERE namespace = $1 AND key = $2`
	a, err := scanAction(db.QueryRowContext(ctx, l.st.rebind(q), ns, key))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, dbError(fmt.Sprintf("ledger: read action %q", key), err)
	}
	return a, nil
}
